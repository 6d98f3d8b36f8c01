"""`videolake bench cpu` and `videolake bench scenes`: CPU cost of our work vs ffmpeg's decode-only, same files.

- cpu: probe + scene detection + quality scores of the CPU stage, in this process.
- scenes: the whole ``videolake scenes FILE`` process (interpreter start-up and imports count), as a user runs it.

Both sides are measured as CPU time (user + sys, all threads / children), so the ratio holds on a noisy machine:
ratio = (our frames per CPU-second) / (ffmpeg -threads 1 decode-only frames per CPU-second).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CpuBenchRow:
    label: str
    frames: int
    ours_cpu_s: float
    ffmpeg_cpu_s: float

    @property
    def ours_fps_per_core(self) -> float:
        return self.frames / self.ours_cpu_s if self.ours_cpu_s else 0.0

    @property
    def ffmpeg_fps_per_core(self) -> float:
        return self.frames / self.ffmpeg_cpu_s if self.ffmpeg_cpu_s else 0.0

    @property
    def ratio(self) -> float:
        return self.ffmpeg_cpu_s / self.ours_cpu_s if self.ours_cpu_s else 0.0


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ffmpeg_decode_cpu(path: str) -> float:
    before = _children_cpu()
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-threads", "1", "-i", path, "-f", "null", "-"], check=True)
    return _children_cpu() - before


def cpu_stage_cpu(path: str, detector: str = "luma") -> tuple[float, int]:
    """CPU seconds of probe + scene detection + quality scoring of one file, in this process."""
    from videolake.platform.scenes import get_detector
    from videolake.platform.scenes.segments import cuts_to_ranges
    from videolake.platform.stages.score import _score_stats_for_bench
    from videolake.platform.stages.split import _detect
    from videolake.platform.video import clips as _clips
    from videolake.platform.video.probe import ProbeConfig, probe_video

    det = get_detector(detector)
    _clips._INDEX_CACHE.clear()  # the stage builds a video's frame index once per unit: so does each measurement
    before = _self_cpu()
    outcome = probe_video(path, ProbeConfig(full_decode=False))  # as raw_videos runs it (RawVideosConfig)
    result, keeper = _detect(det, path)  # as the split stage runs it: the luma pass keeps the sampled frames
    ranges = cuts_to_ranges(result.cuts, result.num_frames, result.fps, 20.0)
    _score_stats_for_bench(path, outcome.probe, result, ranges, keeper.sampled(ranges) if keeper else None)
    return _self_cpu() - before, result.num_frames


def scenes_cli_cpu(path: str, detector: str = "luma") -> tuple[float, int]:
    """CPU seconds of one whole ``videolake scenes FILE`` process (start-up included) and the frames it reports."""
    script = Path(sys.executable).with_name("videolake")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "videolake.cli"]
    before = _children_cpu()
    out = subprocess.run([*cmd, "scenes", path, "--detector", detector], check=True, capture_output=True, text=True)
    return _children_cpu() - before, int(json.loads(out.stdout)["num_frames"])


def make_bench_video(out_dir: Path, height: int, seconds: int) -> Path:
    """A synthetic h264 file with hard cuts, the shape of the scenes benchmark (360p / 1080p)."""
    from videolake.synth import Segment, Transition, VideoSpec, render

    width = {240: 426, 360: 640, 480: 854, 720: 1280, 1080: 1920}[height]
    per = max(1, seconds // 4) * 30
    sources = ("testsrc2", "mandelbrot", "smptehdbars", "gradients")
    spec = VideoSpec(
        name=f"bench_{height}p_{seconds}s",
        width=width,
        height=height,
        fps="30",
        codec="h264",
        segments=tuple(Segment(source=s, frames=per) for s in sources),
        transitions=tuple(Transition("cut") for _ in sources[1:]),
    )
    path, _truth = render(spec, out_dir)
    return Path(path)


def bench_files(tmp: Path, files: list[str] | None, heights, seconds: int) -> list[tuple[str, str]]:
    """(label, path) of the files to measure: ``files`` as given, else a synthetic file per height in ``tmp``."""
    if files:
        return [(Path(f).name, f) for f in files]
    return [(f"{h}p", str(make_bench_video(tmp, h, seconds))) for h in heights]


def bench_cpu(
    heights=(360, 1080), seconds: int = 20, repeats: int = 2, files: list[str] | None = None
) -> list[CpuBenchRow]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="videolake-bench-") as tmp:
        paths = bench_files(Path(tmp), files, heights, seconds)
        for label, path in paths:
            cpu_stage_cpu(path)  # warm-up: imports and page cache, not measured
            ours, ff, frames = [], [], 0
            for _ in range(repeats):  # interleaved, best of N for both sides
                c, frames = cpu_stage_cpu(path)
                ours.append(c)
                ff.append(ffmpeg_decode_cpu(path))
            rows.append(CpuBenchRow(label, frames, min(ours), min(ff)))
    return rows


def bench_scenes_cli(
    heights=(360, 1080), seconds: int = 100, repeats: int = 2, files: list[str] | None = None
) -> list[CpuBenchRow]:
    """``videolake scenes FILE`` (whole process) vs ``ffmpeg -threads 1 -i FILE -f null -``, best of ``repeats``
    each, interleaved; the first CLI run of each file (page cache, bytecode) is not measured."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="videolake-bench-") as tmp:
        paths = bench_files(Path(tmp), files, heights, seconds)
        for label, path in paths:
            scenes_cli_cpu(path)
            ours, ff, frames = [], [], 0
            for _ in range(repeats):
                c, frames = scenes_cli_cpu(path)
                ours.append(c)
                ff.append(ffmpeg_decode_cpu(path))
            rows.append(CpuBenchRow(label, frames, min(ours), min(ff)))
    return rows


def format_rows(rows: list[CpuBenchRow], what: str = "stage", measured: str = "probe + detect + score") -> str:
    lines = [f"{'file':>10} {'frames':>7} {what + ' f/s/core':>15} {'ffmpeg f/s/core':>16} {'ratio':>6}"]
    for r in rows:
        lines.append(
            f"{r.label:>10} {r.frames:>7} {r.ours_fps_per_core:>15.0f} {r.ffmpeg_fps_per_core:>16.0f} {r.ratio:>6.2f}"
        )
    lines.append(f"(ratio = ffmpeg CPU s / {what} CPU s for {measured}; target >= 0.8; cores: {os.cpu_count()})")
    return "\n".join(lines)
