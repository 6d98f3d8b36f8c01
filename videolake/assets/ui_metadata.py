"""Metadata for the Dagster UI that a range step must scope per partition, column lineage, row previews, run tags.

Why per partition: a single-run backfill materializes several partitions in ONE step, and Dagster copies the step's
MaterializeResult metadata onto every partition's materialization. Without partition-scoped values the partition
`2026-02-11` would report the row count of the whole range, and the UI's "plot by partition" would draw the same
range total for every day. ``add_partition_metadata`` scopes the counts to each partition
(``context.add_asset_metadata(..., partition_key=...)`` overrides the step-wide values of the same labels); values
that only exist for the whole step (seconds, throughput of the one Ray/vLLM session) stay step-wide.

Why previews keep full ids: a person follows a caption back to its clip, video and source object by copying the id
from the preview into a search (``videolake lineage ID``, the table's own rows); a shortened id in the data made that
a matter of matching a prefix by eye. The UI narrows wide cells itself; only long free text (captions, errors) is
cut.

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
from videolake.platform.lake.schemas import PARTITION_COLUMN, TABLE_SPECS, TABLES, table_spec

PREVIEW_ROWS = 5
TEXT_CHARS = 60  # shown characters of a caption, error or reason
# Columns a preview always shows whole: the ids and objects a person copies to follow a row's lineage.
FULL_COLUMNS = frozenset({"clip_id", "video_id", "source_uri", "shard_uri", "clip_uri", "duplicate_group"})
TAG_PREFIX = "videolake/"

# Where each column of a table comes from (its spec's lineage, videolake.platform.lake.schemas.TABLE_SPECS):
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
    from videolake.platform.lake.table import PartitionRange

    added: dict[str, dict[str, Any]] = {}
    for key in keys:
        md = figures_metadata(
            table_name, dict(figures_by_day.get(key) or table_spec(table_name).figures_of(_empty(table_name)))
        )
        rows = lake.head(table_name, PartitionRange.of([key]), PREVIEW_ROWS, PREVIEW_COLUMNS[table_name])
        md["preview"] = record_preview(table_name, rows)
        context.add_asset_metadata(md, partition_key=key)
        added[key] = md
    return added


def preview_of(lake: Any, table_name: str, keys: list[str]) -> dg.TableMetadataValue:
    """A preview of the committed rows of ``keys`` (at most PREVIEW_ROWS read back)."""
    from videolake.platform.lake.table import PartitionRange

    return record_preview(
        table_name, lake.head(table_name, PartitionRange.of(keys), PREVIEW_ROWS, PREVIEW_COLUMNS[table_name])
    )


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


def short_text(value: str | None, n: int = TEXT_CHARS) -> str | None:
    if value is None or len(value) <= n:
        return value
    return value[: n - 1].rstrip() + "…"


def record_preview(table_name: str, rows: pa.Table, n: int = PREVIEW_ROWS) -> dg.TableMetadataValue:
    """The first ``n`` rows of ``rows`` (PREVIEW_COLUMNS[table_name]) as a table: ids and uris whole, long text
    cut to TEXT_CHARS."""
    columns = PREVIEW_COLUMNS[table_name]
    sel = rows.select(columns).slice(0, n)
    types = {f.name: str(f.type) for f in sel.schema}
    schema_cols = [dg.TableColumn(name=c, type=types[c]) for c in columns]
    records = []
    for row in sel.to_pylist():
        rec = {}
        for c in columns:
            cut = types[c] == "string" and c not in FULL_COLUMNS
            rec[c] = _plain(short_text(row[c]) if cut else row[c])
        records.append(dg.TableRecord(rec))
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(columns=schema_cols))


def _plain(v: Any) -> str | int | float | bool | None:
    if isinstance(v, float):
        return rounded(v)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)


def run_tags(
    keys: list[str], table_name: str, captioner_code_version: str | None = None, gpu: bool = False
) -> dict[str, str]:
    """The videolake tags of a run that materializes ``keys`` of ``table_name``; ``gpu``: the step runs on GPUs
    (``videolake/gpu=true``; a caption step on CPU actors is not tagged)."""
    tags = {f"{TAG_PREFIX}partitions": keys[0] if len(keys) == 1 else f"{keys[0]}...{keys[-1]}"}
    if gpu:
        tags[f"{TAG_PREFIX}gpu"] = "true"
    if table_name == "clip_captions":
        if captioner_code_version:
            tags[f"{TAG_PREFIX}captioner_code_version"] = captioner_code_version
    return tags


def tag_run(
    context: dg.AssetExecutionContext, table_name: str, captioner_code_version: str | None = None, gpu: bool = False
) -> dict:
    """Add ``run_tags`` of this step to its run (missing keys only; idempotent across the run's steps)."""
    tags = run_tags(list(context.partition_keys), table_name, captioner_code_version, gpu)
    current = context.run.tags
    new = {k: v for k, v in tags.items() if current.get(k) != v}
    if new:
        context.instance.add_run_tags(context.run.run_id, new)
    return new
