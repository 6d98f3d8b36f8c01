"""Stop a process started with start_new_session=True and everything in its process group (SIGTERM, then SIGKILL):
background processes here may ignore SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=timeout_s)
            break
        except subprocess.TimeoutExpired:
            continue
    # the group may outlive its leader (a code server, a run worker): make sure nothing of it is left
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
