"""DayQueueCoordinator: Dagster's run queue, with one run per partition day at a time, multi-day runs included.

Two runs that write the same day overwrite the same Delta partitions and share the day's checkpoints: they must
never run at once. Dagster's run queue can limit runs by tag, but a single-day run carries the day in
``dagster/partition`` and a ranged run (a backfill with VIDEOLAKE_DAYS_PER_RUN != 1) only its first and last day
(``dagster/asset_partition_range_start`` / ``_end``), and a tag limit only ever compares one value per key: no fixed
limit sees that the range 01-04..01-05 and the day 01-05 overlap.

So this coordinator (a QueuedRunCoordinator, so Dagster's queue daemon still does the dequeuing) does two things:

- at submit, before the run is QUEUED, it tags the run with one key per day it covers, ``videolake/day-<YYYY-MM-DD>``
  (``day_tags``);
- the queue config it returns has, besides the configured limits, ``dagster/partition`` one run per unique value
  (race-free for single-day runs: a fixed limit) and a limit of 1 on every day key carried by a run that is queued
  or in progress when the daemon reads the config (``get_run_queue_config``, once per daemon pass).

Dagster's TagConcurrencyLimitsCounter then blocks a queued run while any in-progress run, or a run launched
earlier in the same pass, carries one of its day keys. The per-day limits are read from the runs, not listed in
dagster.yaml, because tag limits need fixed keys and the days are unbounded. One case stays open: two overlapping
runs, one of them ranged, that are both submitted in the milliseconds between the daemon reading this config and
reading the queue; the next pass sees both, but the two may have been launched together in that pass.

``concurrency.runs.tag_concurrency_limits`` in dagster.yaml would replace this coordinator's limits (Dagster prefers
the settings), so the coordinator refuses to work next to it: put extra limits under ``run_coordinator.config``.
Only the local instance uses it; the Kubernetes daemon runs Dagster's own image (docs/kubernetes.md), where the
fixed ``dagster/partition`` limit covers the single-day runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import DagsterRunStatus, RunsFilter
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext
from dagster._core.run_coordinator.queued_run_coordinator import RunQueueConfig
from dagster._core.storage.dagster_run import ACTIVE_RUN_STATUSES, DagsterRun
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)

DAY_TAG_PREFIX = "videolake/day-"

# One run per partition key: fixed, so it also holds for two single-day runs submitted at the same moment.
PARTITION_LIMIT = {"key": PARTITION_NAME_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}


def run_days(tags: Mapping[str, str]) -> list[str]:
    """The partition days (YYYY-MM-DD) a run with ``tags`` covers: its partition, or every day of its range; []
    for an unpartitioned run or keys that are not days."""
    single = tags.get(PARTITION_NAME_TAG)
    start = single or tags.get(ASSET_PARTITION_RANGE_START_TAG)
    end = single or tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if not start or not end:
        return []
    try:
        first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    except ValueError:
        return []
    return [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def day_tags(days: Sequence[str]) -> dict[str, str]:
    """One tag per day: the keys the queue limits to one run each."""
    return {f"{DAY_TAG_PREFIX}{day}": "true" for day in days}


def day_limits(runs: Sequence[DagsterRun]) -> list[dict[str, Any]]:
    """A limit of 1 on every day key that ``runs`` carry."""
    keys = sorted({key for run in runs for key in run.tags if key.startswith(DAY_TAG_PREFIX)})
    return [{"key": key, "limit": 1} for key in keys]


class DayQueueCoordinator(QueuedRunCoordinator):
    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        tags = day_tags(run_days(run.tags))
        if tags:
            # Before the enqueue event: the daemon never sees this run QUEUED without its days.
            self._instance.add_run_tags(run.run_id, tags)
        return super().submit_run(context)

    def get_run_queue_config(self) -> RunQueueConfig:
        settings = self._instance.get_settings("concurrency") or {}
        if (settings.get("runs") or {}).get("tag_concurrency_limits") is not None:
            # Dagster would take those and drop the limits returned here (ConcurrencyConfig.from_concurrency_settings).
            raise ValueError(
                "concurrency.runs.tag_concurrency_limits would replace the per-day limits of "
                f"{type(self).__name__}: put the limits under run_coordinator.config.tag_concurrency_limits"
            )
        config = super().get_run_queue_config()
        in_flight = self._instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.QUEUED, *ACTIVE_RUN_STATUSES]))
        limits = [*config.tag_concurrency_limits, PARTITION_LIMIT, *day_limits(in_flight)]
        return RunQueueConfig(**{**config._asdict(), "tag_concurrency_limits": limits})
