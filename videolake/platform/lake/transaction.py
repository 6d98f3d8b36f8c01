"""A read-modify-write of one Delta table as ONE optimistic transaction: ``transact(lake, table, decide)``.

Why: the cross-day judgements (exact copies in raw_videos, near and semantic duplicates in filtered_clips) read
rows of several days, decide verdicts and write some days back. Written with a plain overwrite, the rows go back
on whatever version is latest then, so a day that another run committed in between is replaced by the rows read
before it (its commit reverted), and two judgements made side by side each miss the other's rows (verdicts lost).

Here ``decide`` gets a ``TableTransaction``: a view of the lake in which ``table`` reads as ONE version V (the
latest when the attempt began) and writes to ``table`` are held back. At the end the held days are written as new
data files and committed in one Delta transaction whose read version is V and which delta-rs may not rebase
(``max_commit_retries=0``): it succeeds only if no commit of the table came after V. On a conflict the files just
written are left to the vacuum (invisible: never in the log), and ``decide`` runs again on a fresh read: a decision
is re-made from the rows it is about, never re-written from stale ones. Every successful judgement is therefore
made on the latest state of the table, and the judgements of runs that overlap are serialized by the table's own
log, with no lock that a killed run could leave held.

Other tables (the near-duplicate index, clip_embeddings) read and write through the lake as they are: they are
derived per day from rows that only that day's run writes.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa

from videolake.platform.lake.schemas import LAKE_SCHEMAS, PARTITION_COLUMN, PRIMARY_KEYS
from videolake.platform.lake.table import Lake, PartitionRange, WriteResult, conform

log = logging.getLogger(__name__)

T = TypeVar("T")

DECIDED_BY_KEY = "videolake.decided_by"  # commit metadata: what made the judgement (a Dagster run id, a command)
ATTEMPTS = 12  # transactions of one judgement before it gives up (each lost one means another commit came first)


class ConcurrentWriteError(RuntimeError):
    """A judgement lost the commit race ``ATTEMPTS`` times in a row: the table is written faster than it can be
    judged. Transient (the step's retry policy runs it again)."""

    transient = True


@dataclass
class TableTransaction:
    """The lake as seen by one attempt of a read-modify-write of ``table`` (module docstring).

    Reads of ``table`` are of ``version``, with the days written in this attempt in place of what that version
    holds; every other call goes to ``lake`` unchanged. Duck-types the ``Lake`` methods the judgements use."""

    lake: Lake
    table: str
    version: int | None  # the read version (None: the table does not exist yet)
    pending: dict[dt.date, pa.Table] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:  # everything else is the lake's
        return getattr(self.lake, name)

    def exists(self, table: str) -> bool:
        if table == self.table:
            return self.version is not None or bool(self.pending)
        return self.lake.exists(table)

    def read_partitions(
        self, table: str, partitions: PartitionRange, columns: list[str] | None = None, where: Any = None
    ) -> pa.Table:
        if table != self.table:
            return self.lake.read_partitions(table, partitions, columns, where)
        schema = LAKE_SCHEMAS[table]
        wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns])
        parts = [wanted.empty_table()]
        kept = [d.isoformat() for d in partitions.days() if d not in self.pending]
        if self.version is not None:
            for rng in PartitionRange.split(kept):
                parts.append(self.lake.read_partitions(table, rng, columns, where, version=self.version))
        for day in partitions.days():
            if day in self.pending:
                parts.append(self._held(day, columns, where))
        return pa.concat_tables(parts)

    def read_where(self, table: str, columns: list[str], where: Any) -> pa.Table:
        if table != self.table:
            return self.lake.read_where(table, columns, where)
        schema = LAKE_SCHEMAS[table]
        wanted = pa.schema([schema.field(c) for c in columns])
        parts = [wanted.empty_table()]
        if self.version is not None:
            with_day = columns if PARTITION_COLUMN in columns else [*columns, PARTITION_COLUMN]
            read = self.lake.read_where(table, with_day, where, version=self.version)
            if self.pending:
                import pyarrow.compute as pc

                held = pa.array(sorted(self.pending), pa.date32())
                read = read.filter(pc.invert(pc.is_in(read.column(PARTITION_COLUMN), value_set=held)))
            parts.append(read.select(columns))
        parts.extend(self._held(day, columns, where) for day in sorted(self.pending))
        return pa.concat_tables(parts)

    def partition_days(self, table: str) -> set[dt.date]:
        if table != self.table:
            return self.lake.partition_days(table)
        days = self.lake.partition_days(table, version=self.version) if self.version is not None else set()
        return (days - set(self.pending)) | {d for d, t in self.pending.items() if t.num_rows}

    def write_partitions(self, table: str, data: pa.Table, partitions: PartitionRange) -> WriteResult:
        """Hold the partitions' new rows until ``commit`` (reads of this attempt see them)."""
        if table != self.table:
            return self.lake.write_partitions(table, data, partitions)
        import pyarrow.compute as pc

        data = conform(data, LAKE_SCHEMAS[table])
        days = partitions.days()
        outside = {d for d in data.column(PARTITION_COLUMN).to_pylist() if d not in set(days)}
        if outside:
            raise ValueError(f"{table}: rows for partitions {sorted(outside)} outside the range {partitions}")
        for day in days:
            self.pending[day] = data.filter(pc.equal(data.column(PARTITION_COLUMN), pa.scalar(day, pa.date32())))
        return WriteResult(table=table, uri=self.lake.table_uri(table), version=-1, rows=data.num_rows)

    def _held(self, day: dt.date, columns: list[str] | None, where: Any) -> pa.Table:
        rows = self.pending[day]
        if where is not None:
            rows = rows.filter(where)
        return rows if columns is None else rows.select(columns)

    def commit(self, decided_by: str) -> int:
        """Write the held days as data files and commit them in one transaction on top of ``version`` (CAS);
        returns the new version. Raises delta-rs's CommitFailedError when another commit came after ``version``."""
        from deltalake import CommitProperties, DeltaTable
        from deltalake.transaction import AddAction, RemoveAction

        from videolake.platform.runtime.units import file_stats

        if self.version is None:
            raise ValueError(f"{self.table}: a judgement writes an existing table")
        files = self.lake.files()
        token = uuid.uuid4().hex[:16]
        now_ms = int(time.time() * 1000)
        actions: list[AddAction | RemoveAction] = []
        for i, (day, rows) in enumerate(sorted(self.pending.items())):
            if rows.num_rows == 0:
                continue
            data = rows.sort_by([(k, "ascending") for k in PRIMARY_KEYS[self.table]]).drop_columns([PARTITION_COLUMN])
            rel = f"{PARTITION_COLUMN}={day.isoformat()}/part-{token}-{i:05d}.parquet"
            size = files.write_parquet(files.path(self.table, rel), data)
            stats = file_stats(data)
            actions.append(AddAction(rel, size, {PARTITION_COLUMN: day.isoformat()}, now_ms, True, stats))
        uri = self.lake.table_uri(self.table)
        props = CommitProperties(
            custom_metadata={DECIDED_BY_KEY: decided_by, "videolake.token": token}, max_commit_retries=0
        )
        DeltaTable(uri, version=self.version, storage_options=self.lake._options()).create_write_transaction(
            actions,
            mode="overwrite",
            schema=LAKE_SCHEMAS[self.table],
            partition_by=[PARTITION_COLUMN],
            partition_filters=[(PARTITION_COLUMN, "in", sorted(d.isoformat() for d in self.pending))],
            commit_properties=props,
        )
        return self.version + 1


def transact(
    lake: Lake,
    table: str,
    decide: Callable[[TableTransaction], T],
    *,
    decided_by: str = "",
    attempts: int = ATTEMPTS,
    on_conflict: Callable[[int], None] | None = None,
) -> T:
    """Run ``decide`` on a ``TableTransaction`` of ``table`` and commit what it wrote as one optimistic
    transaction; on a lost race, run ``decide`` again on a fresh read (module docstring). ``decide`` must build
    its result from scratch each time. ``on_conflict(attempt)`` is called after each lost race."""
    from deltalake.exceptions import CommitFailedError

    for attempt in range(1, attempts + 1):
        tx = TableTransaction(lake, table, lake.version(table))
        result = decide(tx)
        if not tx.pending:
            return result
        try:
            version = tx.commit(decided_by)
        except CommitFailedError as exc:
            if on_conflict is not None:
                on_conflict(attempt)
            if attempt == attempts:
                raise ConcurrentWriteError(
                    f"{table}: {attempts} judgements in a row lost the commit race to other writers ({exc})"
                ) from exc
            log.info("%s: another commit came after version %s; judging again (%d)", table, tx.version, attempt)
            time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))
            continue
        log.info("%s: judgement committed as version %d (%d day(s) rewritten)", table, version, len(tx.pending))
        return result
    raise AssertionError("unreachable")
