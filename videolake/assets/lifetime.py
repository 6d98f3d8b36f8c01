"""A step process dies with its run worker.

Dagster's multiprocess executor (the default of launched runs) runs each step in a child process of the run worker.
When the run worker is killed (SIGKILL, OOM killer), the child is not: it keeps computing, holds its Ray cluster and
vLLM engine, and writes events into a run that run monitoring has already failed, while the automatic retry of that
run starts the same step again beside it. On Kubernetes the pod takes every process with it; on one machine this does
the same: the step process asks Linux to SIGKILL it when its parent dies (prctl PR_SET_PDEATHSIG), and the Ray
processes a step starts die with the step (Ray's own fate sharing). A step forked by the executor's fork server
(assets/executor.py) has the fork server as its parent, so it also watches the run worker itself (a thread waiting on
multiprocessing's parent sentinel).

Only a step in a child of a run worker is bound. A step executing in the main process of a program
(``videolake demo``, ``materialize`` in tests) has no multiprocessing parent and is left alone.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading

_PR_SET_PDEATHSIG = 1


def _die_with(sentinel: int) -> None:
    from multiprocessing.connection import wait

    wait([sentinel])  # ready at end of file: the run worker is gone
    os.kill(os.getpid(), signal.SIGKILL)


_bound = False


def bind_to_run_worker() -> bool:
    """Tie this process to its parent (the run worker): SIGKILL when the parent dies. Returns True when bound."""
    global _bound
    if _bound:
        return True
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent.pid:
        # Started by a fork server (assets/executor.py): the OS parent is the fork server, which outlives the run
        # worker while any process it forked holds its liveness pipe (each step inherits one). A thread waits on
        # multiprocessing's parent sentinel instead: a pipe whose other end only the run worker holds.
        threading.Thread(
            target=_die_with, args=(parent.sentinel,), name="videolake-run-worker-watch", daemon=True
        ).start()
    if not parent.is_alive():  # the run worker died before the binding: nothing to work for any more
        os.kill(os.getpid(), signal.SIGKILL)
    _bound = True
    return True
