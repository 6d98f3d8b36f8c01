"""Per-row boolean columns for the relational gates GX has no built-in for (set equality of ids, ...).

Each helper computes, in pandas, one row per entity with a boolean (or count) column that a plain GX expectation can
then assert, so every gate's verdict still comes from a GX validation.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from videolake.platform.gates.core import Check


def to_pandas(tbl: pa.Table, columns: list[str]) -> Any:
    """The given columns of ``tbl`` as a pandas DataFrame (nullable ints become floats, as GX expects)."""
    return tbl.select(columns).to_pandas()


def id_reconciliation(expected: list[Any], actual: list[Any], id_column: str) -> Any:
    """One row per distinct id of ``expected`` and ``actual`` (nulls excluded) with three flags:

    missing: expected but absent from ``actual``; extra: in ``actual`` but not expected;
    duplicated: more than one row in ``actual``. Rows come in first-seen order (expected first).
    """
    import pandas as pd

    counts: dict[Any, int] = {}
    for a in actual:
        if a is not None:
            counts[a] = counts.get(a, 0) + 1
    expected_set = {e for e in expected if e is not None}
    order = list(dict.fromkeys([e for e in expected if e is not None] + [a for a in actual if a is not None]))
    return pd.DataFrame(
        {
            id_column: pd.Series(order, dtype=object),
            "times_present": pd.Series([counts.get(i, 0) for i in order], dtype="int64"),
            "missing": pd.Series([i in expected_set and counts.get(i, 0) == 0 for i in order], dtype=bool),
            "extra": pd.Series([i not in expected_set for i in order], dtype=bool),
            "duplicated": pd.Series([counts.get(i, 0) > 1 for i in order], dtype=bool),
        }
    )


def no(column: str, *, explain: str, label: str, frame: str = "rows", row_condition: str | None = None) -> Check:
    """A Check that a boolean flag column is False on every row (ExpectColumnValuesToBeInSet([False]))."""
    kwargs: dict[str, Any] = {"column": column, "value_set": [False]}
    if row_condition:
        kwargs.update(row_condition=row_condition, condition_parser="pandas")
    return Check(label=label, expectation="ExpectColumnValuesToBeInSet", kwargs=kwargs, explain=explain, frame=frame)


def where(row_condition: str | None, **kwargs: Any) -> dict[str, Any]:
    """Expectation kwargs restricted to rows matching a pandas ``row_condition`` (None: all rows)."""
    if row_condition:
        kwargs.update(row_condition=row_condition, condition_parser="pandas")
    return kwargs
