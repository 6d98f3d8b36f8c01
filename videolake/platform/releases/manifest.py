"""Where a release lives in the object store, what its manifest holds, and how releases are found again.

    releases/<NAME>/manifest.json   the release itself (``FORMAT``): days, table versions, shards, totals
    releases/<NAME>/README.md       the dataset card, with its PNGs beside it
    releases/<NAME>/files.json      the data files of each pinned table version in the release's days

The manifest is the release: it is written last, so a name without one is no release (a crashed create left only
card files behind, and a new create of that name may proceed), and a name with one is never written again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from videolake.platform.objectstore.base import ObjectStore

FORMAT = "videolake-release/1"
PREFIX = "releases"
MANIFEST = "manifest.json"
CARD = "README.md"
FILES = "files.json"
# The tables a release reads, in pipeline order (every one's partitions must pass their gates).
RELEASE_TABLES: tuple[str, ...] = ("raw_videos", "scene_clips", "filtered_clips", "clip_captions", "training_shards")

# Letters, digits, '.', '_', '-'; starts with a letter or digit (no '.', '..' or hidden names); one path segment.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class ReleaseError(RuntimeError):
    """A release that cannot be made or read, with what to do about it."""


class ReleaseExistsError(ReleaseError):
    """The name already has a manifest: release names are never reused."""


class ReleaseNotFoundError(ReleaseError):
    """No manifest under the name."""


def validate_name(name: str) -> str:
    """``name`` when it is a valid release name, else ReleaseError saying what is allowed."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ReleaseError(
            f"invalid release name {name!r}: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit (e.g. v1, 2026-01.curated)"
        )
    return name


def release_key(name: str, file: str = "") -> str:
    """The store key of ``file`` of release ``name`` (its folder with ``file`` empty)."""
    return f"{PREFIX}/{validate_name(name)}/{file}"


def read_manifest(store: ObjectStore, name: str) -> dict[str, Any]:
    """The manifest of release ``name``; ReleaseNotFoundError when there is none."""
    key = release_key(name, MANIFEST)
    if not store.exists(key):
        raise ReleaseNotFoundError(f"no release {name!r}: {store.uri(key)} does not exist (`videolake release list`)")
    manifest = json.loads(store.get_bytes(key).decode("utf-8"))
    if manifest.get("format") != FORMAT:
        raise ReleaseError(f"{store.uri(key)} has format {manifest.get('format')!r}, not {FORMAT!r}")
    return manifest


def release_names(store: ObjectStore) -> list[str]:
    """The names of every release (a folder with a manifest), sorted."""
    names = []
    for obj in store.list(f"{PREFIX}/"):
        parts = obj.key.split("/")
        if obj.problem is None and len(parts) == 3 and parts[2] == MANIFEST and NAME_PATTERN.fullmatch(parts[1]):
            names.append(parts[1])
    return sorted(names)


def manifests(store: ObjectStore) -> list[dict[str, Any]]:
    """Every release's manifest, by name."""
    return [read_manifest(store, n) for n in release_names(store)]


def referenced_shard_uris(store: ObjectStore) -> set[str]:
    """Every shard uri any release's manifest lists: the shards a clean-up must keep."""
    return {s["uri"] for m in manifests(store) for s in m.get("shards", [])}


@dataclass(frozen=True)
class ReleaseSummary:
    """One line of ``videolake release list``."""

    name: str
    created_at: str
    partitions: tuple[str, ...]
    excluded: int  # days of the requested range left out
    samples: int
    shards: int
    hours: float
    buckets: tuple[str, ...] | None

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> ReleaseSummary:
        totals = manifest.get("totals", {})
        buckets = manifest.get("buckets")
        return cls(
            name=manifest["name"],
            created_at=manifest.get("created_at", ""),
            partitions=tuple(manifest.get("partitions", [])),
            excluded=len(manifest.get("excluded_partitions", [])),
            samples=int(totals.get("samples", 0)),
            shards=int(totals.get("shards", 0)),
            hours=float(totals.get("hours", 0.0)),
            buckets=tuple(buckets) if buckets is not None else None,
        )


def list_releases(store: ObjectStore) -> list[ReleaseSummary]:
    """A summary of every release, by name."""
    return [ReleaseSummary.of(m) for m in manifests(store)]
