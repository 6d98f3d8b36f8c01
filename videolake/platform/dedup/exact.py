"""Exact duplicates across days: a video whose bytes were landed on an earlier day is a copy, not a new video.

raw_videos' ``video_id`` is the sha256 of the bytes, so a copy has the same video_id as its original. Within a day,
``stages.ingest.merge_duplicates`` keeps one row per video_id and lists the other objects in ``duplicate_uris``.
Across days, the **original** of a video is its earliest non-rejected row by (partition_date, source_uri); every
other non-rejected row of that video_id gets status ``duplicate`` with ``duplicate_of_date`` and
``duplicate_of_uri`` naming the original, and yields no clip (scene_clips cuts ok videos only). The probe columns
stay as they were, so a copy turns ``ok`` again when its original goes away.

Order of materialization: ``reconcile_copies`` runs after every raw_videos commit over the rows that can change (the
run's video ids, and the rows that named a run day as their original), in EVERY partition. When an earlier day is
materialized after a later one, or re-materialized with other objects, the later days' rows are re-evaluated in
place and the days whose rows changed are returned: the asset records a materialization for each of them, so Dagster
shows their downstream partitions as changed upstream (stale) until they are materialized again. The verdicts of a
set of days are therefore the same in any order.

Runs at the same time: the judgement is one optimistic transaction (``lake_transaction.transact``): its rows are
read at one table version and the rewritten days commit on top of that version only, else it is made again from a
fresh read. So a day another run commits meanwhile is never reverted, and of two runs' judgements the one that
commits last has read the other's rows: the verdicts are those of some order of the runs, which are all the same.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.lake.schemas import PARTITION_COLUMN
from videolake.platform.lake.table import PartitionRange

log = logging.getLogger(__name__)

TABLE = "raw_videos"
STATUS_OK = "ok"
STATUS_DUPLICATE = "duplicate"
STATUS_REJECTED = "rejected"
COLUMNS = ["video_id", "source_uri", "status", "duplicate_of_date", "duplicate_of_uri", PARTITION_COLUMN]


@dataclass
class Reconciled:
    """What ``reconcile_copies`` changed."""

    changed_days: list[str] = field(default_factory=list)  # every day whose rows changed (run days included)
    outside_run: list[str] = field(default_factory=list)  # of those, the days the run did not materialize
    rows_changed: int = 0


def verdicts(rows: pa.Table) -> pa.Table:
    """The expected (status, duplicate_of_date, duplicate_of_uri) of every non-rejected row of ``rows`` (which hold
    every non-rejected row of their video ids): columns video_id, partition_date, source_uri and the three expected
    values. Vectorized: one sort, no per-row Python."""
    rows = rows.filter(pc.not_equal(rows.column("status"), STATUS_REJECTED))
    rows = rows.sort_by([("video_id", "ascending"), (PARTITION_COLUMN, "ascending"), ("source_uri", "ascending")])
    ids = rows.column("video_id").to_numpy(zero_copy_only=False).astype(object)
    n = len(ids)
    first = np.ones(n, dtype=bool)
    if n > 1:
        first[1:] = ids[1:] != ids[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0)) if n else np.zeros(0, dtype=np.int64)
    original = pa.array(start, pa.int64())
    dates = rows.column(PARTITION_COLUMN).take(original)
    uris = rows.column("source_uri").take(original)
    is_copy = pa.array(~first)
    null_date = pa.nulls(n, pa.date32())
    null_uri = pa.nulls(n, pa.string())
    return pa.table(
        {
            "video_id": rows.column("video_id"),
            PARTITION_COLUMN: rows.column(PARTITION_COLUMN),
            "source_uri": rows.column("source_uri"),
            "status": pc.if_else(is_copy, STATUS_DUPLICATE, STATUS_OK),
            "duplicate_of_date": pc.if_else(is_copy, dates, null_date),
            "duplicate_of_uri": pc.if_else(is_copy, uris, null_uri),
            "was_status": rows.column("status"),
            "was_date": rows.column("duplicate_of_date"),
            "was_uri": rows.column("duplicate_of_uri"),
        }
    )


def _changed(v: pa.Table) -> pa.Table:
    def differs(a: str, b: str) -> pa.Array:
        x, y = v.column(a), v.column(b)
        return pc.or_(pc.fill_null(pc.not_equal(x, y), False), pc.xor(pc.is_null(x), pc.is_null(y)))

    mask = pc.or_(
        pc.or_(differs("status", "was_status"), differs("duplicate_of_date", "was_date")),
        differs("duplicate_of_uri", "was_uri"),
    )
    return v.filter(mask)


def reconcile_copies(lake: Any, run: PartitionRange, *, decided_by: str = "") -> Reconciled:
    """Bring every row that the run's days can affect to its verdict (module docstring) and rewrite the days whose
    rows changed, in one optimistic transaction. Reads only the candidate rows (a filtered scan of a few columns);
    returns what changed. ``decided_by`` (a run id) is recorded in the commit."""
    from videolake.platform.lake.transaction import transact

    return transact(lake, TABLE, lambda tx: _reconcile(tx, run), decided_by=decided_by)


def _reconcile(lake: Any, run: PartitionRange) -> Reconciled:
    out = Reconciled()
    if not lake.exists(TABLE):
        return out
    run_days = [d for d in run.days()]
    ids = lake.read_partitions(TABLE, run, columns=["video_id", "status"])
    ids = pc.unique(ids.filter(pc.not_equal(ids.column("status"), STATUS_REJECTED)).column("video_id"))
    expr = pc.field("video_id").isin(ids) | pc.field("duplicate_of_date").isin(pa.array(run_days, pa.date32()))
    candidates = lake.read_where(TABLE, COLUMNS, expr)
    # Every row of the videos involved, in any day (a former copy whose original left may now be the original).
    involved = pc.unique(candidates.column("video_id"))
    rows = lake.read_where(TABLE, COLUMNS, pc.field("video_id").isin(involved))
    changed = _changed(verdicts(rows))
    if changed.num_rows == 0:
        return out
    by_day: dict[dt.date, dict[str, tuple]] = {}
    for r in changed.select(
        ["video_id", PARTITION_COLUMN, "status", "duplicate_of_date", "duplicate_of_uri"]
    ).to_pylist():
        by_day.setdefault(r[PARTITION_COLUMN], {})[r["video_id"]] = (
            r["status"],
            r["duplicate_of_date"],
            r["duplicate_of_uri"],
        )
    for rng in PartitionRange.split([d.isoformat() for d in by_day]):
        day_rows = lake.read_partitions(TABLE, rng)
        vid = day_rows.column("video_id").to_pylist()
        days = day_rows.column(PARTITION_COLUMN).to_pylist()
        status = day_rows.column("status").to_pylist()
        dup_date = day_rows.column("duplicate_of_date").to_pylist()
        dup_uri = day_rows.column("duplicate_of_uri").to_pylist()
        for i, (v, d) in enumerate(zip(vid, days)):
            new = by_day.get(d, {}).get(v)
            if new is not None and status[i] != STATUS_REJECTED:
                status[i], dup_date[i], dup_uri[i] = new
        for name, values in (("status", status), ("duplicate_of_date", dup_date), ("duplicate_of_uri", dup_uri)):
            idx = day_rows.schema.get_field_index(name)
            day_rows = day_rows.set_column(
                idx, day_rows.schema.field(name), pa.array(values, day_rows.schema.field(name).type)
            )
        lake.write_partitions(TABLE, day_rows, rng)
    out.rows_changed = changed.num_rows
    out.changed_days = sorted(d.isoformat() for d in by_day)
    out.outside_run = [d for d in out.changed_days if dt.date.fromisoformat(d) not in set(run_days)]
    log.info("raw_videos: %d rows re-evaluated as copies or originals in %s", out.rows_changed, out.changed_days)
    return out
