"""The CPU assets materialized through Dagster on an ephemeral instance, with real Delta tables and a local Ray."""

from __future__ import annotations

import hashlib
from pathlib import Path

import dagster as dg
import pytest
from module_ray import joining_local_ray

from videolake.assets import cpu_assets
from videolake.platform.lake.table import PartitionRange
from videolake.resources import LakeResource, ObjectStoreResource

DAY1, DAY2 = "2026-03-01", "2026-03-02"  # the days tests/assets/conftest.py lands videos for
ASSETS = [cpu_assets.raw_videos, cpu_assets.scene_clips, cpu_assets.filtered_clips]


@pytest.fixture()
def resources(landing, tmp_path, module_ray):
    return {
        "object_store": ObjectStoreResource(kind="local", root=str(landing["root"])),
        "lake": LakeResource(root=str(tmp_path / "lake")),
        "ray_cluster": joining_local_ray(),  # the module's Ray (module_ray.py)
    }


def _table(resources, name: str, days: list[str]) -> list[dict]:
    return resources["lake"].get_lake().read_partitions(name, PartitionRange.of(days)).to_pylist()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stable(rows: list[dict]) -> list[dict]:
    return sorted(({k: v for k, v in r.items() if k != "ingested_at"} for r in rows), key=lambda r: str(r))


def test_one_partition_end_to_end_and_rerun_is_identical(resources, landing):
    instance = dg.DagsterInstance.ephemeral()
    res = dg.materialize(ASSETS, partition_key=DAY1, resources=resources, instance=instance)
    assert res.success

    truths = landing["truths"][DAY1]
    folder = landing["root"] / "landing" / DAY1
    raw = _table(resources, "raw_videos", [DAY1])
    by_name = {Path(r["source_uri"]).name: r for r in raw}
    assert set(by_name) == set(truths)  # every landed file has a row: nothing dropped
    assert len({r["video_id"] for r in raw}) == len(raw)
    for name, truth in truths.items():
        row = by_name[name]
        assert row["video_id"] == _sha(folder / name)
        expect = truth["expect"]
        if expect.startswith("reject:"):
            assert (row["status"], row["reject_reason"]) == ("rejected", expect.split(":", 1)[1]), name
        else:
            assert (row["status"], row["reject_reason"]) == ("ok", None), name
            assert row["num_frames"] == truth["num_frames"], name

    clips = _table(resources, "scene_clips", [DAY1])
    ok_ids = {r["video_id"] for r in raw if r["status"] == "ok"}
    assert {c["video_id"] for c in clips} == ok_ids
    # clip boundaries are exactly the true cuts for the hard-cut video; the no-cut video is one clip
    for name in ("cuts3.mp4", "nocut.mp4"):
        vid = by_name[name]["video_id"]
        starts = sorted(c["start_frame"] for c in clips if c["video_id"] == vid)
        assert starts == [0] + truths[name]["cuts"], name
        assert max(c["end_frame"] for c in clips if c["video_id"] == vid) == truths[name]["num_frames"]
    assert len({c["clip_id"] for c in clips}) == len(clips)

    filtered = _table(resources, "filtered_clips", [DAY1])
    assert sorted(f["clip_id"] for f in filtered) == sorted(c["clip_id"] for c in clips)  # scored exactly once
    by_video = {}
    for f in filtered:
        by_video.setdefault(f["video_id"], []).append(f)
    for name, truth in truths.items():
        if truth["expect"].startswith("filter:"):
            reason = truth["expect"].split(":", 1)[1]
            rows = by_video[by_name[name]["video_id"]]
            assert all(not f["passed"] and reason in f["reject_reason"].split(";") for f in rows), (name, rows)
    assert any(f["passed"] for f in filtered)

    # materialization metadata reports the same numbers
    mats = {e.asset_key.path[-1]: e.materialization.metadata for e in res.get_asset_materialization_events()}
    assert mats["raw_videos"]["dagster/partition_row_count"].value == len(raw)
    assert mats["scene_clips"]["dagster/partition_row_count"].value == len(clips)
    assert mats["filtered_clips"]["passed"].value == sum(f["passed"] for f in filtered)

    before = {t: _stable(_table(resources, t, [DAY1])) for t in ("raw_videos", "scene_clips", "filtered_clips")}
    assert dg.materialize(ASSETS, partition_key=DAY1, resources=resources, instance=instance).success
    after = {t: _stable(_table(resources, t, [DAY1])) for t in ("raw_videos", "scene_clips", "filtered_clips")}
    assert after == before  # same rows, no duplicates


def test_two_partition_single_run_backfill(resources, landing):
    instance = dg.DagsterInstance.ephemeral()
    # Partition DAY1 exists already with stale content: the backfill must replace it, not add to it.
    assert dg.materialize([cpu_assets.raw_videos], partition_key=DAY1, resources=resources, instance=instance).success
    job = dg.Definitions(assets=ASSETS, resources=resources).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance,
        tags={"dagster/asset_partition_range_start": DAY1, "dagster/asset_partition_range_end": DAY2},
    )
    assert result.success
    raw = _table(resources, "raw_videos", [DAY1, DAY2])
    assert len(raw) == len({(r["partition_date"], r["video_id"]) for r in raw})
    day2 = [r for r in raw if str(r["partition_date"]) == DAY2]
    # two objects with the same bytes: one row (the first key wins), the other object recorded in duplicate_uris
    assert len(day2) == 1 and len(day2[0]["duplicate_uris"]) == 1
    assert Path(day2[0]["source_uri"]).name == "copy_of_day2.mp4"
    assert Path(day2[0]["duplicate_uris"][0]).name == "day2.mp4"
    assert len([r for r in raw if str(r["partition_date"]) == DAY1]) == len(landing["truths"][DAY1])
    clips2 = [c for c in _table(resources, "scene_clips", [DAY2])]
    assert sorted(c["start_frame"] for c in clips2) == [0] + landing["truths"][DAY2]["day2.mp4"]["cuts"]
    assert len(_table(resources, "filtered_clips", [DAY1, DAY2])) == len(_table(resources, "scene_clips", [DAY1, DAY2]))
    # one run covered both partitions
    mats = result.get_asset_materialization_events()
    assert {(e.asset_key.path[-1], e.partition) for e in mats} >= {("raw_videos", DAY1), ("raw_videos", DAY2)}
