"""Stopping the server processes the tests start (SeaweedFS, PostgreSQL): one routine for both.

Background processes here may ignore a polite signal (docs/stack-facts.md), so each stop escalates to SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_process(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> None:
    """Send ``sig``, then SIGKILL after ``timeout_s``; returns once the process has exited."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
