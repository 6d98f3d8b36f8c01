"""A varied, deterministic set of videos: the templates, ``plan`` (the specs drawn from a seed) and ``generate``
(render them, the specials and the variants into one folder; ``videolake synth OUT``), with its progress line.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from videolake.synth.rendering import render
from videolake.synth.sources import SOURCE_LUMA, _is_flat, distinct
from videolake.synth.specials import render_special
from videolake.synth.specs import Segment, Transition, VideoSpec
from videolake.synth.truth import default_truth_dir
from videolake.synth.variants import perturb
from videolake.synth.verdicts import SPECIAL_KINDS

DEFAULT_MAX_DURATION_S = 20.0
# Flashes are near-white: only visible on shots that are not bright already.
_FLASHABLE = frozenset(s for s, y in SOURCE_LUMA.items() if y < 160 and s != "black")


@dataclass(frozen=True)
class _Template:
    """The shape of one generated video; the rng fills in sources, lengths and positions."""

    tag: str  # goes into the file name
    size: tuple[int, int]  # width, height
    fps: str
    codec: str
    container: str | None
    duration_s: float  # before the max_duration_s cap
    shots: int  # number of shots (fewer when the capped duration cannot hold them)
    transitions: tuple[str, ...]  # kinds drawn from, in turn, for the joins
    flashes: int = 0  # camera flashes spread over the shots
    audio: bool = False
    vfr: bool = False
    sources: tuple[str, ...] = ()  # restrict the first shot's source (e.g. a pan for a no-cut motion clip)


# Cycled in order, so the first dozen files cover every feature; later files re-draw sizes, rates and codecs.
TEMPLATES: tuple[_Template, ...] = (
    _Template("cuts", (320, 240), "30", "h264", None, 6.0, 5, ("cut",)),
    _Template("dissolve", (426, 240), "25", "vp9", None, 5.0, 3, ("dissolve", "cut")),
    _Template("fade", (480, 270), "30000/1001", "hevc", None, 5.0, 3, ("fade", "cut")),
    _Template("wipe_flash", (640, 360), "24", "h264", "mkv", 6.0, 3, ("wipe", "cut"), flashes=3, audio=True),
    _Template("pan_nocut", (320, 240), "60", "mpeg4", None, 3.0, 1, (), flashes=2, sources=("pan",)),
    _Template("vfr", (320, 240), "30", "h264", "mkv", 4.0, 3, ("cut",), vfr=True),
    _Template(
        "mixed", (854, 480), "30", "h264", None, 8.0, 5, ("cut", "dissolve", "fade", "wipe"), flashes=2, audio=True
    ),
    _Template("long", (426, 240), "24", "h264", None, 150.0, 40, ("cut", "cut", "dissolve", "fade", "wipe"), flashes=6),
    _Template("hd", (1280, 720), "30", "h264", None, 2.0, 2, ("cut",), audio=True),
    _Template("fullhd", (1920, 1080), "25", "hevc", None, 1.6, 2, ("dissolve",)),
    _Template("ntsc", (640, 480), "30000/1001", "mpeg4", "mp4", 5.0, 4, ("cut", "fade", "wipe"), flashes=1),
    _Template(
        "still_nocut", (320, 240), "24", "vp9", None, 1.0, 1, (), sources=("testsrc2", "mandelbrot", "gradients")
    ),
)
_RE_DRAW_SIZES = ((320, 240), (426, 240), (480, 360), (640, 360), (854, 480))
_RE_DRAW_FPS = ("24", "25", "30", "30000/1001", "60")
_RE_DRAW_CODECS = (("h264", None), ("h264", "mkv"), ("hevc", None), ("vp9", None), ("mpeg4", None), ("mpeg4", "mp4"))


def _fps_tag(fps: str) -> str:
    f = Fraction(fps)
    return str(f.numerator) if f.denominator == 1 else f"{float(f):.2f}".replace(".", "")


def _pick_sources(rng: random.Random, k: int, height: int, first: tuple[str, ...]) -> list[str]:
    """k sources, each distinct() from the one before; heavy sources only at small sizes."""
    pool = [s for s in SOURCE_LUMA if not (s == "sierpinski" and height > 270)]  # 4x supersampled: costly
    out: list[str] = []
    for i in range(k):
        choices = [s for s in (first if i == 0 and first else pool) if not out or distinct(out[-1], s)]
        # Textured sources three times as likely as each plain colour (there are ten colours).
        weights = [1 if _is_flat(s) else 3 for s in choices]
        out.append(rng.choices(choices, weights)[0])
    return out


def _split(rng: random.Random, total: int, parts: int, minimum: int) -> list[int]:
    """``parts`` integers >= minimum summing to ``total`` (random proportions)."""
    spare = total - parts * minimum
    weights = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    extra = [int(spare * w / sum(weights)) for w in weights]
    extra[rng.randrange(parts)] += spare - sum(extra)
    return [minimum + e for e in extra]


def _spec_from_template(t: _Template, rng: random.Random, name: str, seed: int, max_duration_s: float) -> VideoSpec:
    rate = Fraction(t.fps)
    duration = min(t.duration_s, max_duration_s)
    total = max(1, math.floor(Fraction(duration).limit_denominator(1000) * rate))  # never over the cap
    min_body = max(10, round(rate * Fraction(2, 5)))  # shots of at least ~0.4 s: cuts stay apart
    shots = max(1, min(round(t.shots * duration / t.duration_s), total // (min_body + 8)))
    kinds = (
        [
            t.transitions[(j + rng.randrange(len(t.transitions))) % len(t.transitions)] if j else t.transitions[0]
            for j in range(shots - 1)
        ]
        if t.transitions
        else []
    )
    trans = []
    for kind in kinds:
        d = 0 if kind == "cut" else rng.randint(8, min(30, max(8, round(rate * 0.8))))
        trans.append(Transition(kind, d))
    body_total = total - sum(tr.frames for tr in trans)
    while shots > 1 and body_total < shots * min_body:  # the cap left too little room: fewer shots
        shots -= 1
        trans.pop()
        body_total = total - sum(tr.frames for tr in trans)
    bodies = _split(rng, body_total, shots, min(min_body, body_total // shots))
    sources = _pick_sources(rng, shots, t.size[1], t.sources)
    flashes: list[tuple[int, ...]] = [() for _ in range(shots)]
    candidates = [i for i in range(shots) if sources[i] in _FLASHABLE and bodies[i] >= 24]
    n_flashes = max(1, round(t.flashes * duration / t.duration_s)) if t.flashes else 0
    for _ in range(n_flashes if candidates else 0):
        i = rng.choice(candidates)
        taken = flashes[i]
        # 8 frames clear of either end of the body and of another flash.
        options = [o for o in range(8, bodies[i] - 10) if all(abs(o - p) > 8 for p in taken)]
        if options:
            flashes[i] = tuple(sorted(taken + (rng.choice(options),)))
    segments = tuple(Segment(src, n, fl) for src, n, fl in zip(sources, bodies, flashes))
    return VideoSpec(
        name=name,
        width=t.size[0],
        height=t.size[1],
        fps=t.fps,
        codec=t.codec,
        segments=segments,
        transitions=tuple(trans),
        vfr=t.vfr,
        audio=t.audio,
        container=t.container,
        seed=seed,
    )


def plan(count: int, seed: int = 0, max_duration_s: float = DEFAULT_MAX_DURATION_S) -> list[VideoSpec]:
    """The specs generate() renders (deterministic from ``seed``)."""
    specs = []
    for i in range(count):
        rng = random.Random(f"videolake-synth:{seed}:{i}")
        t = TEMPLATES[i % len(TEMPLATES)]
        if i >= len(TEMPLATES):  # later rounds: same shapes, re-drawn sizes, rates and codecs (small files)
            codec, container = rng.choice(_RE_DRAW_CODECS)
            if t.vfr and codec == "mpeg4":
                codec, container = "h264", "mkv"
            size = rng.choice(_RE_DRAW_SIZES) if t.tag != "long" else (320, 240)
            t = replace(t, size=size, fps=rng.choice(_RE_DRAW_FPS), codec=codec, container=container)
        name = f"{i:03d}_{t.tag}_{t.size[1]}p{_fps_tag(t.fps)}_{t.codec}"
        specs.append(_spec_from_template(t, rng, name, seed * 1000 + i, max_duration_s))
    return specs


def summary_line(path: str | Path, truth: dict[str, Any]) -> str:
    """One line describing a written file (the CLI's progress output)."""
    name = Path(path).name
    if not truth.get("codec"):
        return f"{name}  ({truth.get('special', '?')})  expect={truth['expect']}"
    parts = [
        f"{truth['width']}x{truth['height']}",
        f"{truth['fps_str']}fps{' vfr' if truth.get('vfr') else ''}",
        f"{truth['codec']}/{truth['container']}",
        f"{truth['num_frames']} frames",
        f"{len(truth['cuts'])} cuts",
        f"{len(truth['flashes'])} flashes",
    ]
    kinds = sorted({t["kind"] for t in truth["transitions"] if t["kind"] != "cut"})
    if kinds:
        parts.append("+".join(kinds))
    if truth.get("has_audio"):
        parts.append("audio")
    if truth.get("variant_of"):
        parts.append(f"variant of {truth['variant_of']} ({', '.join(truth.get('perturbations', []))})")
    return f"{name}  {'  '.join(parts)}  expect={truth['expect']}"


def generate(
    out_dir: str | Path,
    count: int,
    variants: int = 0,
    seed: int = 0,
    include_specials: bool = True,
    max_duration_s: float = DEFAULT_MAX_DURATION_S,
    progress: Callable[[str], None] | None = None,
    truth_dir: str | Path | None = None,
) -> list[Path]:
    """Render ``count`` varied videos, then (``include_specials``) the 7 special files, then ``variants`` perturbed
    copies of each decodable one (the ``count`` videos and the black, frozen and short specials).

    Every file gets a ``<stem>.json`` truth in ``truth_dir`` (default ``default_truth_dir(out_dir)``, the sibling
    ``<out_dir>.truth``): ``out_dir`` receives media files only. Returns the media paths in the order written.
    ``progress`` is called with a one-line summary (see summary_line) after each file.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    truth_dir = Path(truth_dir) if truth_dir is not None else default_truth_dir(out_dir)
    written: list[Path] = []
    expected = count + (len(SPECIAL_KINDS) if include_specials else 0)
    expected += variants * (count + (3 if include_specials else 0))

    def done(path: Path, truth: dict[str, Any]) -> None:
        written.append(path)
        if progress is not None:
            width = len(str(expected))
            progress(f"[{len(written):>{width}}/{expected}] {summary_line(path, truth)}")

    originals: list[tuple[Path, dict[str, Any]]] = []
    for spec in plan(count, seed, max_duration_s):
        path, truth = render(spec, out_dir, truth_dir=truth_dir)
        originals.append((path, truth))
        done(path, truth)
    if include_specials:
        for kind in SPECIAL_KINDS:
            path, truth = render_special(kind, out_dir, seed=seed, truth_dir=truth_dir)
            if kind in ("black", "frozen", "short"):
                originals.append((path, truth))
            done(path, truth)
    for path, truth in originals:
        for k in range(1, variants + 1):
            vpath, vtruth = perturb(path, truth, k, out_dir, seed, truth_dir=truth_dir)
            done(vpath, vtruth)
    return written
