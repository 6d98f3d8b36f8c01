"""Where a release lives in the object store, what its manifest holds, and how releases are found again.

    releases/<NAME>/manifest.json   the release itself (``FORMAT``): days, table versions, shards, totals
    releases/<NAME>/README.md       the dataset card, with its PNGs beside it
    releases/<NAME>/files.json      the data files of each pinned table version in the release's days
    releases/<NAME>/pending-<ATTEMPT>.json   a pending pin: what a create in progress is about to publish

The manifest is the release: it is written last, so a name without one is no release (a crashed create left only
card files behind, and a new create of that name may proceed), and a name with one is never written again.

Why pending pins: a create reads the shard list and the table versions long before it publishes the manifest (the
card is written in between). Until the manifest exists, nothing told a clean-up that those shards and versions
are wanted, so a ``training_shards`` re-run committing in that window deleted shards the release then named. A
create therefore writes a pending pin (the table uris and versions, the shard uris) BEFORE its final check, and
every deleter reads the pins with the manifests (``referenced_shard_uris``, ``vacuum.pinned_versions``). A deleter
that listed the pins before the pin was written committed its table change before the create's final check, which
then sees the change and publishes nothing. A pin is superseded once its name has a manifest (the create removes
it then, or on failure); one older than ``PENDING_EXPIRY`` without a manifest is a crashed create's and is ignored.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from videolake.platform.objectstore.base import ObjectStore

log = logging.getLogger(__name__)

FORMAT = "videolake-release/1"
PREFIX = "releases"
MANIFEST = "manifest.json"
CARD = "README.md"
FILES = "files.json"
PIN_FORMAT = "videolake-release-pin/1"
PIN_PATTERN = re.compile(r"pending-[0-9a-f]{32}\.json")
# A create takes minutes (hours for a year of shards at most); a pin this old without a manifest is a crashed
# create's leftover and protects nothing (the next clean-up of its days may delete what it named).
PENDING_EXPIRY = dt.timedelta(hours=24)
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


def referenced_shard_uris(store: ObjectStore, *, now: dt.datetime | None = None) -> set[str]:
    """Every shard uri any release's manifest or any live pending pin lists: the shards a clean-up must keep.

    The pins are read before the manifests: a create that publishes meanwhile wrote its manifest before it removed
    its pin, so one of the two is seen."""
    pending = {u for p in pending_pins(store, now=now) for u in p.shards}
    return pending | {s["uri"] for m in manifests(store) for s in m.get("shards", [])}


@dataclass(frozen=True)
class PendingPin:
    """What a create in progress is about to publish (``releases/<NAME>/pending-<ATTEMPT>.json``)."""

    name: str
    key: str
    created_at: dt.datetime
    tables: dict[str, dict[str, Any]]  # table -> {"uri", "version"}, as the manifest will pin them
    shards: tuple[str, ...]  # the shard uris the manifest will name


def write_pending_pin(
    store: ObjectStore,
    name: str,
    tables: dict[str, dict[str, Any]],
    shards: Iterable[str],
    *,
    now: dt.datetime | None = None,
) -> str:
    """Register what release ``name`` is about to pin; returns the pin's key (one per create attempt, so a failed
    create of a name removes only its own pin)."""
    created = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    key = release_key(name, f"pending-{uuid.uuid4().hex}.json")
    pin = {
        "format": PIN_FORMAT,
        "name": name,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tables": {t: {"uri": r["uri"], "version": int(r["version"])} for t, r in tables.items()},
        "shards": sorted(shards),
    }
    store.put_bytes(key, (json.dumps(pin, indent=2) + "\n").encode("utf-8"))
    return key


def remove_pending_pins(store: ObjectStore, name: str, key: str | None = None) -> None:
    """Delete the pending pin ``key`` of ``name``, or with ``key`` None every one of them (the manifest exists and
    supersedes them: leftovers of crashed attempts go too). A pin that cannot be deleted only expires later."""
    keys = [key] if key is not None else [k for k, n in _pin_keys(store)[0] if n == name]
    for k in keys:
        try:
            store.delete(k)
        except Exception as exc:  # noqa: BLE001 (a leftover pin is harmless: it expires)
            log.warning("could not delete pending pin %s (%s): it expires after %s", store.uri(k), exc, PENDING_EXPIRY)


def _pin_keys(store: ObjectStore) -> tuple[list[tuple[str, str]], set[str]]:
    """(key, release name) of every pending pin object, and the names with a manifest, from one listing."""
    pins, published = [], set()
    for obj in store.list(f"{PREFIX}/"):
        parts = obj.key.split("/")
        if obj.problem is None and len(parts) == 3 and NAME_PATTERN.fullmatch(parts[1]):
            if PIN_PATTERN.fullmatch(parts[2]):
                pins.append((obj.key, parts[1]))
            elif parts[2] == MANIFEST:
                published.add(parts[1])
    return pins, published


def pending_pins(
    store: ObjectStore, *, now: dt.datetime | None = None, expiry: dt.timedelta = PENDING_EXPIRY
) -> list[PendingPin]:
    """The pins of creates in progress: not superseded by a manifest of their name, and younger than ``expiry``
    (an older one is a crashed create's and is ignored, logged). A pin that does not read is a ReleaseError: a
    deleter must not guess what it protected (delete the object once no create of its name runs)."""
    now = now or dt.datetime.now(dt.UTC)
    keys, published = _pin_keys(store)
    pins = []
    for key, name in keys:
        if name in published:
            continue
        try:
            raw = json.loads(store.get_bytes(key).decode("utf-8"))
            if raw.get("format") != PIN_FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, not {PIN_FORMAT!r}")
            created = dt.datetime.strptime(raw["created_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
            pin = PendingPin(
                name=name,
                key=key,
                created_at=created,
                tables={t: {"uri": str(r["uri"]), "version": int(r["version"])} for t, r in raw["tables"].items()},
                shards=tuple(str(u) for u in raw["shards"]),
            )
        except FileNotFoundError:  # removed since the listing: its create finished or failed
            continue
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ReleaseError(
                f"pending pin {store.uri(key)} does not read ({type(exc).__name__}: {exc}); nothing that it may "
                "protect can be deleted: delete the object once no create of that release runs"
            ) from exc
        if now - created > expiry:
            log.info("pending pin %s is older than %s without a manifest: ignored", store.uri(key), expiry)
            continue
        pins.append(pin)
    return pins


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
