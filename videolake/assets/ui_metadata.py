"""Metadata for the Dagster UI that a range step must scope per partition, plus column lineage and row previews.

Why per partition: a single-run backfill materializes several partitions in ONE step, and Dagster copies the step's
MaterializeResult metadata onto every partition's materialization. Without partition-scoped values the partition
`2026-02-11` would report the row count of the whole range, and the UI's "plot by partition" would draw the same
range total for every day. ``add_partition_metadata`` scopes the counts to each partition
(``context.add_asset_metadata(..., partition_key=...)`` overrides the step-wide values of the same labels); values
that only exist for the whole step (seconds, throughput of the one Ray/vLLM session) stay step-wide.

Why column lineage: the UI shows, per column, which upstream columns it comes from (``dagster/column_lineage``), so
a user can follow a caption row back to its clip, video and source object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.schemas import PARTITION_COLUMN, TABLES

PREVIEW_ROWS = 5

# Where each column of a table comes from: column -> [(upstream asset, upstream column), ...]. Only the direct
# upstream asset and the tables the asset reads in its step are named; computed columns name their inputs.
COLUMN_SOURCES: dict[str, dict[str, list[tuple[str, str]]]] = {
    "scene_clips": {
        "clip_id": [("raw_videos", "video_id")],
        "video_id": [("raw_videos", "video_id")],
        "source_uri": [("raw_videos", "source_uri")],
        "start_s": [("raw_videos", "fps")],
        "end_s": [("raw_videos", "fps")],
        "duration_s": [("raw_videos", "fps")],
        PARTITION_COLUMN: [("raw_videos", PARTITION_COLUMN)],
    },
    "filtered_clips": {
        "clip_id": [("scene_clips", "clip_id")],
        "video_id": [("scene_clips", "video_id")],
        "duration_s": [("scene_clips", "duration_s")],
        "width": [("raw_videos", "width")],
        "height": [("raw_videos", "height")],
        "motion": [("scene_clips", "start_frame"), ("scene_clips", "end_frame"), ("raw_videos", "source_uri")],
        "sharpness": [("scene_clips", "start_frame"), ("scene_clips", "end_frame"), ("raw_videos", "source_uri")],
        "brightness": [("scene_clips", "start_frame"), ("scene_clips", "end_frame"), ("raw_videos", "source_uri")],
        PARTITION_COLUMN: [("scene_clips", PARTITION_COLUMN)],
    },
    "clip_captions": {
        "clip_id": [("filtered_clips", "clip_id")],
        "video_id": [("scene_clips", "video_id")],
        "source_uri": [("scene_clips", "source_uri")],
        "num_frames": [("scene_clips", "start_frame"), ("scene_clips", "end_frame"), ("raw_videos", "fps")],
        "caption": [("scene_clips", "source_uri"), ("scene_clips", "start_frame"), ("scene_clips", "end_frame")],
        PARTITION_COLUMN: [("filtered_clips", PARTITION_COLUMN)],
    },
}


def column_lineage(table: str) -> dg.TableColumnLineage:
    """``dagster/column_lineage`` of ``table`` (empty for raw_videos: its columns come from landing objects)."""
    sources = COLUMN_SOURCES.get(table, {})
    unknown = set(sources) - set(TABLES[table].names)
    if unknown:
        raise ValueError(f"column lineage of {table} names columns it does not have: {sorted(unknown)}")
    return dg.TableColumnLineage(
        deps_by_column={
            column: [dg.TableColumnDep(asset_key=dg.AssetKey(asset), column_name=col) for asset, col in deps]
            for column, deps in sources.items()
        }
    )


def partition_tables(table: pa.Table, keys: list[str]) -> dict[str, pa.Table]:
    """The rows of each partition key (an empty table for a key without rows), in the order of ``keys``."""
    dates = table.column(PARTITION_COLUMN).cast(pa.string()) if table.num_rows else None
    out = {}
    for key in keys:
        out[key] = table.filter(pc.equal(dates, key)) if dates is not None else table.slice(0, 0)
    return out


def add_partition_metadata(
    context: dg.AssetExecutionContext,
    table: pa.Table,
    keys: list[str],
    metrics: Callable[[pa.Table], Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Scope ``metrics(rows of the partition)`` plus the row count to each partition's materialization.

    Labels returned here override the same labels of the step's MaterializeResult for that partition. Returns what
    was added, by partition key (for logs and tests).
    """
    added: dict[str, dict[str, Any]] = {}
    for key, part in partition_tables(table, keys).items():
        md = {
            "dagster/row_count": dg.MetadataValue.int(part.num_rows),
            "rows": dg.MetadataValue.int(part.num_rows),
            **metrics(part),
        }
        context.add_asset_metadata(md, partition_key=key)
        added[key] = md
    return added


def record_preview(table: pa.Table, columns: list[str], n: int = PREVIEW_ROWS) -> dg.TableMetadataValue:
    """The first ``n`` rows as a table the UI renders with full (untruncated) ids and uris."""
    sel = table.select(columns).slice(0, n)
    schema = dg.TableSchema(columns=[dg.TableColumn(name=f.name, type=str(f.type)) for f in sel.schema])
    records = [
        dg.TableRecord({k: _plain(v) for k, v in row.items()}) for row in sel.to_pylist()
    ]
    return dg.MetadataValue.table(records=records, schema=schema)


def _plain(v: Any) -> str | int | float | bool | None:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def add_partition_figures(
    context: dg.AssetExecutionContext,
    lake: Any,
    table: str,
    keys: list[str],
    per_partition: Mapping[str, Mapping[str, Any]],
    preview_columns: list[str],
) -> dict[str, dict[str, Any]]:
    """Scope each day's figures (computed by the workers at finalize: no rows here) and a preview of that day's
    committed rows to each partition's materialization."""
    added: dict[str, dict[str, Any]] = {}
    for key in keys:
        figures = dict(per_partition.get(key, {}))
        rows = int(figures.pop("rows", 0))
        md: dict[str, Any] = {"dagster/row_count": dg.MetadataValue.int(rows), "rows": dg.MetadataValue.int(rows)}
        for name, value in figures.items():
            md[name] = _figure(value)
        md["preview"] = preview_of(lake, table, [key], preview_columns)
        context.add_asset_metadata(md, partition_key=key)
        added[key] = md
    return added


def preview_of(lake: Any, table: str, keys: list[str], columns: list[str], n: int = PREVIEW_ROWS):
    """The first ``n`` committed rows of the partitions (read with partition pruning, ``n`` rows at most)."""
    from videolake.platform.lake import PartitionRange

    return record_preview(lake.head(table, PartitionRange.of(keys), n, columns), columns, n)


def _figure(value: Any):
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(round(value, 4))
    return dg.MetadataValue.json(value)
