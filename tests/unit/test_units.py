"""The unit execution model: checkpointed units on Ray Data, resume, one transactional commit, files left to the vacuum.

Process functions run in Ray workers, so they record each call as a file in a folder the test reads afterwards:
that is how "computed" vs "reused" is checked from the outside, not from the stage's own counters alone.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest
import shared_ray

from videolake.platform.lake.files import RETENTION_HOURS
from videolake.platform.lake.schemas import RAW_VIDEOS
from videolake.platform.lake.table import DataFile, Lake, PartitionRange, rows_to_table
from videolake.platform.runtime.units import LOST_WORKER, Checkpoints, PartitionStep, file_stats
from videolake.platform.stages.common import run_stage

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
DAYS = ["2026-01-01", "2026-01-02"]


@pytest.fixture(scope="module", autouse=True)
def ray_local():
    import sys

    from ray import cloudpickle

    # Ray workers cannot import this test module by name: ship its functions by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with shared_ray.module_ray(__file__):  # the suite's shared Ray (tests/shared_ray.py)
        yield


def _units(n_per_day: int) -> list[dict]:
    return [
        {"unit_key": f"u{day}-{i}", "partition_date": day, "payload": json.dumps({"name": f"{day}-{i}"})}
        for day in DAYS
        for i in range(n_per_day)
    ]


def _process(
    payload: dict, *, calls: str, fail: str = "", die: str = "", flaky: str = "", flaky_while: str = ""
) -> list[dict]:
    Path(calls, f"{payload['name']}.{uuid.uuid4().hex}").touch()
    if payload["name"] == fail:
        raise ValueError("unreadable")
    if payload["name"] == flaky and os.path.exists(flaky_while):
        raise TimeoutError("the store did not answer in 30 s")  # transient: a later run can succeed
    if payload["name"] == die:
        os._exit(1)  # the worker process dies: Ray retries, then the unit is recorded as lost
    return [
        {
            "video_id": payload["name"],
            "source_uri": f"file:///{payload['name']}",
            "size_bytes": 1,
            "status": "ok",
            "ingested_at": NOW,
            "duplicate_uris": [],
        }
    ]


def _on_error(payload: dict, error: str) -> list[dict]:
    return [
        {
            "video_id": "err-" + payload["name"],
            "source_uri": f"file:///{payload['name']}",
            "size_bytes": 0,
            "status": "rejected",
            "reject_reason": "ingest_error",
            "reject_detail": error,
            "ingested_at": NOW,
            "duplicate_uris": [],
        }
    ]


def _calls(folder: Path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in folder.iterdir())


def _run(lake, calls, version="v1", units=None, **kw):
    return run_stage(
        lake,
        "raw_videos",
        version,
        PartitionRange.of(DAYS),
        units or _units(3),
        partial(_process, calls=str(calls), **kw),
        _on_error,
        PartitionStep(),
        None,
    )


def _ids(lake) -> list[str]:
    return sorted(lake.read_partitions("raw_videos", PartitionRange.of(DAYS)).column("video_id").to_pylist())


@pytest.mark.slow
def test_rerun_reuses_every_unit_and_a_new_version_reuses_none(tmp_path):
    lake, calls = Lake(str(tmp_path / "lake")), tmp_path / "calls"
    calls.mkdir()
    first = _run(lake, calls)
    assert (first.progress.units_total, first.progress.units_computed, first.progress.units_reused) == (6, 6, 0)
    assert _ids(lake) == sorted(f"{d}-{i}" for d in DAYS for i in range(3))
    assert first.per_partition == {
        DAYS[0]: {"dagster/partition_row_count": 3},
        DAYS[1]: {"dagster/partition_row_count": 3},
    }
    # same version: nothing computed again, same rows
    again = _run(lake, calls)
    assert (again.progress.units_computed, again.progress.units_reused) == (0, 6)
    assert len(_calls(calls)) == 6 and _ids(lake) == _ids(lake)
    # a lost checkpoint (a unit that never finished) is the only one computed
    ckpt = next((tmp_path / "lake" / "_checkpoints" / "raw_videos" / "v1" / f"partition_date={DAYS[1]}").glob("*"))
    ckpt.unlink()
    part = _run(lake, calls)
    assert (part.progress.units_computed, part.progress.units_reused) == (1, 5)
    assert len(_calls(calls)) == 7
    # a changed code version reuses nothing; the old version's checkpoints stay while younger than the retention
    # (an attempt with the old settings may still be running), and go after it
    new = _run(lake, calls, version="v2")
    assert (new.progress.units_computed, new.progress.units_reused) == (6, 0)
    assert len(_calls(calls)) == 13
    old = tmp_path / "lake" / "_checkpoints" / "raw_videos" / "v1" / f"partition_date={DAYS[0]}"
    assert len(list(old.glob("*.parquet"))) == 3
    v2 = Checkpoints(lake.files(), "raw_videos", "v2")
    assert v2.clear_other_versions(DAYS, now_s=time.time() + RETENTION_HOURS * 3600 + 60) == 6
    assert not list(old.glob("*.parquet"))
    assert len(_ids(lake)) == 6  # one row per unit, never duplicated by re-runs


@pytest.mark.slow
def test_a_failing_unit_is_recorded_and_a_dead_worker_is_recorded_as_lost(tmp_path):
    lake, calls = Lake(str(tmp_path / "lake")), tmp_path / "calls"
    calls.mkdir()
    run = _run(lake, calls, fail=f"{DAYS[0]}-1", die=f"{DAYS[1]}-2")
    rows = {r["video_id"]: r for r in lake.read_partitions("raw_videos", PartitionRange.of(DAYS)).to_pylist()}
    assert len(rows) == 6
    assert rows[f"err-{DAYS[0]}-1"]["reject_detail"] == "ValueError: unreadable"
    assert rows[f"err-{DAYS[1]}-2"]["reject_detail"] == LOST_WORKER
    assert run.progress.unit_errors == 2
    # Ray re-ran the dying unit on fresh workers before giving up (each attempt left its call file)
    assert _calls(calls).count(f"{DAYS[1]}-2") >= 2
    # a lost worker can heal, an unreadable input cannot: the re-run computes the lost unit only
    assert rows[f"err-{DAYS[1]}-2"]["failure_class"] == "transient"
    assert rows[f"err-{DAYS[0]}-1"]["failure_class"] == "permanent"
    again = _run(lake, calls, fail=f"{DAYS[0]}-1")
    assert (again.progress.units_computed, again.progress.units_retried) == (1, 1)
    assert f"{DAYS[1]}-2" in _ids(lake) and f"err-{DAYS[1]}-2" not in _ids(lake)


def test_a_rerun_computes_transient_failures_again_and_reuses_permanent_ones(tmp_path):
    lake, calls = Lake(str(tmp_path / "lake")), tmp_path / "calls"
    calls.mkdir()
    outage = tmp_path / "outage"
    outage.touch()
    bad, flaky = f"{DAYS[0]}-1", f"{DAYS[1]}-0"
    kw = dict(fail=bad, flaky=flaky, flaky_while=str(outage))

    def rows():
        return {
            r["source_uri"].rsplit("/", 1)[-1]: (r["video_id"], r["status"], r["failure_class"])
            for r in lake.read_partitions("raw_videos", PartitionRange.of(DAYS)).to_pylist()
        }

    first = _run(lake, calls, **kw)
    assert (first.progress.units_computed, first.progress.units_retried) == (6, 0)
    got = rows()
    assert got[bad] == (f"err-{bad}", "rejected", "permanent")
    assert got[flaky] == (f"err-{flaky}", "rejected", "transient")
    assert {v[2] for k, v in got.items() if k not in (bad, flaky)} == {None}
    # the outage is over: only the transient unit is computed again, and now it is ok
    outage.unlink()
    second = _run(lake, calls, **kw)
    assert (second.progress.units_computed, second.progress.units_reused, second.progress.units_retried) == (1, 5, 1)
    assert second.progress.as_metadata()["units_retried"] == 1
    assert _calls(calls).count(flaky) == 2 and _calls(calls).count(bad) == 1
    got = rows()
    assert got[flaky] == (flaky, "ok", None) and got[bad] == (f"err-{bad}", "rejected", "permanent")
    assert len(got) == 6
    # nothing transient left: a third run reuses every unit
    third = _run(lake, calls, **kw)
    assert (third.progress.units_computed, third.progress.units_retried) == (0, 0)


def _file(lake: Lake, day: str, ids: list[str], token: str) -> DataFile:
    rows = [
        dict(
            video_id=i,
            source_uri=f"file:///{i}",
            size_bytes=1,
            status="ok",
            ingested_at=NOW,
            partition_date=dt.date.fromisoformat(day),
            duplicate_uris=[],
        )
        for i in ids
    ]
    t = rows_to_table(rows, RAW_VIDEOS).drop_columns(["partition_date"])
    rel = f"partition_date={day}/part-{token}-00000.parquet"
    size = lake.files().write_parquet(lake.files().path("raw_videos", rel), t)
    return DataFile(path=rel, size=size, partition_date=day, rows=len(ids), stats=file_stats(t))


def test_commit_is_partition_exact_and_leaves_files_that_never_committed_to_the_vacuum(tmp_path):
    lake = Lake(str(tmp_path))
    both = PartitionRange.of(DAYS)
    w = lake.commit_files(
        "raw_videos", [_file(lake, DAYS[0], ["a", "b"], "t1"), _file(lake, DAYS[1], ["c"], "t1")], both, token="t1"
    )
    assert (w.rows, w.files) == (3, 2)
    # an attempt that died after writing its file (or one still running): never visible to readers
    orphan = _file(lake, DAYS[1], ["zombie"], "dead")
    assert _ids(lake) == ["a", "b", "c"]
    day2 = PartitionRange.of([DAYS[1]])
    lake.commit_files("raw_videos", [_file(lake, DAYS[1], ["d"], "t2")], day2, token="t2")
    assert _ids(lake) == ["a", "b", "d"]  # day 1 untouched, day 2 replaced
    # nothing is deleted by a commit: the other attempt's file stays (it may still commit), and so does the file
    # an older version references (time travel); the vacuum takes both once past the retention
    assert (tmp_path / "raw_videos" / orphan.path).exists()
    assert (tmp_path / "raw_videos" / f"partition_date={DAYS[1]}" / "part-t1-00000.parquet").exists()
    # an empty commit empties exactly that partition
    lake.commit_files("raw_videos", [], day2, token="t3")
    assert _ids(lake) == ["a", "b"]
    with pytest.raises(ValueError, match="outside the run's range"):
        lake.commit_files("raw_videos", [_file(lake, "2026-02-01", ["x"], "t4")], day2, token="t4")


def test_file_stats_are_delta_statistics():
    t = pa.table({"id": ["b", "a", None], "n": [3, 1, 2], "x": [1.5, float("nan"), 0.0]})
    s = json.loads(file_stats(t))
    assert s["numRecords"] == 3 and s["minValues"]["id"] == "a" and s["maxValues"]["n"] == 3
    assert s["nullCount"] == {"id": 1, "n": 0, "x": 0}


def test_finished_keys_lists_the_days_checkpoints_once(tmp_path):
    from videolake.platform.lake.table import Lake
    from videolake.platform.runtime.units import Checkpoints

    cp = Checkpoints(Lake(str(tmp_path)).files(), "scene_clips", "v1")
    for day, key in (("2026-01-01", "aaa"), ("2026-01-01", "bbb"), ("2026-01-02", "ccc")):
        cp.files.write_parquet(cp.unit_path(day, key), pa.table({"x": [1]}))
    cp.files.write_parquet(f"{cp.day_dir('2026-01-01')}/_todo/ddd.parquet", pa.table({"x": [1]}))  # not a unit
    assert cp.finished_keys("2026-01-01") == {"aaa", "bbb"}
    assert cp.finished_keys("2026-01-02") == {"ccc"}
    assert cp.finished_keys("2026-01-03") == set()
    other = Checkpoints(cp.files, "scene_clips", "v2")  # another code version sees none of them
    assert other.finished_keys("2026-01-01") == set()


def _record_resources(payload: dict, *, calls: str) -> list[dict]:
    import ray

    Path(calls, f"{payload['name']}.json").write_text(json.dumps(ray.get_runtime_context().get_assigned_resources()))
    return _process(payload, calls=str(Path(calls, "done")))


def test_units_run_with_the_resources_their_plugin_declares(tmp_path):
    from videolake.platform.runtime.unit_resources import UnitResources

    lake, calls = Lake(str(tmp_path / "lake")), tmp_path / "calls"
    (calls / "done").mkdir(parents=True)
    declared = UnitResources(num_cpus=0.25, memory_mb=64)
    run = run_stage(
        lake,
        "raw_videos",
        "v1",
        PartitionRange.of(DAYS),
        _units(2),
        partial(_record_resources, calls=str(calls)),
        _on_error,
        PartitionStep(),
        None,
        resources=declared,
    )
    assert run.progress.units_computed == 4
    seen = [json.loads(p.read_text()) for p in sorted(calls.glob("*.json"))]
    assert len(seen) == 4 and all(s == {"CPU": 0.25, "memory": 64 << 20} for s in seen), seen


@pytest.mark.slow
def test_unit_resources_ray_args_and_union():
    from videolake.platform.filters.quality import QualityConfig, scorer_resources
    from videolake.platform.runtime.unit_resources import UnitResources
    from videolake.platform.scenes import get_detector

    assert UnitResources().ray_args() == {"num_cpus": 1.0}
    gpu = UnitResources(num_cpus=2, num_gpus=1, memory_mb=512, custom=(("L4", 0.5),))
    assert gpu.ray_args() == {"num_cpus": 2, "num_gpus": 1, "memory": 512 << 20, "resources": {"L4": 0.5}}
    both = UnitResources.union([UnitResources(num_cpus=0.5, custom=(("L4", 1.0), ("x", 1.0))), gpu])
    assert both == UnitResources(num_cpus=2, num_gpus=1, memory_mb=512, custom=(("L4", 1.0), ("x", 1.0)))
    assert UnitResources.union([]) == UnitResources()
    # the built-in plugins declare the default: one CPU per unit
    assert scorer_resources(QualityConfig()) == UnitResources()
    assert get_detector("luma").resources() == UnitResources()


def _progress_task(row: dict) -> dict:
    reused = row["unit_key"] in {"u0", "u1"}
    return {
        "key": row["unit_key"],
        "partition_date": "2026-01-01",
        "reused": reused,
        "rows": 1,
        "seconds": 0.0 if reused else 2.0,
        "error": None,
    }


def test_run_units_reports_k_of_n_with_n_its_unit_count():
    """The stage lines of run_units on the real local Ray: N planned first, then k/N as units come back (the
    reporter's clock reads 2 s per unit done, so the lines are exact), then the final line."""
    import ray.data

    from videolake.platform.runtime.progress import StageReporter
    from videolake.platform.runtime.units import run_units

    class Clock:
        t = 1000.0

        def __call__(self) -> float:
            return self.t

    clock = Clock()

    class Reporter(StageReporter):
        def update(self, done: int, **kw) -> None:
            clock.t = 1000.0 + 2.0 * done  # 2 s per unit done
            super().update(done, **kw)

    units = [{"unit_key": f"u{i}", "partition_date": "2026-01-01", "payload": "{}"} for i in range(6)]
    lines: list[str] = []
    options = ray.data.DataContext.get_current().execution_options
    order = options.preserve_order
    options.preserve_order = True  # u0 and u1 (reused) first, so the counts of each line are known
    try:
        prog = run_units(units, _progress_task, progress=Reporter("split", lines.append, clock=clock))
    finally:
        options.preserve_order = order
    assert (prog.units_total, prog.units_reused, prog.units_computed) == (6, 2, 4)
    assert lines == [
        "split: 0/6 units (0 reused, 0 computed), 0s elapsed",  # planned: N = 6
        "split: 3/6 units (2 reused, 1 computed), 0.17 units/s, ETA 18s",  # 6 s in: the first line >= 5 s later
        "split: 6/6 units (2 reused, 4 computed), 0.33 units/s, ETA 0s",
        "split: 6/6 units (2 reused, 4 computed), 0.33 units/s, done in 12s",
    ]


def _decide_last_ok(t: pa.Table) -> pa.Table:
    """A day-wide decision on narrow columns: the greatest video_id of the day stays ok, the others are rejected."""
    ids = t.column("video_id").to_pylist()
    top = max(ids)
    return pa.table(
        {
            "video_id": ids,
            "status": ["ok" if v == top else "rejected" for v in ids],
            "reject_reason": [None if v == top else "not_last" for v in ids],
        },
        schema=pa.schema([RAW_VIDEOS.field(c) for c in ("video_id", "status", "reject_reason")]),
    )


def test_a_decide_step_reads_its_columns_of_the_day_and_rewrites_the_rows_in_bounded_tasks(tmp_path, monkeypatch):
    """With ``PartitionStep.decide`` the day's rows are never one task's: its narrow columns decide, then the rows
    are rewritten in tasks of at most FINALIZE_MAX_UNITS unit files (one data file each), every row with its
    decided values and the day's figures from the decision."""
    import videolake.platform.runtime.units as U

    monkeypatch.setattr(U, "FINALIZE_MAX_UNITS", 2)
    lake, calls = Lake(str(tmp_path / "lake")), tmp_path / "calls"
    calls.mkdir()
    step = PartitionStep(
        decide=_decide_last_ok,
        decide_columns=("video_id", "status", "reject_reason"),
        summarize=lambda t: {"ok": t.column("status").to_pylist().count("ok")},
    )
    run = run_stage(
        lake,
        "raw_videos",
        "v1",
        PartitionRange.of(DAYS),
        _units(5),
        partial(_process, calls=str(calls)),
        _on_error,
        step,
        None,
    )
    rows = lake.read_partitions("raw_videos", PartitionRange.of(DAYS)).sort_by("video_id").to_pylist()
    for day in DAYS:
        mine = [r for r in rows if r["partition_date"].isoformat() == day]
        assert [(r["video_id"], r["status"], r["reject_reason"]) for r in mine] == [
            (f"{day}-{i}", "ok" if i == 4 else "rejected", None if i == 4 else "not_last") for i in range(5)
        ]
        assert all(r["size_bytes"] == 1 and r["source_uri"] == f"file:///{r['video_id']}" for r in mine)
        assert run.per_partition[day] == {U.ROW_COUNT: 5, "ok": 1}
    from deltalake import DeltaTable

    per_day = [p for p in DeltaTable(lake.table_uri("raw_videos")).file_uris()]
    assert sorted(sum(f"partition_date={d}/" in p for p in per_day) for d in DAYS) == [3, 3]  # 5 unit files, tasks of 2
