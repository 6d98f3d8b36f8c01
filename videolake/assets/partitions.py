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


def with_partitions(asset: dg.AssetsDefinition, partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    """``asset`` over ``partitions_def`` (itself when it already is)."""
    if asset.partitions_def == partitions_def:
        return asset
    return asset.map_asset_specs(lambda spec: spec.replace_attributes(partitions_def=partitions_def))


def partition_keys(context: dg.AssetExecutionContext) -> list[str]:
    """The partition keys of this step: one for a normal run, several for a single-run backfill."""
    return list(context.partition_keys)
