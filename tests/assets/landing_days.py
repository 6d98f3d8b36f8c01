"""Helpers of the tests that land files on several days and materialize them (exact and near copies across days)."""

from __future__ import annotations

import shutil
from pathlib import Path

from module_ray import joining_local_ray

from videolake.resources import LakeResource, ObjectStoreResource


def land(root: Path, day: str, files: dict[str, Path]) -> None:
    """Copy ``files`` (landed name -> source file) into ``root``/landing/``day``/."""
    folder = root / "landing" / day
    folder.mkdir(parents=True, exist_ok=True)
    for name, src in files.items():
        shutil.copy(src, folder / name)


def local_resources(root: Path, lake: Path) -> dict:
    """The CPU assets' resources over a local store at ``root`` and a lake at ``lake``; Ray: the module's
    (``module_ray``) when it is up."""
    return {
        "object_store": ObjectStoreResource(kind="local", root=str(root)),
        "lake": LakeResource(root=str(lake)),
        "ray_cluster": joining_local_ray(),
    }
