"""The daily partitions every asset shares: one partition per landing folder <landing>/<YYYY-MM-DD>/."""

from __future__ import annotations

import os

import dagster as dg

# The first day a team can backfill. Set VIDEOLAKE_PARTITIONS_START to reach further back.
PARTITIONS_START = os.environ.get("VIDEOLAKE_PARTITIONS_START", "2026-01-01")

daily_partitions = dg.DailyPartitionsDefinition(start_date=PARTITIONS_START, timezone="UTC")


def partition_keys(context: dg.AssetExecutionContext) -> list[str]:
    """The partition keys of this step: one for a normal run, several for a single-run backfill."""
    return list(context.partition_keys)
