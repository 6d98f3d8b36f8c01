"""The one execution model of every stage: units of work on Ray Data, checkpointed, then committed in one transaction.

    units (small descriptors, one per video or per batch of clips)
      -> Ray Data: a worker computes a unit and writes its rows as a Parquet checkpoint file    [stream, backpressure]
         (a unit whose checkpoint already exists is reused, not computed)
      -> the driver sees only one small summary per unit (counts, seconds)
      -> finalize: Ray tasks read the checkpoints of each partition, apply the stage's per-partition step (e.g.
         duplicate grouping), write the table's Parquet data files and return their paths + statistics
      -> commit: ONE Delta transaction adds those files and removes the previous files of the run's partitions

Checkpoints live at ``<lake>/_checkpoints/<table>/<stage code version>/partition_date=D/<unit key>.parquet``. The
code version hashes everything that changes a unit's rows (detector and its parameters, filter thresholds, model,
prompt, sampling ...), so a retry or re-run of the same partitions computes only the missing units, and a changed
setting reuses nothing. After a successful commit the checkpoints of other code versions of those partitions are
deleted; the current ones stay, so re-materializing unchanged partitions costs only the commit.

Why checkpoints are separate files from the table's data files: the finalize step turns many small unit files into
few table files (readers of a day with 10^5 videos should not open 10^5 files), and it is where per-partition logic
runs (duplicates across videos of a day). Rows are metadata (bytes per clip) next to the video they describe
(megabytes per clip), so writing them twice costs nothing measurable at the reference scale.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa

from videolake.platform.lake.figures import ROW_COUNT
from videolake.platform.lake.files import RETENTION_HOURS, LakeFiles, past_retention
from videolake.platform.lake.schemas import PARTITION_COLUMN, PRIMARY_KEYS, TABLES
from videolake.platform.lake.table import DataFile, Lake, PartitionRange
from videolake.platform.runtime import telemetry
from videolake.platform.runtime.failures import TRANSIENT, failure_class
from videolake.platform.runtime.progress import StageReporter
from videolake.platform.runtime.unit_resources import UnitResources

log = logging.getLogger(__name__)

CHECKPOINT_DIR = "_checkpoints"
FAILURE_CLASS = "failure_class"  # the column every failure row classes itself in (platform/runtime/failures.py)
ROWS_KEY = "videolake.rows"  # checkpoint file metadata: its row count (a reused unit's count without reading it)
TRANSIENT_KEY = "videolake.transient"  # checkpoint file metadata: its transient failure rows (0: reusable)
FINALIZE_MAX_UNITS = 2000  # unit files per finalize task when the stage has no per-partition step
MAX_UNIT_ATTEMPTS = 3
LOST_WORKER = "worker_lost: the worker died on every attempt (crash or out of memory)"


_connector: Callable[[], None] | None = None


@contextmanager
def ray_connector(connect: Callable[[], None]) -> Iterator[None]:
    """Within this block, ``ensure_ray`` connects through ``connect`` (the orchestrator's Ray resource) the first
    time a stage has work: a day without work never starts or joins a Ray cluster."""
    global _connector
    saved, _connector = _connector, connect
    try:
        yield
    finally:
        _connector = saved


def ensure_ray(num_cpus: int | None = None) -> None:
    """Connect to Ray on first use: through the connector the caller set (Dagster's Ray resource), else by
    starting a local Ray."""
    import ray

    if ray.is_initialized():
        return
    if _connector is not None:
        _connector()
        return
    log.info("no Ray cluster connected: starting a local one")
    ray.init(
        address="local",  # a new one: with no address Ray would join $RAY_ADDRESS or a `ray start` cluster
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=True,
        **telemetry.local_ray_options(),
    )


def stage_version(*parts: Any) -> str:
    """A short hash of everything that changes a stage's rows (JSON-able parts)."""
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def unit_key(*parts: Any) -> str:
    """A deterministic, filesystem-safe unit key."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Checkpoints:
    """Where one stage version's unit checkpoints live (picklable: travels to the workers)."""

    files: LakeFiles
    table: str
    version: str

    def day_dir(self, day: str) -> str:
        return self.files.path(CHECKPOINT_DIR, self.table, self.version, f"{PARTITION_COLUMN}={day}")

    def unit_path(self, day: str, key: str) -> str:
        return f"{self.day_dir(day)}/{key}.parquet"

    def finished_keys(self, day: str) -> set[str]:
        """Keys of the units of ``day`` that have a checkpoint: one listing (one request on S3), not one per unit."""
        suffix = ".parquet"
        return {
            e.path.rsplit("/", 1)[-1][: -len(suffix)]
            for e in self.files.list(self.day_dir(day), recursive=False)
            if e.path.endswith(suffix)
        }

    def ledger_dir(self, run_key: str) -> str:
        return self.files.path(CHECKPOINT_DIR, self.table, self.version, "_ledger", run_key)

    def clear_other_versions(
        self, days: Iterable[str], *, retention_hours: float = RETENTION_HOURS, now_s: float | None = None
    ) -> int:
        """Delete the checkpoint files of other stage versions for these days (this run never reuses them) that
        are older than the retention; returns the files deleted. Younger ones stay: an attempt of the same day
        with other settings may still be running and finalize from them."""
        removed = 0
        for vdir in self.files.list_dirs(self.files.path(CHECKPOINT_DIR, self.table)):
            if vdir.rsplit("/", 1)[-1] == self.version:
                continue
            for day in days:
                for entry in self.files.list(f"{vdir}/{PARTITION_COLUMN}={day}", recursive=True):
                    if past_retention(entry.mtime_s, retention_hours, now_s):
                        self.files.delete(entry.path)
                        removed += 1
        return removed


@dataclass
class StageProgress:
    """Counts the driver accumulates from unit summaries (constant memory in the number of rows)."""

    units_total: int = 0
    units_reused: int = 0
    units_computed: int = 0
    units_retried: int = 0  # computed again because their checkpoint held a transient failure (part of computed)
    rows: int = 0
    compute_s: float = 0.0
    unit_errors: int = 0

    def add(self, s: dict) -> None:
        self.units_total += 1
        self.rows += int(s["rows"])
        if s["reused"]:
            self.units_reused += 1
        else:
            self.units_computed += 1
            self.compute_s += float(s["seconds"])
        if s.get("retried"):
            self.units_retried += 1
        if s.get("error"):
            self.unit_errors += 1

    def as_metadata(self) -> dict[str, int]:
        return {
            "units_total": self.units_total,
            "units_reused": self.units_reused,
            "units_computed": self.units_computed,
            "units_retried": self.units_retried,
        }


# ------------------------------------------------------------------------------------------------ unit worker


@dataclass(frozen=True)
class UnitTask:
    """What a Ray task runs for one unit: compute rows, write the checkpoint, return the summary.

    ``process(payload) -> list[dict]`` computes the unit's rows (without partition_date); if it raises,
    ``on_error(payload, message) -> list[dict]`` gives the rows that record the failure (a rejection), so a bad
    unit is a recorded row, never a crashed stage. Those rows get the exception's ``failure_class`` (rows that
    ``process`` itself returns set their own). A checkpoint holding a transient failure row is computed again by
    the next run of the stage version (``retried`` in the summary); one with only ok rows and permanent failures
    is reused.
    """

    checkpoints: Checkpoints
    schema: pa.Schema
    process: Callable[[dict], list[dict]]
    on_error: Callable[[dict, str], list[dict]]

    def record_lost(self, row: dict) -> dict:
        """Write the failure rows of a unit whose worker died on every retry (runs on the driver: one unit)."""
        out = _classed(self.on_error(json.loads(row["payload"]), LOST_WORKER), TRANSIENT)
        return self._write(row, out, 0.0, LOST_WORKER, retried=False)

    def _write(self, row: dict, out: list[dict], seconds: float, error: str | None, *, retried: bool) -> dict:
        from videolake.platform.lake.table import rows_to_table

        day, key = row["partition_date"], row["unit_key"]
        for r in out:
            r[PARTITION_COLUMN] = _date(day)
        table = rows_to_table(out, self.schema)
        failures = telemetry.failure_counts([r.get(FAILURE_CLASS) for r in out])
        transient = failures.get(TRANSIENT, 0)
        self.checkpoints.files.write_parquet(
            self.checkpoints.unit_path(day, key), table, {ROWS_KEY: str(table.num_rows), TRANSIENT_KEY: str(transient)}
        )
        summary = {
            "key": key,
            "partition_date": day,
            "reused": False,
            "rows": table.num_rows,
            "seconds": seconds,
            "error": error,
            "retried": retried,
        }
        telemetry.record_unit(self.checkpoints.table, summary, failures)
        return summary

    def __call__(self, row: dict) -> dict:

        day, key = row["partition_date"], row["unit_key"]
        path = self.checkpoints.unit_path(day, key)
        files = self.checkpoints.files
        retried = False
        if files.exists(path):
            meta = files.read_metadata(path)
            if int(meta.get(TRANSIENT_KEY, "0")) == 0:
                rows = int(meta.get(ROWS_KEY, "0"))
                summary = {
                    "key": key,
                    "partition_date": day,
                    "reused": True,
                    "rows": rows,
                    "seconds": 0.0,
                    "error": None,
                    "retried": False,
                }
                telemetry.record_unit(self.checkpoints.table, summary)
                return summary
            retried = True  # the last attempt failed in a way that can heal: compute it again
        payload = json.loads(row["payload"])
        t0 = time.perf_counter()
        error = None
        try:
            out = self.process(payload)
        except Exception as exc:  # noqa: BLE001 - recorded as rows with the reason
            error = f"{type(exc).__name__}: {exc}"
            log.warning("unit %s failed (%s): %s\n%s", key, failure_class(exc), error, traceback.format_exc())
            out = _classed(self.on_error(payload, error), failure_class(exc))
        return self._write(row, out, time.perf_counter() - t0, error, retried=retried)


def _classed(rows: list[dict], cls: str) -> list[dict]:
    """Failure rows of one unit with the failure class of what failed (a class the rows set themselves is kept)."""
    for r in rows:
        if r.get(FAILURE_CLASS) is None:
            r[FAILURE_CLASS] = cls
    return rows


class LostUnitsError(RuntimeError):
    """Many units' workers died: a lost node or cluster (worth a retry: the finished units are reused) or broken
    stage code (the retry fails the same way, and the error names it)."""


@contextmanager
def _unit_context() -> Iterator[None]:
    """Ray Data settings for a one-operator unit pipeline, restored afterwards (the context is process-wide).

    - A unit whose worker died on every retry (a decoder segfault on one odd file) must not fail the stage: its
      block is let go and the unit is recorded as a failure row, like any other unit error.
    - No resource reservation: Ray Data reserves half of the cluster for an operator's downstream by default,
      which a pipeline of one map operator does not have. With it, the map ran one task at a time for its first
      seconds and waited ~0.15 s between tasks: 2 Ray CPUs gave 1.46x the throughput of 1 on a 16-unit day;
      without it, 1.98x (a 1 s CPU-bound unit, ``videolake bench ray`` measures the real stage).
    """
    import ray.data

    ctx = ray.data.DataContext.get_current()
    saved = (ctx.max_errored_blocks, ctx.enable_progress_bars, ctx.op_resource_reservation_enabled)
    ctx.max_errored_blocks = -1
    ctx.enable_progress_bars = False
    ctx.op_resource_reservation_enabled = False
    try:
        yield
    finally:
        ctx.max_errored_blocks, ctx.enable_progress_bars, ctx.op_resource_reservation_enabled = saved


@contextmanager
def _queue_drained(stage: str) -> Iterator[None]:
    """The stage's queue-depth gauge reads 0 once its unit loop ends, however it ends."""
    try:
        yield
    finally:
        telemetry.record(telemetry.QUEUE_DEPTH, 0, stage=stage)


def max_lost_units(n_units: int) -> int:
    """How many units may die in their workers before the stage counts as broken: 2, or 1 % of a large run."""
    return max(2, n_units // 100)


def run_units(
    units: list[dict],
    task: UnitTask,
    *,
    resources: UnitResources = UnitResources(),
    progress: StageReporter | None = None,
    stage: str | None = None,
) -> StageProgress:
    """Run ``task`` over ``units`` (dicts with unit_key, partition_date, payload JSON) on Ray Data, each unit's task
    with ``resources``. ``progress`` writes the ``k/N units`` lines (N = len(units); a heartbeat while it runs).
    ``stage``: the metrics' stage label (the table the units write; default: the progress reporter's name).

    Streaming: Ray Data schedules the tasks with backpressure and hands the driver one small summary per unit as
    it finishes; nothing else comes back. Ray re-runs a task whose worker died; a unit lost on every attempt is
    recorded as failure rows (``on_error`` with LOST_WORKER), never dropped.
    """
    prog = StageProgress()
    if not units:
        return prog
    import ray
    import ray.data

    ensure_ray()
    seen: set[str] = set()
    report = progress or StageReporter("units", None)
    report.plan(len(units))
    stage = stage or report.stage
    telemetry.record(telemetry.QUEUE_DEPTH, len(units), stage=stage)
    with _unit_context(), report, _queue_drained(stage):
        ds: ray.data.Dataset = ray.data.from_items(units, override_num_blocks=len(units))
        # Ray Data retries a task whose worker died forever by default: a file that crashes its decoder would then
        # hang the stage. Three attempts, then the unit is recorded as lost (below). max_retries has no named
        # parameter in Ray 2.60, hence the (deprecated) remote-args keyword.
        ds = ds.map(task, max_retries=MAX_UNIT_ATTEMPTS - 1, **resources.ray_args())
        for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0):
            for s in cast(pa.Table, batch).to_pylist():  # batch_format="pyarrow" (Ray types any batch format)
                prog.add(s)
                seen.add(s["key"])
            report.update(prog.units_total, reused=prog.units_reused, computed=prog.units_computed)
            telemetry.record(telemetry.QUEUE_DEPTH, len(units) - prog.units_total, stage=stage)
    lost = [u for u in units if u["unit_key"] not in seen]
    if len(lost) > max_lost_units(len(units)):
        # Not one odd file: the stage itself is broken (bad code in the workers, a lost cluster). Fail the step
        # (transient causes are retried by the step's retry policy) instead of rejecting every video.
        raise LostUnitsError(
            f"{len(lost)} of {len(units)} units failed in their Ray workers (see the Ray worker "
            "logs); more than a few lost units means the stage or the cluster, not one input, "
            "is broken"
        )
    for u in lost:  # its worker died on every attempt (a decoder crash on one odd file)
        log.error("unit %s: worker lost on every attempt; recording it as failed", u["unit_key"])
        prog.add(task.record_lost(u))
    report.finish(prog.units_total, reused=prog.units_reused, computed=prog.units_computed)
    return prog


# ------------------------------------------------------------------------------------------------- finalize


@dataclass(frozen=True)
class PartitionStep:
    """Per-partition logic a stage runs at finalize (on a Ray worker): rows of one day in, rows of one day out,
    plus a small dict of that day's figures for the UI. Default: rows as they are, figures = row count.

    ``reduce`` sees every row of the day in one task. A day-wide decision that needs only a few columns of each row
    (the near-duplicate verdicts) is a ``decide`` instead: it gets the day's ``decide_columns`` (read narrow from
    every unit file, in one task) and returns them for the same rows with the values it decided, keyed by the
    table's key; the rows are then rewritten with those values in tasks of at most FINALIZE_MAX_UNITS unit files,
    so no task holds the day's whole rows. ``summarize`` then reads the decided columns (the day's figures must be
    figures of those columns)."""

    reduce: Callable[[pa.Table], pa.Table] | None = None
    summarize: Callable[[pa.Table], dict] | None = None
    decide: Callable[[pa.Table], pa.Table] | None = None
    decide_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class FinalizeResult:
    files: list[DataFile]
    per_partition: dict[str, dict] = field(default_factory=dict)


def _finalize_part(
    checkpoints: Checkpoints,
    table: str,
    day: str,
    paths: list[str],
    token: str,
    part: int,
    step: PartitionStep,
    extra_columns: tuple[str, ...] = (),
    decided: pa.Table | None = None,
) -> tuple[list[DataFile], dict]:
    files = checkpoints.files
    schema = TABLES[table]
    if paths:
        tables = [files.read_parquet(p) for p in paths]
        data = pa.concat_tables(tables, promote_options="permissive")
    else:
        data = schema.empty_table()
    if decided is not None:  # the day's figures came with the decision (``_decide_day``)
        data, summary = _apply_decided(data, decided, list(PRIMARY_KEYS[table])), {}
    else:
        if step.reduce is not None:
            data = step.reduce(data)
        summary = step.summarize(data) if step.summarize else {}
        summary = {ROW_COUNT: data.num_rows, **summary}
    from videolake.platform.lake.table import conform

    data = conform(data.select([c for c in data.column_names if c in schema.names or c in extra_columns]), schema)
    if data.num_rows == 0:
        return [], summary
    data = data.sort_by([(k, "ascending") for k in PRIMARY_KEYS[table]]).drop_columns([PARTITION_COLUMN])
    rel = f"{PARTITION_COLUMN}={day}/part-{token}-{part:05d}.parquet"
    size = files.write_parquet(files.path(table, rel), data)
    return [DataFile(path=rel, size=size, partition_date=day, rows=data.num_rows, stats=file_stats(data))], summary


def _decide_day(checkpoints: Checkpoints, table: str, day: str, paths: list[str], step: PartitionStep) -> tuple:
    """A day's ``step.decide`` over its unit files' ``decide_columns`` only, and the day's figures of the result."""
    import pyarrow.parquet as pq

    schema = TABLES[table]
    wanted = list(step.decide_columns)
    parts = []
    for p in paths:
        present = set(pq.read_schema(p, filesystem=checkpoints.files.fs).names)
        parts.append(checkpoints.files.read_parquet(p, columns=[c for c in wanted if c in present]))
    empty = pa.schema([schema.field(c) for c in wanted if c in schema.names]).empty_table()
    narrow = pa.concat_tables([empty, *parts], promote_options="permissive")
    decided = step.decide(narrow) if step.decide else narrow
    summary = step.summarize(decided) if step.summarize else {}
    return decided, {ROW_COUNT: decided.num_rows, **summary}


def _apply_decided(data: pa.Table, decided: pa.Table, key: list[str]) -> pa.Table:
    """``data`` with the columns of ``decided`` (rows matched by ``key``, a single column) set from it."""
    import pyarrow.compute as pc

    (k,) = key
    at = pc.index_in(data.column(k), value_set=decided.column(k))
    if at.null_count:
        raise ValueError(f"{at.null_count} rows of {k} have no decided values")
    for name in decided.column_names:
        if name == k:
            continue
        column = decided.column(name).take(at)
        if name in data.column_names:
            data = data.set_column(data.column_names.index(name), name, column)
        else:
            data = data.append_column(name, column)
    return data


def finalize(
    lake: Lake,
    checkpoints: Checkpoints,
    table: str,
    unit_paths_by_day: dict[str, list[str]],
    step: PartitionStep = PartitionStep(),
) -> tuple[FinalizeResult, str]:
    """Turn each day's unit checkpoints into table data files, on Ray workers; returns the files and a token.

    With a per-partition reduce the whole day is one task (its logic needs every row of the day); without one,
    a day is split into tasks of at most FINALIZE_MAX_UNITS unit files, so no task's memory grows with the day's
    rows: a ``decide`` step reads only its narrow columns of the whole day (one task a day), then the rows are
    rewritten in those bounded tasks.
    """
    token = uuid.uuid4().hex[:16]
    on_ray = any(unit_paths_by_day.values())
    days = sorted(unit_paths_by_day)
    decided: dict[str, tuple] = {}
    if step.decide is not None:
        args = [(checkpoints, table, d, unit_paths_by_day[d], step) for d in days]
        decided = dict(zip(days, call_each(_decide_day, args, on_ray=on_ray)))
    calls: list[Any] = []
    days_of: list[str] = []
    for day in days:
        paths = unit_paths_by_day[day]
        chunk = len(paths) if step.reduce is not None else FINALIZE_MAX_UNITS
        chunks = [paths[i : i + chunk] for i in range(0, len(paths), max(chunk, 1))] or [[]]
        for group in chunks:
            calls.append(
                (checkpoints, table, day, group, token, len(calls), step, (), decided[day][0] if decided else None)
            )
            days_of.append(day)
    results = call_each(_finalize_part, calls, on_ray=on_ray)
    files: list[DataFile] = []
    per_day: dict[str, dict] = {day: dict(found[1]) for day, found in decided.items()}
    for day, (fs_, summary) in zip(days_of, results):
        files.extend(fs_)
        merged = per_day.setdefault(day, {})
        for k, v in summary.items():
            merged[k] = merged.get(k, 0) + v if isinstance(v, (int, float)) and not isinstance(v, bool) else v
    return FinalizeResult(files=files, per_partition=per_day), token


def call_each(fn: Callable[..., Any], calls: list[tuple], *, on_ray: bool, num_cpus: float = 0.5) -> list[Any]:
    """``fn(*args)`` for each args tuple: as Ray tasks, or here when ``on_ray`` is false (no unit to read: a day
    without work never starts or joins a Ray cluster, which costs seconds, for a few empty calls)."""
    if not on_ray:
        return [fn(*args) for args in calls]
    import ray

    ensure_ray()
    remote = ray.remote(num_cpus=num_cpus, max_retries=3)(fn)
    return ray.get([remote.remote(*args) for args in calls])


def file_stats(table: pa.Table) -> str:
    """Delta per-file statistics (numRecords, min/max of scalar columns, null counts) for data skipping."""
    import pyarrow.compute as pc

    mins, maxs, nulls = {}, {}, {}
    for name, col in zip(table.column_names, table.columns):
        nulls[name] = col.null_count
        t = col.type
        if pa.types.is_string(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            mm = pc.min_max(col).as_py()
            if mm["min"] is not None:
                if pa.types.is_floating(t) and (mm["min"] != mm["min"] or mm["max"] != mm["max"]):
                    continue  # NaN: no usable bounds
                mins[name], maxs[name] = mm["min"], mm["max"]
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}, default=str
    )


def commit_stage(
    lake: Lake,
    checkpoints: Checkpoints,
    table: str,
    partitions: PartitionRange,
    unit_keys_by_day: dict[str, list[str]],
    step: PartitionStep = PartitionStep(),
):
    """Finalize the run's units into data files and commit them; then drop other versions' checkpoints."""
    paths = {day: [checkpoints.unit_path(day, k) for k in sorted(keys)] for day, keys in unit_keys_by_day.items()}
    for d in partitions.days():
        paths.setdefault(d.isoformat(), [])
    result, token = finalize(lake, checkpoints, table, paths, step)
    write = lake.commit_files(table, result.files, partitions, token=token)
    checkpoints.clear_other_versions([d.isoformat() for d in partitions.days()])
    return write, result.per_partition


def _date(day: str):
    import datetime as dt

    return dt.date.fromisoformat(day)
