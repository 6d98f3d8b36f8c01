"""Delta IO: partition-exact overwrites, partition pruning on read, rejects rows outside the run's range."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from videolake.platform.lake import Lake, PartitionRange, rows_to_table
from videolake.platform.schemas import RAW_VIDEOS

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)


def _rows(day: str, ids: list[str]) -> list[dict]:
    return [
        dict(video_id=i, source_uri=f"file:///{i}", size_bytes=10, status="ok", ingested_at=NOW,
             partition_date=dt.date.fromisoformat(day), duplicate_uris=[])
        for i in ids
    ]


def _ids(lake: Lake, days: list[str]) -> list[str]:
    return sorted(lake.read_partitions("raw_videos", PartitionRange.of(days)).column("video_id").to_pylist())


def test_overwrite_replaces_only_the_runs_partitions(tmp_path):
    lake = Lake(str(tmp_path))
    both = PartitionRange.of(["2026-01-01", "2026-01-02"])
    w = lake.write_partitions("raw_videos", rows_to_table(_rows("2026-01-01", ["a", "b"]) + _rows("2026-01-02", ["c"]), RAW_VIDEOS), both)
    assert (w.rows, w.version) == (3, 0)
    # re-run of day 2 with different content: day 1 untouched, day 2 replaced, no duplicates
    w = lake.write_partitions("raw_videos", rows_to_table(_rows("2026-01-02", ["c", "d"]), RAW_VIDEOS), PartitionRange.of(["2026-01-02"]))
    assert w.version == 1
    assert _ids(lake, ["2026-01-01"]) == ["a", "b"]
    assert _ids(lake, ["2026-01-02"]) == ["c", "d"]
    # same input again: identical rows (idempotent)
    lake.write_partitions("raw_videos", rows_to_table(_rows("2026-01-02", ["c", "d"]), RAW_VIDEOS), PartitionRange.of(["2026-01-02"]))
    assert _ids(lake, ["2026-01-01", "2026-01-02"]) == ["a", "b", "c", "d"]
    # an empty result empties exactly that partition
    lake.write_partitions("raw_videos", RAW_VIDEOS.empty_table(), PartitionRange.of(["2026-01-02"]))
    assert _ids(lake, ["2026-01-01", "2026-01-02"]) == ["a", "b"]


def test_rows_outside_the_range_are_refused(tmp_path):
    lake = Lake(str(tmp_path))
    with pytest.raises(ValueError, match="outside the run's range"):
        lake.write_partitions("raw_videos", rows_to_table(_rows("2026-01-05", ["x"]), RAW_VIDEOS), PartitionRange.of(["2026-01-01"]))


def test_read_of_missing_table_is_empty_with_schema(tmp_path):
    t = Lake(str(tmp_path)).read_partitions("raw_videos", PartitionRange.of(["2026-01-01"]))
    assert t.num_rows == 0 and t.schema == RAW_VIDEOS


def test_partition_range():
    r = PartitionRange.of(["2026-01-03", "2026-01-01", "2026-01-02"])
    assert r.days() == [dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)]
    assert r.predicate() == "partition_date >= '2026-01-01' AND partition_date < '2026-01-04'"


def test_missing_required_column_is_an_error():
    with pytest.raises(ValueError, match="video_id"):
        from videolake.platform.lake import conform

        conform(pa.table({"source_uri": ["x"]}), RAW_VIDEOS)


def test_partition_range_refuses_gaps():
    """Keys with a gap would make one predicate that overwrites the missing days: refused, with the days named."""
    with pytest.raises(ValueError, match=r"not contiguous: 2 separate ranges \(2026-03-01, 2026-03-05\); missing "
                                         r"2026-03-02, 2026-03-03, 2026-03-04\."):
        PartitionRange.of(["2026-03-01", "2026-03-05"])
    with pytest.raises(ValueError, match="3 separate ranges"):
        PartitionRange.of(["2026-01-01", "2026-01-02", "2026-01-04", "2026-01-09"])
    with pytest.raises(ValueError, match="no partition keys"):
        PartitionRange.of([])
    # repeats and any order are fine when the days are contiguous
    assert PartitionRange.of(["2026-01-02", "2026-01-01", "2026-01-02"]) == PartitionRange(dt.date(2026, 1, 1),
                                                                                          dt.date(2026, 1, 3))
    # across a month and a year end
    assert PartitionRange.of(["2025-12-31", "2026-01-01"]).days() == [dt.date(2025, 12, 31), dt.date(2026, 1, 1)]


def test_partition_range_split():
    d = dt.date
    keys = ["2026-03-05", "2026-03-01", "2026-03-02", "2026-03-06", "2026-03-01", "2026-03-09"]
    assert PartitionRange.split(keys) == [
        PartitionRange(d(2026, 3, 1), d(2026, 3, 3)),
        PartitionRange(d(2026, 3, 5), d(2026, 3, 7)),
        PartitionRange(d(2026, 3, 9), d(2026, 3, 10)),
    ]
    assert PartitionRange.split([]) == []
    assert [str(r) for r in PartitionRange.split(["2026-03-01", "2026-03-02", "2026-03-04"])] == [
        "2026-03-01..2026-03-02", "2026-03-04"]


def test_non_contiguous_overwrite_leaves_the_days_between_untouched(tmp_path):
    """Writing days 1 and 5 range by range (split) replaces exactly those two days; days 2-4 keep their rows."""
    lake = Lake(str(tmp_path))
    days = [f"2026-03-0{i}" for i in range(1, 6)]
    first = rows_to_table([r for i, day in enumerate(days) for r in _rows(day, [f"old{i}"])], RAW_VIDEOS)
    lake.write_partitions("raw_videos", first, PartitionRange.of(days))
    for rng in PartitionRange.split(["2026-03-01", "2026-03-05"]):
        day = rng.start.isoformat()
        lake.write_partitions("raw_videos", rows_to_table(_rows(day, [f"new-{day}"]), RAW_VIDEOS), rng)
    assert _ids(lake, days) == ["new-2026-03-01", "new-2026-03-05", "old1", "old2", "old3"]
