"""Ground truth of a spec (cuts, cut ranges, transitions, flashes, segments, expected verdict), computed without
rendering, and where and how the ``<stem>.json`` truth files are written.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

from videolake.synth.sources import _is_static, _motion
from videolake.synth.specs import VideoSpec, _flash_spans, _layout, spec_container, validate


def spec_truth(spec: VideoSpec) -> dict[str, Any]:
    """The ground truth of a spec, computed without rendering (render() adds what only the file can tell)."""
    validate(spec)
    lay = _layout(spec)
    fps = Fraction(spec.fps)
    cuts, ranges, transitions = [], [], []
    for t, a in zip(spec.transitions, lay.trans_start):
        cuts.append(a + t.frames // 2)
        ranges.append([a, a + t.frames])
        transitions.append({"kind": t.kind, "start": a, "frames": t.frames})
    flashes: list[int] = []
    flash_frames: list[int] = []
    segments = []
    for seg, b in zip(spec.segments, lay.body_start):
        for off, length in _flash_spans(seg):
            flashes.append(b + off)
            flash_frames.extend(range(b + off, b + off + length))
        segments.append(
            {
                "source": seg.source,
                "start": b,
                "frames": seg.frames,
                "static": _is_static(seg.source),
                "motion": _motion(seg.source),
            }
        )
    container = spec_container(spec)
    return {
        "file": f"{spec.name}.{container}",
        "fps": float(fps),
        "fps_str": spec.fps,
        "num_frames": lay.num_frames,
        "duration_s": round(lay.num_frames / float(fps), 6),
        "width": spec.width,
        "height": spec.height,
        "codec": spec.codec,
        "container": container,
        "vfr": spec.vfr,
        "has_audio": spec.audio,
        "cuts": cuts,
        "cut_ranges": ranges,
        "transitions": transitions,
        "flashes": flashes,
        "flash_frames": flash_frames,
        "segments": segments,
        "expect": spec.expect,
        "variant_of": None,
    }


def default_truth_dir(out_dir: str | Path) -> Path:
    """Where ``generate`` (and ``videolake synth OUT``) put the truths by default: the sibling folder
    ``<OUT>.truth``, never OUT itself, so OUT can be a landing folder (a .json there would be ingested as a
    ``not_a_video`` rejection). The sibling of ``landing/2024-03-01`` is ``landing/2024-03-01.truth``, outside the
    day's prefix ``landing/2024-03-01/``, and not a date, so the landing sensor ignores it."""
    out = Path(out_dir).resolve()
    return out.with_name(out.name + ".truth") if out.name else out / "truth"


def _write_truth(video: Path, truth: dict[str, Any], truth_dir: str | Path | None = None) -> Path:
    """``<stem>.json`` in ``truth_dir`` (default: beside the video): one key per line, values compact."""
    if truth_dir is None:
        path = video.with_suffix(".json")
    else:
        Path(truth_dir).mkdir(parents=True, exist_ok=True)
        path = Path(truth_dir) / (video.stem + ".json")
    path.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in truth.items()) + "\n}\n")
    return path
