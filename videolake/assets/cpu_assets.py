"""The CPU assets: raw_videos -> scene_clips -> filtered_clips. Thin: read the partition, call the engine, write.

Backfill policy: single_run for each. The work inside a run is already parallel (one Ray task per video), so one
run per backfill keeps one Ray session per step instead of one per day, and the lake's overwrite predicate covers
the whole range (videolake.platform.lake). Large ranges stay bounded by max_partitions_per_run.
"""


import time

import dagster as dg
from dagster_ray import RayResource

from videolake.assets.configs import FilteredClipsConfig, RawVideosConfig, SceneClipsConfig
from videolake.assets.guard import step_guard
from videolake.assets.landing import require_landing_data
from videolake.assets.metadata import column_schema, reason_counts, write_metadata
from videolake.assets.partitions import daily_partitions, partition_keys
from videolake.assets.ui_metadata import add_partition_metadata, column_lineage, record_preview
from videolake.platform.lake import PartitionRange
from videolake.platform.schemas import FILTERED_CLIPS, RAW_VIDEOS, SCENE_CLIPS
from videolake.resources import LakeResource, ObjectStoreResource

GROUP = "videolake"
OWNERS = ["team:ml-data"]
BACKFILL = dg.BackfillPolicy.single_run()
# A lost Ray worker or a storage hiccup is transient; the partition overwrite makes a retried step idempotent.
RETRY = dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL)
COMMON = dict(
    partitions_def=daily_partitions,
    backfill_policy=BACKFILL,
    retry_policy=RETRY,
    group_name=GROUP,
    owners=OWNERS,
    kinds={"delta", "ray"},
)


def _progress(context: dg.AssetExecutionContext, what: str):
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] > 5:
            last[0] = now
            context.log.info(f"{what}: {done}/{total}")

    return report


@dg.asset(
    **COMMON,
    code_version="raw_videos-1",
    description="One row per distinct video landed under landing/YYYY-MM-DD/ (the partition date): content hash "
    "id, probe fields, ok or rejected with its reason.",
    metadata={"dagster/column_schema": column_schema(RAW_VIDEOS)},
)
@step_guard
def raw_videos(
    context: dg.AssetExecutionContext,
    config: RawVideosConfig,
    object_store: ObjectStoreResource,
    lake: LakeResource,
    ray_cluster: RayResource,
) -> dg.MaterializeResult:
    from videolake.platform.cpu_stage import ingest_partition, list_landing

    keys = partition_keys(context)
    store = object_store.get_store()
    require_landing_data(store, object_store.landing, keys)  # a day without a landing folder is never materialized
    objects = list_landing(store, object_store.landing, keys)
    n = sum(len(v) for v in objects.values())
    context.log.info(f"{n} landing objects in {len(keys)} partition(s)")
    t0 = time.monotonic()
    table = ingest_partition(store, objects, config.to_engine(), progress=_progress(context, "probed"))
    elapsed = time.monotonic() - t0
    result = lake.get_lake().write_partitions("raw_videos", table, PartitionRange.of(keys))
    status = table.column("status").to_pylist()
    add_partition_metadata(context, table, keys, _raw_videos_partition_metadata)
    return dg.MaterializeResult(
        metadata={
            **write_metadata(result, keys),
            "videos_ok": dg.MetadataValue.int(status.count("ok")),
            "videos_rejected": dg.MetadataValue.int(status.count("rejected")),
            "rejections_by_reason": dg.MetadataValue.json(reason_counts(table.column("reject_reason").to_pylist())),
            "bytes": dg.MetadataValue.int(sum(table.column("size_bytes").to_pylist())),
            "seconds": dg.MetadataValue.float(round(elapsed, 3)),
            "preview": record_preview(table, RAW_PREVIEW),
        }
    )


RAW_PREVIEW = ["video_id", "source_uri", "codec", "width", "height", "fps", "status", "reject_reason"]


def _raw_videos_partition_metadata(part):
    status = part.column("status").to_pylist()
    return {
        "videos_ok": dg.MetadataValue.int(status.count("ok")),
        "videos_rejected": dg.MetadataValue.int(status.count("rejected")),
        "rejections_by_reason": dg.MetadataValue.json(reason_counts(part.column("reject_reason").to_pylist())),
        "bytes": dg.MetadataValue.int(sum(part.column("size_bytes").to_pylist())),
        "preview": record_preview(part, RAW_PREVIEW),
    }


@dg.asset(
    **COMMON,
    deps=[raw_videos],
    code_version="scene_clips-1",
    description="Scene clips of every ok video, split at cuts (hard and gradual), long scenes split to max_clip_s.",
    metadata={"dagster/column_schema": column_schema(SCENE_CLIPS)},
)
@step_guard
def scene_clips(
    context: dg.AssetExecutionContext,
    config: SceneClipsConfig,
    object_store: ObjectStoreResource,
    lake: LakeResource,
    ray_cluster: RayResource,
) -> dg.MaterializeResult:
    from videolake.platform.cpu_stage import split_partition

    keys = partition_keys(context)
    rng = PartitionRange.of(keys)
    lk = lake.get_lake()
    videos = lk.read_partitions("raw_videos", rng)
    ok = [v for v in videos.to_pylist() if v["status"] == "ok"]
    frames = sum(int(v["num_frames"] or 0) for v in ok)
    t0 = time.monotonic()
    table = split_partition(object_store.get_store(), videos, config.to_engine(), progress=_progress(context, "split"))
    elapsed = time.monotonic() - t0
    result = lk.write_partitions("scene_clips", table, rng)
    errors = [e for e in table.column("detect_error").to_pylist() if e]
    add_partition_metadata(context, table, keys, _scene_clips_partition_metadata)
    return dg.MaterializeResult(
        metadata={
            **write_metadata(result, keys),
            "dagster/column_lineage": column_lineage("scene_clips"),
            "videos": dg.MetadataValue.int(len(ok)),
            "clips": dg.MetadataValue.int(table.num_rows),
            "detect_errors": dg.MetadataValue.int(len(errors)),
            "frames": dg.MetadataValue.int(frames),
            "frames_per_s": dg.MetadataValue.float(round(frames / elapsed, 1) if elapsed > 0 else 0.0),
            "seconds": dg.MetadataValue.float(round(elapsed, 3)),
            "preview": record_preview(table, CLIPS_PREVIEW),
        }
    )


CLIPS_PREVIEW = ["clip_id", "video_id", "source_uri", "clip_index", "start_frame", "end_frame", "duration_s"]


def _scene_clips_partition_metadata(part):
    return {
        "videos": dg.MetadataValue.int(len(set(part.column("video_id").to_pylist()))),
        "clips": dg.MetadataValue.int(part.num_rows),
        "detect_errors": dg.MetadataValue.int(sum(1 for e in part.column("detect_error").to_pylist() if e)),
        "preview": record_preview(part, CLIPS_PREVIEW),
    }


@dg.asset(
    **COMMON,
    deps=[scene_clips],
    code_version="filtered_clips-1",
    description="Quality scores of every scene clip (motion, sharpness, brightness, black/frozen ratio, text area, "
    "near-duplicates) with passed and the reject reason.",
    metadata={"dagster/column_schema": column_schema(FILTERED_CLIPS)},
)
@step_guard
def filtered_clips(
    context: dg.AssetExecutionContext,
    config: FilteredClipsConfig,
    object_store: ObjectStoreResource,
    lake: LakeResource,
    ray_cluster: RayResource,
) -> dg.MaterializeResult:
    from videolake.platform.cpu_stage import score_partition

    keys = partition_keys(context)
    rng = PartitionRange.of(keys)
    lk = lake.get_lake()
    videos = lk.read_partitions("raw_videos", rng)
    clips = lk.read_partitions("scene_clips", rng)
    t0 = time.monotonic()
    table = score_partition(
        object_store.get_store(), videos, clips, config.split.to_engine(), config.to_engine(), progress=_progress(context, "scored")
    )
    elapsed = time.monotonic() - t0
    result = lk.write_partitions("filtered_clips", table, rng)
    passed = table.column("passed").to_pylist()
    n = len(passed)
    add_partition_metadata(context, table, keys, _filtered_clips_partition_metadata)
    return dg.MaterializeResult(
        metadata={
            **write_metadata(result, keys),
            "dagster/column_lineage": column_lineage("filtered_clips"),
            "clips": dg.MetadataValue.int(n),
            "passed": dg.MetadataValue.int(sum(passed)),
            "rejected": dg.MetadataValue.int(n - sum(passed)),
            "pass_rate": dg.MetadataValue.float(round(sum(passed) / n, 4) if n else 0.0),
            "rejections_by_reason": dg.MetadataValue.json(reason_counts(table.column("reject_reason").to_pylist())),
            "seconds": dg.MetadataValue.float(round(elapsed, 3)),
            "preview": record_preview(table, FILTERED_PREVIEW),
        }
    )


FILTERED_PREVIEW = ["clip_id", "video_id", "motion", "sharpness", "brightness", "passed", "reject_reason"]


def _filtered_clips_partition_metadata(part):
    passed = part.column("passed").to_pylist()
    n = len(passed)
    return {
        "clips": dg.MetadataValue.int(n),
        "passed": dg.MetadataValue.int(sum(passed)),
        "rejected": dg.MetadataValue.int(n - sum(passed)),
        "pass_rate": dg.MetadataValue.float(round(sum(passed) / n, 4) if n else 0.0),
        "rejections_by_reason": dg.MetadataValue.json(reason_counts(part.column("reject_reason").to_pylist())),
        "preview": record_preview(part, FILTERED_PREVIEW),
    }
