"""``export_release``: a release as one self-contained folder (local or ``s3://bucket/prefix``) that travels
without the lake: its shards, a manifest whose shard uris are relative to the folder, the card, and Croissant
metadata.

    DEST/manifest.json      the release's manifest (``videolake-release/1``): every field kept, ``shards[].uri``
                            relative (``shards/<file>.tar``, the original in ``origin_uri``), plus ``export``
    DEST/shards/<file>.tar  the shards, byte for byte
    DEST/README.md, *.png   the card, as the release has it (with ``files.json``: what the pinned tables held)
    DEST/croissant.json     Croissant 1.1 (``croissant.py``), validated with mlcroissant before it is written

Why the sha256 is checked while copying: an export is what other people will train on, away from the lake that
could tell them a shard changed. Each shard is hashed on the bytes copied (one read), and a shard whose bytes are
not the ones its manifest names fails the export with an error naming it; the same read counts its samples and
gathers the samples' json for the Croissant RAI facts (caption models, score ranges).

Why the manifest is written last: a folder without ``manifest.json`` is no release (``open_release`` refuses it),
so an export that fails half way leaves nothing a reader would take for complete; exporting again into the same
folder overwrites the leftovers. A folder that has a manifest is refused: an export is written once.

``videolake.dataset.open_release(DEST)`` reads the folder with no lake and no Dagster: the manifest's ``export``
field marks it, and the relative uris resolve against the folder.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import posixpath
import tarfile
import tempfile
import uuid
from collections.abc import Mapping
from typing import Any, BinaryIO

from videolake.platform.objectstore.base import ObjectStore
from videolake.platform.releases.croissant import (
    FILE as CROISSANT,
)
from videolake.platform.releases.croissant import (
    RAI_PROPERTIES,
    CroissantError,
    SampleFacts,
    build_croissant,
    rai_properties,
    validate,
)
from videolake.platform.releases.manifest import CARD, MANIFEST, PIN_PATTERN, ReleaseError, read_manifest, release_key

log = logging.getLogger(__name__)

EXPORT_FORMAT = "videolake-release-export/1"
SHARDS_DIR = "shards"
CHUNK = 8 << 20
# The quality filter settings stated (as defaults) in the Croissant RAI facts: the rule thresholds of QualityConfig.
THRESHOLD_FIELDS = (
    "min_clip_s",
    "max_clip_s",
    "min_width",
    "min_height",
    "black_luma",
    "max_black_ratio",
    "min_brightness",
    "max_brightness",
    "frozen_diff",
    "max_frozen_ratio",
    "min_motion",
    "max_motion",
    "min_sharpness",
    "max_text_area",
    "dup_max_distance",
    "dup_min_share",
    "semantic_eps",
)


class ExportError(ReleaseError):
    """An export that cannot be made: the destination holds a release already, or a shard is not what its
    manifest names."""


class ShardMismatchError(ExportError):
    """A shard whose bytes (sha256, size) or samples are not the ones the release's manifest names."""

    def __init__(self, message: str, uri: str) -> None:
        super().__init__(message)
        self.uri = uri


@dataclasses.dataclass(frozen=True)
class ExportResult:
    name: str
    dest: str  # the folder's uri
    manifest_uri: str
    croissant_uri: str
    shards: int
    samples: int
    bytes: int  # shard bytes copied
    files: tuple[str, ...]  # every file of the folder, relative to it, sorted
    warnings: tuple[str, ...]  # mlcroissant's warnings (its errors fail the export)


def destination(dest: str, like: ObjectStore | None = None) -> ObjectStore:
    """The object store of an export folder: a local path (or ``file://`` uri), or ``s3://bucket/prefix``. An S3
    destination reuses ``like``'s connection (endpoint, region, credentials) when ``like`` is an S3 store, else
    boto3's default chain (AWS_* variables, AWS_ENDPOINT_URL included)."""
    from videolake.platform.objectstore import LocalObjectStore, S3ObjectStore

    if dest.startswith(("s3://", "s3a://")):
        bucket, _, prefix = dest.split("://", 1)[1].partition("/")
        if not bucket:
            raise ExportError(f"no bucket in {dest!r}: use s3://bucket/prefix")
        if isinstance(like, S3ObjectStore):
            clone = copy.copy(like)  # its connection settings; a fresh client (the bucket differs)
            clone.bucket, clone.prefix = bucket, prefix.strip("/")
            return clone
        return S3ObjectStore(
            bucket, prefix, endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None, region=_region_from_env()
        )
    if "://" in dest and not dest.startswith("file://"):
        raise ExportError(f"unsupported destination {dest!r}: a local folder, file:// or s3://bucket/prefix")
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    path = url2pathname(urlparse(dest).path) if dest.startswith("file://") else dest
    return LocalObjectStore(os.path.abspath(path))


def _region_from_env() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def default_thresholds() -> dict[str, Any]:
    """The quality filter's default rule thresholds (``QualityConfig``), by field."""
    from videolake.platform.filters.quality import QualityConfig

    config = QualityConfig()
    return {f: getattr(config, f) for f in THRESHOLD_FIELDS if hasattr(config, f)}


def export_release(
    store: ObjectStore,
    name: str,
    dest: ObjectStore,
    *,
    storage_options: dict[str, str] | None = None,
    license: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    thresholds: Mapping[str, Any] | None = None,
) -> ExportResult:
    """Write release ``name`` of ``store`` into ``dest`` as one self-contained folder (module docstring).

    ``storage_options``: for shards outside ``store`` (s3:// uris of another bucket), as ``open_shard`` takes them.
    ``license``: the Croissant ``license`` (a URL or SPDX id). ``overrides``: Croissant properties (``rai:...``,
    ``license``, ``creator``, ...) that replace the generated ones. ``thresholds``: the quality settings stated in
    the RAI facts (default: ``default_thresholds()``, stated as defaults).

    Raises ReleaseNotFoundError, ExportError when ``dest`` holds a release already or ``overrides`` names an RAI
    property Croissant does not have, ShardMismatchError naming a shard whose bytes or samples differ from the
    manifest, CroissantError when mlcroissant rejects the metadata (nothing of the manifest is written then)."""
    manifest = read_manifest(store, name)
    overrides = _checked_overrides(overrides or {})
    if dest.exists(MANIFEST):
        raise ExportError(
            f"{dest.uri(MANIFEST)} exists: {dest.uri('')} holds a release already; export into a new folder"
        )
    names = _shard_names(manifest["shards"])
    facts = SampleFacts()
    shards_out, copied = [], 0
    for entry, rel in zip(manifest["shards"], names):
        _copy_shard(store, entry, dest, rel, facts, storage_options)
        shards_out.append({**entry, "uri": rel, "origin_uri": entry["uri"]})
        copied += int(entry["bytes"])
        log.info("export %s: %s -> %s", name, entry["uri"], dest.uri(rel))

    files: dict[str, dict[str, Any]] = {}
    card = ""
    folder = release_key(name)
    for obj in store.list(folder):
        rel = obj.key[len(folder) :]
        if obj.problem is not None or obj.is_folder or rel == MANIFEST or PIN_PATTERN.fullmatch(rel):
            continue
        data = store.get_bytes(obj.key)
        if rel == CARD:
            card = data.decode("utf-8")
        dest.put_bytes(rel, data)
        files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    if not card:
        log.warning("release %s has no card (%s): the export carries none", name, store.uri(release_key(name, CARD)))

    rai = rai_properties(manifest, card, facts, default_thresholds() if thresholds is None else thresholds)
    doc = build_croissant(
        manifest, shards_out, rai=rai, description=_description(manifest), license=license, overrides=overrides
    )
    warnings = validate(doc)
    croissant = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    croissant_uri = dest.put_bytes(CROISSANT, croissant)
    files[CROISSANT] = {"sha256": hashlib.sha256(croissant).hexdigest(), "bytes": len(croissant)}

    exported = {
        **manifest,
        "shards": shards_out,
        "export": {
            "format": EXPORT_FORMAT,
            "exported_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source_manifest": store.uri(release_key(name, MANIFEST)),
            "shards_dir": SHARDS_DIR,
            "files": dict(sorted(files.items())),
        },
    }
    manifest_uri = dest.put_bytes(MANIFEST, (json.dumps(exported, indent=2, ensure_ascii=False) + "\n").encode())
    log.info("export %s: %d shards, %d bytes, %s", name, len(shards_out), copied, dest.uri(""))
    return ExportResult(
        name=name,
        dest=dest.uri(""),
        manifest_uri=manifest_uri,
        croissant_uri=croissant_uri,
        shards=len(shards_out),
        samples=sum(int(s["samples"]) for s in shards_out),
        bytes=copied,
        files=tuple(sorted([*files, MANIFEST, *names])),
        warnings=tuple(warnings),
    )


def _checked_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` with every ``rai:`` property known to Croissant (a typo is an error, not a silent extra) and
    single strings of list-valued RAI properties wrapped in a list."""
    out = {}
    for key, value in overrides.items():
        if key.startswith("rai:"):
            if key not in RAI_PROPERTIES:
                raise ExportError(f"unknown Croissant RAI property {key!r}; known: {', '.join(sorted(RAI_PROPERTIES))}")
            if RAI_PROPERTIES[key] and isinstance(value, str):
                value = [value]
        out[key] = value
    return out


def _description(manifest: Mapping[str, Any]) -> str:
    t = manifest.get("totals", {})
    days = manifest.get("partitions", [])
    span = f"{days[0]} to {days[-1]}" if days else "no day"
    return (
        f"videolake release {manifest['name']}: {t.get('samples', 0)} captioned video clips "
        f"({float(t.get('hours', 0.0)):.4f} h, {t.get('frames', 0)} frames) in {t.get('shards', 0)} WebDataset tar "
        f"shards, from the {len(days)} day(s) {span} whose partitions passed every blocking quality gate. Each "
        "sample is <clip_id>.mp4 (H.264), <clip_id>.txt (the caption) and <clip_id>.json (provenance and scores). "
        f"Created {manifest.get('created_at', '')}; manifest.json lists every shard with its sha256."
    )


def _shard_names(shards: list[dict[str, Any]]) -> list[str]:
    """``shards/<file name>`` of each shard; a name two shards share gets the shard's sha256 prefix."""
    base = [posixpath.basename(str(s["uri"]).rstrip("/")) or "shard.tar" for s in shards]
    out = []
    for s, b in zip(shards, base):
        if base.count(b) > 1:
            stem, ext = posixpath.splitext(b)
            b = f"{stem}-{str(s['sha256'])[:16]}{ext}"
        out.append(f"{SHARDS_DIR}/{b}")
    if len(set(out)) != len(out):
        raise ExportError("two shards of the release have the same name and sha256: the manifest lists a shard twice")
    return out


class _Tee:
    """A read-only stream that copies, hashes and counts what is read through it."""

    def __init__(self, src: BinaryIO, out: BinaryIO) -> None:
        self.src, self.out = src, out
        self.sha, self.size = hashlib.sha256(), 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(CHUNK), b""))
        data = self.src.read(n)
        self.sha.update(data)
        self.out.write(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        while self.read(CHUNK):
            pass


def _copy_shard(
    store: ObjectStore,
    entry: Mapping[str, Any],
    dest: ObjectStore,
    rel: str,
    facts: SampleFacts,
    storage_options: dict[str, str] | None,
) -> None:
    """Copy one shard to ``dest`` at ``rel``, checking its sha256, size and samples on the bytes copied; the copy
    is put in place only when they match."""
    from videolake.platform.releases.shardio import ShardMissingError, open_shard

    uri = str(entry["uri"])
    local = dest.local_path(rel)
    if local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        tmp = os.path.join(os.path.dirname(local), f".{os.path.basename(local)}.part-{uuid.uuid4().hex[:8]}")
    else:
        fd, tmp = tempfile.mkstemp(prefix="videolake-export-", suffix=".tar")
        os.close(fd)
    try:
        keys: set[str] = set()
        shard_facts = SampleFacts()
        tar_error = None
        try:
            with open_shard(store, uri, storage_options) as src, open(tmp, "wb") as out:
                tee = _Tee(src, out)
                try:
                    with tarfile.open(fileobj=tee, mode="r|") as tar:  # type: ignore[call-overload]
                        for member in tar:
                            if not member.isfile():
                                continue
                            key, _, ext = member.name.rpartition("/")[2].partition(".")
                            keys.add(key)
                            if ext == "json":
                                fh = tar.extractfile(member)
                                if fh is not None:
                                    shard_facts.add(json.loads(fh.read().decode("utf-8")))
                except (tarfile.TarError, ValueError, UnicodeDecodeError) as exc:
                    tar_error = f"{type(exc).__name__}: {exc}"
                tee.drain()
        except ShardMissingError:
            raise ShardMismatchError(f"shard {uri} of the release does not exist: nothing to export", uri) from None
        sha, size = tee.sha.hexdigest(), tee.size
        want_sha, want_size = str(entry["sha256"]), int(entry.get("bytes") or 0)
        if sha != want_sha or (want_size and size != want_size):
            raise ShardMismatchError(
                f"shard {uri} does not hold the bytes the release's manifest names: sha256 {sha} ({size} bytes) "
                f"read, {want_sha} ({want_size} bytes) expected; the shard changed after the release was "
                "published (`videolake release verify NAME`); nothing of the export's manifest was written",
                uri,
            )
        if tar_error is not None or len(keys) != int(entry["samples"]):
            raise ShardMismatchError(
                f"shard {uri} holds {len(keys)} samples, its manifest lists {entry['samples']}"
                + (f" (the tar does not read: {tar_error})" if tar_error else ""),
                uri,
            )
        if local is not None:
            os.replace(tmp, local)
        else:
            dest.put_file(rel, tmp)
        facts.merge(shard_facts)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


__all__ = [
    "EXPORT_FORMAT",
    "CroissantError",
    "ExportError",
    "ExportResult",
    "ShardMismatchError",
    "default_thresholds",
    "destination",
    "export_release",
]
