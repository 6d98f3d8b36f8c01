"""Perturbed copies of a written file (speed change, scale, centre crop, re-encode) with their truth recomputed, so
a detector is also scored on near-duplicates of the same content.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

from videolake.synth.ffmpeg import (
    _DEFAULT_QUALITY,
    _ENCODERS,
    VFR_TIMEBASE,
    _encode_args,
    _ffmpeg,
    _run,
    count_frames,
    frame_times,
)
from videolake.synth.sources import _cfr_pts
from videolake.synth.truth import _write_truth

PERTURBATIONS = ("speed", "scale", "crop", "codec")
_SPEEDS = (Fraction(11, 10), Fraction(6, 5), Fraction(5, 4), Fraction(9, 10), Fraction(4, 5), Fraction(3, 4))


def _ceil_div(i: int, s: Fraction) -> int:
    """Smallest output frame j that shows source frame >= i when output frame j shows source frame floor(j * s)."""
    return math.ceil(Fraction(i) / s)


def _speed_truth(truth: dict[str, Any], s: Fraction, num_frames: int) -> dict[str, Any]:
    """Truth of a copy played ``s`` times faster, re-sampled at the same rate: output j shows source floor(j * s)."""
    new = dict(truth)
    trans, cuts, ranges = [], [], []
    for t in truth["transitions"]:
        a, d = t["start"], t["frames"]
        a2 = _ceil_div(a, s)
        d2 = _ceil_div(a + d, s) - a2 if d else 0
        trans.append({"kind": t["kind"], "start": a2, "frames": d2})
        cuts.append(a2 + d2 // 2)
        ranges.append([a2, a2 + d2])
    flashes: list[int] = []
    flash_frames: list[int] = []
    flash_set = set(truth.get("flash_frames", []))
    for f in truth["flashes"]:
        length = 1
        while f + length in flash_set:
            length += 1
        lo, hi = _ceil_div(f, s), min(_ceil_div(f + length, s), num_frames)
        if lo < hi:  # a speed-up may drop a whole 1-frame flash
            flashes.append(lo)
            flash_frames.extend(range(lo, hi))
    new.update(
        num_frames=num_frames,
        duration_s=round(num_frames / truth["fps"], 6),
        transitions=trans,
        cuts=cuts,
        cut_ranges=ranges,
        flashes=flashes,
        flash_frames=flash_frames,
        segments=[
            {
                **g,
                "start": _ceil_div(g["start"], s),
                "frames": (_ceil_div(g["start"] + g["frames"], s) - _ceil_div(g["start"], s)),
            }
            for g in truth.get("segments", [])
        ],
        speed=str(s),
    )
    return new


def perturb(
    src: str | Path,
    truth: dict[str, Any],
    k: int,
    out_dir: str | Path,
    seed: int = 0,
    *,
    ops: Iterable[str] | None = None,
    speed: Fraction | None = None,
    truth_dir: str | Path | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Write the k-th (1-based) perturbed copy of ``src`` as ``<stem>__v<k>.<ext>`` with its recomputed truth
    (into ``truth_dir``, default beside it).

    Perturbations: speed change (+-10-25 %, frame-exact re-sampling), scale, centre crop, re-encode with another
    codec/CRF. Every variant is re-encoded; crop and scale keep frame indices, a speed change moves them.
    ``ops`` (a subset of PERTURBATIONS) and ``speed`` override the seeded choice (tests).
    """
    src = Path(src)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ops_override = ops
    # Variants 1..4 of a file cycle through the four perturbations (from a per-file offset); half add a second one.
    offset = random.Random(f"{seed}:{truth['file']}").randrange(len(PERTURBATIONS))
    rnd = random.Random(f"{seed}:{truth['file']}:{k}")
    ops = [PERTURBATIONS[(k - 1 + offset) % len(PERTURBATIONS)]]
    if rnd.random() < 0.5:
        ops.append(rnd.choice([o for o in PERTURBATIONS if o not in ops]))
    if ops_override is not None:
        ops = list(ops_override)
        unknown = set(ops) - set(PERTURBATIONS)
        if unknown:
            raise ValueError(f"unknown perturbations {sorted(unknown)}; known: {PERTURBATIONS}")
    # No speed change on VFR files (fps would make them CFR) nor on specials (it could move "short" past the
    # minimum clip length and change the expected verdict).
    if (truth.get("vfr") or truth.get("special")) and "speed" in ops:
        ops = [o if o != "speed" else "scale" for o in ops]
        ops = list(dict.fromkeys(ops))
    w, h = truth["width"], truth["height"]
    codec, container = truth["codec"], truth["container"]
    quality = None
    filters: list[str] = []
    new: dict[str, Any] = dict(truth)
    applied: list[str] = []
    if "crop" in ops:
        f = rnd.choice([0.8, 0.85, 0.9])
        cw, ch = max(16, int(w * f) // 2 * 2), max(16, int(h * f) // 2 * 2)
        filters.append(f"crop={cw}:{ch}")
        w, h = cw, ch
        applied.append(f"crop:{cw}x{ch}")
    if "scale" in ops:
        f = rnd.choice([0.5, 0.75, 1.25, 1.5])
        sw, sh = max(16, round(w * f / 2) * 2), max(16, round(h * f / 2) * 2)
        filters.append(f"scale={sw}:{sh}")
        w, h = sw, sh
        applied.append(f"scale:{sw}x{sh}")
    if "codec" in ops:
        choices = [c for c in _ENCODERS if c != codec and not (truth.get("vfr") and c == "mpeg4")]
        codec = rnd.choice(choices)
        container = _ENCODERS[codec][0]
        quality = rnd.choice({"h264": [18, 28, 35], "hevc": [24, 32], "vp9": [30, 45], "mpeg4": [2, 8]}[codec])
        applied.append(f"codec:{codec}:q{quality}")
    else:
        base = _DEFAULT_QUALITY[codec]
        quality = base + rnd.choice([-5, 5, 10]) if codec != "mpeg4" else rnd.choice([2, 6, 10])
        applied.append(f"requality:q{quality}")
    name = f"{Path(truth['file']).stem}__v{k}"
    path = out_dir / f"{name}.{container}"
    cmd = _ffmpeg("-i", str(src), "-map", "0:v:0")
    audio = bool(truth.get("has_audio"))
    if audio:
        cmd += ["-map", "0:a:0"]
    rate = truth["fps_str"]
    if "speed" in ops:
        s = Fraction(speed) if speed is not None else rnd.choice(_SPEEDS)
        n_src = truth["num_frames"]
        n_out = _ceil_div(n_src, s)  # the j with floor(j * s) < n_src
        # Source frame i goes to output slot ceil(i / s); fps then keeps, per slot, the last frame that reached it,
        # i.e. output j shows source floor(j * s): exact, no interpolation. (ceil of an integer ratio: exact in
        # double for these small numbers.)
        filters = [_cfr_pts(rate), f"setpts=ceil(N*{s.denominator}/{s.numerator})", f"fps={rate}"] + filters
        if audio:
            cmd += ["-af", f"atempo={float(s):.6f}"]
        applied.insert(0, f"speed:{s}")
        new = _speed_truth(truth, s, n_out)
        frames_arg = ["-frames:v", str(n_out), "-fps_mode", "passthrough", "-r", rate]
    else:
        frames_arg = ["-fps_mode", "passthrough"]
        if truth.get("vfr"):
            frames_arg += ["-enc_time_base", f"1/{VFR_TIMEBASE}"]
            if container in ("mp4", "mov"):
                frames_arg += ["-video_track_timescale", str(VFR_TIMEBASE)]
        else:
            frames_arg += ["-r", rate]
    if filters:
        cmd += ["-vf", ",".join(filters)]
    cmd += frames_arg + _encode_args(codec, container, quality, audio) + [str(path)]
    _run(cmd)
    new.update(
        file=path.name,
        width=w,
        height=h,
        codec=codec,
        container=container,
        variant_of=truth["file"],
        perturbations=applied,
    )
    got = count_frames(path)
    if got != new["num_frames"]:
        raise RuntimeError(f"{path.name}: decoded {got} frames, the variant's truth has {new['num_frames']}")
    if truth.get("vfr"):
        new["frame_times_s"] = frame_times(path)
    _write_truth(path, new, truth_dir)
    return path, new
