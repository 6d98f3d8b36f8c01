"""LockedSqliteStorage: Dagster's sqlite storage, created and migrated by one process at a time.

Dagster creates the local instance's sqlite databases (history/runs.db, history/runs/index.db, schedules.db) the
first time a process opens the instance: create the tables, then stamp the alembic version. Two processes doing
that at once (two ``videolake demo`` against a fresh DAGSTER_HOME, issue 40 item 8) interleave: one creates the
tables, the other finds tables without a version and stamps the older revision Dagster uses for such databases,
the first stamps head, and from then on every open fails with alembic's "Version table 'alembic_version' has more
than one head present"; other interleavings fail with "table already exists" or "database is locked". Reproduced
here with three processes released together onto an empty DAGSTER_HOME: 5 trials of 8 had a process fail.

This storage holds an exclusive lock on ``<base_dir>/storage.lock`` (fcntl, released when the process dies) while
Dagster's own storage constructor runs, so a second process waits and then opens databases that are complete. Every
process that loads the local instance builds its storage here, because VideolakeInstance makes it the default
storage (dagster.yaml names no ``storage``): the CLI, the webserver, the daemon, code servers and run workers.
Later connections are Dagster's as before; a run's own event-log database was already safe (Dagster retries its
initialization on exactly these errors).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

import yaml
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage
from dagster._serdes import ConfigurableClassData

LOCK_NAME = "storage.lock"


@contextlib.contextmanager
def init_lock(base_dir: str) -> Iterator[None]:
    """Hold the exclusive lock of the storage under ``base_dir`` (waits while another process holds it)."""
    os.makedirs(base_dir, exist_ok=True)
    with open(os.path.join(base_dir, LOCK_NAME), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class LockedSqliteStorage(DagsterSqliteStorage):
    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        with init_lock(base_dir):
            super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> LockedSqliteStorage:
        # Dagster's classmethod builds a DagsterSqliteStorage by name; from_local builds ``cls``.
        return cls.from_local(inst_data=inst_data, **config_value)


def storage_data(base_dir: str) -> ConfigurableClassData:
    """The instance-ref entry for a LockedSqliteStorage under ``base_dir`` (where Dagster's default one would be)."""
    return ConfigurableClassData(__name__, LockedSqliteStorage.__name__, yaml.dump({"base_dir": base_dir}))
