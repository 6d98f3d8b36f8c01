"""training_shards through Dagster on an ephemeral instance: the day's sample set, every mp4's frame count (ffprobe),
captions equal to clip_captions', the gates (and that they fail on a tampered shard), a re-run that reuses the
finished shards, and other settings that write new shard names and remove the old ones.

The captions are written straight into clip_captions (a caption per passed clip, one of them failed): the captioner
itself is tested in tests/integration; here the captions are the input whose every ok row must become one sample.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import tarfile
from pathlib import Path
from urllib.parse import unquote

import dagster as dg
import pytest
from module_ray import joining_local_ray

from videolake.assets import cpu_assets
from videolake.assets.checks import build_gate_checks
from videolake.platform.gates import check_partition
from videolake.platform.lake.schemas import CLIP_CAPTIONS
from videolake.platform.lake.table import PartitionRange, rows_to_table
from videolake.resources import LakeResource, ObjectStoreResource

DAY = "2026-03-01"
RNG = PartitionRange.of([DAY])
SHARDS = [cpu_assets.training_shards, build_gate_checks("training_shards")]


def _path(uri: str) -> Path:
    return Path(unquote(uri[len("file://") :]))


@pytest.fixture(scope="module")
def day(landing, tmp_path_factory, module_ray):
    """The CPU tables of DAY materialized once, and a caption row per passed clip (the first one failed)."""
    res = {
        "object_store": ObjectStoreResource(kind="local", root=str(landing["root"])),
        "lake": LakeResource(root=str(tmp_path_factory.mktemp("lake"))),
        "ray_cluster": joining_local_ray(),  # the module's Ray (module_ray.py)
    }
    instance = dg.DagsterInstance.ephemeral()
    assets = [cpu_assets.raw_videos, cpu_assets.scene_clips, cpu_assets.filtered_clips]
    # Lenient filters: more of the day's clips (short, dark, still ones too) become samples.
    lenient = {
        "min_clip_s": 0.1,
        "max_black_ratio": 1.0,
        "min_brightness": 0.0,
        "max_frozen_ratio": 1.0,
        "min_motion": 0.0,
        "max_motion": 255.0,
        "min_sharpness": 0.0,
        "max_text_area": 1.0,
        "dup_max_distance": -1,
    }
    config = {"ops": {"filtered_clips": {"config": {"thresholds": lenient}}}}
    assert dg.materialize(assets, partition_key=DAY, resources=res, instance=instance, run_config=config).success
    lake = res["lake"].get_lake()
    clips = {r["clip_id"]: r for r in lake.read_partitions("scene_clips", RNG).to_pylist()}
    passed = sorted(r["clip_id"] for r in lake.read_partitions("filtered_clips", RNG).to_pylist() if r["passed"])
    assert len(passed) >= 3, passed
    rows = []
    for i, cid in enumerate(passed):
        c = clips[cid]
        failed = i == 0
        rows.append(
            {
                "clip_id": cid,
                "caption_track": "default",
                "video_id": c["video_id"],
                "source_uri": c["source_uri"],
                "status": "failed" if failed else "ok",
                "caption": None if failed else f"clip {i}: a scene, ünïcode",
                "error": "timeout" if failed else None,
                "model": "tiny",
                "model_revision": "r1",
                "prompt_version": "v1-describe",
                "num_frames": 8,
                "captioned_at": dt.datetime.now(dt.UTC),
                "partition_date": dt.date.fromisoformat(DAY),
            }
        )
    lake.write_partitions("clip_captions", rows_to_table(rows, CLIP_CAPTIONS), RNG)
    return {
        "res": res,
        "instance": instance,
        "lake": lake,
        "clips": clips,
        "captions": {r["clip_id"]: r for r in rows if r["status"] == "ok"},
    }


def _materialize(day, config: dict | None = None) -> dg.ExecuteInProcessResult:
    run_config = {"ops": {"training_shards": {"config": config}}} if config else None
    result = dg.materialize(
        SHARDS, partition_key=DAY, resources=day["res"], instance=day["instance"], run_config=run_config
    )
    assert result.success
    return result


def _metadata(result) -> dict:
    [event] = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


@pytest.fixture(scope="module")
def first(day):
    result = _materialize(day)
    rows = day["lake"].read_partitions("training_shards", RNG).to_pylist()
    return {"result": result, "rows": rows}


def test_one_sample_per_ok_caption_with_exact_frames_and_captions(day, first, ffmpeg):
    rows = first["rows"]
    assert sorted(r["clip_id"] for r in rows) == sorted(day["captions"])  # the failed caption is no sample
    assert {r["status"] for r in rows} == {"ok"}
    evals = list(first["result"].get_asset_check_evaluations())
    assert len(evals) == 4 and all(e.passed for e in evals), [(e.check_name, e.description) for e in evals]
    seen: dict[str, list[str]] = {}
    for uri in sorted({r["shard_uri"] for r in rows}):
        path = _path(uri)
        assert "/shards/2026-03-01/resolution_240/aspect_4_3/" in str(path)
        with tarfile.open(path) as tar:
            names = tar.getnames()
            out = path.parent / "x"
            tar.extractall(out, filter="data")
        keys = sorted({n.split(".")[0] for n in names})
        assert names == [f"{k}.{ext}" for k in keys for ext in ("json", "mp4", "txt")]
        seen[uri] = keys
        for key in keys:
            clip, caption = day["clips"][key], day["captions"][key]
            meta = json.loads((out / f"{key}.json").read_text())
            assert meta["caption"] == caption["caption"] == (out / f"{key}.txt").read_text()
            assert (meta["clip_id"], meta["video_id"], meta["source_uri"], meta["partition_date"]) == (
                key,
                clip["video_id"],
                clip["source_uri"],
                DAY,
            )
            assert (meta["model"], meta["model_revision"], meta["prompt_version"]) == ("tiny", "r1", "v1-describe")
            n = clip["end_frame"] - clip["start_frame"]
            probe = json.loads(
                subprocess.run(
                    [
                        ffmpeg.replace("ffmpeg", "ffprobe"),
                        "-v",
                        "error",
                        "-count_frames",
                        "-select_streams",
                        "v:0",
                        "-show_entries",
                        "stream=nb_read_frames,width,height",
                        "-of",
                        "json",
                        str(out / f"{key}.mp4"),
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )["streams"][0]
            assert int(probe["nb_read_frames"]) == n == meta["num_frames"]
            assert (probe["width"], probe["height"]) == (320, 240) == (meta["width"], meta["height"])
            assert set(meta["scores"]) >= {
                "motion",
                "sharpness",
                "brightness",
                "black_ratio",
                "frozen_ratio",
                "text_area",
            }
    by_clip = {r["clip_id"]: r for r in rows}
    for uri, keys in seen.items():
        assert all(by_clip[k]["shard_uri"] == uri and by_clip[k]["shard_samples"] == len(keys) for k in keys)
    md = _metadata(first["result"])
    assert (md["dagster/partition_row_count"], md["samples_failed"], md["shards"]) == (len(rows), 0, len(seen))


def test_rerun_reuses_every_unit_and_shard(day, first):
    shards = {r["shard_uri"]: _path(r["shard_uri"]).stat().st_mtime_ns for r in first["rows"]}
    result = _materialize(day)
    md = _metadata(result)
    assert (md["units_reused"], md["units_computed"]) == (md["units_total"], 0)
    again = day["lake"].read_partitions("training_shards", RNG).to_pylist()
    assert sorted(again, key=lambda r: r["clip_id"]) == sorted(first["rows"], key=lambda r: r["clip_id"])
    assert {u: _path(u).stat().st_mtime_ns for u in shards} == shards  # not written again


def test_gates_fail_on_a_tampered_shard_and_a_missing_sample(day, first):
    uri = first["rows"][0]["shard_uri"]
    path = _path(uri)
    original = path.read_bytes()
    try:
        data = bytearray(original)
        data[-2000] ^= 0xFF  # inside the last sample's txt/mp4 padding area or data: another sha256
        path.write_bytes(bytes(data))
        results = {r.gate: r for r in check_partition(day["lake"], "training_shards", DAY)}
        assert not results["shards_match_table"].passed
        assert results["shards_match_table"].to_metadata()["measured"]["sha256_mismatch"] == 1
        path.unlink()
        results = {r.gate: r for r in check_partition(day["lake"], "training_shards", DAY)}
        assert results["shards_match_table"].to_metadata()["measured"]["missing_shards"] == 1
        assert not results["mp4_frame_counts"].passed
    finally:
        path.write_bytes(original)
    assert all(r.passed for r in check_partition(day["lake"], "training_shards", DAY))


def test_other_settings_write_new_shards_and_remove_the_old(day, first):
    old = {r["shard_uri"] for r in first["rows"]}
    try:
        result = _materialize(day, {"max_short_side": 120, "max_shard_samples": 1})
        rows = day["lake"].read_partitions("training_shards", RNG).to_pylist()
        assert {(r["width"], r["height"]) for r in rows} == {(160, 120)}
        assert {r["bucket"].split("/")[0] for r in rows} == {"resolution_0"}
        assert {r["shard_samples"] for r in rows} == {1} and len({r["shard_uri"] for r in rows}) == len(rows)
        assert _metadata(result)["units_computed"] == _metadata(result)["units_total"]
        # Within the retention the old shards stay (another attempt of the day, or an older table version inside
        # Delta's retention, may still name them); past it, the clean-up removes what no table or release names.
        assert all(_path(u).exists() for u in old)
        from videolake.platform.shards.config import ShardConfig
        from videolake.platform.stages.shard import remove_stale_shards

        store = day["res"]["object_store"].get_store()
        removed = remove_stale_shards(day["lake"], store, RNG, ShardConfig(), "other", retention_hours=0, now_s=4e9)
        assert removed == len(old) and not any(_path(u).exists() for u in old)
    finally:
        _materialize(day)  # back to the defaults for the other tests of the module
    # Computed again: the same names, so the same bytes.
    again = {r["shard_uri"] for r in day["lake"].read_partitions("training_shards", RNG).to_pylist()}
    assert again == old and all(_path(u).exists() for u in old)


def test_a_release_still_verifies_after_its_day_was_rematerialized_with_other_settings(day, first):
    from videolake.platform.releases import create_release, verify_release

    store = day["res"]["object_store"].get_store()
    # The gates of the five tables are tested with releases in tests/unit/test_releases.py; here every day counts
    # as passed, and what is checked is that nothing the release names goes away.
    current = {r["shard_uri"] for r in day["lake"].read_partitions("training_shards", RNG).to_pylist()}
    release = create_release(day["lake"], store, "r-shards-test", DAY, DAY, gate_verdicts=lambda table, d: [])
    pinned = {s["uri"] for s in release.manifest["shards"]}
    assert pinned == current
    try:
        _materialize(day, {"max_short_side": 120})
        now = {r["shard_uri"] for r in day["lake"].read_partitions("training_shards", RNG).to_pylist()}
        assert now.isdisjoint(pinned)
        assert all(_path(u).exists() for u in pinned)  # referenced by the release: kept
        result = verify_release(store, "r-shards-test")
        assert result.ok, result.problems
    finally:
        _materialize(day)


def test_a_unit_whose_samples_were_deleted_is_encoded_again(day, first):
    from videolake.platform.shards.config import ShardConfig
    from videolake.platform.stages.shard import SAMPLES_DIR, shard_version

    prefix = f"shards/{SAMPLES_DIR}/{shard_version(ShardConfig())}/{DAY}/"
    store = day["res"]["object_store"].get_store()
    victim = first["rows"][0]
    store.delete(f"{prefix}{victim['clip_id']}.tar")
    _path(victim["shard_uri"]).unlink()  # its shard must be packed again, from every sample of it
    result = _materialize(day)
    md = _metadata(result)
    assert (md["units_computed"], md["units_reused"]) == (1, md["units_total"] - 1)
    again = {r["clip_id"]: r["shard_uri"] for r in day["lake"].read_partitions("training_shards", RNG).to_pylist()}
    assert again[victim["clip_id"]] == victim["shard_uri"] and _path(victim["shard_uri"]).exists()
