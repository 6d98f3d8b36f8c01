"""`videolake bench models`: the score stage with the model scorers on, in CPU-seconds per frame, against FFmpeg's
decode of the same file.

What is measured is one video's work in the filtered_clips stage as ``stages.score.score_one`` does it: its clips
scored by every configured scorer (the built-in statistics scorers, the near-duplicate fingerprint from the frames
the detection pass kept, and the model scorers on their sampled frames, all served by ONE decoding pass,
``clip_pixels.VideoPixels``), then the passed clips checked to decode as the shard encoder reads them. The frame
statistics and kept frames come from the split stage's detection pass, run first and not counted (it is the
``bench cpu`` figure). Models load once per process (``Scorer.setup``): a warm-up run loads them, unmeasured.

The baseline is ``ffmpeg -threads 1 -i F -f null -`` (what reading every frame costs); ratio = stage CPU-s ÷
FFmpeg CPU-s, so 2.0 means the stage costs two decodes. The design's bound: <= 2 with OCR on sampled frames only.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from videolake.benchmarks.cpu import _self_cpu, bench_files, ffmpeg_decode_cpu

# The model scorers `make bench` turns on, with the settings it measures.
MODEL_SCORERS = ("text_overlay", "nsfw", "faces")


@dataclass(frozen=True)
class ModelBenchRow:
    label: str
    frames: int
    clips: int
    stage_cpu_s: float
    ffmpeg_cpu_s: float
    baseline_cpu_s: float  # the same stage with the default scorers only

    @property
    def ratio(self) -> float:
        return self.stage_cpu_s / self.ffmpeg_cpu_s if self.ffmpeg_cpu_s else 0.0


def _prepared(path: str) -> tuple[list[dict], Any, Any]:
    """The clips, frame statistics (with kept frames) and probe of ``path``, as the split stage leaves them."""
    from dataclasses import replace

    from videolake.platform.lake.schemas import clip_id
    from videolake.platform.scenes import get_detector
    from videolake.platform.scenes.segments import cuts_to_ranges
    from videolake.platform.stages.split import _detect
    from videolake.platform.video.probe import ProbeConfig, probe_video

    probe = probe_video(path, ProbeConfig(full_decode=False)).probe
    result, keeper = _detect(get_detector("luma"), path)
    ranges = cuts_to_ranges(result.cuts, result.num_frames, result.fps, 20.0)
    stats = result.stats
    if keeper is not None:
        stats = replace(stats, thumbnails=keeper.sampled(ranges))
    fps = result.fps or 30.0
    clips = [
        {
            "clip_id": clip_id("bench", s, e),
            "video_id": "bench",
            "start_frame": s,
            "end_frame": e,
            "duration_s": (e - s) / fps,
            "clip_index": i,
        }
        for i, (s, e) in enumerate(ranges)
    ]
    video = {"video_id": "bench", "width": probe.width if probe else None, "height": probe.height if probe else None}
    return clips, stats, video


def score_stage_cpu(path: str, prepared: tuple[list[dict], Any, Any], config: Any) -> float:
    """CPU seconds of one video's filtered_clips work under ``config`` (scores, one pixel pass, decode check)."""
    from videolake.platform.filters.quality import score_video_clips
    from videolake.platform.stages.score import _file_pixels, set_aside
    from videolake.platform.video import clips as _clips

    clips, stats, video = prepared
    _clips._INDEX_CACHE.clear()  # the stage builds a video's frame index once per unit: so does each measurement
    before = _self_cpu()
    rows = score_video_clips(clips, stats, video, config, pixels=_file_pixels(path, clips, stats.thumbnails, config))
    set_aside(rows, clips, lambda: path)
    return _self_cpu() - before


def bench_models(
    heights: tuple[int, ...] = (360, 1080),
    seconds: int = 20,
    repeats: int = 2,
    files: list[str] | None = None,
    scorers: tuple[str, ...] = MODEL_SCORERS,
) -> list[ModelBenchRow]:
    from videolake.platform.filters.quality import DEFAULT_SCORERS, SCORERS, QualityConfig

    on = tuple(s for s in scorers if s in SCORERS)
    with_models = QualityConfig(scorers=(*DEFAULT_SCORERS, *(s for s in on if s not in DEFAULT_SCORERS)))
    defaults = QualityConfig()
    rows = []
    with tempfile.TemporaryDirectory(prefix="videolake-bench-") as tmp:
        paths = bench_files(Path(tmp), files, heights, seconds)
        for label, path in paths:
            prepared = _prepared(path)
            score_stage_cpu(path, prepared, with_models)  # warm-up: model load, imports, page cache
            ours, base, ff = [], [], []
            for _ in range(repeats):  # interleaved, best of N for each side
                ours.append(score_stage_cpu(path, prepared, with_models))
                base.append(score_stage_cpu(path, prepared, defaults))
                ff.append(ffmpeg_decode_cpu(path))
            frames = int(prepared[1].num_frames)
            rows.append(ModelBenchRow(label, frames, len(prepared[0]), min(ours), min(ff), min(base)))
    return rows


def format_rows(rows: list[ModelBenchRow], scorers: tuple[str, ...] = MODEL_SCORERS) -> str:
    lines = [
        f"{'file':>16} {'frames':>7} {'clips':>5} {'stage CPU-ms/frame':>19} {'defaults only':>14} "
        f"{'ffmpeg CPU-ms/frame':>20} {'ratio':>6}"
    ]
    for r in rows:
        per = lambda s, n=r.frames: 1000 * s / max(1, n)  # noqa: E731
        lines.append(
            f"{r.label:>16} {r.frames:>7} {r.clips:>5} {per(r.stage_cpu_s):>19.2f} {per(r.baseline_cpu_s):>14.2f} "
            f"{per(r.ffmpeg_cpu_s):>20.2f} {r.ratio:>6.2f}"
        )
    lines.append(
        f"(ratio = filtered_clips CPU s with the default scorers + {', '.join(scorers)} ÷ ffmpeg -threads 1 decode CPU s"
        f" of the same file; bound <= 2.0; cores: {os.cpu_count()})"
    )
    return "\n".join(lines)
