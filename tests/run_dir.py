"""The test run's own folder, shared by its pytest-xdist workers (each worker's base temporary folder is below it):
for what one run builds once and every worker reads (the real-footage corpus, the tiny model)."""

from __future__ import annotations

import os
from pathlib import Path


def run_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
