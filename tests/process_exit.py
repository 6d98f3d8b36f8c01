"""Ends the pytest process with pytest's own exit status as soon as pytest is done, skipping the interpreter's
finalization.

By the end of `make test` the pytest process has loaded Ray (gRPC threads), pyarrow (jemalloc's background thread),
torch, vLLM, OpenCV and Playwright, and has started and stopped their servers hundreds of times. Tearing all of that
down at interpreter exit is not something the suite tests, and it crashed once in CI: every test passed (696 of 696),
pytest printed its summary, and then the process died of SIGSEGV, so `make test` failed. Once pytest has reported,
the suite's verdict is settled; this plugin stops Ray if the process still runs one (nothing else outlives a test,
its fixtures stop their servers), flushes the output and calls `os._exit` with that verdict.

Only the process that ran the tests does this: a pytest-xdist worker exits normally, as its controller expects.
"""

from __future__ import annotations

import os
import sys

import pytest

# The session, kept where pytest_unconfigure (which gets only the config) can read its final exit status: the status
# is settled at the end of pytest_sessionfinish, after every plugin has run.
_SESSION_KEY = pytest.StashKey[pytest.Session]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_SESSION_KEY] = session


@pytest.hookimpl(trylast=True)  # after every other plugin has unconfigured (reports written, faulthandler off)
def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION_KEY, None)
    if session is None or hasattr(config, "workerinput"):
        return
    status = int(session.exitstatus)
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
