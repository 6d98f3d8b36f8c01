"""Accuracy harness for scene detectors: score predicted cuts against ground truth, on a suite of lavfi videos.

Three sets (``set_items``): synthetic (``synth.generate``), hard (the lavfi ``CASES`` below) and real (the
real-footage corpus of ``corpus.py`` with its hand-made truth); ``python -m videolake.evaluation.scenes``
prints precision/recall/F1 per detector and set (+-1 frame tolerance), cuts cached under /tmp/scenes-eval-cache.

Ground truth follows the synthetic-video convention (``videolake.synth``): ``cut_ranges`` holds one
inclusive ``[lo, hi]`` frame range per scene change; a hard cut has ``lo == hi`` (the first frame of the new shot),
a gradual transition spans its mixed frames and the detector must report exactly one frame inside it.

``CASES`` is a self-contained suite (hard cuts, dissolves, fades, wipes, flashes, fast motion, noise, no-cut,
variable frame rate, 29.97 fps, h264/hevc/vp9/mpeg4, 240p..1080p) built with ffmpeg's lavfi sources, so the harness
runs without any other part of videolake. ``python -m videolake.evaluation.scenes`` prints precision/recall per
detector and set.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


def score_cuts(
    pred: Iterable[int], truth_ranges: Sequence[Sequence[int]], tolerance: int = 0, ignore: Sequence[Sequence[int]] = ()
) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) of predicted cut frames against inclusive truth ranges.

    Each truth range, widened by ``tolerance`` frames on each side, is matched by at most one prediction inside it
    (the earliest unused one); a second prediction inside the same range, or one outside every range, is a false
    positive. Predictions inside an ``ignore`` range (and no truth range) count neither way.
    """
    preds = sorted(int(p) for p in pred)
    used = [False] * len(preds)
    tp = 0
    for lo, hi in sorted((int(r[0]) - tolerance, int(r[1]) + tolerance) for r in truth_ranges):
        for i, p in enumerate(preds):
            if not used[i] and lo <= p <= hi:
                used[i] = True
                tp += 1
                break
    ignored = sum(1 for i, p in enumerate(preds) if not used[i] and any(a <= p <= b for a, b in ignore))
    fp = len(preds) - tp - ignored
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
    "hevc": (
        [
            "-c:v",
            "libx265",
            "-preset",
            "ultrafast",
            "-crf",
            "28",
            "-pix_fmt",
            "yuv420p",
            "-x265-params",
            "log-level=error",
        ],
        "mp4",
    ),
    "vp9": (
        ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "800k", "-pix_fmt", "yuv420p"],
        "webm",
    ),
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
    return {
        "cuts": [r[0] if r[0] == r[1] else (r[0] + r[1]) // 2 for r in ranges],
        "cut_ranges": ranges,
        "num_frames": total,
    }


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
            chains.append(
                f"[{cur}][s{i}]xfade=transition={seg.join}:duration={seg.join_frames / fps:.6f}:offset={off:.6f}[{out}]"
            )
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
    Case(
        "hard_360p_2997",
        _hard("mandelbrot", "testsrc2", "rgbtestsrc", "gradients=speed=0.02"),
        size=(640, 360),
        rate="30000/1001",
    ),
    Case("hard_hevc", _hard("testsrc2", "smptehdbars", "mandelbrot", "sierpinski"), codec="hevc"),
    Case("hard_vp9", _hard("testsrc2", "smptehdbars", "mandelbrot", "sierpinski"), codec="vp9"),
    Case("hard_mpeg4", _hard("testsrc2", "smptehdbars", "mandelbrot", "sierpinski"), codec="mpeg4"),
    Case("hard_1080p", _hard("mandelbrot", "smptehdbars", "testsrc2", frames=30), size=(1920, 1080)),
    Case("hard_720p_vfr", _hard("testsrc2", "mandelbrot", "smptehdbars", "sierpinski"), size=(1280, 720), drop_every=4),
    Case(
        "dissolve_10",
        (Seg("testsrc2", 40), Seg("mandelbrot", 50, "dissolve", 10), Seg("smptehdbars", 50, "dissolve", 10)),
    ),
    Case(
        "dissolve_30",
        (Seg("mandelbrot", 50), Seg("gradients=speed=0.03", 70, "dissolve", 30), Seg("testsrc2", 70, "fade", 30)),
    ),
    Case(
        "dissolve_48_360p",
        (Seg("sierpinski", 90), Seg("testsrc2", 90, "dissolve", 48), Seg("mandelbrot", 60)),
        size=(640, 360),
    ),
    Case(
        "fadeblack",
        (Seg("testsrc2", 40), Seg("mandelbrot", 60, "fadeblack", 20), Seg("smptehdbars", 70, "fadeblack", 30)),
    ),
    Case(
        "fadewhite", (Seg("smptehdbars", 40), Seg("sierpinski", 60, "fadewhite", 16), Seg("gradients=speed=0.03", 50))
    ),
    Case(
        "wipes",
        (
            Seg("testsrc2", 40),
            Seg("smptehdbars", 60, "wipeleft", 20),
            Seg("mandelbrot", 60, "slideup", 16),
            Seg("sierpinski", 60, "circleopen", 24),
        ),
    ),
    Case(
        "mixed",
        (
            Seg("testsrc2", 40),
            Seg("mandelbrot", 40),
            Seg("smptehdbars", 60, "dissolve", 20),
            Seg("sierpinski", 50, "fadeblack", 24),
            Seg("gradients=speed=0.03", 40),
        ),
    ),
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
    Case(
        "noise_cuts",
        (Seg("testsrc2", 60, noise=25), Seg("mandelbrot", 60, noise=25), Seg("sierpinski", 60, noise=25)),
        gop=10,
    ),
)


CACHE_DIR = os.environ.get("VIDEOLAKE_SCENES_EVAL_CACHE", "/tmp/scenes-eval-cache")
SYNTH_DIR, SUITE_DIR = "/tmp/scenes-synth", "/tmp/scenes-suite"
SETS = ("synthetic", "hard", "real")


def _file_key(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.basename(path)}-{st.st_size}-{int(st.st_mtime)}"


def cached_cuts(det, path: str, cache_dir: str | None = CACHE_DIR) -> list[int]:
    """``det.detect(path).cuts``, cached per (detector, parameters, file) under ``cache_dir`` (None: no cache).

    TransNetV2's per-frame probabilities are cached instead, so other thresholds cost nothing. Decoding dominates
    every detector's cost, and the machine this runs on is small.
    """
    import hashlib

    if cache_dir is None:
        return list(det.detect(path).cuts)
    if det.name == "transnetv2":
        import numpy as np

        base = os.path.join(cache_dir, "transnetv2-probs", _file_key(path))
        if not os.path.exists(base + ".npz"):
            os.makedirs(os.path.dirname(base), exist_ok=True)
            pred, fps, black = det.predict(path)
            np.savez(base + ".tmp.npz", pred=pred, fps=np.float64(fps), black=black)
            os.replace(base + ".tmp.npz", base + ".npz")
        z = np.load(base + ".npz")
        return det.cuts_from(z["pred"], float(z["fps"]), z["black"])
    tag = hashlib.sha256(f"{det.name}|{det.params_json()}".encode()).hexdigest()[:12]
    out = os.path.join(cache_dir, f"{det.name}-{tag}", _file_key(path) + ".json")
    if os.path.exists(out):
        with open(out) as fh:
            return json.load(fh)
    cuts = [int(c) for c in det.detect(path).cuts]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump(cuts, fh)
    return cuts


def _score(
    name: str,
    items: Sequence[tuple[str, str, dict]],
    params: dict | None,
    verbose: bool,
    tolerance: int = 0,
    cache_dir: str | None = None,
) -> dict:
    """Run detector ``name`` on (label, path, truth) items; totals (precision, recall, F1) and per-item rows."""
    from videolake.platform.scenes.base import get_detector

    det = get_detector(name, **(params or {}))
    tot = [0, 0, 0]
    cpu = 0.0
    rows = {}
    for label, path, truth in items:
        t0 = time.process_time()
        try:
            cuts = cached_cuts(det, path, cache_dir)
        except ValueError as exc:
            if truth.get("num_frames"):
                raise
            log.info("%s: undecodable, as expected (%s)", label, exc)
            continue
        cpu += time.process_time() - t0
        tp, fp, fn = score_cuts(cuts, truth["cut_ranges"], tolerance, truth.get("ignore", ()))
        tot = [tot[0] + tp, tot[1] + fp, tot[2] + fn]
        rows[label] = {"tp": tp, "fp": fp, "fn": fn, "cuts": cuts, "truth": truth["cut_ranges"]}
        if verbose and (fp or fn):
            shown = cuts if len(cuts) <= 20 else f"{len(cuts)} cuts"
            print(f"  {name:10s} {label:36s} tp={tp} fp={fp} fn={fn} pred={shown}")
    p = tot[0] / max(1, tot[0] + tot[1])
    r = tot[0] / max(1, tot[0] + tot[2])
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    if verbose:
        print(
            f"{name:10s} precision={p:.3f} recall={r:.3f} f1={f1:.3f} tp={tot[0]} fp={tot[1]} fn={tot[2]} "
            f"files={len(rows)} cpu={cpu:.1f}s"
        )
    return {
        "tp": tot[0],
        "fp": tot[1],
        "fn": tot[2],
        "precision": p,
        "recall": r,
        "f1": f1,
        "cpu_s": cpu,
        "files": rows,
    }


def _truth_dir_items(directory: str, truth_dir: str | None = None) -> list[tuple[str, str, dict]]:
    """(name, path, truth) for every video of ``directory`` with a truth JSON: ``<stem>.json`` as ``videolake synth``
    writes (into the sibling ``<directory>.truth``), or ``<file>.json`` as ``build_case`` writes (beside the video);
    looked for in ``truth_dir`` when given, else beside the video and in the sibling. Rejected files are left out."""
    from videolake.synth import default_truth_dir

    places = [truth_dir] if truth_dir else [directory, str(default_truth_dir(directory))]
    items = []
    for name in sorted(os.listdir(directory)):
        stem, ext = os.path.splitext(name)
        if ext in (".json", ".done"):
            continue
        for truth_path in (os.path.join(d, f) for d in places for f in (name + ".json", stem + ".json")):
            if os.path.exists(truth_path):
                with open(truth_path) as fh:
                    truth = json.load(fh)
                if "cut_ranges" in truth and not str(truth.get("expect", "ok")).startswith("reject"):
                    items.append((name, os.path.join(directory, name), truth))
                break
    return items


def set_items(
    name: str, synth_dir: str = SYNTH_DIR, suite_dir: str = SUITE_DIR, corpus_dir: str | None = None
) -> list[tuple[str, str, dict]]:
    """The (label, path, truth) items of an evaluation set, built or fetched (and cached) on first use.

    synthetic: ``synth.generate(count=24, variants=1, seed=0)`` (hard cuts, dissolves, fades, wipes, flashes, fast
    pans, VFR, 4 codecs, 240p-1080p, and their scaled/cropped/re-encoded/speed-changed variants).
    hard: ``CASES`` above (flashes, fast pans, long dissolves, fades through black and white, wipes, noise, life).
    real: the real-footage corpus (``corpus.py``) and its hand-made truth (``real_truth.json``).
    """
    if name == "synthetic":
        from videolake.synth import generate

        if not os.path.exists(os.path.join(synth_dir, ".done")):
            generate(synth_dir, count=24, variants=1, seed=0)
            open(os.path.join(synth_dir, ".done"), "w").close()
        items = _truth_dir_items(synth_dir)
        if not items:
            raise RuntimeError(f"no synthetic video with its truth in {synth_dir}; delete it to generate it again")
        return items
    if name == "hard":
        os.makedirs(suite_dir, exist_ok=True)
        for case in CASES:
            if not any(
                os.path.exists(os.path.join(suite_dir, f"{case.name}.{e}.json")) for e in ("mp4", "webm", "avi")
            ):
                build_case(case, suite_dir)
        return _truth_dir_items(suite_dir)
    if name == "real":
        from videolake.evaluation import corpus

        paths = corpus.fetch(corpus_dir or corpus.DEFAULT_DEST)
        videos = corpus.load_truth()["videos"]
        return [(n, str(paths[n]), {**videos[n], "num_frames": videos[n]["num_frames"]}) for n in paths]
    raise ValueError(f"unknown evaluation set {name!r}; known: {', '.join(SETS)}")


def evaluate_sets(
    detectors: Sequence[str],
    sets: Sequence[str] = SETS,
    tolerance: int = 1,
    cache_dir: str | None = CACHE_DIR,
    verbose: bool = False,
    params: dict[str, dict] | None = None,
) -> dict[str, dict[str, dict]]:
    """set -> detector -> totals, for every detector on every set (cuts cached: see ``cached_cuts``)."""
    out: dict[str, dict[str, dict]] = {}
    for s in sets:
        items = set_items(s)
        if verbose:
            print(f"== {s} ({len(items)} files)")
        out[s] = {d: _score(d, items, (params or {}).get(d), verbose, tolerance, cache_dir) for d in detectors}
    return out


def markdown_table(results: dict[str, dict[str, dict]]) -> str:
    """The accuracy table of docs/performance.md: one row per detector, precision / recall / F1 per set."""
    sets = list(results)
    dets = list(next(iter(results.values())))
    lines = ["| detector | " + " | ".join(f"{s} P / R / F1" for s in sets) + " |", "|---|" + "---|" * len(sets)]
    for d in dets:
        cells = []
        for s in sets:
            r = results[s][d]
            cells.append(f"{r['precision']:.3f} / {r['recall']:.3f} / **{r['f1']:.3f}** ({r['tp'] + r['fn']} cuts)")
        lines.append(f"| `{d}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def evaluate_dir(
    directory: str,
    detectors: Sequence[str] = ("luma", "adaptive", "content"),
    params: dict[str, dict] | None = None,
    verbose: bool = True,
    tolerance: int = 0,
) -> dict[str, dict]:
    """Score detectors on every video of ``directory`` that has a truth JSON beside it."""
    items = _truth_dir_items(directory)
    return {name: _score(name, items, (params or {}).get(name), verbose, tolerance) for name in detectors}


if __name__ == "__main__":  # python -m videolake.evaluation.scenes [--sets ...] [--detectors ...] [DIR ...]
    import argparse

    logging.basicConfig(level=logging.WARNING)
    ap = argparse.ArgumentParser(
        description="precision/recall/F1 of scene detectors on the synthetic, hard and real sets (or on truth dirs)"
    )
    ap.add_argument("dirs", nargs="*", help="directories of videos with truth JSON (instead of the sets)")
    ap.add_argument("--detectors", default="luma,adaptive,content,transnetv2")
    ap.add_argument("--sets", default=",".join(SETS), help="synthetic, hard, real")
    ap.add_argument("--tolerance", type=int, default=1, help="frames a predicted cut may be off (default 1)")
    ap.add_argument("--no-cache", action="store_true", help=f"do not reuse cached cuts ({CACHE_DIR})")
    ap.add_argument("-q", "--quiet", action="store_true", help="the table only")
    a = ap.parse_args()
    names = [d for d in a.detectors.split(",") if d]
    if a.dirs:
        for d in a.dirs:
            print(f"== {d}")
            evaluate_dir(d, names, verbose=not a.quiet, tolerance=a.tolerance)
    else:
        res = evaluate_sets(
            names,
            [s for s in a.sets.split(",") if s],
            a.tolerance,
            None if a.no_cache else CACHE_DIR,
            verbose=not a.quiet,
        )
        print(markdown_table(res))
