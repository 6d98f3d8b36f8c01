"""The vocabulary of the gates: what a gate asks GX to check (``Check``, ``Gate``), on which rows (``Frame``), and
what comes back (``GateResult``).

Table modules (raw_videos.py, ...) only describe gates with these plain dataclasses; gx_runner.py turns the checks
into Great Expectations expectations. So the table modules import neither GX nor pandas at module level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 5  # failing example ids kept per gate


@dataclass(frozen=True)
class Frame:
    """A pandas DataFrame a set of checks runs on, and the column that names its rows in failing examples."""

    df: Any  # pandas.DataFrame (typed loosely: pandas is imported lazily)
    id_column: str  # e.g. video_id, clip_id; a null id is reported as "row <n>"


@dataclass(frozen=True)
class Check:
    """One GX expectation, by class name, with the sentence that explains a failure.

    ``measure`` says what the check reports in GateResult.measured under ``label``: "unexpected_count" for
    column-map expectations (rows that break the rule), "observed_value" for aggregate ones (a mean, a rate).
    ``explain`` is formatted with ``n`` (the unexpected count) or ``value`` (the observed value).
    """

    label: str  # key in GateResult.measured, e.g. "duplicated"
    expectation: str  # great_expectations.expectations class name, e.g. "ExpectColumnValuesToBeUnique"
    kwargs: dict[str, Any]  # the expectation's arguments (column, min_value, row_condition, ...)
    explain: str  # failure sentence, e.g. "{n} duplicated video_id"
    frame: str = "rows"  # which Frame the expectation runs on
    measure: str = "unexpected_count"  # "unexpected_count" | "observed_value"


@dataclass(frozen=True)
class Gate:
    """A named group of checks that pass or fail together, with the thresholds they encode."""

    name: str  # stable: names the Dagster asset check
    summary: str  # what the gate asserts, one sentence (shown when it passes)
    checks: tuple[Check, ...]
    thresholds: dict[str, Any] = field(default_factory=dict)
    # For rate gates: below this many rows of ``rate_rows_frame`` the gate passes with a note (rate is noise).
    min_rows: int | None = None
    rate_rows_frame: str = "rows"
    extra_measured: dict[str, Any] = field(default_factory=dict)  # context counts computed in pandas (rows, ...)
    # For aggregate (rate) gates, whose expectations name no rows: the ids behind the rate (rejected videos, failed
    # captions), reported as failing ids when the gate fails.
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckOutcome:
    """What GX said about one Check."""

    success: bool
    value: Any  # unexpected count or observed value
    examples: tuple[str, ...]  # ids of failing rows, in row order (deduplicated, at most a handful)
    error: str | None = None  # exception message when GX could not evaluate the expectation


@dataclass(frozen=True)
class GateResult:
    """The outcome of one gate on one partition of one table."""

    gate: str  # gate name, e.g. "video_id_unique"
    table: str  # table name, e.g. "raw_videos"
    passed: bool  # True when every check of the gate held (or the gate is disabled / a rate below min rows)
    measured: dict[str, Any]  # label -> unexpected count or observed value, plus context counts such as rows
    thresholds: dict[str, Any]  # the thresholds the checks encode
    failing_ids: tuple[str, ...]  # up to MAX_EXAMPLES ids of failing rows
    description: str  # human sentence: what failed (or what was asserted, when passed)
    severity: str = "error"  # "error": a failure blocks downstream; "warn": reported only
    enabled: bool = True  # False: not evaluated (disabled by config)

    @property
    def blocks(self) -> bool:
        """True when this result must stop downstream assets."""
        return not self.passed and self.severity == "error"

    def to_metadata(self) -> dict[str, Any]:
        """Plain, JSON-able data (for Dagster metadata, the CLI and logs)."""
        return {
            "gate": self.gate,
            "table": self.table,
            "passed": self.passed,
            "severity": self.severity,
            "enabled": self.enabled,
            "measured": _plain(self.measured),
            "thresholds": _plain(self.thresholds),
            "failing_ids": list(self.failing_ids),
            "description": self.description,
        }


def _plain(value: Any) -> Any:
    """numpy scalars / tuples -> Python types, recursively."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (TypeError, ValueError):
            return value
    return value
