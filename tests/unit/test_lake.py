"""Delta IO: partition-exact overwrites, partition pruning on read, rejects rows outside the run's range."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from videolake.platform.lake.schemas import RAW_VIDEOS
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def _rows(day: str, ids: list[str]) -> list[dict]:
    return [
        dict(
            video_id=i,
            source_uri=f"file:///{i}",
            size_bytes=10,
            status="ok",
            ingested_at=NOW,
            partition_date=dt.date.fromisoformat(day),
            duplicate_uris=[],
        )
        for i in ids
    ]


def _ids(lake: Lake, days: list[str]) -> list[str]:
    return sorted(lake.read_partitions("raw_videos", PartitionRange.of(days)).column("video_id").to_pylist())


def test_overwrite_replaces_only_the_runs_partitions(tmp_path):
    lake = Lake(str(tmp_path))
    both = PartitionRange.of(["2026-01-01", "2026-01-02"])
    w = lake.write_partitions(
        "raw_videos", rows_to_table(_rows("2026-01-01", ["a", "b"]) + _rows("2026-01-02", ["c"]), RAW_VIDEOS), both
    )
    assert (w.rows, w.version) == (3, 0)
    # re-run of day 2 with different content: day 1 untouched, day 2 replaced, no duplicates
    w = lake.write_partitions(
        "raw_videos", rows_to_table(_rows("2026-01-02", ["c", "d"]), RAW_VIDEOS), PartitionRange.of(["2026-01-02"])
    )
    assert w.version == 1
    assert _ids(lake, ["2026-01-01"]) == ["a", "b"]
    assert _ids(lake, ["2026-01-02"]) == ["c", "d"]
    # same input again: identical rows (idempotent)
    lake.write_partitions(
        "raw_videos", rows_to_table(_rows("2026-01-02", ["c", "d"]), RAW_VIDEOS), PartitionRange.of(["2026-01-02"])
    )
    assert _ids(lake, ["2026-01-01", "2026-01-02"]) == ["a", "b", "c", "d"]
    # an empty result empties exactly that partition
    lake.write_partitions("raw_videos", RAW_VIDEOS.empty_table(), PartitionRange.of(["2026-01-02"]))
    assert _ids(lake, ["2026-01-01", "2026-01-02"]) == ["a", "b"]


def test_rows_outside_the_range_are_refused(tmp_path):
    lake = Lake(str(tmp_path))
    with pytest.raises(ValueError, match="outside the run's range"):
        lake.write_partitions(
            "raw_videos", rows_to_table(_rows("2026-01-05", ["x"]), RAW_VIDEOS), PartitionRange.of(["2026-01-01"])
        )


def test_read_of_missing_table_is_empty_with_schema(tmp_path):
    t = Lake(str(tmp_path)).read_partitions("raw_videos", PartitionRange.of(["2026-01-01"]))
    assert t.num_rows == 0 and t.schema == RAW_VIDEOS


def test_partition_range():
    r = PartitionRange.of(["2026-01-03", "2026-01-01", "2026-01-02"])
    assert r.days() == [dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)]
    assert r.predicate() == "partition_date >= '2026-01-01' AND partition_date < '2026-01-04'"


def test_missing_required_column_is_an_error():
    with pytest.raises(ValueError, match="video_id"):
        from videolake.platform.lake.table import conform

        conform(pa.table({"source_uri": ["x"]}), RAW_VIDEOS)


def test_partition_range_refuses_gaps():
    """Keys with a gap would make one predicate that overwrites the missing days: refused, with the days named."""
    with pytest.raises(
        ValueError,
        match=r"not contiguous: 2 separate ranges \(2026-03-01, 2026-03-05\); missing "
        r"2026-03-02, 2026-03-03, 2026-03-04\.",
    ):
        PartitionRange.of(["2026-03-01", "2026-03-05"])
    with pytest.raises(ValueError, match="3 separate ranges"):
        PartitionRange.of(["2026-01-01", "2026-01-02", "2026-01-04", "2026-01-09"])
    with pytest.raises(ValueError, match="no partition keys"):
        PartitionRange.of([])
    # repeats and any order are fine when the days are contiguous
    assert PartitionRange.of(["2026-01-02", "2026-01-01", "2026-01-02"]) == PartitionRange(
        dt.date(2026, 1, 1), dt.date(2026, 1, 3)
    )
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
        "2026-03-01..2026-03-02",
        "2026-03-04",
    ]


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


HEAD_AND_EXIT = """
import sys
from videolake.platform.lake.table import Lake, PartitionRange
days = [f"2026-02-{d:02d}" for d in range(1, 9)]
lake = Lake(sys.argv[1])
t = lake.head("raw_videos", PartitionRange.of(days), 3, ["video_id", "partition_date"])
print(" ".join(f"{r['video_id']}@{r['partition_date']}" for r in t.to_pylist()))
print(lake.read_partitions("raw_videos", PartitionRange.of(days[:2]), ["video_id"]).num_rows)
"""


@pytest.mark.slow
def test_head_returns_n_rows_of_the_range_and_the_process_exits_cleanly(tmp_path):
    """A preview reads whole files: a half-consumed Arrow scanner (``Dataset.head``) leaves read-ahead running, and a
    process that exits then dies of SIGSEGV/SIGABRT (it did, in `videolake demo`, 5 of 5 times on this table).
    Any threaded read through delta-rs's Python filesystem handler could abort at exit too (a full
    ``read_partitions``: 20 of 30 processes; a whole-fragment read: 11 of 30), so the lake reads through pyarrow's
    own filesystem and this child process does both."""
    import subprocess
    import sys

    lake = Lake(str(tmp_path))
    days = [f"2026-02-{d:02d}" for d in range(1, 9)]
    for day in days:  # 8 files of 20,000 rows: the scanner has read-ahead in flight when head() has its rows
        ids = [f"{day}-{i:05d}" for i in range(20_000)]
        lake.write_partitions("raw_videos", rows_to_table(_rows(day, ids), RAW_VIDEOS), PartitionRange.of([day]))
    lake.write_partitions(
        "raw_videos", rows_to_table(_rows("2026-02-09", ["outside"]), RAW_VIDEOS), PartitionRange.of(["2026-02-09"])
    )

    one = lake.head("raw_videos", PartitionRange.of(["2026-02-03"]), 2, ["video_id", "partition_date"])
    assert one.to_pylist() == [
        {"video_id": "2026-02-03-00000", "partition_date": dt.date(2026, 2, 3)},
        {"video_id": "2026-02-03-00001", "partition_date": dt.date(2026, 2, 3)},
    ]
    assert lake.head("raw_videos", PartitionRange.of(["2026-03-01"]), 2, ["video_id"]).num_rows == 0
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", HEAD_AND_EXIT, str(tmp_path)], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        *rows, read = out.stdout.split()
        assert read == "40000", out.stdout  # two whole days
        assert len(rows) == 3 and len(set(rows)) == 3, out.stdout
        assert all(r.split("@")[0].rsplit("-", 1)[0] == r.split("@")[1] for r in rows), rows  # id matches its day
        assert all(r.split("@")[1] in days for r in rows), rows  # never the day outside the range


def test_a_tables_column_encodings_apply_to_every_write_and_each_file_reads_back_with_its_day(tmp_path):
    """near_dup_index.band_key is delta-encoded (schemas.COLUMN_ENCODINGS) whoever writes it; other columns and
    tables keep Parquet's defaults. day_fragments names each data file's day."""
    import pyarrow.parquet as pq

    from videolake.platform.lake.schemas import NEAR_DUP_INDEX

    lake = Lake(str(tmp_path))
    days = [dt.date(2026, 1, 1), dt.date(2026, 1, 2)]
    idx = pa.table(
        {
            "band_key": pa.array(list(range(0, 3000, 3)) * 2, pa.int64()),
            "clip_key": pa.array([7] * 1000 + [8] * 1000, pa.int64()),
            "partition_date": pa.array([days[0]] * 1000 + [days[1]] * 1000, pa.date32()),
        }
    )
    lake.write_partitions(
        "near_dup_index", idx.select(NEAR_DUP_INDEX.names), PartitionRange.of(["2026-01-01", "2026-01-02"])
    )
    lake.write_partitions(
        "raw_videos", rows_to_table(_rows("2026-01-01", ["a"]), RAW_VIDEOS), PartitionRange.of(["2026-01-01"])
    )

    def encodings(table: str, column: str) -> set[str]:
        found = set()
        for path in (tmp_path / table).rglob("*.parquet"):
            meta = pq.ParquetFile(path).metadata.row_group(0)
            names = [meta.column(i).path_in_schema for i in range(meta.num_columns)]
            found |= set(meta.column(names.index(column)).encodings)
        return found

    assert "DELTA_BINARY_PACKED" in encodings("near_dup_index", "band_key")
    assert "DELTA_BINARY_PACKED" not in encodings("near_dup_index", "clip_key")
    assert "DELTA_BINARY_PACKED" not in encodings("raw_videos", "size_bytes")
    seen = sorted(
        (day, fragment.to_table(columns=["clip_key"]).column(0).unique().to_pylist())
        for day, fragment in lake.day_fragments("near_dup_index")
    )
    assert seen == [(days[0], [7]), (days[1], [8])]
