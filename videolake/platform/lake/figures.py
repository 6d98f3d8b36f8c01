"""Counts and rates of a table's rows, per partition: what the UI shows and plots (see assets/metadata.py).

Each table declares its figures in its ``TableSpec`` (schemas.py) as a tuple of the small kinds below; from that
one declaration come the columns to read (``columns``), a day's figures (``compute``) and a range's (``merge``).

Pure pyarrow, no Dagster: the stages' finalize tasks compute each day's figures on the Ray workers from the rows
they commit, and the step only adds up days (``merge``), so no step holds the rows to report on them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

ROW_COUNT = "dagster/partition_row_count"  # Dagster's label for the rows of one partition (the day's)
TABLE_ROW_COUNT = "dagster/row_count"  # Dagster's label for the rows of the whole table (every partition)


def reason_counts(values: Iterable[str | None]) -> dict[str, int]:
    """Rejections by reason; multi-reason values (';'-joined) count once per reason, ':'-details dropped."""
    c: Counter[str] = Counter()
    for v in values:
        if v:
            for part in v.split(";"):
                c[part.split(":")[0].strip()] += 1
    return dict(sorted(c.items()))


def _rate(n: int, d: int) -> float:
    return n / d if d else 0.0


class Figure(ABC):
    """One labelled figure of a table's rows. A ``derived`` figure's ``value`` reads the others (``done``)."""

    label: str
    derived = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns ``value`` reads."""
        return ()

    @abstractmethod
    def value(self, rows: pa.Table, done: dict[str, Any]) -> Any:
        """The figure of ``rows`` (one partition, or all rows of a range)."""


@dataclass(frozen=True)
class RowCount(Figure):
    label: str = ROW_COUNT

    def value(self, rows: pa.Table, done: dict[str, Any]) -> int:
        return rows.num_rows


@dataclass(frozen=True)
class ColumnFigure(Figure, ABC):
    """A figure of one column's values."""

    label: str
    column: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)


@dataclass(frozen=True)
class Count(ColumnFigure):
    """Rows whose ``column`` equals ``equals``; with ``equals`` None, rows where it is set (true, non-empty)."""

    equals: Any = None

    def value(self, rows: pa.Table, done: dict[str, Any]) -> int:
        values = rows.column(self.column).to_pylist()
        return sum(1 for v in values if v) if self.equals is None else values.count(self.equals)


@dataclass(frozen=True)
class Remainder(Figure):
    """The rows not counted by the figure ``of``: of all rows, or of those counted by the figure ``total``."""

    label: str
    of: str
    total: str = ROW_COUNT
    derived = True

    def value(self, rows: pa.Table, done: dict[str, Any]) -> int:
        return done[self.total] - done[self.of]


@dataclass(frozen=True)
class EarlierDay(ColumnFigure):
    """Rows whose date ``column`` lies before their own partition_date (a duplicate whose kept clip is in an earlier
    day)."""

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column, "partition_date")

    def value(self, rows: pa.Table, done: dict[str, Any]) -> int:
        earlier = pc.less(rows.column(self.column), rows.column("partition_date"))
        return int(pc.sum(pc.fill_null(earlier, False).cast(pa.int64())).as_py() or 0)


@dataclass(frozen=True)
class Total(ColumnFigure):
    """The sum of an integer column."""

    def value(self, rows: pa.Table, done: dict[str, Any]) -> int:
        return int(pc.sum(rows.column(self.column)).as_py() or 0)


@dataclass(frozen=True)
class Distinct(ColumnFigure):
    """Distinct non-null values of a column in a day. Days are added up when merged: each value (a video, a shard)
    belongs to one."""

    def value(self, rows: pa.Table, done: dict[str, Any]) -> int:
        return len(set(rows.column(self.column).to_pylist()) - {None})


@dataclass(frozen=True)
class Rate(Figure):
    """``numerator`` / ``denominator`` (0 without rows); recomputed, not added, when days are merged."""

    label: str
    numerator: str
    denominator: str = ROW_COUNT
    derived = True

    def value(self, rows: pa.Table, done: dict[str, Any]) -> float:
        return _rate(done[self.numerator], done[self.denominator])


@dataclass(frozen=True)
class Reasons(ColumnFigure):
    """Rows by reason (``reason_counts``). ``whole``: the value is one reason, named by its text before the first
    ':' (an error message), rather than ';'-joined rule names."""

    whole: bool = False

    def value(self, rows: pa.Table, done: dict[str, Any]) -> dict[str, int]:
        values = rows.column(self.column).to_pylist()
        return reason_counts([v.split(":")[0] if v else None for v in values] if self.whole else values)


@dataclass(frozen=True)
class RuleCount(ColumnFigure):
    """Rows whose ';'-joined rule list in ``column`` holds ``rule`` (alone or with others)."""

    rule: str = ""

    def value(self, rows: pa.Table, done: dict[str, Any]) -> int:
        return sum(1 for v in rows.column(self.column).to_pylist() if v and self.rule in v.split(";"))


@dataclass(frozen=True)
class GroupSizes(ColumnFigure):
    """Groups by size: {"2": groups of two rows, ...} over the non-null values of a group-id column (a day's
    near-duplicate groups; days add up when merged, as a group lies in one day)."""

    def value(self, rows: pa.Table, done: dict[str, Any]) -> dict[str, int]:
        sizes: dict[int, int] = {}
        for n in Counter(v for v in rows.column(self.column).to_pylist() if v is not None).values():
            sizes[n] = sizes.get(n, 0) + 1
        return {str(k): v for k, v in sorted(sizes.items())}


def columns(figures: tuple[Figure, ...]) -> tuple[str, ...]:
    """The columns the figures read, each once, in order."""
    return tuple(dict.fromkeys(c for f in figures for c in f.columns))


def compute(figures: tuple[Figure, ...], rows: pa.Table) -> dict[str, Any]:
    """The figures of ``rows`` by label, in declaration order (derived figures computed after the others)."""
    done: dict[str, Any] = {}
    for f in sorted(figures, key=lambda f: f.derived):
        done[f.label] = f.value(rows, done)
    return {f.label: done[f.label] for f in figures}


def merge(figures: tuple[Figure, ...], days: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of several days as if computed over all their rows: counts added, by-reason dicts merged,
    rates recomputed. Labels a day carries besides the declared ones (a stage's own counts) merge the same way."""
    out: dict[str, Any] = {}
    for d in days:
        for k, v in d.items():
            if isinstance(v, dict):
                merged = out.setdefault(k, {})
                for r, n in v.items():
                    merged[r] = merged.get(r, 0) + n
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
            else:
                out[k] = v
    for f in figures:
        if isinstance(f, Rate) and f.denominator in out:
            out[f.label] = _rate(out.get(f.numerator, 0), out[f.denominator])
    for k, v in out.items():
        if isinstance(v, dict):
            out[k] = dict(sorted(v.items()))
    return out
