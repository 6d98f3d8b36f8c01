"""A bad file never blocks a day: a day of good footage plus one file whose clip would not encode (its frame size
changes within a continuous scene) and one whose clip is longer than the bound (a frame held 25 s) goes through
raw_videos, scene_clips, filtered_clips, clip_captions and training_shards with every gate green. Both files are
rows with reasons and their source objects, counted in the gates' metadata and the summary figures, and kept out of
everything downstream; every other clip becomes a sample.

Captions are written straight into clip_captions (one ok caption per passed clip), as tests/assets/
test_training_shards.py does: the captioner is tested elsewhere; here what matters is that no caption is asked for a
clip that will not encode.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from videolake.assets import cpu_assets
from videolake.assets.checks import build_gate_checks
from videolake.platform.gates import check_partition
from videolake.platform.lake.schemas import CLIP_CAPTIONS, table_spec
from videolake.platform.lake.table import PartitionRange, rows_to_table
from videolake.resources import LakeResource, ObjectStoreResource

DAY = "2026-04-01"
RNG = PartitionRange.of([DAY])
MAX_CLIP_S = 2.0
# Five good 8 s files of distinct footage: 4 clips of 2 s each.
GOOD = {
    "a_testsrc.mp4": "testsrc2=size=320x240:rate=25",
    "b_mandelbrot.mp4": "mandelbrot=size=320x240:rate=25",
    "c_life.mp4": "life=size=320x240:rate=25:mold=10:ratio=0.5:death_color=#00aa00",
    "d_cellauto.mp4": "cellauto=size=320x240:rate=25:rule=110",
    "e_rgbtest.mp4": "rgbtestsrc=size=320x240:rate=25,hue=H=2*PI*t/8",
}
LENIENT = {
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


def _ff(ffmpeg: str, *args: str) -> None:
    subprocess.run([ffmpeg, "-nostdin", "-v", "error", "-y", *args], check=True)


@pytest.fixture(scope="module")
def store(ffmpeg, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store")
    land = root / "landing" / DAY
    land.mkdir(parents=True)
    for name, src in GOOD.items():
        _ff(ffmpeg, "-f", "lavfi", "-i", src, "-t", "8", "-c:v", "libx264", "-g", "25", "-pix_fmt", "yuv420p",
            str(land / name))  # fmt: skip
    # the frame size changes from 320x240 to 352x288 at frame 50, in one continuous scene
    work = tmp_path_factory.mktemp("parts")
    _ff(ffmpeg, "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "2", "-c:v", "libx264", "-g", "25",
        str(work / "a.ts"))  # fmt: skip
    _ff(ffmpeg, "-f", "lavfi", "-i", "testsrc2=size=352x288:rate=25", "-ss", "2", "-t", "2", "-c:v", "libx264",
        "-g", "25", "-output_ts_offset", "2", str(work / "b.ts"))  # fmt: skip
    (land / "x_sizes.ts").write_bytes((work / "a.ts").read_bytes() + (work / "b.ts").read_bytes())
    # 2 s at 10 fps, one frame held 25 s, 2 s at 10 fps
    _ff(ffmpeg, "-f", "lavfi", "-t", "4.1", "-i", "testsrc2=size=320x240:rate=10",
        "-vf", "setpts='if(lt(N,20),N,if(eq(N,20),20,270+N-21))'", "-fps_mode", "passthrough",
        "-c:v", "libx264", "-bf", "0", "-g", "10", "-video_track_timescale", "1000", str(land / "y_still.mp4"))  # fmt: skip
    return root


@pytest.fixture(scope="module")
def day(store, tmp_path_factory, module_ray):
    from module_ray import joining_local_ray

    res = {
        "object_store": ObjectStoreResource(kind="local", root=str(store)),
        "lake": LakeResource(root=str(tmp_path_factory.mktemp("lake"))),
        "ray_cluster": joining_local_ray(),
    }
    instance = dg.DagsterInstance.ephemeral()
    assets = [cpu_assets.raw_videos, cpu_assets.scene_clips, cpu_assets.filtered_clips]
    checks = [build_gate_checks(t) for t in ("raw_videos", "scene_clips", "filtered_clips")]
    config = {
        "ops": {
            "scene_clips": {"config": {"max_clip_s": MAX_CLIP_S}},
            "filtered_clips": {"config": {"thresholds": LENIENT}},
        }
    }
    cpu = dg.materialize([*assets, *checks], partition_key=DAY, resources=res, instance=instance, run_config=config)
    assert cpu.success
    lake = res["lake"].get_lake()
    clips = {r["clip_id"]: r for r in lake.read_partitions("scene_clips", RNG).to_pylist()}
    scored = {r["clip_id"]: r for r in lake.read_partitions("filtered_clips", RNG).to_pylist()}
    rows = [
        {
            "clip_id": cid,
            "caption_track": "default",
            "video_id": clips[cid]["video_id"],
            "source_uri": clips[cid]["source_uri"],
            "status": "ok",
            "caption": f"clip {i}: moving test patterns",
            "error": None,
            "model": "tiny",
            "model_revision": "r1",
            "prompt_version": "v1-describe",
            "num_frames": 8,
            "captioned_at": dt.datetime.now(dt.UTC),
            "partition_date": dt.date.fromisoformat(DAY),
        }
        for i, cid in enumerate(sorted(c for c, r in scored.items() if r["passed"]))
    ]
    lake.write_partitions("clip_captions", rows_to_table(rows, CLIP_CAPTIONS), RNG)
    shards = dg.materialize(
        [cpu_assets.training_shards, build_gate_checks("training_shards")],
        partition_key=DAY,
        resources=res,
        instance=instance,
    )
    assert shards.success
    return {"lake": lake, "cpu": cpu, "shards": shards, "clips": clips, "scored": scored, "store": store}


def _name(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def test_the_day_is_green_at_every_gate(day):
    evals = [*day["cpu"].get_asset_check_evaluations(), *day["shards"].get_asset_check_evaluations()]
    assert len(evals) == 6 + 7 + 6 + 4 and all(e.passed for e in evals), [(e.check_name, e.description) for e in evals]
    for table in ("raw_videos", "scene_clips", "filtered_clips", "clip_captions", "training_shards"):
        failed = {r.gate: r.description for r in check_partition(day["lake"], table, DAY) if not r.passed}
        assert failed == {}, table


def test_both_files_are_rows_with_reasons_and_their_source_objects(day):
    raw = {_name(r["source_uri"]): r for r in day["lake"].read_partitions("raw_videos", RNG).to_pylist()}
    assert {n: r["status"] for n, r in raw.items()} == dict.fromkeys([*GOOD, "x_sizes.ts", "y_still.mp4"], "ok")
    rejected = {
        (_name(r["source_uri"]), r["reject_reason"], r["reject_detail"])
        for r in day["scored"].values()
        if not r["passed"]
    }
    assert rejected == {
        ("x_sizes.ts", "undecodable", "the frame size changes within the clip at frame 50: 352x288, was 320x240"),
        (
            "y_still.mp4",
            "too_few_frames;too_long",
            "duration_s 25.000 > max_clip_s 2 (measured from the frames' timestamps; a frame or scene the split "
            "could not cut shorter)",
        ),
    }
    # counted in the gates' metadata, with their source objects, and in the summary figures
    gates = {r.gate: r for r in check_partition(day["lake"], "filtered_clips", DAY)}
    measured = gates["undecodable_rate"].measured
    assert (measured["rows"], measured["undecodable"], measured["too_long"]) == (25, 1, 1)
    assert [_name(u) for u in measured["undecodable_sources"]] == ["x_sizes.ts"]
    assert [_name(u) for u in measured["too_long_sources"]] == ["y_still.mp4"]
    scene = {r.gate: r for r in check_partition(day["lake"], "scene_clips", DAY)}["duration_in_bounds"].measured
    assert (scene["rows"], scene["clips_out_of_bounds"]) == (25, 1)
    assert [_name(u) for u in scene["sources_out_of_bounds"]] == ["y_still.mp4"]
    figures = table_spec("filtered_clips").figures_of(day["lake"].read_partitions("filtered_clips", RNG))
    assert figures["rejections_by_reason"] == {"too_few_frames": 1, "too_long": 1, "undecodable": 1}
    assert (figures["passed"], figures["rejected"]) == (23, 2)


def test_nothing_else_is_lost(day):
    clips = day["clips"]
    by_file: dict[str, list[tuple[int, int, float]]] = {}
    for c in sorted(clips.values(), key=lambda c: (c["source_uri"], c["start_frame"])):
        by_file.setdefault(_name(c["source_uri"]), []).append(
            (c["start_frame"], c["end_frame"], round(c["duration_s"], 3))
        )
    good = [(0, 50, 2.0), (50, 100, 2.0), (100, 150, 2.0), (150, 200, 2.0)]
    assert by_file == {
        **dict.fromkeys(GOOD, good),
        "x_sizes.ts": [(0, 51, 1.96), (51, 100, 1.96)],  # frame 50 is the first of the new size
        "y_still.mp4": [(0, 20, 2.0), (20, 21, 25.0), (21, 41, 2.0)],
    }
    samples = day["lake"].read_partitions("training_shards", RNG).to_pylist()
    passed = sorted(c for c, r in day["scored"].items() if r["passed"])
    assert sorted(s["clip_id"] for s in samples) == passed
    assert {s["status"] for s in samples} == {"ok"}
    assert all(
        s["num_frames"] == clips[s["clip_id"]]["end_frame"] - clips[s["clip_id"]]["start_frame"] for s in samples
    )
    # each sample lasts as long as its clip did in the source
    assert all(s["duration_s"] == pytest.approx(clips[s["clip_id"]]["duration_s"], rel=1e-6) for s in samples)
    # of the two odd files, only the clips that were set aside are missing
    kept = sorted((_name(s["source_uri"]), clips[s["clip_id"]]["start_frame"]) for s in samples)
    assert [k for k in kept if k[0] in ("x_sizes.ts", "y_still.mp4")] == [
        ("x_sizes.ts", 51),
        ("y_still.mp4", 0),
        ("y_still.mp4", 21),
    ]
    assert len(samples) == 23
