"""Shared fixtures. Integration fixtures (S3 server, PostgreSQL, tiny VLM) live in tests/integration/conftest.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# The pytest process ends with pytest's exit status as soon as pytest has reported (tests/process_exit.py).
pytest_plugins = ("process_exit",)

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def ffmpeg() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        pytest.fail("ffmpeg is not installed: run `make test` (it installs system packages)")
    return path


# ------------------------------------------------------------------------------------------------ markers and order
TESTS = Path(__file__).resolve().parent

# Every test in these directories is `slow` (Dagster materializations and runs, the CLI in subprocesses, real
# S3/PostgreSQL/vLLM servers, Dagster deployments, a browser), as if marked one by one: `make test-quick`
# (-m "not slow") leaves them out. Elsewhere a test that takes seconds is marked where it is defined.
SLOW_DIRS = ("assets", "browser", "integration", "ops")

# The longest test files, longest first. Under pytest-xdist (`make test`: --dist loadfile --no-loadscope-reorder) a
# worker takes the next whole file when it is nearly out of work, so these start at once and the short files fill in
# around them; a long file started last would end the run alone on one worker. Files not named keep their order.
LONGEST_FIRST = (
    "browser/test_ui.py",
    "integration/test_run_recovery.py",
    "integration/test_kill_resume.py",
    "integration/test_pipeline_s3.py",
    "integration/test_openai_backend.py",
    "integration/test_captioning.py",
    "ops/test_cli.py",
)


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.path)).resolve().relative_to(TESTS).parts[0] in SLOW_DIRS:
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # an xdist worker: the controller schedules files in this order
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(Path(str(item.path)).resolve().relative_to(TESTS).as_posix(), len(rank)))
