"""The daily partitions every asset shares: one partition per landing folder <landing>/<YYYY-MM-DD>/.

The first day comes from VIDEOLAKE_PARTITIONS_START, read when the code location is loaded (``daily_partitions()``
called by ``definitions.build_definitions``), not at import. The asset modules' own definitions carry
``DEFAULT_PARTITIONS`` (first day ``DEFAULT_START``); ``with_partitions`` gives them the loaded partitions.
"""

from __future__ import annotations

import functools
import os

import dagster as dg

# The first day a team can backfill unless VIDEOLAKE_PARTITIONS_START reaches further back.
DEFAULT_START = "2026-01-01"


def partitions_start() -> str:
    """VIDEOLAKE_PARTITIONS_START (read now), else ``DEFAULT_START``."""
    return os.environ.get("VIDEOLAKE_PARTITIONS_START") or DEFAULT_START


@functools.cache
def _daily(start: str) -> dg.DailyPartitionsDefinition:
    return dg.DailyPartitionsDefinition(start_date=start, timezone="UTC")


def daily_partitions(start: str | None = None) -> dg.DailyPartitionsDefinition:
    """The daily partitions from ``start`` (default: ``partitions_start()``, read at this call)."""
    return _daily(start or partitions_start())


DEFAULT_PARTITIONS = daily_partitions(DEFAULT_START)

# Days per run of a backfill (VIDEOLAKE_DAYS_PER_RUN). 1: every day is a run of its own, so a day that fails a
# blocking gate or a step fails alone and the other days of the backfill complete every asset; each run pays its
# own Ray start per step and model load (docs/ui.md, "Backfills: one run per day"). N > 1: runs of N days (one Ray
# session and model load per N days; a failing day stops the others of its run). 0: the whole backfill in one run.
DEFAULT_DAYS_PER_RUN = 1


def days_per_run() -> int:
    """VIDEOLAKE_DAYS_PER_RUN (read now), else DEFAULT_DAYS_PER_RUN."""
    raw = os.environ.get("VIDEOLAKE_DAYS_PER_RUN", "").strip()
    if not raw:
        return DEFAULT_DAYS_PER_RUN
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"VIDEOLAKE_DAYS_PER_RUN must be a whole number of days (0: one run), got {raw!r}") from None
    if n < 0:
        raise ValueError(f"VIDEOLAKE_DAYS_PER_RUN must be >= 0, got {n}")
    return n


def backfill_policy(days: int | None = None) -> dg.BackfillPolicy:
    """The backfill policy of every daily asset: runs of ``days`` partitions (default ``days_per_run()``; 0: a
    single run for the whole range)."""
    days = days_per_run() if days is None else days
    return dg.BackfillPolicy.single_run() if days == 0 else dg.BackfillPolicy.multi_run(max_partitions_per_run=days)


def with_partitions(asset: dg.AssetsDefinition, partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """``asset`` over ``partitions_def`` (itself when it already is)."""
    if asset.partitions_def == partitions_def:
        return asset
    return asset.map_asset_specs(lambda spec: spec.replace_attributes(partitions_def=partitions_def))


def partition_keys(context: dg.AssetExecutionContext) -> list[str]:
    """The partition keys of this step: one for a normal run, several for a single-run backfill."""
    return list(context.partition_keys)
