"""Local-instance plumbing shared by the CLI commands that use Dagster (demo, run, rows, check, release, lineage,
doctor)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def repo_root() -> Path:
    """The directory holding dagster.yaml: the current directory if it has one, else the source checkout."""
    cwd = Path.cwd()
    if (cwd / "dagster.yaml").exists():
        return cwd
    return Path(__file__).resolve().parents[2]


def prepare_local_instance(home: str | None = None) -> Path:
    """Point DAGSTER_HOME at .dagster/ (created, with the repository's dagster.yaml) unless it is set already."""
    root = repo_root()
    if home is None:
        home = os.environ.get("DAGSTER_HOME") or str(root / ".dagster")
    path = Path(home).resolve()
    path.mkdir(parents=True, exist_ok=True)
    src = root / "dagster.yaml"
    dst = path / "dagster.yaml"
    if src.exists() and (not dst.exists() or dst.read_bytes() != src.read_bytes()):
        shutil.copyfile(src, dst)
    os.environ["DAGSTER_HOME"] = str(path)
    os.environ.setdefault("VIDEOLAKE_DATA_DIR", str(root / "data"))
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    quiet_dagster_warnings()
    return path


def quiet_dagster_warnings() -> None:
    """Dagster's BetaWarning/PreviewWarning blocks (one per asset built with a beta parameter: 36 lines on `check`
    and `release`) say nothing a user of a command can act on (the pinned version's behaviour is what the tests
    check). Called by ``prepare_local_instance``, before any definition is built."""
    import warnings

    import dagster as dg

    for category in (dg.BetaWarning, dg.PreviewWarning):
        warnings.filterwarnings("ignore", category=category)
