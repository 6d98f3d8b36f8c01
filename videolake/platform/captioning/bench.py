"""``videolake bench caption``: the whole caption stage versus raw ``LLM.generate`` on the same inputs.

The clips' frames are decoded once, in this process, and kept in a ``FrameCache``. Then, on those same frames,
prompts and per-clip seeds:
- raw: one vLLM engine here, one ``LLM.generate`` over all prompts (the best the engine can do with no pipeline
  around it);
- stage: ``caption_clips`` (extraction tasks reading the cache + Ray Data + captioner actors that checkpoint every
  batch + finalize + one Delta commit), captions/s from the moment the first actor was ready to the last batch
  (steady state: model load is excluded, as it is from the baseline) and, for the record, end to end.
ratio = stage / raw (target >= 0.9): what the platform around the engine costs. Load seconds are reported beside.

With ``decode=True`` the stage runs a second time decoding its own frames, for the record: on a 2-core node the
decoder then shares the cores with the CPU engine, so that figure measures the node, not the pipeline.
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
from videolake.platform.captioning.clip_frames import FrameCache, SourceOpener, extract_frames

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
    decode_s: float  # seconds this process took to decode the clips' frames once (for both sides)
    stage_decoding_captions_per_s: float | None = None  # steady rate of a second stage run that decodes itself

    def report(self) -> str:
        decoding = "" if self.stage_decoding_captions_per_s is None else (
            f"\nstage decoding its own frames (shares the cores with the engine): "
            f"{self.stage_decoding_captions_per_s:.2f} captions/s steady")
        return (
            f"caption stage (Ray Data + actors): {self.stage_captions_per_s:.2f} captions/s steady "
            f"({self.stage_end_to_end_captions_per_s:.3f}/s end to end over {self.stage_wall_s:.1f}s, "
            f"model load {self.stage_model_load_s:.1f}s)\n"
            f"raw LLM.generate, same frames+prompts: {self.raw_captions_per_s:.2f} captions/s "
            f"({self.raw_generate_s:.2f}s generate, model load {self.raw_model_load_s:.1f}s)\n"
            f"frames decoded once for both in {self.decode_s:.1f}s{decoding}\n"
            f"ratio stage/raw: {self.ratio:.2f} (target >= 0.9); {self.captions_ok}/{self.clips} clips captioned"
        )

    def to_dict(self) -> dict:
        return asdict(self)


def bench_caption(clips: pa.Table, config: CaptionerConfig, *, open_source: SourceOpener | None = None,
                  raw_repeats: int = 3, decode: bool = False, work_dir: str | None = None,
                  echo: Callable[[str], None] | None = print) -> CaptionBench:
    """Decode the frames once; time raw generate passes in this process, the stage, then raw passes again, all on
    the same frames; print and return both rates.

    Both engines get the same warm-up in setup(). Each raw pass starts with empty prefix and multimodal caches. The
    raw rate is the median of ``raw_repeats`` passes before the stage and ``raw_repeats`` after it: these machines
    drift by tens of percent within minutes, and a baseline taken only before the stage would compare two different
    machines. The stage runs once (each run starts its actors anew); its rate is taken over the steady window (first
    actor ready -> last batch).
    """
    import tempfile

    from videolake.platform.captioning.pipeline import caption_clips

    if config.backend != "vllm":
        raise ValueError("the caption bench compares against raw vLLM: use backend='vllm'")
    with tempfile.TemporaryDirectory(prefix="videolake-bench-frames-", dir=work_dir) as tmp:
        t0 = time.perf_counter()
        extracted = _extract_all(clips, config, open_source)
        decode_s = time.perf_counter() - t0
        cache = FrameCache.write(tmp, extracted, config.frames, config.input_mode)
        with _RawEngine(extracted, config) as raw:
            before = [raw.generate_pass() for _ in range(max(1, raw_repeats))]
            table, metrics = caption_clips(clips, config, open_source=open_source, frame_cache=cache)
            after = [raw.generate_pass() for _ in range(max(1, raw_repeats))]
            raw_load = raw.load_s
    raw_ok = before[0][0]
    raw_s = statistics.median([s for _, s in before + after])
    raw_rate = raw_ok / raw_s if raw_s > 0 else 0.0
    ok = metrics.captions
    # The stage's steady rate counts every row; count ok rows only, like the baseline.
    stage_rate = metrics.steady_captions_per_s * ok / max(table.num_rows, 1)
    if echo:
        rates = lambda passes: ", ".join(f"{n / s:.1f}" for n, s in passes)  # noqa: E731
        echo(f"raw: {raw_ok} captions per pass; captions/s before the stage {rates(before)}, after {rates(after)}")
        echo(f"stage: {ok} ok / {table.num_rows} clips in {metrics.wall_s:.1f}s")
        for cid, err in zip(table.column("clip_id").to_pylist(), table.column("error").to_pylist()):
            if err:
                echo(f"  failed {cid}: {err}")
    decoding_rate = None
    if decode:
        decoded_table, decoded = caption_clips(clips, config, open_source=open_source)
        decoding_rate = decoded.steady_captions_per_s * decoded.captions / max(decoded_table.num_rows, 1)
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
        decode_s=decode_s,
        stage_decoding_captions_per_s=decoding_rate,
    )
    if echo:
        echo(result.report())
    return result


def _extract_all(clips: pa.Table, config: CaptionerConfig, open_source: SourceOpener | None) -> dict:
    """The captioner inputs of every clip, decoded here once (the same extraction code the stage runs)."""
    cols = {c: clips.column(c).to_numpy(zero_copy_only=False) for c in
            ("clip_id", "video_id", "source_uri", "start_frame", "end_frame", "fps")}
    if "clip_uri" in clips.column_names:
        cols["clip_uri"] = clips.column("clip_uri").to_numpy(zero_copy_only=False)
    return extract_frames(cols, frame_config=config.frames, input_mode=config.input_mode, open_source=open_source)


class _RawEngine:
    """One in-process engine over the same requests the stage builds (frames, prompt, metadata, per-clip seeds)."""

    def __init__(self, batch: dict, config: CaptionerConfig):
        from videolake.platform.captioning.vllm_backend import VLLMCaptioner

        self.items = [
            {"clip_id": str(batch["clip_id"][i]), "frames": batch["frames"][i],
             "video_meta": json.loads(batch["video_meta"][i])}
            for i in range(len(batch["clip_id"]))
            if not batch["frame_error"][i]
        ]
        self.backend = VLLMCaptioner(config)
        self.load_s = 0.0

    def __enter__(self) -> "_RawEngine":
        self.backend.setup()
        self.load_s = self.backend.load_s
        self.prompts, self.params = self.backend.build_requests(self.items)
        return self

    def __exit__(self, *exc) -> None:
        self.backend.teardown()

    def generate_pass(self) -> tuple[int, float]:
        """(ok captions, seconds) of one ``LLM.generate`` over all prompts, with empty prefix and multimodal caches
        (a pass must not reuse the previous pass's encoder outputs and KV blocks: the stage sees every clip once)."""
        llm = self.backend.llm
        llm.reset_prefix_cache()
        llm.reset_mm_cache()
        t0 = time.perf_counter()
        outputs = llm.generate(self.prompts, self.params, use_tqdm=False)
        seconds = time.perf_counter() - t0
        return sum(1 for o in outputs if o.outputs and (o.outputs[0].text or "").strip()), seconds


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
                    decode: bool = False, **overrides) -> CaptionBench:
    """Build the tiny model (cached, in ``model_dir`` or under ``work_dir``) when no model is given, make the
    workload, run the bench."""
    from videolake.platform.captioning.tiny_model import build_tiny_qwen_vl

    if model is None:
        model = build_tiny_qwen_vl(model_dir or os.path.join(work_dir, "tiny-qwen2_5_vl"))
        if echo:
            echo(f"model: tiny random-weight Qwen2.5-VL at {model} (its captions are random text)")
    clips = make_bench_clips(os.path.join(work_dir, "videos"), videos=videos, clips_per_video=clips_per_video)
    return bench_caption(clips, tiny_bench_config(model, **overrides), decode=decode, work_dir=work_dir, echo=echo)


def main(clips: int = 16, model: str | None = None, work_dir: str | None = None, decode: bool = False) -> int:
    """``videolake bench caption``: ``clips`` clips (8 per synthetic video) through the stage and the raw engine.

    Without ``model`` the cached tiny random-weight Qwen2.5-VL under $VIDEOLAKE_DATA_DIR/models is used (the demo's).
    """
    logging.basicConfig(level=logging.WARNING)
    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    work = work_dir or os.path.join(data, "bench", "caption")
    per_video = 8
    videos = max(1, -(-clips // per_video))
    result = run_local_bench(work, model=model, videos=videos, clips_per_video=per_video,
                             model_dir=os.path.join(data, "models", "tiny-qwen2_5_vl"), decode=decode)
    return 0 if result.captions_ok > 0 else 1


__all__ = ["CaptionBench", "bench_caption", "make_bench_clips", "main", "run_local_bench", "tiny_bench_config"]
