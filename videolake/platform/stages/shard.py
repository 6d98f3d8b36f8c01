"""The shard stage (training_shards): every passed clip with an ok caption becomes one WebDataset sample, and a
day's samples are packed into tar shards per bucket.

    units    (Ray Data, one per video)  encode each eligible clip of the video (shards.encode), write its sample
                                        (json + mp4 + txt tar members) as a fragment object, checkpoint its rows
    finalize (one Ray task per day)     sort the day's samples by (bucket, clip_id), cut them into shards of at most
                                        max_shard_samples / max_shard_bytes, pack each shard (a Ray task each:
                                        the fragments concatenated, no re-encode) and fill the rows' shard columns
    commit   (the step)                 ONE Delta transaction; then the day's shards that the table no longer names
                                        and no release references are deleted

A shard's name carries a digest of its samples (clip ids and sample sha256), so a name always means the same
bytes: a re-run whose samples did not change finds its shards in place and does not write them again (it only
hashes them), and a re-materialization with other settings writes new names beside the old ones, which a release
may still reference. Fragments live under ``<prefix>/_samples/<stage version>/``: they are the stage's checkpoint of
encoded clips (the unit checkpoint names them); cleanup removes those of other versions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.lake.files import RETENTION_HOURS, past_retention
from videolake.platform.lake.schemas import PARTITION_COLUMN, TRAINING_SHARDS, table_spec
from videolake.platform.lake.table import PartitionRange
from videolake.platform.objectstore import ObjectStore
from videolake.platform.runtime.progress import StageReporter
from videolake.platform.runtime.units import PartitionStep, call_each, stage_version, unit_key
from videolake.platform.shards.config import ShardConfig
from videolake.platform.stages.common import StageRun, _config_dict, run_stage

log = logging.getLogger(__name__)

TABLE = "training_shards"
STATUS_OK = "ok"
STATUS_FAILED = "failed"
ENCODE_ERROR = "encode_error"
SAMPLES_DIR = "_samples"
SCORE_COLUMNS = ("motion", "sharpness", "brightness", "black_ratio", "frozen_ratio", "text_area")


def shard_version(config: ShardConfig) -> str:
    from videolake.platform.shards.encode import ENCODE_VERSION

    # -2: each clip encoded at its measured rate
    return stage_version("training_shards-2", ENCODE_VERSION, _config_dict(config))


# ------------------------------------------------------------------------------------------------ inputs


def eligible_clips(lake: Any, rng: PartitionRange, track: str = "default") -> pa.Table:
    """The clips of the range that become samples: passed in filtered_clips and with an ``ok`` caption in caption
    track ``track`` (only that track's captions are read), joined with their frame range (scene_clips), frame rate
    (raw_videos) and scores. One row per clip, sorted by clip_id."""
    import pyarrow.dataset as pads

    captions = lake.read_partitions(
        "clip_captions",
        rng,
        columns=[
            "clip_id",
            "caption_track",
            "video_id",
            "source_uri",
            "status",
            "caption",
            "caption_fields",
            "model",
            "model_revision",
            "prompt_version",
            PARTITION_COLUMN,
        ],
        where=pads.field("caption_track") == track,
    )
    captions = captions.filter(pc.equal(captions.column("status"), STATUS_OK)).drop_columns(["status"])
    # Arrow joins carry no map column: a structured track's fields travel as JSON text (null: a free-text track)
    captions = captions.set_column(
        captions.schema.get_field_index("caption_fields"),
        "caption_fields",
        pa.array(
            [
                None if f is None else json.dumps(dict(f), sort_keys=True)
                for f in captions.column("caption_fields").to_pylist()
            ],
            pa.string(),
        ),
    )
    filtered = lake.read_partitions(
        "filtered_clips", rng, columns=["clip_id", "passed", *SCORE_COLUMNS, "scores", PARTITION_COLUMN]
    )
    filtered = filtered.filter(pc.equal(filtered.column("passed"), True)).drop_columns(["passed"])
    # Arrow joins carry no map column: the plugin scores travel as JSON text.
    filtered = filtered.set_column(
        filtered.schema.get_field_index("scores"),
        "scores",
        pa.array([json.dumps(dict(s or [])) for s in filtered.column("scores").to_pylist()], pa.string()),
    )
    clips = lake.read_partitions(
        "scene_clips", rng, columns=["clip_id", "start_frame", "end_frame", "duration_s", PARTITION_COLUMN]
    )
    videos = lake.read_partitions("raw_videos", rng, columns=["video_id", "fps", PARTITION_COLUMN])
    keys = ["clip_id", PARTITION_COLUMN]
    joined = (
        captions.join(filtered, keys, join_type="inner")
        .join(clips, keys, join_type="inner")
        .join(videos, ["video_id", PARTITION_COLUMN], join_type="left outer")
    )
    return joined.sort_by("clip_id")


def _units(eligible: pa.Table) -> list[dict]:
    by_video: dict[tuple[str, str], list[dict]] = {}
    for c in eligible.to_pylist():
        day = c.pop(PARTITION_COLUMN).isoformat()
        c["scores"] = json.loads(c["scores"]) if c["scores"] else {}
        c["caption_fields"] = json.loads(c["caption_fields"]) if c.get("caption_fields") else None
        by_video.setdefault((day, c["video_id"]), []).append(c)
    units = []
    for (day, vid), cs in sorted(by_video.items()):
        cs.sort(key=lambda c: c["start_frame"])
        # The key holds what the samples are made of: a new caption or frame range is a new unit.
        digest = hashlib.sha256(json.dumps(cs, sort_keys=True, default=str).encode()).hexdigest()
        units.append(
            {
                "unit_key": unit_key("shard", vid, digest),
                "partition_date": day,
                "payload": json.dumps({"day": day, "video_id": vid, "clips": cs}, default=str),
            }
        )
    # Longest first (frames to encode), as the other stages do.
    units.sort(key=lambda u: -sum(c["end_frame"] - c["start_frame"] for c in json.loads(u["payload"])["clips"]))
    return units


# ------------------------------------------------------------------------------------------------ units


def sample_json(clip: dict, day: str, encoded: Any, fps: float, bucket: str) -> dict:
    """The ``<clip_id>.json`` member of a sample: the caption and where it came from (docs/shards.md)."""
    scores = {k: clip.get(k) for k in SCORE_COLUMNS}
    scores.update(clip.get("scores") or {})
    return {
        "caption": clip["caption"],
        "caption_track": clip["caption_track"],
        **({"caption_fields": clip["caption_fields"]} if clip.get("caption_fields") else {}),
        "clip_id": clip["clip_id"],
        "video_id": clip["video_id"],
        "source_uri": clip["source_uri"],
        "model": clip["model"],
        "model_revision": clip["model_revision"],
        "prompt_version": clip["prompt_version"],
        "fps": fps,
        "num_frames": encoded.num_frames,
        "width": encoded.width,
        "height": encoded.height,
        "duration_s": encoded.num_frames / fps,
        "start_frame": int(clip["start_frame"]),
        "end_frame": int(clip["end_frame"]),
        "bucket": bucket,
        "partition_date": day,
        "scores": scores,
    }


def fragment_key(config: ShardConfig, version: str, day: str, clip_id: str) -> str:
    return f"{config.prefix}/{SAMPLES_DIR}/{version}/{day}/{clip_id}.tar"


def _failed_row(clip: dict, error: str, failure: str | None = None) -> dict:
    return {
        "clip_id": clip["clip_id"],
        "video_id": clip["video_id"],
        "source_uri": clip["source_uri"],
        "status": STATUS_FAILED,
        "error": error,
        "failure_class": failure,
        "num_frames": int(clip["end_frame"]) - int(clip["start_frame"]),
        "caption_chars": len(clip["caption"] or ""),
        "caption_track": clip["caption_track"],
    }


def shard_one(payload: dict, *, store: ObjectStore, config: ShardConfig, version: str) -> list[dict]:
    """TRAINING_SHARDS rows (without the shard columns) of one video's eligible clips, the video decoded once for
    nearby clips (``encode_clips``); each clip's sample is written as a fragment object. A clip that does not encode
    is a failed row with its reason and failure class."""
    from videolake.platform.runtime.failures import failure_class
    from videolake.platform.shards.buckets import bucket_of
    from videolake.platform.shards.encode import encode_clips
    from videolake.platform.shards.tarfile_det import sample_fragment
    from videolake.platform.video.clips import clip_rate

    day, clips = payload["day"], payload["clips"]
    rows = []
    key = store.key_from_uri(clips[0]["source_uri"])
    # Each clip at its own measured rate (its frames over its duration): a clip of a variable-rate video, or of
    # an AVI's repeat-frame stretch, plays as long as it did in the source.
    rates = [clip_rate(c["start_frame"], c["end_frame"], c.get("duration_s"), c.get("fps")) for c in clips]
    with store.open_local(key) as path:
        results = encode_clips(path, [(int(c["start_frame"]), int(c["end_frame"])) for c in clips], rates, config)
    for clip, encoded, fps in zip(clips, results, rates):
        if isinstance(encoded, Exception):
            cls = failure_class(encoded)
            log.warning("clip %s does not encode (%s): %s", clip["clip_id"], cls, encoded)
            rows.append(_failed_row(clip, f"{ENCODE_ERROR}: {type(encoded).__name__}: {encoded}", cls))
            continue
        bucket = bucket_of(encoded.width, encoded.height, encoded.num_frames, config)
        meta = sample_json(clip, day, encoded, fps, bucket)
        fragment = sample_fragment(
            clip["clip_id"],
            {
                "json": json.dumps(meta, sort_keys=True, ensure_ascii=False).encode(),
                "mp4": encoded.data,
                "txt": clip["caption"].encode(),
            },
        )
        store.put_bytes(fragment_key(config, version, day, clip["clip_id"]), fragment)
        rows.append(
            {
                "clip_id": clip["clip_id"],
                "video_id": clip["video_id"],
                "source_uri": clip["source_uri"],
                "status": STATUS_OK,
                "bucket": bucket,
                "sample_bytes": len(fragment),
                "sample_sha256": hashlib.sha256(fragment).hexdigest(),
                "num_frames": encoded.num_frames,
                "width": encoded.width,
                "height": encoded.height,
                "fps": fps,
                "duration_s": encoded.num_frames / fps,
                "caption_chars": len(clip["caption"]),
                "caption_track": clip["caption_track"],
                "faces_blurred": config.blur_faces,
            }
        )
    return rows


def _shard_error(payload: dict, error: str) -> list[dict]:
    return [_failed_row(c, f"{ENCODE_ERROR}: {error}") for c in payload["clips"]]


# ------------------------------------------------------------------------------------------------ packing


def plan_shards(rows: list[dict], config: ShardConfig, day: str) -> list[dict]:
    """The shards of one day's ok samples: per bucket, in clip_id order, a new shard whenever the next sample would
    pass max_shard_samples or max_shard_bytes. Deterministic: the same samples give the same shards and names."""
    from videolake.platform.shards.tarfile_det import END_OF_ARCHIVE

    by_bucket: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["bucket"], r["clip_id"])):
        by_bucket.setdefault(r["bucket"], []).append(r)
    shards = []
    for bucket, samples in by_bucket.items():
        groups: list[list[dict]] = [[]]
        size = len(END_OF_ARCHIVE)
        for s in samples:
            full = len(groups[-1]) >= config.max_shard_samples or size + s["sample_bytes"] > config.max_shard_bytes
            if groups[-1] and full:
                groups.append([])
                size = len(END_OF_ARCHIVE)
            groups[-1].append(s)
            size += s["sample_bytes"]
        for idx, group in enumerate(groups):
            digest = hashlib.sha256("\n".join(f"{s['clip_id']} {s['sample_sha256']}" for s in group).encode())
            # No '=' or other character a URI escapes: a file:// shard URI is its path (tar -tf, ray.data take it).
            key = f"{config.prefix}/{day}/{bucket}/shard-{day}-{idx:05d}-{digest.hexdigest()[:10]}.tar"
            shards.append(
                {
                    "key": key,
                    "bucket": bucket,
                    "clip_ids": [s["clip_id"] for s in group],
                    "sample_bytes": [s["sample_bytes"] for s in group],
                }
            )
    return shards


def pack_shard(store: ObjectStore, shard: dict, fragment_keys: list[str]) -> dict:
    """Write one shard (unless it exists: its name means its bytes) and return its uri, sha256 and size. The shard
    is hashed from a local file (the one just written, or the store's copy), never held in memory."""
    from videolake.platform.objectstore.base import sha256_file
    from videolake.platform.shards.tarfile_det import write_shard

    key = shard["key"]
    if store.exists(key):
        with store.open_local(key, suffix=".tar") as path:
            return {"uri": store.uri(key), "sha256": sha256_file(path), "bytes": os.path.getsize(path)}
    fd, tmp = tempfile.mkstemp(suffix=".tar", prefix="videolake-shard-")
    try:
        with os.fdopen(fd, "wb") as out:
            size = write_shard((store.get_bytes(k) for k in fragment_keys), out)
        digest = sha256_file(tmp)
        store.put_if_absent(key, tmp)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return {"uri": store.uri(key), "sha256": digest, "bytes": size}


# What the day's packing reads of every row (the plan: status, bucket, sizes and hashes) and what the day's figures
# read; the finalize reads only these of the whole day at once (``units.PartitionStep.decide``), then writes the rows.
PACK_COLUMNS = (
    "clip_id",
    "status",
    "bucket",
    "sample_bytes",
    "sample_sha256",
    "num_frames",
    "duration_s",
    PARTITION_COLUMN,
)
SHARD_COLUMNS = ("shard_uri", "shard_sha256", "shard_bytes", "shard_samples", "sample_offset")


def pack_day(t: pa.Table, *, store: ObjectStore, config: ShardConfig, version: str) -> pa.Table:
    """The per-day decision at finalize, over the day's ``PACK_COLUMNS``: plan the shards of its ok samples, pack
    them (Ray tasks), and return the same rows with the shard columns filled (null on rows in no shard)."""
    import ray

    if t.num_rows == 0:
        return t
    rows = t.to_pylist()
    day = rows[0][PARTITION_COLUMN].isoformat()
    ok = [r for r in rows if r["status"] == STATUS_OK]
    shards = plan_shards(ok, config, day)
    calls = [(store, s, [fragment_key(config, version, day, c) for c in s["clip_ids"]]) for s in shards]
    packed = call_each(pack_shard, calls, on_ray=ray.is_initialized() and len(calls) > 1)
    where: dict[str, dict] = {}
    for s, p in zip(shards, packed):
        offset = 0
        for cid, size in zip(s["clip_ids"], s["sample_bytes"]):
            where[cid] = {
                "shard_uri": p["uri"],
                "shard_sha256": p["sha256"],
                "shard_bytes": p["bytes"],
                "shard_samples": len(s["clip_ids"]),
                "sample_offset": offset,
            }
            offset += size
    empty = dict.fromkeys(SHARD_COLUMNS)
    filled = [{**r, **where.get(r["clip_id"], empty)} for r in rows]
    schema = pa.schema([*t.schema, *(TRAINING_SHARDS.field(c) for c in SHARD_COLUMNS if c not in t.schema.names)])
    return pa.Table.from_pylist(filled, schema=schema)


# ------------------------------------------------------------------------------------------------ the stage


def shard_partitions(
    lake: Any,
    store: ObjectStore,
    partitions: PartitionRange,
    config: ShardConfig,
    *,
    progress: StageReporter | None = None,
) -> StageRun:
    """training_shards for the run's partitions (see the module docstring); then the cleanup of unreferenced
    shards of those days (``remove_stale_shards``)."""
    version = shard_version(config)
    units = _units(eligible_clips(lake, partitions, config.caption_track))
    recompute_units_without_samples(lake, store, config, version, units)
    step = PartitionStep(
        decide=partial(pack_day, store=store, config=config, version=version),
        decide_columns=PACK_COLUMNS,
        summarize=table_spec(TABLE).figures_of,
    )
    run = run_stage(
        lake,
        TABLE,
        version,
        partitions,
        units,
        partial(shard_one, store=store, config=config, version=version),
        _shard_error,
        step,
        progress,
    )
    removed = remove_stale_shards(lake, store, partitions, config, version)
    run.extra.update({"shards_removed": removed})
    return run


def recompute_units_without_samples(
    lake: Any, store: ObjectStore, config: ShardConfig, version: str, units: list[dict]
) -> int:
    """Drop the checkpoint of every finished unit whose ok samples are no longer all in the object store (deleted
    by hand, a lifecycle rule): the unit is then encoded again instead of failing the pack. One listing per day;
    a unit's checkpoint is read only when one of its samples is missing. Returns the units dropped."""
    from videolake.platform.runtime.units import Checkpoints

    checkpoints = Checkpoints(lake.files(), TABLE, version)
    by_day: dict[str, list[dict]] = {}
    for u in units:
        by_day.setdefault(u["partition_date"], []).append(u)
    dropped = 0
    for day, day_units in by_day.items():
        done = checkpoints.finished_keys(day)
        if not done:
            continue
        prefix = f"{config.prefix}/{SAMPLES_DIR}/{version}/{day}/"
        have = {o.key[len(prefix) : -len(".tar")] for o in store.list(prefix) if not o.is_folder}
        for u in day_units:
            if u["unit_key"] not in done:
                continue
            clips = {c["clip_id"] for c in json.loads(u["payload"])["clips"]}
            if clips <= have:
                continue
            path = checkpoints.unit_path(day, u["unit_key"])
            rows = checkpoints.files.read_parquet(path, columns=["clip_id", "status"]).to_pylist()
            if any(r["status"] == STATUS_OK and r["clip_id"] not in have for r in rows):
                log.warning("unit %s of %s: samples are missing from %s; encoding it again", u["unit_key"], day, prefix)
                checkpoints.files.delete(path)
                dropped += 1
    return dropped


def remove_stale_shards(
    lake: Any,
    store: ObjectStore,
    partitions: PartitionRange,
    config: ShardConfig,
    version: str,
    *,
    retention_hours: float = RETENTION_HOURS,
    now_s: float | None = None,
) -> int:
    """Delete the shards of the run's days that the committed table does not name, no release references (nor
    a release being created) and that are older than the retention, and the sample fragments of other stage
    versions of those days older than the retention. Returns the shards deleted.

    Why the age: a shard that no committed version names may be one another attempt of the day has just packed
    and is about to commit, or one an older table version (inside Delta's retention) still names."""
    from videolake.platform.releases.manifest import referenced_shard_uris

    current = set(lake.read_partitions(TABLE, partitions, columns=["shard_uri"]).column("shard_uri").to_pylist())
    keep = current | referenced_shard_uris(store)
    removed = 0
    for d in partitions.days():
        day = d.isoformat()
        for obj in store.list(f"{config.prefix}/{day}/"):
            if (
                not obj.is_folder
                and obj.key.endswith(".tar")
                and store.uri(obj.key) not in keep
                and past_retention(obj.modified_s, retention_hours, now_s)
            ):
                store.delete(obj.key)
                removed += 1
    samples = f"{config.prefix}/{SAMPLES_DIR}/"
    for obj in store.list(samples):
        parts = obj.key[len(samples) :].split("/")
        if (
            not obj.is_folder
            and len(parts) >= 3
            and parts[0] != version
            and parts[1] in {d.isoformat() for d in partitions.days()}
            and past_retention(obj.modified_s, retention_hours, now_s)
        ):
            store.delete(obj.key)
    return removed
