"""A local directory built once, however many processes ask for it at the same time.

Why: the tiny test models are built on first use, by the step that needs them, and the two runs of a two-day
backfill on a fresh machine start their caption steps together. Without a lock each built its own copy, twice the
CPU, and the second to finish removed the first's complete directory (it took it for an interrupted build) while
the first run's engine was loading from it. Here the builder holds an exclusive lock (``flock`` on a file beside
the directory), and a process that waited for it finds the directory complete and uses it.

The directory is built in a sibling temporary directory and renamed into place, so a crash never leaves a
half-written one where a reader would find it; an interrupted build's leftovers are replaced by the next build.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on the file at ``path`` (created when missing) while the block runs; other processes,
    and other open files of this one, wait for it."""
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def lock_path(out: str | os.PathLike) -> Path:
    """The lock file of the directory ``out``: beside it, hidden."""
    out = Path(out)
    return out.parent / f".{out.name}.lock"


def build_once(out: str | os.PathLike, complete: Callable[[Path], bool], build: Callable[[Path], None]) -> bool:
    """Make the directory ``out`` with ``build(tmp)`` (which fills the empty directory ``tmp``) unless
    ``complete(out)``. Returns True when this call built it, False when it was complete already or another process
    completed it while this one waited for the lock."""
    out = Path(out)
    if complete(out):
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    with locked(lock_path(out)):
        if complete(out):
            return False
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
        try:
            build(tmp)
            os.chmod(tmp, 0o755)
            if out.exists():  # an interrupted build (a complete one is never replaced: the lock is held)
                shutil.rmtree(out)
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return True
