"""The odd files the pipeline must reject or filter (black, frozen, short, truncated, zero bytes, not a video, audio
only; see ``SPECIAL_EXPECT``), each written with its truth.
"""

from __future__ import annotations

import random
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any

from videolake.synth.ffmpeg import _BITEXACT, AUDIO_RATE, _ffmpeg, _run, count_frames
from videolake.synth.rendering import render
from videolake.synth.specs import Segment, Transition, VideoSpec
from videolake.synth.truth import _write_truth
from videolake.synth.verdicts import SPECIAL_EXPECT, SPECIAL_KINDS


def _special_truth(name: str, kind: str, container: str, **over: Any) -> dict[str, Any]:
    """Truth of a file without a decodable video stream."""
    truth: dict[str, Any] = {
        "file": f"{name}.{container}",
        "fps": None,
        "fps_str": None,
        "num_frames": 0,
        "duration_s": 0.0,
        "width": None,
        "height": None,
        "codec": None,
        "container": container,
        "vfr": False,
        "has_audio": False,
        "cuts": [],
        "cut_ranges": [],
        "transitions": [],
        "flashes": [],
        "flash_frames": [],
        "segments": [],
        "expect": SPECIAL_EXPECT[kind],
        "variant_of": None,
        "special": kind,
    }
    truth.update(over)
    return truth


def render_special(
    kind: str,
    out_dir: str | Path,
    *,
    name: str | None = None,
    width: int = 320,
    height: int = 240,
    fps: str = "30",
    seed: int = 0,
    truth_dir: str | Path | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Write one special file (see SPECIAL_EXPECT) and its truth (into ``truth_dir``, default beside it)."""
    if kind not in SPECIAL_EXPECT:
        raise ValueError(f"unknown special {kind!r}; known: {', '.join(SPECIAL_KINDS)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or f"special_{kind}"
    rate = Fraction(fps)
    if kind in ("black", "frozen", "short"):
        two_s, short = round(2 * rate), max(1, round(Fraction(3, 10) * rate))
        frames = {"black": two_s, "frozen": two_s, "short": short}[kind]
        source = {"black": "black", "frozen": "static", "short": "testsrc2"}[kind]
        spec = VideoSpec(
            name=name,
            width=width,
            height=height,
            fps=fps,
            codec="h264",
            segments=(Segment(source, frames),),
            transitions=(),
            seed=seed,
            expect=SPECIAL_EXPECT[kind],
        )
        path, truth = render(spec, out_dir, truth_dir=truth_dir)
        truth["special"] = kind
        _write_truth(path, truth, truth_dir)
        return path, truth
    path = out_dir / f"{name}.mp4"
    if kind == "zero_bytes":
        path.write_bytes(b"")
        truth = _special_truth(name, kind, "mp4")
    elif kind == "not_video":
        rnd = random.Random(seed)
        words = ["frame", "scene", "clip", "lake", "delta", "ray", "caption", "cut", "pixel", "shot"]
        text = "This is not a video.\n" + "\n".join(" ".join(rnd.choice(words) for _ in range(12)) for _ in range(200))
        path.write_text(text + "\n")
        truth = _special_truth(name, kind, "mp4")
    elif kind == "audio_only":
        _run(
            _ffmpeg(
                "-f",
                "lavfi",
                "-i",
                f"sine=frequency=440:sample_rate={AUDIO_RATE}:duration=2",
                "-c:a",
                "aac",
                "-b:a",
                "64k",
                "-threads",
                "1",
                *_BITEXACT,
                "-f",
                "mp4",
                str(path),
            )
        )
        truth = _special_truth(name, kind, "mp4", has_audio=True, duration_s=2.0)
    else:  # truncated
        frames = round(2 * rate)
        spec = VideoSpec(
            name=name + "_full",
            width=width,
            height=height,
            fps=fps,
            codec="h264",
            segments=(Segment("testsrc2", frames // 2), Segment("smptehdbars", frames - frames // 2)),
            transitions=(Transition("cut"),),
            seed=seed,
        )
        full_dir = out_dir / f".{name}_tmp"
        full, full_truth = render(spec, full_dir)
        # Move the index to the front (faststart) so the header survives and only media data is missing.
        fast = full_dir / "fast.mp4"
        _run(_ffmpeg("-i", str(full), "-c", "copy", "-movflags", "+faststart", *_BITEXACT, str(fast)))
        data = fast.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        shutil.rmtree(full_dir, ignore_errors=True)
        truth = {
            **full_truth,
            "file": path.name,
            "expect": SPECIAL_EXPECT[kind],
            "special": kind,
            "declared_frames": full_truth["num_frames"],
            "num_frames": count_frames(path),
            "size_bytes_full": len(data),
        }
    _write_truth(path, truth, truth_dir)
    return path, truth
