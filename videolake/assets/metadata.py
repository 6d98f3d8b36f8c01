"""The figures each asset reports to the Dagster UI, and which of them the UI plots.

A curator reads an asset's page: Dagster plots EVERY int/float metadata entry over partitions, so only a short,
fixed list per table (its spec's ``plotted``: rows, throughput, pass/reject rates, failures, goodput, stragglers) is
numeric.
Every figure, plotted or not, is also a row of a table with its unit and a one-line meaning (assets/figure_docs.py):
``details`` (the day's counts, counts by reason and the like) and ``step`` (what the step measured once for its whole
range: timings, the caption pool, per-actor values, Delta version). All numbers are rounded (``rounded``).

Figures are computed per day by the stage's finalize tasks on the Ray workers (``platform.figures``), from the
rows they commit; the step only adds days up, so it never holds the rows to report on them.

The asset bodies call three functions (see also ui_metadata.add_partition_figures and ui_metadata.tag_run):
    asset_metadata(table_name, counts, keys, write, seconds, extra=..., preview=...)  -> MaterializeResult metadata
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import dagster as dg
import pyarrow as pa

from videolake.platform.lake.schemas import TABLE_SPECS, table_spec
from videolake.platform.lake.table import WriteResult

# The only numeric (plotted) metadata per table, in display order (each TableSpec's ``plotted``). Throughput labels
# are step-wide (one value for the whole range of a single-run backfill); the others are counted per partition.
PLOTTED: dict[str, tuple[str, ...]] = {t.name: t.plotted for t in TABLE_SPECS}

# Also numeric on every asset, besides PLOTTED: the resume counts of the step (checks outside the test suite read
# them by these names; see platform/runtime/units.py).
UNIT_COUNTS: tuple[str, ...] = ("units_total", "units_reused", "units_computed", "units_retried")


def rounded(value: Any) -> Any:
    """Floats rounded for reading (>= 100: 1 decimal, >= 1: 2, below: 3 significant digits), recursively."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return value
        a = abs(value)
        if a >= 100:
            return round(value, 1)
        if a >= 1:
            return round(value, 2)
        return round(value, 2 - int(math.floor(math.log10(a))))
    if isinstance(value, Mapping):
        return {str(k): rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """``dagster/column_schema``: every column with its type, nullability and description (from the schema)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=f.name,
                type=str(f.type),
                description=(f.metadata or {}).get(b"description", b"").decode() or None,
                constraints=dg.TableColumnConstraints(nullable=f.nullable),
            )
            for f in schema
        ]
    )


FIGURE_TABLE = dg.TableSchema(
    columns=[
        dg.TableColumn(
            "figure", "string", description="the figure's label (plotted figures are also entries of their own)"
        ),
        dg.TableColumn("value", "string", description="its value: a number, or JSON for counts by reason and the like"),
        dg.TableColumn("unit", "string"),
        dg.TableColumn("meaning", "string"),
    ]
)


def figure_table(figures: Mapping[str, Any]) -> dg.TableMetadataValue:
    """``figures`` as a table a person reads: figure, value, unit, one-line meaning (assets/figure_docs.py)."""
    from videolake.assets.figure_docs import figure_doc

    records = []
    for label, value in figures.items():
        unit, meaning = figure_doc(label)
        shown = value if isinstance(value, str) else json.dumps(rounded(value), default=str)
        records.append(dg.TableRecord({"figure": label, "value": shown, "unit": unit, "meaning": meaning}))
    return dg.MetadataValue.table(records=records, schema=FIGURE_TABLE)


def table_figures(value: Any) -> dict[str, Any]:
    """The figures of a ``figure_table`` (or of the JSON entry earlier materializations have) as a dict."""
    if isinstance(value, dg.TableMetadataValue):
        out: dict[str, Any] = {}
        for record in value.records:
            figure, text = str(record.data["figure"]), record.data["value"]
            try:
                out[figure] = json.loads(text) if isinstance(text, str) else text
            except ValueError:
                out[figure] = text
        return out
    data = getattr(value, "value", value)
    return dict(data) if isinstance(data, Mapping) else {}


def step_figures(md: Mapping[str, Any]) -> dict[str, Any]:
    """The ``step`` figures of a materialization's metadata (e.g. its ``delta_version``)."""
    return table_figures(md["step"]) if "step" in md else {}


def figures_metadata(table_name: str, figures: Mapping[str, Any], details_label: str = "details") -> dict[str, Any]:
    """``figures`` as metadata: the labels of PLOTTED[table_name] as rounded int/float (plotted); every figure,
    plotted or not, as a row of one table named ``details_label`` with its unit and meaning (``figure_table``)."""
    plotted = PLOTTED[table_name]
    md: dict[str, Any] = {}
    rows: dict[str, Any] = {}
    for label, value in figures.items():
        if label in plotted:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"plotted figure {table_name}.{label} must be a number, got {value!r}")
            md[label] = (
                dg.MetadataValue.int(value) if isinstance(value, int) else dg.MetadataValue.float(rounded(float(value)))
            )
        elif isinstance(value, str):
            md[label] = dg.MetadataValue.text(value)  # a name (model, accelerator): an entry of its own too
        rows[label] = value
    if rows:
        md[details_label] = figure_table(rows)
    return md


def throughput(table_name: str, figures: Mapping[str, Any], seconds: float) -> dict[str, float]:
    """The step's throughput figure of ``table_name`` (units per wall second of the step; its spec's
    ``throughput``), or nothing for a table whose step reports its own (clip_captions)."""
    rate = table_spec(table_name).throughput
    if rate is None:
        return {}
    label, figure = rate
    return {label: float(figures.get(figure, 0)) / seconds if seconds > 0 else 0.0}


def caption_figures(metrics) -> dict[str, Any]:
    """Figures of a caption run (platform.captioning.metrics.CaptionMetrics): throughput, goodput and stragglers
    plotted; the rest (pool size, load times, token rates, accelerator-seconds, per actor) as details."""
    m = metrics.to_metadata()
    per_actor = [
        {
            "actor": a.actor_id,
            "captions": a.captions,
            "captions_per_s": a.captions_per_s,
            "load_s": a.load_s,
            "straggler": a.straggler,
        }
        for a in metrics.per_actor
    ]
    keep = {
        k: v
        for k, v in m.items()
        if not k.startswith("actor_") and k not in ("captions", "captions_failed", "accelerator_is_gpu")
    }
    return {**keep, "accelerator": metrics.accelerator, "per_actor": per_actor}


def table_identity(table_name: str, uri: str, table_rows: int | None = None) -> dict[str, Any]:
    """Dagster's own labels for the table an asset writes: ``dagster/uri``, ``dagster/table_name``, and
    ``dagster/row_count`` (the whole table's rows; a day's rows are ``dagster/partition_row_count``)."""
    from videolake.platform.lake.figures import TABLE_ROW_COUNT

    md: dict[str, Any] = {
        "dagster/uri": dg.MetadataValue.path(uri),
        "dagster/table_name": dg.MetadataValue.text(f"videolake.{table_name}"),
    }
    if table_rows is not None:
        md[TABLE_ROW_COUNT] = dg.MetadataValue.int(int(table_rows))
    return md


def asset_metadata(
    table_name: str,
    counts: Mapping[str, Any],
    keys: list[str],
    write: WriteResult,
    seconds: float,
    *,
    extra: Mapping[str, Any] | None = None,
    preview: dg.TableMetadataValue | None = None,
    table_rows: int | None = None,
) -> dict[str, Any]:
    """The MaterializeResult metadata of a step that wrote ``keys`` of ``table_name``.

    ``counts``: the figures of the range (its spec's ``merge_figures`` of the days' figures, which the
    stage's workers computed); ``write``: the Delta commit; ``seconds``: the step's
    work time; ``extra``: more figures (e.g. ``caption_figures(metrics)``, ``{"frames": n}``; plotted only if
    listed in PLOTTED); ``preview``: ui_metadata.record_preview of a few rows; ``table_rows``: the rows of the
    whole table after the commit (``dagster/row_count``; from the Delta log). Per-partition values are added by
    ui_metadata.add_partition_metadata (they override the range's counts on each partition).
    """
    counts = dict(counts)
    step = {**dict(extra or {}), **throughput(table_name, {**counts, **dict(extra or {})}, seconds)}
    step.update(seconds=seconds, delta_version=write.version, days_written=len(keys))
    md = {
        # counts of the range; add_partition_metadata replaces them (and ``details``) with each partition's own
        **figures_metadata(table_name, counts, "details"),
        # the step's own figures, the same on every partition: throughput, caption pool, timings, Delta version
        **figures_metadata(table_name, step, "step"),
        **table_identity(table_name, write.uri, table_rows),
        "partitions": dg.MetadataValue.text(keys[0] if len(keys) == 1 else f"{keys[0]}...{keys[-1]}"),
    }
    if preview is not None:
        md["preview"] = preview
    return md
