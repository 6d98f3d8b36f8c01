"""tests/process_exit.py: the pytest process exits with pytest's verdict even when the interpreter's finalization
would crash it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

# A test module whose process dies of SIGSEGV at interpreter exit, as the suite's process did once in CI.
CRASHES_AT_EXIT = """
import atexit, os, signal

atexit.register(lambda: os.kill(os.getpid(), signal.SIGSEGV))

def test_it():
    assert {verdict}
"""


def _pytest(tmp_path: Path, verdict: str, *plugin: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_crashes_at_exit.py").write_text(CRASHES_AT_EXIT.format(verdict=verdict))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin, "test_crashes_at_exit.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_the_plugin_the_crash_at_exit_is_the_exit_status(tmp_path):
    done = _pytest(tmp_path, "True")
    assert "1 passed" in done.stdout
    assert done.returncode == -11


@pytest.mark.parametrize(("verdict", "status", "summary"), [("True", 0, "1 passed"), ("False", 1, "1 failed")])
def test_with_the_plugin_the_exit_status_is_pytests_verdict(tmp_path, verdict, status, summary):
    done = _pytest(tmp_path, verdict, "-p", "process_exit")
    assert summary in done.stdout
    assert done.returncode == status, done.stdout + done.stderr
