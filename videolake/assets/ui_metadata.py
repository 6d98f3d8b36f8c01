"""Metadata for the Dagster UI that a range step must scope per partition, column lineage, row previews, run tags.

Why per partition: a single-run backfill materializes several partitions in ONE step, and Dagster copies the step's
MaterializeResult metadata onto every partition's materialization. Without partition-scoped values the partition
`2026-02-11` would report the row count of the whole range, and the UI's "plot by partition" would draw the same
range total for every day. ``add_partition_metadata`` scopes the counts to each partition
(``context.add_asset_metadata(..., partition_key=...)`` overrides the step-wide values of the same labels); values
that only exist for the whole step (seconds, throughput of the one Ray/vLLM session) stay step-wide.

Why short previews: a preview is a table in the asset page; full 64-character ids made it ~2,650 px wide and
pushed the caption off screen. Ids are shown as their first 10 characters (a unique prefix in practice: enough to
find the row) and long text is cut, so a preview fits a laptop screen.

Why run tags at run time: Dagster 1.13 gives a backfill launched from the UI (a pure asset backfill) only the
tags typed into its dialog plus its partition range; neither asset tags nor a job's run_tags reach its runs. So each
step adds its facts to its own run (``tag_run``): the partition range, the captioner's code version and
``videolake/gpu`` for a run that captions, which the Runs page filters by. Tags added at run time cannot steer the
run queue; schedule and sensor runs also carry ``videolake/gpu`` from the job's run_tags when they are created.

Why column lineage: the UI shows, per column, which upstream columns it comes from (``dagster/column_lineage``), so
a user can follow a caption row back to its clip, video and source object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from videolake.assets.metadata import figures_metadata, rounded
from videolake.platform.schemas import PARTITION_COLUMN, TABLE_SPECS, TABLES, table_spec

PREVIEW_ROWS = 5
ID_CHARS = 10  # shown characters of a 64-hex video id
TEXT_CHARS = 60  # shown characters of a caption, error or reason
TAG_PREFIX = "videolake/"

# Where each column of a table comes from (its spec's lineage, videolake.platform.schemas.TABLE_SPECS):
# column -> [(upstream asset, upstream column), ...].
COLUMN_SOURCES: dict[str, dict[str, list[tuple[str, str]]]] = {
    t.name: {c: list(src) for c, src in t.lineage.items()} for t in TABLE_SPECS if t.lineage
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


def partition_metadata(table_name: str, part: pa.Table, preview_rows: pa.Table | None = None) -> dict[str, Any]:
    """Metadata of one partition: its counts (PLOTTED labels numeric, the rest in ``details``) and its preview.

    Step-wide figures (throughput, ``step``) are not repeated: the step's MaterializeResult carries them.
    """
    figures = table_spec(table_name).figures_of(part)
    md = figures_metadata(table_name, figures)
    if preview_rows is not None:
        md["preview"] = record_preview(table_name, preview_rows)
    return md


def add_partition_figures(
    context: dg.AssetExecutionContext,
    table_name: str,
    figures_by_day: Mapping[str, Mapping[str, Any]],
    keys: list[str],
    lake: Any,
) -> dict[str, dict[str, Any]]:
    """Scope each day's figures (computed by the stage's workers from the rows they committed) and a preview of
    that day's committed rows (at most PREVIEW_ROWS read back) to that partition's materialization."""
    from videolake.platform.lake import PartitionRange

    added: dict[str, dict[str, Any]] = {}
    for key in keys:
        md = figures_metadata(table_name, dict(figures_by_day.get(key) or table_spec(table_name).figures_of(_empty(table_name))))
        rows = lake.head(table_name, PartitionRange.of([key]), PREVIEW_ROWS, PREVIEW_COLUMNS[table_name])
        md["preview"] = record_preview(table_name, rows)
        context.add_asset_metadata(md, partition_key=key)
        added[key] = md
    return added


def preview_of(lake: Any, table_name: str, keys: list[str]) -> dg.TableMetadataValue:
    """A preview of the committed rows of ``keys`` (at most PREVIEW_ROWS read back)."""
    from videolake.platform.lake import PartitionRange

    return record_preview(table_name, lake.head(table_name, PartitionRange.of(keys), PREVIEW_ROWS,
                                                PREVIEW_COLUMNS[table_name]))


def _empty(table_name: str) -> pa.Table:
    return TABLES[table_name].empty_table()


def add_partition_metadata(
    context: dg.AssetExecutionContext,
    table_name: str,
    rows: pa.Table,
    keys: list[str],
    preview_rows: pa.Table | None = None,
) -> dict[str, dict[str, Any]]:
    """Scope the counts (and a preview) of each partition of ``keys`` to that partition's materialization.

    ``rows``: the step's rows, at least its spec's ``summary_columns``; ``preview_rows``: a few rows per
    partition (any number of partitions; defaults to ``rows`` when it has the preview columns). Labels returned here
    override the same labels of the step's MaterializeResult for that partition. Returns what was added, by key.
    """
    if preview_rows is None and set(PREVIEW_COLUMNS[table_name]) <= set(rows.column_names):
        preview_rows = rows
    previews = partition_tables(preview_rows, keys) if preview_rows is not None else {}
    added: dict[str, dict[str, Any]] = {}
    for key, part in partition_tables(rows, keys).items():
        md = partition_metadata(table_name, part, previews.get(key))
        context.add_asset_metadata(md, partition_key=key)
        added[key] = md
    return added


# The preview columns of each table (its spec's preview): shown as `column` (short ids) with what each shows.
PREVIEW_COLUMNS: dict[str, list[str]] = {t.name: list(t.preview) for t in TABLE_SPECS}


def short_id(value: str | None) -> str | None:
    """``<64 hex>`` -> first ID_CHARS chars + "…"; a clip id ``<video>_<start>_<end>`` -> ``<video prefix>…_<start>_<end>``
    without the zero padding (e.g. ``3f9a1c2b7d…_45_90``)."""
    if value is None:
        return None
    head, sep, rest = value.partition("_")
    if len(head) <= ID_CHARS + 1:
        return value
    short = head[:ID_CHARS] + "…"
    if sep:
        frames = [p.lstrip("0") or "0" for p in rest.split("_")]
        short += "_" + "_".join(frames)
    return short


def short_uri(value: str | None) -> str | None:
    """The landing day and file name of a source uri (``.../landing/2026-03-01/x.mp4`` -> ``2026-03-01/x.mp4``)."""
    if value is None:
        return None
    return "/".join(value.rstrip("/").split("/")[-2:])


def short_text(value: str | None, n: int = TEXT_CHARS) -> str | None:
    if value is None or len(value) <= n:
        return value
    return value[: n - 1].rstrip() + "…"


_SHOWN = {
    "video_id": ("video", short_id, "video_id: first characters of the sha256 (a unique prefix)"),
    "clip_id": ("clip", short_id, "clip_id: video id prefix…_start_end frame"),
    "source_uri": ("source", short_uri, "source_uri: landing day / file name"),
}


def record_preview(table_name: str, rows: pa.Table, n: int = PREVIEW_ROWS) -> dg.TableMetadataValue:
    """The first ``n`` rows of ``rows`` (PREVIEW_COLUMNS[table_name]) as a table short enough for one screen."""
    columns = PREVIEW_COLUMNS[table_name]
    sel = rows.select(columns).slice(0, n)
    types = {f.name: str(f.type) for f in sel.schema}
    schema_cols, convert = [], {}
    for c in columns:
        shown, fn, doc = _SHOWN.get(c, (c, None, None))
        if fn is None and types[c] == "string":
            fn = short_text
        convert[c] = (shown, fn)
        schema_cols.append(dg.TableColumn(name=shown, type=types[c], description=doc))
    records = []
    for row in sel.to_pylist():
        rec = {}
        for c in columns:
            shown, fn = convert[c]
            rec[shown] = _plain(fn(row[c]) if fn else row[c])
        records.append(dg.TableRecord(rec))
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(columns=schema_cols))


def _plain(v: Any) -> str | int | float | bool | None:
    if isinstance(v, float):
        return rounded(v)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)


def run_tags(keys: list[str], table_name: str, captioner_code_version: str | None = None) -> dict[str, str]:
    """The videolake tags of a run that materializes ``keys`` of ``table_name``."""
    tags = {f"{TAG_PREFIX}partitions": keys[0] if len(keys) == 1 else f"{keys[0]}...{keys[-1]}"}
    if table_name == "clip_captions":
        tags[f"{TAG_PREFIX}gpu"] = "true"
        if captioner_code_version:
            tags[f"{TAG_PREFIX}captioner_code_version"] = captioner_code_version
    return tags


def tag_run(context: dg.AssetExecutionContext, table_name: str, captioner_code_version: str | None = None) -> dict:
    """Add ``run_tags`` of this step to its run (missing keys only; idempotent across the run's steps)."""
    tags = run_tags(list(context.partition_keys), table_name, captioner_code_version)
    current = context.run.tags
    new = {k: v for k, v in tags.items() if current.get(k) != v}
    if new:
        context.instance.add_run_tags(context.run.run_id, new)
    return new

