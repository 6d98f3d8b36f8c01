"""One local Ray per test process, shared by the modules in FILES while they run one after another.

A local Ray costs ~6 s of wall time and ~5.5 CPU-s to start (its helper processes: dashboard head and agent,
runtime-env agent, autoscaler and log monitors), and each module's fresh worker processes import the stages again.
The modules below start none of their own: the first one that asks (``start()``, from its Ray fixture) starts the
shared one and the next ones join it. Under pytest-xdist they are one unit of work (tests/conftest.py's scheduler),
so one worker runs them back to back and the Ray is started once per run of the suite.

No other module inherits it: before any module not in FILES, tests/conftest.py stops it (``stop_unless_shared``),
and before a module in FILES it stops any Ray that this helper did not start, so a shared module never joins a Ray
with another module's options. A module that reads Ray-wide state (test_prometheus_metrics sums counters over the
whole node) stays out of FILES and starts its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# Paths relative to tests/. They share the options below, set no Ray-wide state, and read none.
FILES = (
    "assets/test_clip_embeddings.py",
    "assets/test_cpu_assets.py",
    "assets/test_exact_copies.py",
    "assets/test_landing.py",
    "assets/test_near_duplicates_across_days.py",
    "assets/test_retries.py",
    "assets/test_training_shards.py",
    "integration/test_captioning.py",
    "unit/test_scenes_transnet.py",
    "unit/test_units.py",
)
GROUP = "shared-ray"  # the pytest-xdist unit of work that holds FILES
OPTIONS = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}

_started: str | None = None  # the session directory of the Ray this helper started, while it is up


def _context() -> str | None:
    """The connected Ray's identity (its session directory), None when none is connected."""
    if "ray" not in sys.modules:
        return None
    import ray

    if not ray.is_initialized():
        return None
    from ray._private.worker import global_worker

    return global_worker.node.get_session_dir_path() if global_worker.node is not None else "another process's Ray"


def start() -> None:
    """The shared local Ray, started unless it is up. Never a cluster that $RAY_ADDRESS or `ray start` names."""
    global _started
    if _context() is not None and _context() == _started:
        return
    stop()
    import ray

    ray.init(address="local", **OPTIONS)
    _started = _context()


def stop() -> None:
    """Stop whatever Ray this process is connected to."""
    global _started
    _started = None
    if _context() is not None:
        import ray

        ray.shutdown()


def stop_unless_shared(path: str | os.PathLike) -> None:
    """Before the module at ``path``: a module outside FILES starts with no Ray; one in FILES keeps only the
    shared Ray."""
    if relpath(path) not in FILES:
        stop()
    elif _context() is not None and _context() != _started:
        stop()


def relpath(path: str | os.PathLike) -> str:
    """A test file's path relative to tests/, as FILES names it."""
    return Path(path).resolve().relative_to(TESTS).as_posix()


@contextmanager
def module_ray(path: str | os.PathLike) -> Iterator[None]:
    """The local Ray of the test module at ``path``: the shared one for a module in FILES (left up for the next),
    else one of its own, stopped at the module's end."""
    if relpath(path) in FILES:
        start()
        yield
        return
    stop()
    import ray

    ray.init(address="local", **OPTIONS)
    try:
        yield
    finally:
        ray.shutdown()
