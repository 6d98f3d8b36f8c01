"""Jobs and schedules. The job selects every asset, so the blocking checks defined with them run in it too."""

from __future__ import annotations

import dagster as dg

from videolake.assets.partitions import daily_partitions

# All assets of the pipeline (and, implicitly, their asset checks) for one or more daily partitions.
pipeline_job = dg.define_asset_job(
    name="videolake_daily",
    selection=dg.AssetSelection.groups("videolake"),
    partitions_def=daily_partitions,
    description="The whole pipeline for a daily partition: ingest, split, filter, caption, with their gates.",
    # Schedule and sensor runs of this job carry these from their creation, so the run queue's tag limits see them:
    # the job captions, so its runs need the GPU pool. (UI backfills get tags at run time: ui_metadata.tag_run.)
    run_tags={"videolake/gpu": "true"},
)

# Runs shortly after midnight UTC for the day that just ended (the newest complete partition).
daily_schedule = dg.build_schedule_from_partitioned_job(pipeline_job, hour_of_day=0, minute_of_hour=30)
