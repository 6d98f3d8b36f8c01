"""Accuracy harness for scene detectors: score predicted cuts against ground truth, on a suite of lavfi videos.

Ground truth follows the synthetic-video convention (``videolake.platform.synth``): ``cut_ranges`` holds one
inclusive ``[lo, hi]`` frame range per scene change; a hard cut has ``lo == hi`` (the first frame of the new shot),
a gradual transition spans its mixed frames and the detector must report exactly one frame inside it.

``CASES`` is a self-contained suite (hard cuts, dissolves, fades, wipes, flashes, fast motion, noise, no-cut,
variable frame rate, 29.97 fps, h264/hevc/vp9/mpeg4, 240p..1080p) built with ffmpeg's lavfi sources, so the harness
runs without any other part of videolake. ``run_suite`` prints precision/recall per detector and case.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

log = logging.getLogger(__name__)


def score_cuts(pred: Iterable[int], truth_ranges: Sequence[Sequence[int]]) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) of predicted cut frames against inclusive truth ranges.

    Each truth range is matched by at most one prediction inside it (the earliest unused one); a second prediction
    inside the same range, or one outside every range, is a false positive.
    """
    preds = sorted(int(p) for p in pred)
    used = [False] * len(preds)
    tp = 0
    for lo, hi in sorted((int(r[0]), int(r[1])) for r in truth_ranges):
        for i, p in enumerate(preds):
            if not used[i] and lo <= p <= hi:
                used[i] = True
                tp += 1
                break
    fp = len(preds) - tp
    fn = len(truth_ranges) - tp
    return tp, fp, fn


# ---------------------------------------------------------------------------------------------------------------------
# The lavfi case suite.
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seg:
    source: str  # lavfi source with options, without size/rate (e.g. "testsrc2", "gradients=speed=0.02")
    frames: int  # frames of this segment shown on its own (a transition into it overlaps the previous segment)
    join: str = "cut"  # how this segment starts: "cut" or an xfade transition name (dissolve, fade, fadeblack, ...)
    join_frames: int = 0  # transition length in frames (xfade only)
    pan: float = 0.0  # > 0: a moving crop over a 2x larger source, this many cycles per second (fast camera motion)
    noise: int = 0  # temporal noise strength added to the segment (0 = none)


@dataclass(frozen=True)
class Case:
    name: str
    segments: tuple[Seg, ...]
    size: tuple[int, int] = (426, 240)
    rate: str = "25"  # frame rate as ffmpeg accepts it, e.g. "25", "30000/1001"
    codec: str = "h264"  # h264 | hevc | vp9 | mpeg4
    flashes: tuple[tuple[int, int], ...] = ()  # (first frame, frame count) of white-ish camera flashes
    drop_every: int = 0  # > 0: variable frame rate, every n-th frame dropped (timestamps kept)
    gop: int = 0  # > 0: keyframe interval (keyframe pulses with noisy sources)
    extra: dict = field(default_factory=dict)


_ENCODERS = {
    "h264": (["-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p"], "mp4"),
    "hevc": (["-c:v", "libx265", "-preset", "ultrafast", "-crf", "28", "-pix_fmt", "yuv420p", "-x265-params", "log-level=error"], "mp4"),
    "vp9": (["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "800k", "-pix_fmt", "yuv420p"], "webm"),
    "mpeg4": (["-c:v", "mpeg4", "-q:v", "4", "-pix_fmt", "yuv420p"], "avi"),
}


def _rate_float(rate: str) -> float:
    if "/" in rate:
        a, b = rate.split("/")
        return float(a) / float(b)
    return float(rate)


def case_truth(case: Case) -> dict:
    """Cut ranges in output frame numbers, and the frame count."""
    ranges: list[list[int]] = []
    total = 0
    for i, seg in enumerate(case.segments):
        if i == 0:
            total = seg.frames
            continue
        if seg.join == "cut":
            ranges.append([total, total])
            total += seg.frames
        else:
            off = total - seg.join_frames
            ranges.append([off, total])
            total += seg.frames - seg.join_frames
    if case.drop_every:
        kept = [n for n in range(total) if n % case.drop_every != 1]
        index = {n: i for i, n in enumerate(kept)}

        def remap(n: int, up: bool) -> int:
            while n not in index:
                n += 1 if up else -1
            return index[n]

        ranges = [[remap(lo, True), remap(hi, hi == lo)] for lo, hi in ranges]
        total = len(kept)
    return {"cuts": [r[0] if r[0] == r[1] else (r[0] + r[1]) // 2 for r in ranges], "cut_ranges": ranges, "num_frames": total}


def build_case(case: Case, out_dir: str) -> tuple[str, dict]:
    """Render ``case`` with ffmpeg into ``out_dir``; returns (path, truth)."""
    w, h = case.size
    fps = _rate_float(case.rate)
    args = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y"]
    chains = []
    for i, seg in enumerate(case.segments):
        opts = f"size={2 * w}x{2 * h}" if seg.pan else f"size={w}x{h}"
        src = seg.source if "=" in seg.source else seg.source + "="
        src = f"{src}{'' if src.endswith('=') else ':'}{opts}:rate={case.rate}"
        args += ["-f", "lavfi", "-i", src]
        f = f"[{i}]trim=end_frame={seg.frames},setpts=PTS-STARTPTS"
        if seg.pan:
            f += f",crop={w}:{h}:x='{w / 2}*(1+sin(2*PI*t*{seg.pan}))':y='{h / 2}*(1+cos(2*PI*t*{seg.pan}))'"
        if seg.noise:
            f += f",noise=alls={seg.noise}:allf=t"
        f += f",format=yuv420p,settb=AVTB[s{i}]"
        chains.append(f)
    cur, total = "s0", case.segments[0].frames
    for i, seg in enumerate(case.segments[1:], start=1):
        out = f"j{i}"
        if seg.join == "cut":
            chains.append(f"[{cur}][s{i}]concat=n=2:v=1:a=0[{out}]")
            total += seg.frames
        else:
            off = (total - seg.join_frames) / fps
            chains.append(f"[{cur}][s{i}]xfade=transition={seg.join}:duration={seg.join_frames / fps:.6f}:offset={off:.6f}[{out}]")
            total += seg.frames - seg.join_frames
        cur = out
    post = []
    for start, count in case.flashes:
        post.append(f"eq=brightness=0.45:contrast=0.6:enable='between(n,{start},{start + count - 1})'")
    if case.drop_every:
        post.append(f"select='not(eq(mod(n\\,{case.drop_every})\\,1))'")
    if post:
        chains.append(f"[{cur}]{','.join(post)}[post]")
        cur = "post"
    enc, ext = _ENCODERS[case.codec]
    path = os.path.join(out_dir, f"{case.name}.{ext}")
    args += ["-filter_complex", ";".join(chains), "-map", f"[{cur}]", *enc]
    if case.gop:
        args += ["-g", str(case.gop)]
    if case.drop_every:
        args += ["-fps_mode", "vfr"]
    args += [path]
    subprocess.run(args, check=True)
    truth = case_truth(case)
    with open(path + ".json", "w") as fh:
        json.dump(truth, fh)
    return path, truth


def _hard(*sources: str, frames: int = 40) -> tuple[Seg, ...]:
    return tuple(Seg(s, frames) for s in sources)


SOURCES = ("testsrc2", "mandelbrot", "smptehdbars", "gradients=speed=0.03", "sierpinski", "color=c=navy", "rgbtestsrc")

CASES: tuple[Case, ...] = (
    Case("hard_h264_240p", _hard("testsrc2", "mandelbrot", "smptehdbars", "gradients=speed=0.03", "sierpinski")),
    Case("hard_short_shots", _hard("testsrc2", "mandelbrot", "sierpinski", "smptehdbars", "testsrc2", frames=14)),
    Case("hard_solid_colours", _hard("color=c=#a05030", "color=c=#3070a0", "color=c=#50a050", "color=c=#909090")),
    Case("hard_360p_2997", _hard("mandelbrot", "testsrc2", "rgbtestsrc", "gradients=speed=0.02"), size=(640, 360), rate="30000/1001"),
    Case("hard_hevc", _hard("testsrc2", "smptehdbars", "mandelbrot", "sierpinski"), codec="hevc"),
    Case("hard_vp9", _hard("testsrc2", "smptehdbars", "mandelbrot", "sierpinski"), codec="vp9"),
    Case("hard_mpeg4", _hard("testsrc2", "smptehdbars", "mandelbrot", "sierpinski"), codec="mpeg4"),
    Case("hard_1080p", _hard("mandelbrot", "smptehdbars", "testsrc2", frames=30), size=(1920, 1080)),
    Case("hard_720p_vfr", _hard("testsrc2", "mandelbrot", "smptehdbars", "sierpinski"), size=(1280, 720), drop_every=4),
    Case("dissolve_10", (Seg("testsrc2", 40), Seg("mandelbrot", 50, "dissolve", 10), Seg("smptehdbars", 50, "dissolve", 10))),
    Case("dissolve_30", (Seg("mandelbrot", 50), Seg("gradients=speed=0.03", 70, "dissolve", 30), Seg("testsrc2", 70, "fade", 30))),
    Case("dissolve_48_360p", (Seg("sierpinski", 90), Seg("testsrc2", 90, "dissolve", 48), Seg("mandelbrot", 60)), size=(640, 360)),
    Case("fadeblack", (Seg("testsrc2", 40), Seg("mandelbrot", 60, "fadeblack", 20), Seg("smptehdbars", 70, "fadeblack", 30))),
    Case("fadewhite", (Seg("smptehdbars", 40), Seg("sierpinski", 60, "fadewhite", 16), Seg("gradients=speed=0.03", 50))),
    Case("wipes", (Seg("testsrc2", 40), Seg("smptehdbars", 60, "wipeleft", 20), Seg("mandelbrot", 60, "slideup", 16), Seg("sierpinski", 60, "circleopen", 24))),
    Case("mixed", (Seg("testsrc2", 40), Seg("mandelbrot", 40), Seg("smptehdbars", 60, "dissolve", 20), Seg("sierpinski", 50, "fadeblack", 24), Seg("gradients=speed=0.03", 40))),
    Case("flash_1", (Seg("testsrc2", 120),), flashes=((30, 1), (80, 1))),
    Case("flash_3", (Seg("mandelbrot", 120),), flashes=((40, 3), (90, 2))),
    Case("flash_and_cut", (Seg("testsrc2", 60), Seg("smptehdbars", 60)), flashes=((20, 2), (90, 3))),
    Case("pan_fast", (Seg("testsrc2", 150, pan=0.6),)),
    Case("pan_mandelbrot", (Seg("mandelbrot", 150, pan=0.8),), size=(640, 360)),
    Case("pan_then_cut", (Seg("testsrc2", 75, pan=0.7), Seg("mandelbrot", 75, pan=0.5))),
    Case("nocut_static", (Seg("smptehdbars", 100),)),
    Case("nocut_noise_keyframes", (Seg("smptehdbars", 150, noise=30),), gop=12),
    Case("nocut_life", (Seg("life=mold=10:ratio=0.1:death_color=#202020:life_color=#e0e0e0", 150),), gop=25),
    Case("black", (Seg("color=c=black", 60),)),
    Case("frozen", (Seg("rgbtestsrc", 60),), codec="mpeg4"),
    Case("noise_cuts", (Seg("testsrc2", 60, noise=25), Seg("mandelbrot", 60, noise=25), Seg("sierpinski", 60, noise=25)), gop=10),
)


def _score(name: str, items: Sequence[tuple[str, str, dict]], params: dict | None, verbose: bool) -> dict:
    """Run detector ``name`` on (label, path, truth) items; totals and per-item rows."""
    from videolake.platform.scenes.base import get_detector

    det = get_detector(name, **(params or {}))
    tot = [0, 0, 0]
    cpu = 0.0
    rows = {}
    for label, path, truth in items:
        t0 = time.process_time()
        try:
            cuts = list(det.detect(path).cuts)
        except ValueError as exc:
            if truth.get("num_frames"):
                raise
            log.info("%s: undecodable, as expected (%s)", label, exc)
            continue
        cpu += time.process_time() - t0
        tp, fp, fn = score_cuts(cuts, truth["cut_ranges"])
        tot = [tot[0] + tp, tot[1] + fp, tot[2] + fn]
        rows[label] = {"tp": tp, "fp": fp, "fn": fn, "cuts": cuts, "truth": truth["cut_ranges"]}
        if verbose and (fp or fn):
            print(f"  {name:9s} {label:36s} tp={tp} fp={fp} fn={fn} pred={cuts} truth={truth['cut_ranges']}")
    p = tot[0] / max(1, tot[0] + tot[1])
    r = tot[0] / max(1, tot[0] + tot[2])
    print(f"{name:9s} precision={p:.3f} recall={r:.3f} tp={tot[0]} fp={tot[1]} fn={tot[2]} files={len(rows)} cpu={cpu:.1f}s")
    return {"tp": tot[0], "fp": tot[1], "fn": tot[2], "precision": p, "recall": r, "cpu_s": cpu, "files": rows}


def run_suite(
    detectors: Sequence[str] = ("luma", "adaptive", "content"),
    out_dir: str = "/tmp/videolake-scenes-suite",
    cases: Sequence[Case] = CASES,
    params: dict[str, dict] | None = None,
    verbose: bool = True,
) -> dict[str, dict]:
    """Build every case of ``cases`` (cached in ``out_dir``), run each detector, print precision/recall."""
    os.makedirs(out_dir, exist_ok=True)
    items = []
    for case in cases:
        path = next((os.path.join(out_dir, f"{case.name}.{e}") for e in ("mp4", "webm", "avi") if os.path.exists(os.path.join(out_dir, f"{case.name}.{e}.json"))), None)
        if path is None:
            path, truth = build_case(case, out_dir)
        else:
            with open(path + ".json") as fh:
                truth = json.load(fh)
        items.append((case.name, path, truth))
    return {name: _score(name, items, (params or {}).get(name), verbose) for name in detectors}


def evaluate_dir(
    directory: str,
    detectors: Sequence[str] = ("luma", "adaptive", "content"),
    params: dict[str, dict] | None = None,
    verbose: bool = True,
) -> dict[str, dict]:
    """Score detectors on every video of ``directory`` that has a ``<stem>.json`` truth beside it (the layout
    ``videolake synth`` / ``synth.generate`` writes). Files without video (num_frames 0) must fail to decode."""
    items = []
    for name in sorted(os.listdir(directory)):
        stem, ext = os.path.splitext(name)
        truth_path = os.path.join(directory, stem + ".json")
        if ext == ".json" or not os.path.exists(truth_path):
            continue
        with open(truth_path) as fh:
            truth = json.load(fh)
        if "cut_ranges" in truth:
            items.append((name, os.path.join(directory, name), truth))
    return {name: _score(name, items, (params or {}).get(name), verbose) for name in detectors}


if __name__ == "__main__":  # python -m videolake.platform.scenes.evaluate [DIR ...] [--detectors luma,adaptive]
    import argparse

    ap = argparse.ArgumentParser(description="precision/recall of scene detectors on the lavfi suite or truth dirs")
    ap.add_argument("dirs", nargs="*", help="directories of videos with <stem>.json truth (default: the built-in suite)")
    ap.add_argument("--detectors", default="luma,adaptive,content")
    ap.add_argument("--suite-dir", default="/tmp/videolake-scenes-suite", help="where the built-in suite is built")
    ap.add_argument("-q", "--quiet", action="store_true", help="totals only")
    a = ap.parse_args()
    names = [d for d in a.detectors.split(",") if d]
    if a.dirs:
        for d in a.dirs:
            print(f"== {d}")
            evaluate_dir(d, names, verbose=not a.quiet)
    else:
        run_suite(names, a.suite_dir, verbose=not a.quiet)
