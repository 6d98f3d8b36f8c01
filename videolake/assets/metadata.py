"""Materialization metadata shared by the assets: what the UI shows (numbers it plots, schema, lineage, preview)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import dagster as dg
import pyarrow as pa

from videolake.platform.lake import WriteResult

PREVIEW_ROWS = 5


def column_schema(schema: pa.Schema) -> dg.TableSchema:
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


def preview(table: pa.Table, columns: list[str], n: int = PREVIEW_ROWS) -> dg.MarkdownMetadataValue:
    """A few rows as a markdown table (long ids shortened so the UI stays readable)."""
    rows = table.select(columns).slice(0, n).to_pylist()
    def cell(v: Any) -> str:
        s = "" if v is None else str(v)
        return (s[:24] + "…") if len(s) > 25 else s.replace("|", "/")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r[c]) for c in columns) + " |" for r in rows]
    return dg.MetadataValue.md("\n".join(lines))


def reason_counts(values: list[str | None]) -> dict[str, int]:
    """Rejections by reason; multi-reason values (';'-joined) count once per reason."""
    c: Counter[str] = Counter()
    for v in values:
        if v:
            for part in v.split(";"):
                c[part.split(":")[0].strip()] += 1
    return dict(sorted(c.items()))


def write_metadata(result: WriteResult, partitions: list[str]) -> dict[str, Any]:
    return {
        "dagster/row_count": dg.MetadataValue.int(result.rows),
        "rows": dg.MetadataValue.int(result.rows),
        "delta_version": dg.MetadataValue.int(result.version),
        "table_uri": dg.MetadataValue.path(result.uri),
        "partitions": dg.MetadataValue.text(", ".join(partitions)),
    }
