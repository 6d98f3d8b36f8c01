"""The lavfi sources a shot can be made of: the filter chain that renders each one frame-exactly, its measured luma,
and the rules (``distinct``) that keep a hard cut between two of them unambiguous.
"""

from __future__ import annotations

import random
from fractions import Fraction

# Named colours usable as ``color:<name>`` with their BT.601 limited-range luma (used to keep consecutive colour
# shots far apart in luma: equal-luma colours, e.g. red and green, are a cut only for a colour-aware detector).
COLOR_LUMA: dict[str, int] = {
    "blue": 41,
    "purple": 61,
    "red": 81,
    "magenta": 106,
    "gray": 126,
    "lime": 145,
    "orange": 164,
    "cyan": 170,
    "yellow": 210,
    "white": 235,
    "black": 16,
}
# Sources whose content does not move (the quality stage may see their shots as static).
STATIC_SOURCES = frozenset({"smptehdbars", "rgbtestsrc", "black", "static"})
MOVING_SOURCES = ("testsrc2", "mandelbrot", "gradients", "sierpinski", "pan")
PLAIN_SOURCES = (
    "testsrc2",
    "mandelbrot",
    "smptehdbars",
    "gradients",
    "sierpinski",
    "rgbtestsrc",
    "pan",
    "black",
    "static",
)
# Mean luma (0..255, full range as decoded to gray) of each source, measured at 320x240 and 640x360. Used with the
# rules of distinct() so that consecutive generated shots differ by a mean abs luma difference of >= ~45 (>= ~55
# next to a fast pan, whose own frame-to-frame difference reaches ~35), well above any in-shot change.
SOURCE_LUMA: dict[str, int] = {
    "testsrc2": 125,
    "mandelbrot": 146,
    "smptehdbars": 102,
    "gradients": 125,
    "sierpinski": 16,
    "rgbtestsrc": 42,
    "pan": 124,
    "static": 128,
    "black": 0,
    "color:blue": 29,
    "color:purple": 52,
    "color:red": 76,
    "color:magenta": 105,
    "color:gray": 128,
    "color:lime": 150,
    "color:orange": 173,
    "color:cyan": 179,
    "color:yellow": 226,
    "color:white": 255,
}
# Textured pairs measured too close (mean abs luma difference < 45 between some of their frames) or alike.
_WEAK_PAIRS = frozenset(
    frozenset(p)
    for p in [
        ("testsrc2", "static"),
        ("mandelbrot", "pan"),
        ("gradients", "pan"),
        ("mandelbrot", "gradients"),
        ("sierpinski", "rgbtestsrc"),
    ]
)
_FLAT = ("black",)  # plain sources that behave like a colour in distinct()


def _is_flat(source: str) -> bool:
    return source.startswith("color:") or source in _FLAT


def distinct(a: str, b: str) -> bool:
    """True when a hard cut from source ``a`` to source ``b`` is unambiguous (rules fitted to measured luma diffs)."""
    if a == b or frozenset((a, b)) in _WEAK_PAIRS:
        return False
    la, lb = SOURCE_LUMA.get(a), SOURCE_LUMA.get(b)
    if la is None or lb is None:
        return False
    gap = abs(la - lb)
    if _is_flat(a) and _is_flat(b):
        return gap >= 45
    if _is_flat(a) or _is_flat(b):
        other, flat = (b, a) if _is_flat(a) else (a, b)
        if other == "gradients":  # random colours: only the extremes are safe
            return flat in ("color:blue", "color:white", "black")
        return gap >= (70 if other == "pan" else 60)
    return True


def _is_static(source: str) -> bool:
    return source in STATIC_SOURCES or source.startswith("color:")


def _motion(source: str) -> str:
    if _is_static(source):
        return "none"
    return "fast" if source == "pan" else "slow"


def _source_chain(source: str, w: int, h: int, rate: str, n: int, seed: int) -> str:
    """A filter chain (no inputs) producing exactly ``n`` frames of ``source`` at ``rate`` with pts = N / rate."""
    size = f"{w}x{h}"
    if source.startswith("color:"):
        name = source.split(":", 1)[1]
        if name not in COLOR_LUMA:
            raise ValueError(f"unknown colour {name!r}; known: {', '.join(COLOR_LUMA)}")
        head = f"color=c={name}:s={size}:r={rate}"
    elif source == "black":
        head = f"color=c=black:s={size}:r={rate}"
    elif source in ("testsrc2", "smptehdbars", "rgbtestsrc"):
        head = f"{source}=s={size}:r={rate}"
    elif source == "mandelbrot":
        head = f"mandelbrot=s={size}:r={rate}"
    elif source == "gradients":
        # Explicit colours: gradients' default c0..c7 are "random", which FFmpeg draws from the system's entropy
        # on every run (its seed only places the gradient line). Alpha is dropped by format=yuv420p.
        rnd = random.Random(seed)
        colors = ":".join(f"c{k}=0x{rnd.getrandbits(24):06x}" for k in range(3))
        head = f"gradients=s={size}:r={rate}:seed={seed % 4294967295}:speed=0.02:n=3:{colors}"
    elif source == "sierpinski":
        # The carpet flips every pixel each frame (1 px dots moving 1 px); the triangle rendered at 4x and averaged
        # down moves smoothly.
        head = f"sierpinski=s={4 * w}x{4 * h}:r={rate}:seed={seed % 4294967295}:type=triangle,scale={w}:{h}:flags=area"
    elif source == "static":
        # One frame of the classic testsrc, repeated.
        head = f"testsrc=s={size}:r={rate},trim=end_frame=1,loop=loop={max(n - 1, 0)}:size=1:start=0"
    elif source == "pan":
        # A fast camera move: a window sliding over one large, detailed Mandelbrot texture (2x the frame size),
        # ~2-4 % of the frame width per frame. (zoompan would add zoom but re-inits swscale per frame: too slow.)
        rnd = random.Random(seed)
        px, py = rnd.randint(32, 56), rnd.randint(36, 64)
        head = (
            f"mandelbrot=s={2 * w}x{2 * h}:r={rate}:maxiter=200:start_scale={rnd.choice([0.02, 0.05, 0.1])},"
            "trim=end_frame=1,"
            f"loop=loop={max(n - 1, 0)}:size=1:start=0,"
            f"crop={w}:{h}:x='(iw-ow)/2*(1+0.95*sin(n*2*PI/{px}))':y='(ih-oh)/2*(1+0.95*cos(n*2*PI/{py}))'"
        )
    else:
        raise ValueError(f"unknown source {source!r}; known: {', '.join(PLAIN_SOURCES)}, color:<name>")
    return f"{head},trim=end_frame={n},{_cfr_pts(rate)},format=yuv420p"


def _cfr_pts(rate: str) -> str:
    """Timestamps 0, 1, 2, ... in a time base of exactly 1/rate.

    Why not ``setpts=N/FRAME_RATE/TB``: setpts truncates the double, and N/(30000/1001)/(1001/30000) can land a hair
    under N, duplicating timestamps (xfade then blends at the wrong progress).
    """
    tb = 1 / Fraction(rate)
    return f"settb={tb.numerator}/{tb.denominator},setpts=N"
