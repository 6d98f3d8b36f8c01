"""Imported once by the fork server of a launched run (``executor.FORKSERVER_PRELOAD``): the modules that every step
process of the run imports after it is forked, so that each of the run's eleven step processes inherits them instead
of importing them again.

Measured on one partition (2 cores): a step process forked from a server that had imported only the code location
and Great Expectations imported ~550 more modules and spent ~0.6 CPU-s doing it: Dagster's step machinery and
its SQL storage (alembic, SQLAlchemy: ~0.36 CPU-s), and the asset, check and resource modules that the code
location imports lazily when its definitions are built (dagster-ray, deltalake, pyarrow: ~0.2 CPU-s). Nothing here
leaves a thread, a file or a connection open (tests/unit/test_step_preload.py counts the threads), so forking after
it is as safe as forking after the imports of the code location; Ray, torch and vLLM stay out (a step imports them
only when its stage has work).
"""

from __future__ import annotations

import contextlib

# Dagster's step process: the run's instance (its SQL storages) and the code location's reconstruction.
import dagster._core.execution.plan.resume_retry  # noqa: F401
import dagster._core.executor.step_delegating  # noqa: F401
import dagster._core.instance.factory  # noqa: F401
import dagster._core.storage.event_log.sqlite  # noqa: F401
import dagster._core.storage.runs.sqlite  # noqa: F401
import dagster._core.storage.schedules.sqlite  # noqa: F401
import dagster._utils.test.definitions  # noqa: F401  (dg.definitions' LazyDefinitions, read back by the step)

from videolake.definitions import build_definitions

# Building the definitions once imports every asset, check and resource module they are made of. A definition that
# fails to build here fails again in the step process, which reports it where Dagster shows a step's error: this
# import must not take the fork server down with it (it would hide that error behind a broken pipe).
with contextlib.suppress(Exception):
    build_definitions()
