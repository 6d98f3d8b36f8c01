"""Delta Lake table IO with delta-rs: partition-exact overwrites and partition reads.

Why not dagster-deltalake's IO manager: it builds its overwrite predicate from the start of the time window only, so
a single-run backfill over several partitions fails on an existing table (docs/stack-facts.md). Here the predicate covers
exactly the run's partitions, ``partition_date >= start AND partition_date < end``: a re-run or a backfill replaces
those partitions and touches nothing else, and delta-rs rejects rows outside the predicate.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from videolake.platform.lake.schemas import COLUMN_ENCODINGS, LAKE_SCHEMAS, PARTITION_COLUMN

if TYPE_CHECKING:
    from collections.abc import Iterator

    from videolake.platform.lake.files import LakeFiles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionRange:
    """Half-open range of daily partitions [start, end)."""

    start: dt.date
    end: dt.date

    @classmethod
    def of(cls, keys: list[str] | tuple[str, ...]) -> PartitionRange:
        """The range of partition keys (YYYY-MM-DD) that form one run of contiguous days (any order, repeats fine).

        Refuses keys with gaps (ValueError naming the missing days): a range spanning them would let an overwrite
        predicate delete days the run never computed. Use ``PartitionRange.split`` for such keys.
        """
        ranges = cls.split(keys)
        if not ranges:
            raise ValueError("no partition keys")
        if len(ranges) > 1:
            missing = [d.isoformat() for a, b in zip(ranges, ranges[1:]) for d in cls(a.end, b.start).days()]
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise ValueError(
                f"partition keys are not contiguous: {len(ranges)} separate ranges ({', '.join(map(str, ranges))}); "
                f"missing {shown}. One range would overwrite the missing days: split the keys with "
                "PartitionRange.split and handle each range separately"
            )
        return ranges[0]

    @classmethod
    def split(cls, keys: list[str] | tuple[str, ...]) -> list[PartitionRange]:
        """The partition keys as the fewest contiguous ranges, in date order (empty for no keys)."""
        days = sorted({dt.date.fromisoformat(k) for k in keys})
        out: list[PartitionRange] = []
        for day in days:
            if out and out[-1].end == day:
                out[-1] = cls(out[-1].start, day + dt.timedelta(days=1))
            else:
                out.append(cls(day, day + dt.timedelta(days=1)))
        return out

    def __str__(self) -> str:
        last = self.end - dt.timedelta(days=1)
        return self.start.isoformat() if last == self.start else f"{self.start.isoformat()}..{last.isoformat()}"

    def days(self) -> list[dt.date]:
        return [self.start + dt.timedelta(days=i) for i in range((self.end - self.start).days)]

    def predicate(self) -> str:
        return f"{PARTITION_COLUMN} >= '{self.start.isoformat()}' AND {PARTITION_COLUMN} < '{self.end.isoformat()}'"


@dataclass(frozen=True)
class WriteResult:
    table: str
    uri: str
    version: int
    rows: int
    files: int = 0  # data files the commit added


@dataclass(frozen=True)
class DataFile:
    """A Parquet data file a worker wrote into a table's directory, ready to be committed (a Delta add action)."""

    path: str  # relative to the table root: partition_date=YYYY-MM-DD/part-....parquet
    size: int
    partition_date: str  # YYYY-MM-DD
    rows: int
    stats: str  # Delta per-file statistics JSON (numRecords, minValues, maxValues, nullCount)


@dataclass(frozen=True)
class Lake:
    """Where the Delta tables live: ``<root>/<table>``; root is a local path or s3:// URI."""

    root: str
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)  # may hold credentials: never repr'd

    def table_uri(self, table: str) -> str:
        return f"{self.root.rstrip('/')}/{table}"

    def _options(self) -> dict[str, str] | None:
        return dict(self.storage_options) or None

    def exists(self, table: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.table_uri(table), storage_options=self._options())

    def write_partitions(self, table: str, data: pa.Table, partitions: PartitionRange) -> WriteResult:
        """Replace exactly the partitions in ``partitions`` with ``data`` (which may be empty), with the table's
        column encodings (``schemas.COLUMN_ENCODINGS``)."""
        from deltalake import DeltaTable, write_deltalake

        schema = LAKE_SCHEMAS[table]
        data = conform(data, schema)
        days = set(partitions.days())
        outside = {d for d in data.column(PARTITION_COLUMN).to_pylist() if d not in days}
        if outside:
            raise ValueError(f"{table}: rows for partitions {sorted(outside)} outside the run's range {partitions}")
        from videolake.platform.lake.storage import retry_on_commit_conflict

        if self.exists(table):
            self._add_new_columns(table)
        uri = self.table_uri(table)
        # Concurrent runs of other partitions may win the commit race; the overwrite is safe to repeat.
        retry_on_commit_conflict(
            lambda: write_deltalake(
                uri,
                data,
                mode="overwrite",
                partition_by=[PARTITION_COLUMN],
                predicate=partitions.predicate(),
                storage_options=self._options(),
                writer_properties=_writer_properties(table),
            ),
            what=f"overwrite of {table} {partitions}",
        )
        version = DeltaTable(uri, storage_options=self._options()).version()
        log.info("wrote %d rows to %s partitions %s (version %d)", data.num_rows, table, partitions, version)
        return WriteResult(table=table, uri=uri, version=version, rows=data.num_rows)

    def read_partitions(
        self,
        table: str,
        partitions: PartitionRange,
        columns: list[str] | None = None,
        where: Any = None,
        *,
        version: int | None = None,
    ) -> pa.Table:
        """Rows of the given partitions only (partition pruning: other partitions' files are never opened); with
        ``where`` (a pyarrow compute expression), only the rows that match it (a filtered scan); with ``version``,
        as that table version held them (time travel), else the latest."""
        schema = LAKE_SCHEMAS[table]
        if not self.exists(table):
            empty = schema.empty_table() if columns is None else schema.empty_table().select(columns)
            return empty
        tbl = self._dataset(table, partitions, version).to_table(columns=columns, filter=where)
        return conform(tbl, schema if columns is None else pa.schema([schema.field(c) for c in columns]))

    def read_where(self, table: str, columns: list[str], where: Any, *, version: int | None = None) -> pa.Table:
        """``columns`` of the rows of every partition that match ``where`` (a pyarrow compute expression): a
        filtered scan, which holds only the matching rows (of ``version``, else of the latest version)."""
        schema = LAKE_SCHEMAS[table]
        if not self.exists(table):
            return schema.empty_table().select(columns)
        return conform(
            self._dataset(table, None, version).to_table(columns=columns, filter=where),
            pa.schema([schema.field(c) for c in columns]),
        )

    def row_count(self, table: str, partitions: PartitionRange | None) -> int:
        """Rows in the given partitions (None: the whole table), from the Delta log's per-file record counts (no
        data file is opened)."""
        from deltalake import DeltaTable

        if not self.exists(table):
            return 0
        dtbl = DeltaTable(self.table_uri(table), storage_options=self._options())
        actions = pa.table(dtbl.get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return 0
        if "num_records" not in actions.column_names:  # a writer without statistics: count the rows
            return self._dataset(table, partitions).count_rows()
        counts = actions.column("num_records").to_pylist()
        if partitions is None:
            return sum(int(n or 0) for n in counts)
        days = {d.isoformat() for d in partitions.days()}
        col = f"partition.{PARTITION_COLUMN}"
        return sum(int(n or 0) for d, n in zip(actions.column(col).to_pylist(), counts) if str(d) in days)

    def partition_days(self, table: str, *, version: int | None = None) -> set[dt.date]:
        """The days that hold at least one data file of ``table`` (at ``version``, else the latest), from the Delta
        log (no data file is opened)."""
        from deltalake import DeltaTable

        if not self.exists(table):
            return set()
        dtbl = DeltaTable(self.table_uri(table), version=version, storage_options=self._options())
        actions = pa.table(dtbl.get_add_actions(flatten=True))
        col = f"partition.{PARTITION_COLUMN}"
        if actions.num_rows == 0 or col not in actions.column_names:
            return set()
        return {_as_date(d) for d in actions.column(col).to_pylist()}

    def head(self, table: str, partitions: PartitionRange, n: int, columns: list[str]) -> pa.Table:
        """At most ``n`` rows of the partitions (a preview: stops reading after ``n`` rows)."""
        schema = LAKE_SCHEMAS[table]
        if not self.exists(table):
            return schema.empty_table().select(columns)
        dataset = self._dataset(table, partitions)
        # Whole data files, one at a time, until n rows: never `Dataset.head`, which stops a scanner half-way and
        # leaves its read-ahead running; if the process exits then, Arrow aborts it (apache/arrow#34314).
        parts, have = [], 0
        for fragment in dataset.get_fragments():
            if have >= n:
                break
            part = fragment.to_table(schema=dataset.schema, columns=columns)
            parts.append(part)
            have += part.num_rows
        tbl = pa.concat_tables(parts).slice(0, n) if parts else dataset.schema.empty_table().select(columns)
        return conform(tbl, pa.schema([schema.field(c) for c in columns]))

    def day_fragments(self, table: str) -> Iterator[tuple[dt.date, Any]]:
        """(day, pyarrow fragment) of every data file of ``table``: for readers that visit the files one by one."""
        import pyarrow.dataset as pads

        for fragment in self._dataset(table, None).get_fragments():
            day = pads.get_partition_keys(fragment.partition_expression).get(PARTITION_COLUMN)
            yield _as_date(day), fragment

    def column_names(self, table: str) -> list[str]:
        """The columns of the stored table, in order."""
        from deltalake import DeltaTable

        dtbl = DeltaTable(self.table_uri(table), storage_options=self._options())
        return list(pa.schema(dtbl.schema().to_arrow()).names)

    def replace_table(self, table: str) -> None:
        """Replace the table by an empty one with the current schema, in one Delta commit (its history is kept):
        for the engine's own index tables, rebuilt from the asset tables when their columns change."""
        from deltalake import write_deltalake

        write_deltalake(
            self.table_uri(table),
            LAKE_SCHEMAS[table].empty_table(),
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=[PARTITION_COLUMN],
            storage_options=self._options(),
        )

    def _dataset(self, table: str, partitions: PartitionRange | None, version: int | None = None):
        """The partitions' data files as a pyarrow Dataset, read through pyarrow's own filesystem (local or S3).

        Why not delta-rs's default: it reads through a Python filesystem handler, so Arrow's I/O threads call into
        Python; a process that exits after a threaded read then aborts ("terminate called without an active
        exception") when a late I/O thread meets the finalizing interpreter: 20 of 30 short processes did here,
        0 of 30 with pyarrow's native filesystem."""
        import pyarrow.fs as pafs
        from deltalake import DeltaTable

        dtbl = DeltaTable(self.table_uri(table), version=version, storage_options=self._options())
        files = self.files()
        filesystem = pafs.SubTreeFileSystem(files.path(table), files.fs)
        if partitions is None:  # every partition
            return dtbl.to_pyarrow_dataset(filesystem=filesystem)
        filters = [(PARTITION_COLUMN, "in", [d.isoformat() for d in partitions.days()])]
        return dtbl.to_pyarrow_dataset(file_pruning_predicate=filters, filesystem=filesystem)

    def files(self) -> LakeFiles:
        """The lake root as a filesystem, for workers that write data files and checkpoints (picklable)."""
        from videolake.platform.lake.files import LakeFiles

        return LakeFiles(self.root, dict(self.storage_options))

    def ensure_table(self, table: str) -> None:
        """Create the (empty, partitioned) table if it does not exist; a concurrent creator winning is fine."""
        from deltalake import DeltaTable

        if self.exists(table):
            self._add_new_columns(table)
            return
        try:
            DeltaTable.create(
                self.table_uri(table),
                schema=LAKE_SCHEMAS[table],
                partition_by=[PARTITION_COLUMN],
                mode="ignore",
                storage_options=self._options(),
            )
        except Exception:  # noqa: BLE001 - lost a creation race: fine if the table now exists
            if not self.exists(table):
                raise

    def _add_new_columns(self, table: str) -> None:
        """Schema evolution: nullable columns a newer videolake added are added to an older table. Anything else
        (a column we do not know, a changed type, a missing required column) is a mismatch: refused, never merged."""
        from deltalake import DeltaTable, Field
        from deltalake.exceptions import SchemaMismatchError

        dtbl = DeltaTable(self.table_uri(table), storage_options=self._options())
        have = {f.name: f for f in pa.schema(dtbl.schema().to_arrow())}
        want = LAKE_SCHEMAS[table]
        unknown = sorted(set(have) - set(want.names))
        changed = sorted(n for n in want.names if n in have and not _same_type(have[n].type, want.field(n).type))
        missing_required = sorted(f.name for f in want if f.name not in have and not f.nullable)
        if unknown or changed or missing_required:
            raise SchemaMismatchError(
                f"{self.table_uri(table)} has another schema than videolake's {table}: unknown columns {unknown}, "
                f"changed types {changed}, missing required columns {missing_required}; move the table away or "
                "point the lake root elsewhere"
            )
        new = [f for f in want if f.name not in have]
        if new:
            log.info("%s: adding columns %s", table, [f.name for f in new])
            dtbl.alter.add_columns([Field.from_arrow(f) for f in new])

    def commit_files(
        self, table: str, files: list[DataFile], partitions: PartitionRange, *, token: str | None = None
    ) -> WriteResult:
        """ONE Delta transaction: add ``files`` and remove every previous file of the run's partitions.

        The same partition-exact overwrite as ``write_partitions``, but the rows never pass through this process:
        workers wrote the files (``DataFile``), this commits their paths. ``token`` (the attempt that wrote the
        files) is recorded in the commit's metadata, for a person reading the table's history.

        Nothing is deleted here. Files of an attempt that never committed are invisible to readers (not in the log)
        and go with Delta's vacuum once older than its retention (``releases.vacuum``): a second attempt of the
        same day that is still running may yet commit the files it wrote, so no commit may judge them orphans.
        """
        from deltalake import CommitProperties, DeltaTable
        from deltalake.transaction import AddAction, RemoveAction

        from videolake.platform.lake.storage import retry_on_commit_conflict

        days = {d.isoformat() for d in partitions.days()}
        outside = sorted({f.partition_date for f in files} - days)
        if outside:
            raise ValueError(f"{table}: files for partitions {outside} outside the run's range {partitions}")
        self.ensure_table(table)
        uri = self.table_uri(table)
        now_ms = int(time.time() * 1000)
        actions: list[AddAction | RemoveAction] = [
            AddAction(f.path, f.size, {PARTITION_COLUMN: f.partition_date}, now_ms, True, f.stats) for f in files
        ]
        props = CommitProperties(custom_metadata={COMMIT_TOKEN_KEY: token or ""})

        def commit() -> None:
            DeltaTable(uri, storage_options=self._options()).create_write_transaction(
                actions,
                mode="overwrite",
                schema=LAKE_SCHEMAS[table],
                partition_by=[PARTITION_COLUMN],
                partition_filters=[(PARTITION_COLUMN, "in", sorted(days))],
                commit_properties=props,
            )

        retry_on_commit_conflict(commit, what=f"commit of {len(files)} files to {table} {partitions}")
        version = DeltaTable(uri, storage_options=self._options()).version()
        rows = sum(f.rows for f in files)
        log.info(
            "committed %d files (%d rows) to %s partitions %s (version %d)",
            len(files),
            rows,
            table,
            partitions,
            version,
        )
        return WriteResult(table=table, uri=uri, version=version, rows=rows, files=len(files))

    def commit_slice(
        self,
        table: str,
        files: list[DataFile],
        partitions: PartitionRange,
        column: str,
        value: str,
        *,
        token: str | None = None,
        attempts: int = 12,
    ) -> WriteResult:
        """ONE Delta transaction: add ``files`` and remove the previous files of the run's partitions whose rows
        all have ``column == value`` (a slice of the day: clip_captions' rows of one caption track). Every file of
        such a table holds one value of ``column`` (its writers make sure), so a slice is a set of whole files.

        Files of other values stay, also those another writer commits meanwhile: the transaction is optimistic,
        its removals decided at one read version V and committed on top of V only (no rebase); if another commit
        came first, it is decided again from a fresh read (as ``lake_transaction.transact``). Two writers of one
        slice thereby never both keep their rows, and writers of different slices never remove each other's."""
        from deltalake import CommitProperties, DeltaTable
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import AddAction, RemoveAction

        days = {d.isoformat() for d in partitions.days()}
        outside = sorted({f.partition_date for f in files} - days)
        if outside:
            raise ValueError(f"{table}: files for partitions {outside} outside the run's range {partitions}")
        self.ensure_table(table)
        uri = self.table_uri(table)
        for attempt in range(1, attempts + 1):
            version = DeltaTable(uri, storage_options=self._options()).version()
            now_ms = int(time.time() * 1000)
            actions: list[AddAction | RemoveAction] = [
                AddAction(f.path, f.size, {PARTITION_COLUMN: f.partition_date}, now_ms, True, f.stats) for f in files
            ]
            actions += [
                RemoveAction(path, True, now_ms, size, {PARTITION_COLUMN: day})
                for path, size, day in self.slice_files(table, days, column, value, version=version)
            ]
            props = CommitProperties(custom_metadata={COMMIT_TOKEN_KEY: token or ""}, max_commit_retries=0)
            try:
                DeltaTable(uri, version=version, storage_options=self._options()).create_write_transaction(
                    actions,
                    mode="append",
                    schema=LAKE_SCHEMAS[table],
                    partition_by=[PARTITION_COLUMN],
                    commit_properties=props,
                )
            except CommitFailedError as exc:
                if attempt == attempts:
                    raise
                log.info("%s: a commit came after version %s (%s); deciding the slice again", table, version, exc)
                time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))
                continue
            rows = sum(f.rows for f in files)
            log.info(
                "committed %d files (%d rows) to %s partitions %s where %s = %r (version %d)",
                len(files),
                rows,
                table,
                partitions,
                column,
                value,
                version + 1,
            )
            return WriteResult(table=table, uri=uri, version=version + 1, rows=rows, files=len(files))
        raise AssertionError("unreachable")

    def slice_files(
        self, table: str, days: set[str], column: str, value: str, *, version: int | None = None
    ) -> list[tuple[str, int, str]]:
        """(path, size, day) of the data files of ``days`` whose rows have ``column == value``: read from the
        file statistics in the Delta log (min = max = value), or from the file itself where the log has none."""
        from deltalake import DeltaTable

        dtbl = DeltaTable(self.table_uri(table), version=version, storage_options=self._options())
        actions = pa.table(dtbl.get_add_actions(flatten=True)).to_pylist()
        out = []
        for a in actions:
            day = str(_as_date(a[f"partition.{PARTITION_COLUMN}"]))
            if day not in days:
                continue
            low, high = a.get(f"min.{column}"), a.get(f"max.{column}")
            if low is None or high is None:  # no statistics: read the column
                seen = set(
                    self.files()
                    .read_parquet(self.files().path(table, a["path"]), columns=[column])
                    .column(column)
                    .to_pylist()
                )
                low, high = (min(seen), max(seen)) if seen and None not in seen else (None, None)
            if low == value and high == value:
                out.append((a["path"], int(a["size_bytes"]), day))
            elif low is not None and high is not None and low <= value <= high:
                raise ValueError(f"{table}: data file {a['path']} mixes {column} values around {value!r}")
        return out

    def version(self, table: str) -> int | None:
        from deltalake import DeltaTable

        if not self.exists(table):
            return None
        return DeltaTable(self.table_uri(table), storage_options=self._options()).version()


COMMIT_TOKEN_KEY = "videolake.token"  # the attempt that wrote a commit's files (commit metadata)


def _as_date(value: Any) -> dt.date:
    """A partition value as the Delta log or a fragment's partition expression gives it (a date or its ISO text)."""
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


def _writer_properties(table: str) -> Any:
    """The ``deltalake.WriterProperties`` of the table's column encodings (``COLUMN_ENCODINGS``); None: defaults."""
    encodings = COLUMN_ENCODINGS.get(table)
    if not encodings:
        return None
    from deltalake import ColumnProperties, WriterProperties

    return WriterProperties(
        column_properties={
            column: ColumnProperties(dictionary_enabled=False, encoding=encoding)
            for column, encoding in encodings.items()
        }
    )


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal types, allowing for delta-rs reading strings and lists back as their large variants."""
    norm = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    if pa.types.is_large_list(a) or pa.types.is_list(a):
        return (pa.types.is_large_list(b) or pa.types.is_list(b)) and _same_type(a.value_type, b.value_type)
    return norm.get(a, a) == norm.get(b, b)


def conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Order, cast and complete columns to ``schema``; a missing non-nullable column is an error."""
    cols = []
    for f in schema:
        if f.name in data.column_names:
            cols.append(data.column(f.name).cast(f.type))
        elif f.nullable:
            cols.append(pa.nulls(data.num_rows, f.type))
        else:
            raise ValueError(f"missing required column {f.name!r}")
    # nullable=True on write: delta-rs checks nullability itself from the schema; we keep the declared one.
    return pa.Table.from_arrays(cols, schema=schema)


def rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """A pyarrow table from dict rows, columns in schema order (missing nullable keys become null)."""
    if not rows:
        return schema.empty_table()
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.Table.from_pydict(cols, schema=schema)
