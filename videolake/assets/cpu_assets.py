"""The CPU assets: raw_videos -> scene_clips -> filtered_clips, and training_shards after clip_captions. Thin: run the engine's stage, report what it did.

Each stage streams its units through Ray Data into checkpoints and commits them in one Delta transaction
(videolake.platform.runtime.units); the step never holds the rows. A step may write several days (a run of several
partitions commits them together); how many days a backfill puts in one run is the code location's backfill policy
(partitions.backfill_policy, applied by ``build_cpu_assets``: one run per day by default, so one bad day fails
alone). The module-level assets keep a single-run policy for callers that materialize a range in one step.
"""

from functools import partial
from typing import Any

import dagster as dg
from dagster_ray import RayResource

from videolake.assets.configs import FilteredClipsConfig, RawVideosConfig, SceneClipsConfig, TrainingShardsConfig
from videolake.assets.guard import step_guard
from videolake.assets.landing import require_landing_data
from videolake.assets.metadata import asset_metadata, column_schema
from videolake.assets.partitions import DEFAULT_PARTITIONS, backfill_policy, partition_keys, with_partitions
from videolake.assets.ui_metadata import add_partition_figures, column_lineage, preview_of, tag_run
from videolake.platform.lake.schemas import (
    FILTERED_CLIPS,
    RAW_VIDEOS,
    SCENE_CLIPS,
    TRAINING_SHARDS,
    table_spec,
    upstream_of,
)
from videolake.platform.lake.table import PartitionRange
from videolake.platform.runtime.progress import StageReporter
from videolake.resources import LakeResource, ObjectStoreResource
from videolake.resources.ray_on_demand import connect_on_demand, scalable_gpus

GROUP = "videolake"
OWNERS = ["team:ml-data"]
BACKFILL = dg.BackfillPolicy.single_run()
# A lost Ray worker or a storage hiccup is transient; the partition overwrite makes a retried step idempotent.
RETRY = dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL)
COMMON: dict[str, Any] = dict(
    partitions_def=DEFAULT_PARTITIONS,  # the loaded partitions replace it: build_cpu_assets
    backfill_policy=BACKFILL,
    retry_policy=RETRY,
    group_name=GROUP,
    owners=OWNERS,
    kinds={"deltalake", "ray"},
)


def _with_deps(spec: dg.AssetSpec, deps: Any) -> dg.AssetSpec:
    return spec.replace_attributes(deps=deps)


def stage_progress(context: dg.AssetExecutionContext, what: str) -> StageReporter:
    """The stage's progress lines in the step's log (``split: 5/9 units (0 reused, 5 computed), 0.81 units/s, ETA
    5s``, at least every 30 s while it runs): ``videolake demo`` draws them from the run's event log."""
    return StageReporter(what, context.log.info)


def stage_result(
    context: dg.AssetExecutionContext, table: str, run, keys: list[str], lake, *, extra: dict | None = None
) -> dg.MaterializeResult:
    """The metadata of a stage run: each day's figures (computed by the workers), the range's, the unit counts
    (``units_total``/``units_reused``/``units_computed``: resume), lineage, a preview read back from the table."""
    tag_run(context, table)
    add_partition_figures(context, table, run.per_partition, keys, lake)
    counts = table_spec(table).merge_figures(list(run.per_partition.values()))
    md = {
        **asset_metadata(
            table,
            counts,
            keys,
            run.write,
            run.seconds,
            extra=extra,
            preview=preview_of(lake, table, keys),
            table_rows=lake.row_count(table, None),
        ),
        **{k: dg.MetadataValue.int(v) for k, v in run.progress.as_metadata().items()},
    }
    if table != "raw_videos":
        md["dagster/column_lineage"] = column_lineage(table)
    return dg.MaterializeResult(metadata=md)


def run_cpu_stage(
    context: dg.AssetExecutionContext, table: str, what: str, lake: LakeResource, ray_cluster: RayResource, stage
) -> dg.MaterializeResult:
    """Run ``stage(lake, partitions, progress)`` (an engine stage) for the step's partition keys on the step's Ray
    cluster, and report it (``stage_result``). ``what``: the word the progress lines use."""
    keys = partition_keys(context)
    lk = lake.get_lake()
    with connect_on_demand(context, ray_cluster):
        run = stage(lk, PartitionRange.of(keys), stage_progress(context, what))
    return stage_result(context, table, run, keys, lk, extra=run.extra)


@dg.asset(
    **COMMON,
    code_version="raw_videos-3",
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
    from videolake.platform.stages.ingest import ingest_partitions, list_landing

    keys = partition_keys(context)
    store = object_store.get_store()
    require_landing_data(store, object_store.landing, keys)  # a day without a landing folder is never materialized
    objects = list_landing(store, object_store.landing, keys)
    n = sum(len(v) for v in objects.values())
    context.log.info(f"{n} landing objects in {len(keys)} partition(s)")

    def stage(lk, rng, progress):
        run = ingest_partitions(
            lk, store, objects, config.to_engine(), rng, progress=progress, decided_by=context.run_id
        )
        record_reevaluated_days(
            context, run.extra.get("days_reevaluated", []), keys, "exact copies across days re-evaluated"
        )
        return run

    return run_cpu_stage(context, "raw_videos", "probed", lake, ray_cluster, stage)


def record_reevaluated_days(context: dg.AssetExecutionContext, days: list[str], keys: list[str], reason: str) -> None:
    """A later day whose rows this run re-evaluated (raw_videos: a copy of a video of the run's days, or a former
    copy that is the original now; filtered_clips: a near-duplicate of a clip of the run's days) gets a
    materialization of its own, so Dagster shows its downstream as changed upstream; its metadata names this run
    (``decided_by_run``), which made the verdicts in one transaction (``platform/lake/transaction.py``)."""
    run_days = keys[0] if len(keys) == 1 else f"{keys[0]}...{keys[-1]}"
    table = context.asset_key.path[-1]
    for day in days:
        context.log.warning(
            f"{table} {day}: {reason} after {run_days} was materialized; its downstream partitions "
            "are stale until materialized again"
        )
        context.log_event(
            dg.AssetMaterialization(
                asset_key=context.asset_key,
                partition=day,
                metadata={
                    "reevaluated_after": dg.MetadataValue.text(run_days),
                    "reason": dg.MetadataValue.text(reason),
                    "decided_by_run": dg.MetadataValue.dagster_run(context.run_id),
                },
            )
        )


@dg.asset(
    **COMMON,
    deps=upstream_of("scene_clips"),
    code_version="scene_clips-6",
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
    from videolake.platform.stages.split import split_partitions

    return run_cpu_stage(
        context,
        "scene_clips",
        "split",
        lake,
        ray_cluster,
        lambda lk, rng, progress: split_partitions(
            lk,
            object_store.get_store(),
            rng,
            config.to_engine(),
            progress=progress,
            scalable_gpus=scalable_gpus(ray_cluster),
        ),
    )


@dg.asset(
    **COMMON,
    deps=upstream_of("filtered_clips"),
    code_version="filtered_clips-8",
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
    from videolake.platform.stages.score import score_partitions

    keys = list(context.partition_keys)

    def stage(lk, rng, progress):
        run = score_partitions(
            lk, object_store.get_store(), rng, config.to_engine(), progress=progress, decided_by=context.run_id
        )
        record_reevaluated_days(
            context, run.extra.get("days_reevaluated", []), keys, "near-duplicates across days re-evaluated"
        )
        return run

    return run_cpu_stage(context, "filtered_clips", "scored", lake, ray_cluster, stage)


@dg.asset(
    **COMMON,
    deps=upstream_of("training_shards"),
    code_version="training_shards-2",
    description="The day's training set: one WebDataset sample (mp4 + json + txt, key = clip_id) per passed clip "
    "with an ok caption, packed into tar shards per bucket (resolution / aspect ratio / length) under shards/; one "
    "row per sample with its shard, sha256 and size.",
    metadata={"dagster/column_schema": column_schema(TRAINING_SHARDS)},
)
@step_guard
def training_shards(
    context: dg.AssetExecutionContext,
    config: TrainingShardsConfig,
    object_store: ObjectStoreResource,
    lake: LakeResource,
    ray_cluster: RayResource,
) -> dg.MaterializeResult:
    from videolake.platform.stages.shard import shard_partitions

    return run_cpu_stage(
        context,
        "training_shards",
        "sharded",
        lake,
        ray_cluster,
        lambda lk, rng, progress: shard_partitions(
            lk, object_store.get_store(), rng, config.to_engine(), progress=progress
        ),
    )


CPU_ASSETS = (raw_videos, scene_clips, filtered_clips, training_shards)


def build_cpu_assets(
    partitions_def: dg.PartitionsDefinition, optional_tables: tuple[str, ...] = ()
) -> list[dg.AssetsDefinition]:
    """The CPU assets over ``partitions_def`` (the code location's, read when it loads) with the location's backfill
    policy (partitions.backfill_policy: one run per day by default); ``optional_tables``: the optional tables whose
    assets the location has (filtered_clips then also depends on clip_embeddings)."""
    policy = backfill_policy()
    out = []
    for a in CPU_ASSETS:
        a = with_partitions(a, partitions_def).with_attributes(backfill_policy=policy)
        deps = upstream_of(a.key.to_user_string(), optional_tables)
        if deps != upstream_of(a.key.to_user_string()):
            a = a.map_asset_specs(partial(_with_deps, deps=deps))
        out.append(a)
    return out
