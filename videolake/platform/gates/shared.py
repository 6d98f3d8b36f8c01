"""Gates that several tables have in the same shape, built in one place: an id that is set and unique, ids that
match the upstream table's exactly once, a reason column consistent with a status, and a rate inside bounds.

Gate names, check labels and sentences are part of the interface (Dagster asset-check names, the UI, the CLI):
the callers pass their own words; the shapes live here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from videolake.platform.gates.core import MAX_EXAMPLES, Check, Gate
from videolake.platform.gates.relations import no, where

if TYPE_CHECKING:
    import pandas as pd


def unique_id_gate(name: str, column: str) -> Gate:
    """``column`` is set on every row and never repeats."""
    return Gate(
        name,
        f"{column} is set and unique",
        (
            Check("null_ids", "ExpectColumnValuesToNotBeNull", {"column": column}, f"{{n}} row(s) without {column}"),
            Check("duplicated", "ExpectColumnValuesToBeUnique", {"column": column}, f"{{n}} row(s) share a {column}"),
        ),
    )


def exactly_once_gate(
    name: str, summary: str, column: str, *, missing: str, extra: str, duplicated: str, extra_measured: dict[str, Any]
) -> Gate:
    """Every upstream id has exactly one row and no row has an id the upstream lacks; runs on the ``ids`` frame of
    ``relations.id_reconciliation``. ``missing``/``extra``/``duplicated``: the failure sentences ({n})."""
    return Gate(
        name,
        summary,
        (
            Check("null_ids", "ExpectColumnValuesToNotBeNull", {"column": column}, f"{{n}} row(s) without {column}"),
            no("missing", label="missing", explain=missing, frame="ids"),
            no("extra", label="extra", explain=extra, frame="ids"),
            no("duplicated", label="duplicated", explain=duplicated, frame="ids"),
        ),
        extra_measured=extra_measured,
    )


def reason_consistent_gate(
    summary: str,
    *,
    bad: str,
    good: str,
    bad_noun: str,
    good_noun: str,
    reason: str = "reject_reason",
    first: tuple[Check, ...] = (),
) -> Gate:
    """Rows matching ``bad`` (a pandas condition) carry a non-empty ``reason``; rows matching ``good`` carry none.
    ``bad_noun``/``good_noun`` name those rows in the sentences ("rejected", "ok"); ``first``: checks run before."""
    return Gate(
        "reject_reason_consistent",
        summary,
        (
            *first,
            Check(
                f"{bad_noun}_without_reason",
                "ExpectColumnValuesToNotBeNull",
                where(bad, column=reason),
                f"{{n}} {bad_noun} row(s) without {reason}",
            ),
            Check(
                f"{bad_noun}_with_empty_reason",
                "ExpectColumnValueLengthsToBeBetween",
                where(bad, column=reason, min_value=1),
                f"{{n}} {bad_noun} row(s) with an empty {reason}",
            ),
            Check(
                f"{good_noun}_with_reason",
                "ExpectColumnValuesToBeNull",
                where(good, column=reason),
                f"{{n}} {good_noun} row(s) with a {reason}",
            ),
        ),
    )


def rate_gate(
    name: str,
    flag: str,
    df: pd.DataFrame,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    min_rows: int,
    counted: str,
    id_column: str | None = None,
) -> Gate:
    """The mean of the 0/1 column ``flag`` lies in [min_value, max_value] (a bound left None is open), checked from
    ``min_rows`` rows on. ``counted`` names the flagged rows in the measured counts ("rejected", "failed");
    ``id_column``: report the flagged rows' ids as the gate's examples."""
    what = name.replace("_", " ")
    bounds = {k: v for k, v in (("min_value", min_value), ("max_value", max_value)) if v is not None}
    if min_value is not None and max_value is not None:
        summary = f"{what} within [{min_value:g}, {max_value:g}]"
        explain = f"{what} {{value}} outside [{min_value:g}, {max_value:g}]"
    elif max_value is not None:
        summary, explain = f"{what} <= {max_value:g}", f"{what} {{value}} > max {max_value:g}"
    else:
        summary, explain = f"{what} >= {min_value:g}", f"{what} {{value}} < min {min_value:g}"
    examples = () if id_column is None else tuple(str(v) for v in df.loc[df[flag] > 0, id_column].head(MAX_EXAMPLES))
    return Gate(
        name,
        summary,
        (Check(name, "ExpectColumnMeanToBeBetween", {"column": flag, **bounds}, explain, measure="observed_value"),),
        thresholds={**{f"{k.split('_')[0]}_{name}": v for k, v in bounds.items()}, "min_rows_for_rate": min_rows},
        min_rows=min_rows,
        extra_measured={"rows": len(df), counted: int(df[flag].sum())},
        examples=examples,
    )
