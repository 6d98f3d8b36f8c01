"""The CPU assets: raw_videos -> scene_clips -> filtered_clips. Thin: read the partition, call the engine, write.

Backfill policy: single_run for each. The work inside a run is already parallel (one Ray task per video), so one
run per backfill keeps one Ray session per step instead of one per day, and the lake's overwrite predicate covers
the whole range (videolake.platform.lake). Large ranges stay bounded by max_partitions_per_run.
"""


import time

import dagster as dg
from dagster_ray import RayResource

from videolake.assets.configs import FilteredClipsConfig, RawVideosConfig, SceneClipsConfig
from videolake.assets.metadata import asset_metadata, column_schema
from videolake.assets.partitions import daily_partitions, partition_keys
from videolake.assets.ui_metadata import add_partition_metadata, column_lineage, record_preview, tag_run
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
    objects = list_landing(store, object_store.landing, keys)
    n = sum(len(v) for v in objects.values())
    context.log.info(f"{n} landing objects in {len(keys)} partition(s)")
    t0 = time.monotonic()
    table = ingest_partition(store, objects, config.to_engine(), progress=_progress(context, "probed"))
    elapsed = time.monotonic() - t0
    result = lake.get_lake().write_partitions("raw_videos", table, PartitionRange.of(keys))
    tag_run(context, "raw_videos")
    add_partition_metadata(context, "raw_videos", table, keys)
    return dg.MaterializeResult(
        metadata=asset_metadata("raw_videos", table, keys, result, elapsed, preview=record_preview("raw_videos", table))
    )


@dg.asset(
    **COMMON,
    deps=[raw_videos],
    code_version="scene_clips-1",
    description="Scene clips of every ok video, split at cuts (hard and gradual), long scenes split to max_clip_s.",
    metadata={"dagster/column_schema": column_schema(SCENE_CLIPS)},
)
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
    tag_run(context, "scene_clips")
    add_partition_metadata(context, "scene_clips", table, keys)
    return dg.MaterializeResult(
        metadata={
            **asset_metadata("scene_clips", table, keys, result, elapsed, extra={"frames": frames},
                             preview=record_preview("scene_clips", table)),
            "dagster/column_lineage": column_lineage("scene_clips"),
        }
    )


@dg.asset(
    **COMMON,
    deps=[scene_clips],
    code_version="filtered_clips-1",
    description="Quality scores of every scene clip (motion, sharpness, brightness, black/frozen ratio, text area, "
    "near-duplicates) with passed and the reject reason.",
    metadata={"dagster/column_schema": column_schema(FILTERED_CLIPS)},
)
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
    tag_run(context, "filtered_clips")
    add_partition_metadata(context, "filtered_clips", table, keys)
    return dg.MaterializeResult(
        metadata={
            **asset_metadata("filtered_clips", table, keys, result, elapsed,
                             preview=record_preview("filtered_clips", table)),
            "dagster/column_lineage": column_lineage("filtered_clips"),
        }
    )
