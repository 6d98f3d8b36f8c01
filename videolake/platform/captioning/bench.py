"""``videolake bench caption``: the whole caption stage versus raw ``LLM.generate`` on the same inputs.

Two numbers on the same clips, frames and prompts:
- stage: ``caption_clips`` (frame extraction tasks + Ray Data + captioner actors), captions/s measured from the
  moment the first actor was ready to the last batch (steady state: model load is excluded, as it is from the
  baseline) and, for the record, end to end including actor start and model load;
- raw: frames pre-decoded in this process, one vLLM engine here, one ``LLM.generate`` over all prompts (the best
  the engine can do with no pipeline around it).
ratio = stage / raw (target >= 0.9). Load seconds are reported beside, not mixed in.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa

from videolake.platform.captioning.base import CaptionerConfig, FrameConfig, SamplingConfig
from videolake.platform.captioning.clip_frames import SourceOpener, extract_frames

log = logging.getLogger(__name__)

_SOURCES = ["testsrc2", "mandelbrot", "smptehdbars", "rgbtestsrc"]


@dataclass(frozen=True)
class CaptionBench:
    clips: int  # clips in the workload
    captions_ok: int  # ok rows from the stage
    stage_captions_per_s: float  # steady state: first actor ready -> last batch
    stage_end_to_end_captions_per_s: float  # including actor start and model load
    stage_wall_s: float
    stage_model_load_s: float  # per actor (max)
    raw_captions_per_s: float  # one LLM.generate over the same pre-decoded frames and prompts
    raw_generate_s: float
    raw_model_load_s: float
    ratio: float  # stage_captions_per_s / raw_captions_per_s (target >= 0.9)

    def report(self) -> str:
        return (
            f"caption stage (Ray Data + actors): {self.stage_captions_per_s:.2f} captions/s steady "
            f"({self.stage_end_to_end_captions_per_s:.3f}/s end to end over {self.stage_wall_s:.1f}s, "
            f"model load {self.stage_model_load_s:.1f}s)\n"
            f"raw LLM.generate, same frames+prompts: {self.raw_captions_per_s:.2f} captions/s "
            f"({self.raw_generate_s:.2f}s generate, model load {self.raw_model_load_s:.1f}s)\n"
            f"ratio stage/raw: {self.ratio:.2f} (target >= 0.9); {self.captions_ok}/{self.clips} clips captioned"
        )

    def to_dict(self) -> dict:
        return asdict(self)


def bench_caption(clips: pa.Table, config: CaptionerConfig, *, open_source: SourceOpener | None = None,
                  raw_repeats: int = 3, echo: Callable[[str], None] | None = print) -> CaptionBench:
    """Run the raw baseline in this process, then the stage, on the same clips; print and return both.

    Both engines get the same warm-up in setup(). The raw generate runs ``raw_repeats`` times (median), each pass
    with empty prefix and multimodal caches. The stage runs once (each run starts its actors anew); its rate is taken
    over the steady window (first actor ready -> last batch). The baseline goes first: a stage's actor can keep its
    cores busy for a while after the stage (until Ray reaps it), which would slow a baseline measured after it.
    """
    from videolake.platform.captioning.pipeline import caption_clips

    if config.backend != "vllm":
        raise ValueError("the caption bench compares against raw vLLM: use backend='vllm'")
    raw_ok, raw_s, raw_load = _raw_baseline(clips, config, open_source, raw_repeats)
    raw_rate = raw_ok / raw_s if raw_s > 0 else 0.0
    if echo:
        echo(f"raw: {raw_ok} captions in {raw_s:.2f}s (median of {max(1, raw_repeats)})")

    table, metrics = caption_clips(clips, config, open_source=open_source)
    ok = metrics.captions
    # The stage's steady rate counts every row; count ok rows only, like the baseline.
    stage_rate = metrics.steady_captions_per_s * ok / max(table.num_rows, 1)
    if echo:
        echo(f"stage: {ok} ok / {table.num_rows} clips in {metrics.wall_s:.1f}s")
        for cid, err in zip(table.column("clip_id").to_pylist(), table.column("error").to_pylist()):
            if err:
                echo(f"  failed {cid}: {err}")
    result = CaptionBench(
        clips=clips.num_rows,
        captions_ok=ok,
        stage_captions_per_s=stage_rate,
        stage_end_to_end_captions_per_s=ok / metrics.wall_s if metrics.wall_s > 0 else 0.0,
        stage_wall_s=metrics.wall_s,
        stage_model_load_s=metrics.model_load_s_max,
        raw_captions_per_s=raw_rate,
        raw_generate_s=raw_s,
        raw_model_load_s=raw_load,
        ratio=stage_rate / raw_rate if raw_rate > 0 else 0.0,
    )
    if echo:
        echo(result.report())
    return result


def _raw_baseline(clips: pa.Table, config: CaptionerConfig, open_source: SourceOpener | None,
                  repeats: int) -> tuple[int, float, float]:
    """(ok captions, median generate seconds, model load seconds) of one in-process engine over the same requests
    the stage builds: the same extraction code, prompt, frames, metadata and per-clip seeds."""
    from videolake.platform.captioning.vllm_backend import VLLMCaptioner

    cols = {c: clips.column(c).to_numpy(zero_copy_only=False) for c in
            ("clip_id", "video_id", "source_uri", "start_frame", "end_frame", "fps")}
    if "clip_uri" in clips.column_names:
        cols["clip_uri"] = clips.column("clip_uri").to_numpy(zero_copy_only=False)
    batch = extract_frames(cols, frame_config=config.frames, input_mode=config.input_mode, open_source=open_source)
    items = [
        {"clip_id": str(batch["clip_id"][i]), "frames": batch["frames"][i],
         "video_meta": json.loads(batch["video_meta"][i])}
        for i in range(len(batch["clip_id"]))
        if not batch["frame_error"][i]
    ]
    backend = VLLMCaptioner(config)
    backend.setup()
    try:
        prompts, params = backend.build_requests(items)
        times = []
        for _ in range(max(1, repeats)):  # the median of a few runs: shared machines are noisy
            # Each pass starts with empty prefix and multimodal caches: a repeat must not reuse the previous
            # pass's encoder outputs and KV blocks (the stage sees every clip once).
            backend.llm.reset_prefix_cache()
            backend.llm.reset_mm_cache()
            t0 = time.perf_counter()
            outputs = backend.llm.generate(prompts, params, use_tqdm=False)
            times.append(time.perf_counter() - t0)
    finally:
        load_s = backend.load_s
        backend.teardown()
    ok = sum(1 for o in outputs if o.outputs and (o.outputs[0].text or "").strip())
    return ok, statistics.median(times), load_s


def make_bench_clips(work_dir: str | os.PathLike, *, videos: int = 4, clips_per_video: int = 8,
                     seconds_per_clip: float = 1.0, fps: int = 24, size: str = "320x240") -> pa.Table:
    """A synthetic workload: ``videos`` ffmpeg lavfi videos, each cut into ``clips_per_video`` equal clips."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RuntimeError("ffmpeg is not installed")
    out = Path(work_dir)
    out.mkdir(parents=True, exist_ok=True)
    frames_per_clip = int(round(seconds_per_clip * fps))
    total = frames_per_clip * clips_per_video
    rows: dict[str, list] = {k: [] for k in ("clip_id", "video_id", "source_uri", "start_frame", "end_frame", "fps")}
    for v in range(videos):
        src = _SOURCES[v % len(_SOURCES)]
        path = out / f"bench_{v}_{src}.mp4"
        if not path.exists():
            subprocess.run(
                [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", f"{src}=size={size}:rate={fps}",
                 "-frames:v", str(total), "-pix_fmt", "yuv420p", "-c:v", "libx264", "-g", str(fps), str(path)],
                check=True,
            )
        for c in range(clips_per_video):
            start, end = c * frames_per_clip, (c + 1) * frames_per_clip
            rows["clip_id"].append(f"bench{v}_{start:08d}_{end:08d}")
            rows["video_id"].append(f"bench{v}")
            rows["source_uri"].append(path.resolve().as_uri())
            rows["start_frame"].append(start)
            rows["end_frame"].append(end)
            rows["fps"].append(float(fps))
    return pa.table(rows)


def tiny_bench_config(model_dir: str, **overrides) -> CaptionerConfig:
    """The CPU settings the tests and the local bench use with the tiny model."""
    base = CaptionerConfig(
        model=model_dir,
        enforce_eager=True,
        frames=FrameConfig(sample_fps=4.0, min_frames=4, max_frames=4, max_pixels=112 * 112),
        sampling=SamplingConfig(temperature=0.7, top_p=0.95, max_tokens=16),
        batch_size=32,
        num_actors=1,
        max_num_seqs=32,
    )
    return base.replace(**overrides) if overrides else base


def run_local_bench(work_dir: str, *, model: str | None = None, videos: int = 4, clips_per_video: int = 8,
                    model_dir: str | None = None, echo: Callable[[str], None] | None = print,
                    **overrides) -> CaptionBench:
    """Build the tiny model (cached, in ``model_dir`` or under ``work_dir``) when no model is given, make the
    workload, run the bench."""
    from videolake.platform.captioning.tiny_model import build_tiny_qwen_vl

    if model is None:
        model = build_tiny_qwen_vl(model_dir or os.path.join(work_dir, "tiny-qwen2_5_vl"))
        if echo:
            echo(f"model: tiny random-weight Qwen2.5-VL at {model} (its captions are random text)")
    clips = make_bench_clips(os.path.join(work_dir, "videos"), videos=videos, clips_per_video=clips_per_video)
    return bench_caption(clips, tiny_bench_config(model, **overrides), echo=echo)


def main(clips: int = 16, model: str | None = None, work_dir: str | None = None) -> int:
    """``videolake bench caption``: ``clips`` clips (8 per synthetic video) through the stage and the raw engine.

    Without ``model`` the cached tiny random-weight Qwen2.5-VL under $VIDEOLAKE_DATA_DIR/models is used (the demo's).
    """
    logging.basicConfig(level=logging.WARNING)
    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    work = work_dir or os.path.join(data, "bench", "caption")
    per_video = 8
    videos = max(1, -(-clips // per_video))
    result = run_local_bench(work, model=model, videos=videos, clips_per_video=per_video,
                             model_dir=os.path.join(data, "models", "tiny-qwen2_5_vl"))
    return 0 if result.captions_ok > 0 else 1


__all__ = ["CaptionBench", "bench_caption", "make_bench_clips", "main", "run_local_bench", "tiny_bench_config"]
