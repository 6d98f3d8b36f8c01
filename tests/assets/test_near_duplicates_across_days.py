"""Near-duplicates across days (issue: duplicates a training set must not keep): a re-encoded, brightened or
letterboxed copy of a clip landed on another day is a `duplicate` naming the kept clip, the earliest by
(partition_date, clip_id), whatever order the days are materialized in; a later day re-judged by an earlier day's run
gets a materialization of its own (Dagster then shows its downstream, clip_captions, stale)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import dagster as dg
import pytest
from landing_days import land, local_resources

from videolake.assets import cpu_assets
from videolake.assets.metadata import table_figures
from videolake.platform.lake.table import PartitionRange
from videolake.synth import Segment, VideoSpec, render

pytestmark = pytest.mark.usefixtures("module_ray")  # one Ray for the module's runs (module_ray.py)

A, B, C = "2026-06-01", "2026-06-02", "2026-06-03"
ASSETS = [cpu_assets.raw_videos, cpu_assets.scene_clips, cpu_assets.filtered_clips]
# Lenient quality rules: only the duplicate rule decides here.
LENIENT = {
    "min_clip_s": 0.1,
    "max_black_ratio": 1.0,
    "min_brightness": 0.0,
    "max_brightness": 255.0,
    "max_frozen_ratio": 1.0,
    "min_motion": 0.0,
    "max_motion": 255.0,
    "min_sharpness": 0.0,
    "max_text_area": 1.0,
    "min_width": 16,
    "min_height": 16,
}
RUN_CONFIG = {"ops": {"filtered_clips": {"config": {"thresholds": LENIENT}}}}


def _ffmpeg(src: Path, dst: Path, vf: str) -> Path:
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-i",
            str(src),
            "-vf",
            vf,
            "-c:v",
            "libx264",
            "-crf",
            "30",
            "-pix_fmt",
            "yuv420p",
            "-threads",
            "1",
            "-fflags",
            "+bitexact",
            "-flags:v",
            "+bitexact",
            str(dst),
        ],
        check=True,
    )
    return dst


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("near-src")
    out = {}
    for name, source in (("x", "mandelbrot"), ("y", "testsrc2"), ("z", "sierpinski")):
        path, _ = render(
            VideoSpec(
                name=name,
                width=320,
                height=240,
                fps="25",
                codec="h264",
                segments=(Segment(source, 40),),
                transitions=(),
            ),
            work,
        )
        out[name] = path
    out["x_bright"] = _ffmpeg(out["x"], work / "x_bright.mp4", "eq=brightness=0.08:contrast=1.15")
    out["x_letterbox"] = _ffmpeg(out["x"], work / "x_letterbox.mp4", "scale=240:180,pad=320:240:40:30:black")
    return out


def _verdicts(resources: dict) -> dict[tuple[str, str], tuple]:
    """(day, landed name) -> (passed, the kept clip's (day, landed name), duplicate_kind), for every clip."""
    lake = resources["lake"].get_lake()
    days = PartitionRange.of([A, B, C])
    names = {
        r["video_id"]: (str(r["partition_date"]), Path(r["source_uri"]).name)
        for r in lake.read_partitions("raw_videos", days).to_pylist()
    }
    rows = lake.read_partitions("filtered_clips", days).to_pylist()
    by_clip = {r["clip_id"]: names[r["video_id"]] for r in rows}
    return {
        names[r["video_id"]]: (
            r["passed"],
            r["duplicate_group"] and by_clip.get(r["duplicate_group"]),
            r["duplicate_kind"],
        )
        for r in rows
    }


def _materialize(res: dict, day: str, instance: dg.DagsterInstance, assets=ASSETS) -> dg.ExecuteInProcessResult:
    result = dg.materialize(assets, partition_key=day, resources=res, instance=instance, run_config=RUN_CONFIG)
    assert result.success
    return result


def test_near_copies_across_days_in_any_order(videos, tmp_path):
    root = tmp_path / "store"
    land(root, A, {"x.mp4": videos["x"]})
    land(root, B, {"x_bright.mp4": videos["x_bright"], "y.mp4": videos["y"]})
    land(root, C, {"x_letterbox.mp4": videos["x_letterbox"]})
    res = local_resources(root, tmp_path / "lake")
    instance = dg.DagsterInstance.ephemeral()

    # The later day first: its copy of x has nothing earlier to match, so it is kept.
    _materialize(res, B, instance)
    assert _verdicts(res) == {(B, "x_bright.mp4"): (True, None, None), (B, "y.mp4"): (True, None, None)}

    # Then the earlier day: B's copy is now a near-duplicate of A's x, and the run records B as re-judged.
    result = _materialize(res, A, instance)
    recorded = {(e.asset_key.path[-1], e.partition) for e in result.get_asset_materialization_events()}
    assert ("filtered_clips", B) in recorded and ("filtered_clips", C) not in recorded
    assert _verdicts(res) == {
        (A, "x.mp4"): (True, (A, "x.mp4"), None),
        (B, "x_bright.mp4"): (False, (A, "x.mp4"), "near"),
        (B, "y.mp4"): (True, None, None),
    }
    assert _filtered_md(result, A)["duplicates_of_earlier_days"] == 0

    # A letterboxed copy on a third day names A's clip (the kept one), not B's copy.
    result = _materialize(res, C, instance)
    late_order = _verdicts(res)
    assert late_order[(C, "x_letterbox.mp4")] == (False, (A, "x.mp4"), "near")
    md = _filtered_md(result, C)
    assert (md["duplicates"], md["duplicates_of_earlier_days"], md["near_duplicates"]) == (1, 1, 1)

    # The same landing materialized in date order, in one run, into another lake: the same verdicts.
    fresh = local_resources(root, tmp_path / "lake2")
    job = dg.Definitions(assets=ASSETS, resources=fresh).resolve_implicit_global_asset_job_def()
    run = job.execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        run_config=RUN_CONFIG,
        tags={"dagster/asset_partition_range_start": A, "dagster/asset_partition_range_end": C},
    )
    assert run.success and _verdicts(fresh) == late_order

    # The original leaves A and A is materialized again: B's copy is the kept clip now, C's names it.
    (root / "landing" / A / "x.mp4").unlink()
    land(root, A, {"z.mp4": videos["z"]})
    result = _materialize(res, A, instance)
    assert {
        e.partition for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == "filtered_clips"
    } == {A, B, C}
    assert _verdicts(res) == {
        (A, "z.mp4"): (True, None, None),
        (B, "x_bright.mp4"): (True, (B, "x_bright.mp4"), None),
        (B, "y.mp4"): (True, None, None),
        (C, "x_letterbox.mp4"): (False, (B, "x_bright.mp4"), "near"),
    }


def _filtered_md(result: dg.ExecuteInProcessResult, day: str) -> dict:
    """The figures of ``day`` on the run's filtered_clips materialization of it."""
    for e in result.get_asset_materialization_events():
        if e.asset_key.path[-1] == "filtered_clips" and e.partition == day:
            md = e.materialization.metadata
            details = table_figures(md["details"]) if "details" in md else {}
            return {**details, **{k: getattr(v, "value", v) for k, v in md.items()}}  # plotted, and the table's
    raise AssertionError(f"no filtered_clips materialization of {day}")
