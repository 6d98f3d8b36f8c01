"""``create_release``: the gated days of a date range as one immutable, named training-set release.

A release takes a day only when every table it reads (``RELEASE_TABLES``) has rows for it and no blocking gate of
any of them failed on it; the other days are listed with the reason and left out, so a release never holds a day a
gate stopped. It pins the Delta version of each table it read, so its rows can be read again (time travel) and the
protective vacuum (``vacuum.py``) keeps the files of those versions.

Why the manifest is written last: the card, the plots and the file list are written first, so a create that
crashes leaves no manifest, and a name without a manifest is no release (a new create of the name may proceed and
overwrites the leftovers). A name with a manifest is refused: a name is never reused, so a training run that
names a release always gets the same samples.

Why the versions are checked again at the end: a table may be written while the release is being made (the daily
schedule writes today's partition); that is harmless unless the write touched a day of the range. The data files
of the range's days at the pinned version are compared with the latest version's; if they differ the create fails
(nothing is published) rather than pin a version that is not what it read.

Why a pending pin comes before that final check: a ``training_shards`` re-run deletes the shards of its days that
neither its table nor a release names once they are past the retention (``remove_stale_shards``), and the shards
this create is about to name are in no manifest yet (a day last packed a week ago has shards that old). So the order is: shard list and table versions ->
``files.json`` -> pending pin (``manifest.write_pending_pin``: every deleter keeps what it names) -> card -> final
check (the tables' files of the range did not change, every shard to be named still exists) -> manifest -> the
pin is removed (the manifest supersedes it). A deleter that listed the pins before this one was written committed
before the final check, which sees its commit; one that lists them later keeps the shards.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.lake.schemas import PARTITION_COLUMN
from videolake.platform.objectstore.base import ObjectStore
from videolake.platform.releases.manifest import (
    FILES,
    FORMAT,
    MANIFEST,
    RELEASE_TABLES,
    ReleaseError,
    ReleaseExistsError,
    release_key,
    remove_pending_pins,
    validate_name,
    write_pending_pin,
)

if TYPE_CHECKING:
    from videolake.platform.gates import GateConfig
    from videolake.platform.lake.table import Lake, PartitionRange

log = logging.getLogger(__name__)

# (table, day) -> the names of the blocking gates that failed on that day (empty: every blocking gate passed).
GateVerdicts = Callable[[str, str], Sequence[str]]

BUCKET_PATTERN = re.compile(r"resolution_\d+/aspect_\d+_\d+/frames_\d+_(\d+|plus)")

# The columns a release reads of each table (the shard list, the totals and the card's figures).
READ_COLUMNS: dict[str, tuple[str, ...]] = {
    "raw_videos": ("video_id", "status", "reject_reason", PARTITION_COLUMN),
    "scene_clips": ("clip_id", "detect_error", PARTITION_COLUMN),
    "filtered_clips": ("clip_id", "passed", "reject_reason", PARTITION_COLUMN),
    "clip_captions": (
        "clip_id",
        "caption_track",
        "status",
        "error",
        "model",
        "model_revision",
        "prompt_version",
        PARTITION_COLUMN,
    ),
    "training_shards": (
        "clip_id",
        "status",
        "error",
        "bucket",
        "shard_uri",
        "shard_sha256",
        "shard_samples",
        "shard_bytes",
        "sample_offset",
        "sample_bytes",
        "num_frames",
        "width",
        "height",
        "fps",
        "duration_s",
        "caption_chars",
        "caption_track",
        "faces_blurred",
        PARTITION_COLUMN,
    ),
}


@dataclass(frozen=True)
class Release:
    """A published release: its manifest (the contract's format) and where its files are."""

    name: str
    manifest: dict[str, Any]
    manifest_uri: str
    card_uri: str
    images: tuple[str, ...]  # uris of the card's PNGs

    @property
    def partitions(self) -> list[str]:
        return list(self.manifest["partitions"])

    @property
    def excluded_partitions(self) -> list[dict[str, Any]]:
        return list(self.manifest["excluded_partitions"])

    @property
    def shards(self) -> list[dict[str, Any]]:
        return list(self.manifest["shards"])

    @property
    def totals(self) -> dict[str, Any]:
        return dict(self.manifest["totals"])

    @property
    def table_versions(self) -> dict[str, int]:
        return {t: v["version"] for t, v in self.manifest["tables"].items()}


def gate_verdicts_from_lake(lake: Lake, config: GateConfig | None = None) -> GateVerdicts:
    """Verdicts by evaluating the gates again on the stored partition (``gates.check_partition``), with
    ``config`` (default: ``load_gate_config()``, i.e. $VIDEOLAKE_GATES_FILE). A table without gates passes."""

    def verdicts(table: str, day: str) -> list[str]:
        from videolake.platform.gates import TABLE_GATES, check_partition

        if table not in TABLE_GATES:
            log.warning("table %s has no gates: its partition %s is taken without a gate verdict", table, day)
            return []
        return [r.gate for r in check_partition(lake, table, day, config) if r.blocks]

    return verdicts


def create_release(
    lake: Lake,
    store: ObjectStore,
    name: str,
    start: str | dt.date,
    end: str | dt.date,
    *,
    buckets: Iterable[str] | None = None,
    gate_verdicts: GateVerdicts | None = None,
    caption_track: str | None = None,
) -> Release:
    """Publish release ``name`` from the days [start, end] (inclusive) that passed every gate of every table.

    ``buckets``: only the shards of these buckets (None: all). ``caption_track``: the caption track the shards must
    carry (None: the one they carry; shards of several tracks are refused); the manifest and the card name it. ``gate_verdicts(table, day)``: the failed blocking
    gates of a partition (default ``gate_verdicts_from_lake(lake)``). Raises ReleaseExistsError when the name has a
    manifest, ReleaseError when no day (or no shard) is left to release.
    """
    from videolake.platform.lake.table import PartitionRange

    validate_name(name)
    manifest_key = release_key(name, MANIFEST)
    if store.exists(manifest_key):
        raise ReleaseExistsError(
            f"release {name!r} exists ({store.uri(manifest_key)}): a release name is never reused; choose another name"
        )
    first, last = _day(start), _day(end)
    if last < first:
        raise ReleaseError(f"end {last} is before start {first}")
    wanted = _buckets(buckets)
    verdicts = gate_verdicts or gate_verdicts_from_lake(lake)
    requested = PartitionRange(first, last + dt.timedelta(days=1))
    days = [d.isoformat() for d in requested.days()]

    versions = {t: lake.version(t) for t in RELEASE_TABLES}
    rows = {t: _rows_by_day(lake, t, requested) if versions[t] is not None else {} for t in RELEASE_TABLES}
    taken, excluded = _split_days(name, days, rows, verdicts, requested)

    data = {t: _read_days(lake, t, taken, READ_COLUMNS[t]) for t in RELEASE_TABLES}
    ok = _ok_samples(data["training_shards"], wanted)
    track = _release_track(ok, caption_track)
    # the card's caption figures: the released track's rows only (a day holds one row per clip per track)
    caps = data["clip_captions"]
    data["clip_captions"] = caps.filter(pc.equal(caps.column("caption_track"), track))
    shards = _released_shards(ok, taken, wanted)

    _check_unchanged(lake, versions, requested)  # early: a write that landed while the rows were read
    tables = _pinned_tables(lake, versions)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "name": name,
        "created_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "requested": {"start": first.isoformat(), "end": last.isoformat()},
        "partitions": taken,
        "excluded_partitions": excluded,
        "buckets": wanted,
        "caption_track": track,
        "tables": tables,
        "shards": shards,
        "totals": totals_of(ok, shards),
    }

    # files.json before the pin: a vacuum that honours the pin falls back to it when the log lacks a version
    store.put_bytes(release_key(name, FILES), _json(_pinned_files(lake, versions, taken)))
    pin = write_pending_pin(store, name, tables, [s["uri"] for s in shards])
    try:
        card_uri, images, manifest_uri = _publish(lake, store, manifest, versions, requested, ok, data)
    except BaseException:
        remove_pending_pins(store, name, pin)
        raise
    remove_pending_pins(store, name)  # the manifest pins everything now (leftover pins of the name go too)
    log.info(
        "release %s: %d days, %d shards, %d samples (%s)",
        name,
        len(taken),
        len(shards),
        manifest["totals"]["samples"],
        manifest_uri,
    )
    return Release(name=name, manifest=manifest, manifest_uri=manifest_uri, card_uri=card_uri, images=images)


def _split_days(
    name: str, days: list[str], rows: dict[str, dict[str, int]], verdicts: GateVerdicts, requested: PartitionRange
) -> tuple[list[str], list[dict[str, Any]]]:
    """The days that can be released and the excluded ones with why; ReleaseError when none can."""
    taken, excluded = [], []
    for day in days:
        reason, detail = _exclusion(day, rows, verdicts)
        if reason is None:
            taken.append(day)
        else:
            excluded.append({"partition_date": day, "reason": reason, **detail})
            log.info("release %s: %s left out: %s", name, day, reason)
    if not taken:
        why = "; ".join(f"{e['partition_date']}: {e['reason']}" for e in excluded)
        raise ReleaseError(f"no partition of {requested} can be released ({why})")
    return taken, excluded


def _ok_samples(shard_rows: pa.Table, wanted: list[str] | None) -> pa.Table:
    """The ok training_shards rows, of the ``wanted`` buckets only (None: every bucket)."""
    ok = shard_rows.filter(pc.equal(shard_rows.column("status"), "ok"))
    if wanted is not None:
        ok = ok.filter(pc.is_in(ok.column("bucket"), pa.array(wanted, pa.string())))
    return ok


def _released_shards(ok: pa.Table, taken: list[str], wanted: list[str] | None) -> list[dict[str, Any]]:
    """The shard list of the ok rows (``shard_list``); ReleaseError when the released days have none."""
    shards = shard_list(ok)
    if not shards:
        raise ReleaseError(
            f"the released days {', '.join(taken)} have no shard"
            + (f" in the buckets {', '.join(wanted)}" if wanted is not None else "")
        )
    return shards


def _pinned_tables(lake: Lake, versions: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    """The manifest's ``tables``: each table's uri and pinned version; ReleaseError when a table does not exist."""
    missing = [t for t in RELEASE_TABLES if versions[t] is None]
    if missing:  # not reached: a day without a table's rows is left out above
        raise ReleaseError(f"the lake has no table {', '.join(missing)}")
    return {t: {"uri": lake.table_uri(t), "version": int(v)} for t, v in versions.items() if v is not None}


def _publish(
    lake: Lake,
    store: ObjectStore,
    manifest: dict[str, Any],
    versions: dict[str, int | None],
    requested: PartitionRange,
    ok: pa.Table,
    data: dict[str, pa.Table],
) -> tuple[str, tuple[str, ...], str]:
    """Write the card, check again, then the manifest (last); the card's uri, its images and the manifest's uri."""
    from videolake.platform.releases.card import write_card

    name, taken = manifest["name"], manifest["partitions"]
    manifest_key = release_key(name, MANIFEST)
    card_uri, images = write_card(store, manifest, _with_caption_chars(lake, ok, taken), data)
    _check_unchanged(lake, versions, requested)  # the final check: after the pin, before the manifest
    _check_shards_exist(store, manifest["shards"])
    if store.exists(manifest_key):  # a create of the same name that finished meanwhile: it keeps the name
        raise ReleaseExistsError(
            f"release {name!r} was published by another create while this one ran "
            f"({store.uri(manifest_key)}); choose another name"
        )
    manifest_uri = store.put_bytes(manifest_key, _json(manifest))  # last: from here on the release exists
    return card_uri, images, manifest_uri


def _exclusion(day: str, rows: dict[str, dict[str, int]], verdicts: GateVerdicts) -> tuple[str | None, dict[str, Any]]:
    """Why ``day`` cannot be released (None: it can), and the same as data (missing tables, failed gates)."""
    missing = [t for t in RELEASE_TABLES if rows[t].get(day, 0) == 0]
    if missing:
        return f"no rows in {', '.join(missing)}", {"missing_tables": missing}
    failed = {}
    for t in RELEASE_TABLES:
        gates = sorted(set(verdicts(t, day)))
        if gates:
            failed[t] = gates
    if failed:
        return (
            "; ".join(f"{t} failed blocking gate(s) {', '.join(g)}" for t, g in failed.items()),
            {"failed_gates": failed},
        )
    return None, {}


def shard_list(ok: pa.Table) -> list[dict[str, Any]]:
    """The distinct shards of the ok sample rows, sorted by uri; a shard its rows disagree about is an error."""
    cols = ("shard_uri", "shard_sha256", "shard_samples", "shard_bytes", "bucket", PARTITION_COLUMN)
    seen: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for uri, sha, samples, size, bucket, day in zip(*(ok.column(c).to_pylist() for c in cols)):
        if uri is None or sha is None or samples is None:
            raise ReleaseError(f"an ok training_shards row of {day} has no shard_uri/shard_sha256/shard_samples")
        entry = {
            "uri": uri,
            "sha256": sha,
            "samples": int(samples),
            "bytes": int(size or 0),
            "bucket": bucket,
            "partition_date": str(day),
        }
        if seen.setdefault(uri, entry) != entry:
            raise ReleaseError(f"training_shards rows disagree about shard {uri}: {seen[uri]} vs {entry}")
        counts[uri] = counts.get(uri, 0) + 1
    for uri, entry in seen.items():
        if counts[uri] != entry["samples"]:
            raise ReleaseError(
                f"shard {uri} holds {entry['samples']} samples but {counts[uri]} ok training_shards "
                "rows point at it: the table and the shard disagree"
            )
    return [seen[u] for u in sorted(seen)]


def totals_of(ok: pa.Table, shards: list[dict[str, Any]]) -> dict[str, Any]:
    """The contract's totals: samples, shards, bytes, frames, hours, and samples/hours per bucket."""
    by_bucket: dict[str, dict[str, Any]] = {}
    for bucket, duration in zip(ok.column("bucket").to_pylist(), ok.column("duration_s").to_pylist()):
        b = by_bucket.setdefault(bucket, {"samples": 0, "seconds": 0.0})
        b["samples"] += 1
        b["seconds"] += float(duration or 0.0)
    return {
        "samples": ok.num_rows,
        "shards": len(shards),
        "bytes": sum(s["bytes"] for s in shards),
        "frames": int(pc.sum(ok.column("num_frames")).as_py() or 0),
        "hours": _hours(sum(b["seconds"] for b in by_bucket.values())),
        "by_bucket": {
            k: {"samples": v["samples"], "hours": _hours(v["seconds"])} for k, v in sorted(by_bucket.items())
        },
    }


def _with_caption_chars(lake: Lake, ok: pa.Table, days: list[str]) -> pa.Table:
    """``ok`` with caption_chars filled from clip_captions where a shard row has none (rows written without it)."""
    if ok.column("caption_chars").null_count == 0:
        return ok
    caps = _read_days(lake, "clip_captions", days, ("clip_id", "caption"))
    lengths = dict(zip(caps.column("clip_id").to_pylist(), pc.utf8_length(caps.column("caption")).to_pylist()))
    filled = [
        c if c is not None else lengths.get(i)
        for i, c in zip(ok.column("clip_id").to_pylist(), ok.column("caption_chars").to_pylist())
    ]
    idx = ok.schema.get_field_index("caption_chars")
    return ok.set_column(idx, "caption_chars", pa.array(filled, ok.schema.field(idx).type))


def _release_track(ok: pa.Table, wanted: str | None) -> str:
    """The caption track of the released samples (training_shards.caption_track; rows written before tracks: the
    default track); ReleaseError when they carry several or not the ``wanted`` one."""
    tracks = sorted({t or "default" for t in ok.column("caption_track").to_pylist()})
    if len(tracks) > 1:
        raise ReleaseError(
            f"the released days' shards carry the captions of several tracks ({', '.join(tracks)}): build the "
            "shards of every day from one track (the shard stage's caption_track) and release again"
        )
    track = tracks[0] if tracks else (wanted or "default")
    if wanted is not None and track != wanted:
        raise ReleaseError(
            f"the released days' shards carry caption track {track!r}, not {wanted!r}: build them with "
            f"caption_track={wanted!r} first"
        )
    return track


def _hours(seconds: float) -> float:
    return round(seconds / 3600.0, 6)


def _rows_by_day(lake: Lake, table: str, rng) -> dict[str, int]:
    """Rows per day of ``rng`` from the Delta log's per-file record counts (no data file is opened)."""
    from deltalake import DeltaTable

    dtbl = DeltaTable(lake.table_uri(table), storage_options=lake.storage_options or None)
    actions = pa.table(dtbl.get_add_actions(flatten=True))
    days = {d.isoformat() for d in rng.days()}
    col = f"partition.{PARTITION_COLUMN}"
    if actions.num_rows == 0:
        return {}
    if "num_records" not in actions.column_names:  # a writer without statistics: count the rows
        from videolake.platform.lake.table import PartitionRange

        return {d: lake.row_count(table, PartitionRange.of([d])) for d in sorted(days)}
    out: dict[str, int] = {}
    for d, n in zip(actions.column(col).to_pylist(), actions.column("num_records").to_pylist()):
        if str(d) in days:
            out[str(d)] = out.get(str(d), 0) + int(n or 0)
    return out


def _read_days(lake: Lake, table: str, days: list[str], columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of ``days`` (any set of days: read range by contiguous range)."""
    from videolake.platform.lake.table import PartitionRange

    cols = list(columns) if columns is not None else None
    parts = [lake.read_partitions(table, r, cols) for r in PartitionRange.split(days)]
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _day_files(lake: Lake, table: str, version: int | None, days: Iterable[str]) -> list[str]:
    """The data files (relative to the table) of ``days`` at ``version`` (None: the latest), sorted."""
    from deltalake import DeltaTable

    dtbl = DeltaTable(lake.table_uri(table), version=version, storage_options=lake.storage_options or None)
    wanted = sorted(days)
    uris = dtbl.file_uris(file_pruning_predicate=[(PARTITION_COLUMN, "in", wanted)]) if wanted else []
    return sorted(relative_path(lake.table_uri(table), u) for u in uris)


def _check_unchanged(lake: Lake, versions: dict[str, int | None], rng) -> None:
    """ReleaseError when a table's files of the range's days changed after its version was pinned."""
    days = [d.isoformat() for d in rng.days()]
    for t, pinned in versions.items():
        now = lake.version(t)
        if now == pinned:
            continue
        if pinned is None or _day_files(lake, t, pinned, days) != _day_files(lake, t, None, days):
            raise ReleaseError(
                f"{t} was written (version {pinned} -> {now}) for days of {rng} while the release "
                "was being made; nothing was published: create it again"
            )


def _check_shards_exist(store: ObjectStore, shards: list[dict[str, Any]]) -> None:
    """ReleaseError naming the shards to be named that no longer exist (something deleted them without honouring
    the pending pin, e.g. a clean-up that listed the pins before this create wrote its own)."""
    from videolake.platform.releases.shardio import ShardMissingError, open_shard

    gone = []
    for s in shards:
        try:
            key = store.key_from_uri(s["uri"])
        except ValueError:
            key = None
        if key is not None:
            if not store.exists(key):
                gone.append(s["uri"])
            continue
        try:  # a uri outside the store: its filesystem says whether it exists (open_shard reads nothing here)
            with open_shard(store, s["uri"]):
                pass
        except ShardMissingError:
            gone.append(s["uri"])
    if gone:
        raise ReleaseError(
            f"{len(gone)} shard(s) the release would name no longer exist ({', '.join(gone[:5])}"
            f"{', ...' if len(gone) > 5 else ''}): they were deleted while the release was being made; nothing was "
            "published: create it again"
        )


def _pinned_files(lake: Lake, versions: dict[str, int | None], days: list[str]) -> dict[str, Any]:
    """``files.json``: per table, its pinned version and that version's data files of the released days.

    The vacuum keeps these even when the Delta log no longer has the version (log retention), so the released rows
    stay readable from the files."""
    return {
        t: {"uri": lake.table_uri(t), "version": versions[t], "files": _day_files(lake, t, versions[t], days)}
        for t in RELEASE_TABLES
    }


def relative_path(table_uri: str, file_uri: str) -> str:
    """A data file's path relative to its table (``partition_date=D/part-....parquet``), from a uri or path."""
    from urllib.parse import unquote

    base = table_uri.rstrip("/")
    for prefix in (base + "/", "file://" + base + "/"):
        if file_uri.startswith(prefix):
            return unquote(file_uri[len(prefix) :])
    marker = f"/{PARTITION_COLUMN}="
    return unquote(file_uri[file_uri.rindex(marker) + 1 :]) if marker in file_uri else unquote(file_uri)


def _day(value: str | dt.date) -> dt.date:
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ReleaseError(f"not a day (YYYY-MM-DD): {value!r}") from None


def _buckets(buckets: Iterable[str] | None) -> list[str] | None:
    if buckets is None:
        return None
    out = sorted(set(buckets))
    bad = [b for b in out if not BUCKET_PATTERN.fullmatch(b)]
    if bad or not out:
        raise ReleaseError(
            f"invalid bucket name(s) {bad or '(none given)'}: a bucket is "
            "resolution_<R>/aspect_<W>_<H>/frames_<LO>_<HI> or .../frames_<LO>_plus, "
            "e.g. resolution_240/aspect_4_3/frames_0_63"
        )
    return out


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
