"""The CPU assets: raw_videos -> scene_clips -> filtered_clips. Thin: read the partition, call the engine, write.

Backfill policy: single_run for each. The work inside a run is already parallel (one Ray task per video), so one
run per backfill keeps one Ray session per step instead of one per day, and the lake's overwrite predicate covers
the whole range (videolake.platform.lake). Large ranges stay bounded by max_partitions_per_run.
"""


import dagster as dg
from dagster_ray import RayResource

from videolake.assets.configs import FilteredClipsConfig, RawVideosConfig, SceneClipsConfig
from videolake.assets.metadata import column_schema, write_metadata
from videolake.assets.partitions import daily_partitions, partition_keys
from videolake.assets.ui_metadata import add_partition_figures, column_lineage, preview_of
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
    def report(prog) -> None:
        context.log.info(f"{what}: {prog.units_total} units done ({prog.units_reused} reused, "
                         f"{prog.units_computed} computed)")

    return report


def stage_metadata(run, keys: list[str]) -> dict:
    """What every stage reports: the commit, the unit counts (resume), time."""
    return {
        **write_metadata(run.write, keys),
        **{k: dg.MetadataValue.int(v) for k, v in run.progress.as_metadata().items()},
        "seconds": dg.MetadataValue.float(round(run.seconds, 3)),
    }


def _sum(per_partition: dict[str, dict], key: str) -> int:
    return int(sum(p.get(key, 0) for p in per_partition.values()))


def _merge_reasons(per_partition: dict[str, dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in per_partition.values():
        for k, v in (p.get("rejections_by_reason") or {}).items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


@dg.asset(
    **COMMON,
    code_version="raw_videos-2",
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
    from videolake.platform.cpu_stage import ingest_partitions, list_landing

    keys = partition_keys(context)
    store = object_store.get_store()
    objects = list_landing(store, object_store.landing, keys)
    n = sum(len(v) for v in objects.values())
    context.log.info(f"{n} landing objects in {len(keys)} partition(s)")
    lk = lake.get_lake()
    run = ingest_partitions(lk, store, objects, config.to_engine(), PartitionRange.of(keys),
                            progress=_progress(context, "probed"))
    ok, rejected = _sum(run.per_partition, "videos_ok"), _sum(run.per_partition, "videos_rejected")
    add_partition_figures(context, lk, "raw_videos", keys, run.per_partition, RAW_PREVIEW)
    return dg.MaterializeResult(
        metadata={
            **stage_metadata(run, keys),
            "videos_ok": dg.MetadataValue.int(ok),
            "videos_rejected": dg.MetadataValue.int(rejected),
            "rejections_by_reason": dg.MetadataValue.json(_merge_reasons(run.per_partition)),
            "bytes": dg.MetadataValue.int(_sum(run.per_partition, "bytes")),
            "preview": preview_of(lk, "raw_videos", keys, RAW_PREVIEW),
        }
    )


RAW_PREVIEW = ["video_id", "source_uri", "codec", "width", "height", "fps", "status", "reject_reason"]


@dg.asset(
    **COMMON,
    deps=[raw_videos],
    code_version="scene_clips-2",
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
    from videolake.platform.cpu_stage import split_partitions

    keys = partition_keys(context)
    lk = lake.get_lake()
    run = split_partitions(lk, object_store.get_store(), PartitionRange.of(keys), config.to_engine(),
                           progress=_progress(context, "split"))
    add_partition_figures(context, lk, "scene_clips", keys, run.per_partition, CLIPS_PREVIEW)
    return dg.MaterializeResult(
        metadata={
            **stage_metadata(run, keys),
            "dagster/column_lineage": column_lineage("scene_clips"),
            "videos": dg.MetadataValue.int(_sum(run.per_partition, "videos")),
            "clips": dg.MetadataValue.int(run.write.rows),
            "detect_errors": dg.MetadataValue.int(_sum(run.per_partition, "detect_errors")),
            "preview": preview_of(lk, "scene_clips", keys, CLIPS_PREVIEW),
        }
    )


CLIPS_PREVIEW = ["clip_id", "video_id", "source_uri", "clip_index", "start_frame", "end_frame", "duration_s"]


@dg.asset(
    **COMMON,
    deps=[scene_clips],
    code_version="filtered_clips-2",
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
    from videolake.platform.cpu_stage import score_partitions

    keys = partition_keys(context)
    lk = lake.get_lake()
    run = score_partitions(lk, object_store.get_store(), PartitionRange.of(keys), config.split.to_engine(),
                           config.to_engine(), progress=_progress(context, "scored"))
    n, passed = _sum(run.per_partition, "clips"), _sum(run.per_partition, "passed")
    add_partition_figures(context, lk, "filtered_clips", keys, run.per_partition, FILTERED_PREVIEW)
    return dg.MaterializeResult(
        metadata={
            **stage_metadata(run, keys),
            "dagster/column_lineage": column_lineage("filtered_clips"),
            "clips": dg.MetadataValue.int(n),
            "passed": dg.MetadataValue.int(passed),
            "rejected": dg.MetadataValue.int(n - passed),
            "pass_rate": dg.MetadataValue.float(round(passed / n, 4) if n else 0.0),
            "rejections_by_reason": dg.MetadataValue.json(_merge_reasons(run.per_partition)),
            "preview": preview_of(lk, "filtered_clips", keys, FILTERED_PREVIEW),
        }
    )


FILTERED_PREVIEW = ["clip_id", "video_id", "motion", "sharpness", "brightness", "passed", "reject_reason"]
