"""Run the `videolake` command in a subprocess against a throw-away instance and data directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIDEOLAKE_", "DAGSTER_", "AWS_"))}
    env.update(
        {
            "DAGSTER_HOME": str(tmp_path / "home"),
            "VIDEOLAKE_DATA_DIR": str(tmp_path / "data"),
            "VIDEOLAKE_RAY_CPUS": "2",
            "GX_ANALYTICS_ENABLED": "false",
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    env.pop("RAY_ADDRESS", None)
    env.update(extra)
    return env


def videolake(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "videolake.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def normalized(text: str) -> list[str]:
    """Output lines with durations made comparable: '(12.3s)' -> '(Ns)', 'in 12.3s' -> 'in Ns'."""
    return [re.sub(r"\d+\.\d+s\b", "Ns", line) for line in text.splitlines()]
