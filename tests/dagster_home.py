"""The repository's dagster.yaml written into a test's DAGSTER_HOME, with run monitoring's poll interval shortened
where a test waits for the daemon's passes (the product's file keeps its 10 s; tests/ops/test_instance_config.py
checks that file as it is)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def write_instance_yaml(home: Path, poll_interval_seconds: int | None = None) -> dict:
    """Write REPO/dagster.yaml into ``home``, run_monitoring.poll_interval_seconds replaced when given; returns the
    settings written (the bounds a test asserts follow the file its daemon reads)."""
    settings = yaml.safe_load((REPO / "dagster.yaml").read_text())
    if poll_interval_seconds is not None:
        settings["run_monitoring"]["poll_interval_seconds"] = poll_interval_seconds
    (Path(home) / "dagster.yaml").write_text(yaml.safe_dump(settings))
    return settings
