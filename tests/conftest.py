"""Shared fixtures. Integration fixtures (S3 server, PostgreSQL, tiny VLM) live in tests/integration/conftest.py."""

from __future__ import annotations

import os
import shutil

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def ffmpeg() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        pytest.fail("ffmpeg is not installed: run `make test` (it installs system packages)")
    return path
