"""Kill a run mid-stage with SIGKILL, run it again: it resumes from the checkpointed units (issue 10).

A run is a separate process (kill_child.py: Dagster's materialize with the real resources, a local Ray, the
captioner on the tiny vLLM model) that reads its videos through a slow store (1 s per object read), so the test can
SIGKILL its whole process group (the run, Ray, the actors) when about half of the units have checkpoints:

- during scene_clips at about half of the videos;
- during clip_captions at about half of the clips (batch size 1: one checkpoint piece per clip).

The re-run must report ``units_reused`` >= the checkpoints that existed at the kill (every checkpoint on disk is a
whole unit: files are written atomically), compute only the rest, and end with exactly the rows of a clean run
(ids, statuses, row counts; the clean run is the same assets run uninterrupted on another lake), with no data file
in the table that the table does not reference (the killed attempt never committed).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from videolake.platform.lake.table import Lake, PartitionRange

pytestmark = pytest.mark.slow

DAY = "2026-05-01"
HERE = Path(__file__).parent
# Lenient filter thresholds: most synthetic clips pass, so captioning has enough units to kill in the middle.
THRESHOLDS = {
    "max_frozen_ratio": 1.0,
    "min_motion": 0.0,
    "min_sharpness": 0.0,
    "max_text_area": 1.0,
    "min_brightness": 0.0,
    "max_brightness": 255.0,
}
SOURCES = [
    "testsrc2",
    "mandelbrot",
    "smptehdbars",
    "rgbtestsrc",
    "color:red",
    "color:blue",
    "gradients",
    "sierpinski",
    "color:lime",
    "color:orange",
]
KILL_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from videolake.synth import Segment, Transition, VideoSpec, render

    root = tmp_path_factory.mktemp("store")
    folder = root / "landing" / DAY
    folder.mkdir(parents=True)
    work = tmp_path_factory.mktemp("synth")
    for i in range(8):
        spec = VideoSpec(
            name=f"v{i}",
            width=320,
            height=240,
            fps="30",
            codec="h264",
            segments=(Segment(SOURCES[i], 40), Segment(SOURCES[(i + 3) % len(SOURCES)], 40)),
            transitions=(Transition("cut"),),
        )
        path, _ = render(spec, work, truth_dir=work)
        path.replace(folder / path.name)
    return root


def _child(args: dict) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(HERE / "kill_child.py"), json.dumps(args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _run(args: dict) -> list[dict]:
    proc = _child(args)
    out, _ = proc.communicate(timeout=KILL_TIMEOUT_S)
    assert proc.returncode == 0, out[-4000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"asset"')]


def _kill_when(args: dict, pattern: str, count: int, lake_root: Path) -> int:
    """Start a run; SIGKILL its process group once ``count`` files match ``pattern``; return how many existed."""
    proc = _child(args)
    deadline = time.monotonic() + KILL_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            done = len(list(lake_root.glob(pattern)))
            if done >= count:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                return len(list(lake_root.glob(pattern)))
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it could be killed:\n{proc.stdout.read()[-4000:]}")
            time.sleep(0.05)
        pytest.fail("the run never reached the kill point")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return -1


def _rows(lake_root: Path, table: str, cols: list[str]) -> list[tuple]:
    t = Lake(str(lake_root)).read_partitions(table, PartitionRange.of([DAY]), columns=cols)
    return sorted(tuple(r[c] for c in cols) for r in t.to_pylist())


def _start_from_clean(clean: Path, lake: Path, tables: tuple[str, ...]) -> None:
    """Start ``lake`` with the clean run's committed ``tables`` (a Delta table is a folder whose log names its files
    relative to it): the stage under test reads exactly the upstream rows the clean run had, and they are not
    computed a second time. The clean run's checkpoints stay behind: the resumed stage's are the ones under test."""
    for table in tables:
        shutil.copytree(clean / table, lake / table)


def _no_orphans(lake_root: Path, table: str) -> None:
    from deltalake import DeltaTable

    live = {u.rsplit("/", 1)[-1] for u in DeltaTable(str(lake_root / table)).file_uris()}
    on_disk = {p.name for p in (lake_root / table / f"partition_date={DAY}").glob("*.parquet")}
    assert on_disk == live, f"files the table does not reference: {sorted(on_disk - live)}"


@pytest.fixture(scope="module")
def clean(store, tmp_path_factory, tiny_model_dir):
    """The uninterrupted run: every asset of the day, on its own lake."""
    lake = tmp_path_factory.mktemp("clean-lake")
    _run(
        {
            "store": str(store),
            "lake": str(lake),
            "day": DAY,
            "model": tiny_model_dir,
            "thresholds": THRESHOLDS,
            "assets": ["raw_videos", "scene_clips", "filtered_clips", "clip_captions"],
        }
    )
    return lake


SCENE_COLS = ["clip_id", "video_id", "start_frame", "end_frame", "detect_error"]
FILTER_COLS = ["clip_id", "passed", "reject_reason"]
CAPTION_COLS = ["clip_id", "video_id", "status"]
# What the CPU stages commit: their tables and filtered_clips' near-duplicate index.
UPSTREAM_OF_CAPTIONS = ("raw_videos", "scene_clips", "filtered_clips", "near_dup_index")


def test_kill_during_scene_clips_then_resume(store, clean, tmp_path, tiny_model_dir):
    lake = tmp_path / "lake"
    base = {"store": str(store), "lake": str(lake), "day": DAY, "model": tiny_model_dir, "thresholds": THRESHOLDS}
    _start_from_clean(clean, lake, ("raw_videos",))
    ok_videos = sum(1 for r in _rows(lake, "raw_videos", ["video_id", "status"]) if r[1] == "ok")
    assert ok_videos == 8
    pattern = f"_checkpoints/scene_clips/*/partition_date={DAY}/*.parquet"
    at_kill = _kill_when({**base, "assets": ["scene_clips"], "delay_s": 1.0}, pattern, ok_videos // 2, lake)
    assert ok_videos // 2 <= at_kill < ok_videos, at_kill
    assert not (lake / "scene_clips" / "_delta_log").exists()  # the killed attempt committed nothing
    reports = {r["asset"]: r for r in _run({**base, "assets": ["scene_clips", "filtered_clips"]})}
    assert reports["scene_clips"]["units_total"] == ok_videos
    assert reports["scene_clips"]["units_reused"] >= at_kill
    assert reports["scene_clips"]["units_computed"] == ok_videos - reports["scene_clips"]["units_reused"]
    assert _rows(lake, "scene_clips", SCENE_COLS) == _rows(clean, "scene_clips", SCENE_COLS)
    assert _rows(lake, "filtered_clips", FILTER_COLS) == _rows(clean, "filtered_clips", FILTER_COLS)
    _no_orphans(lake, "scene_clips")


def test_kill_during_clip_captions_then_resume(store, clean, tmp_path, tiny_model_dir):
    lake = tmp_path / "lake"
    base = {"store": str(store), "lake": str(lake), "day": DAY, "model": tiny_model_dir, "thresholds": THRESHOLDS}
    _start_from_clean(clean, lake, UPSTREAM_OF_CAPTIONS)
    passed = sum(1 for r in _rows(lake, "filtered_clips", FILTER_COLS) if r[1])
    assert passed >= 6, "too few passed clips to kill the caption stage in the middle"
    pattern = f"_checkpoints/clip_captions/*/partition_date={DAY}/piece-*.parquet"
    at_kill = _kill_when({**base, "assets": ["clip_captions"], "delay_s": 1.0}, pattern, passed // 2, lake)
    assert passed // 2 <= at_kill < passed, at_kill
    assert not (lake / "clip_captions" / "_delta_log").exists()
    report = _run({**base, "assets": ["clip_captions"]})[0]
    assert report["units_reused"] >= at_kill
    assert report["units_total"] == report["units_reused"] + report["units_computed"]
    assert report["units_computed"] <= passed - at_kill
    # goodput counts the killed attempt too: its actor held the accelerator (model load, batches) before the kill
    assert 0.0 < report["goodput"] < 1.0
    assert _rows(lake, "clip_captions", CAPTION_COLS) == _rows(clean, "clip_captions", CAPTION_COLS)
    assert len(_rows(lake, "clip_captions", CAPTION_COLS)) == passed
    _no_orphans(lake, "clip_captions")
