"""Jobs and schedules. The job selects every asset, so the blocking checks defined with them run in it too."""

import datetime as dt

import dagster as dg

from videolake.assets.landing import day_prefix, folder_uri, landing_folder_exists
from videolake.assets.partitions import daily_partitions
from videolake.assets.ray_reaper import MAX_RUNTIME_TAG, max_run_seconds
from videolake.resources import ObjectStoreResource

PIPELINE_JOB = "videolake_daily"
GPU_TAG = "videolake/gpu"


def build_pipeline_job(gpu: bool):
    """All assets of the pipeline (and, implicitly, their asset checks) for one or more daily partitions (the
    assets': Dagster takes the job's partitions from them when the Definitions resolve it). ``gpu``: whether its
    captioning runs on GPUs (the profile's captioner). Schedule and sensor runs of the job carry its run_tags from
    their creation, so the run queue's tag limits see ``videolake/gpu=true`` on the runs that need the GPU pool, and
    only on those (a local run that captions on the CPU is not tagged). UI backfills get tags at run time
    (ui_metadata.tag_run)."""
    return dg.define_asset_job(
        name=PIPELINE_JOB,
        selection=dg.AssetSelection.groups("videolake"),
        description="The whole pipeline for a daily partition: ingest, split, filter, caption, shard, with their gates.",
        # run monitoring fails a run that takes longer (and the reaper's age limit is set above it: ray_reaper.py)
        run_tags={**({GPU_TAG: "true"} if gpu else {}), MAX_RUNTIME_TAG: str(max_run_seconds())},
    )


SCHEDULE_CRON = "30 0 * * *"


def scheduled_day(tick: dt.datetime) -> str:
    """The partition a tick runs: the UTC day that ended before the tick (the newest complete partition)."""
    return (tick.astimezone(dt.UTC).date() - dt.timedelta(days=1)).isoformat()


@dg.schedule(
    name="videolake_daily_schedule",
    cron_schedule=SCHEDULE_CRON,
    execution_timezone="UTC",
    job_name=PIPELINE_JOB,
    description="At 00:30 UTC, the day that just ended, if its landing folder exists (otherwise the tick is skipped "
    "with the reason: a day without data is never materialized).",
)
def daily_schedule(context: dg.ScheduleEvaluationContext, object_store: ObjectStoreResource):
    tick = context.scheduled_execution_time or dt.datetime.now(dt.UTC)
    day = scheduled_day(tick)
    partitions = daily_partitions()
    if day not in partitions.get_partition_keys(current_time=tick):
        return dg.SkipReason(f"{day} is not a partition of videolake_daily (first: {partitions.start:%Y-%m-%d})")
    store = object_store.get_store()
    if not landing_folder_exists(store, object_store.landing, day):
        return dg.SkipReason(
            f"no landing data for {day}: {folder_uri(store, day_prefix(object_store.landing, day))} does not exist"
        )
    return dg.RunRequest(partition_key=day, run_key=day, tags={"videolake/trigger": "schedule"})
