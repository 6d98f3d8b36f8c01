"""Synthetic test videos with exact ground truth (cuts, gradual transitions, flashes, expected pipeline verdict).

Why synthetic: the scene detector, the probe and the quality scorers are evaluated against truth that is exact by
construction. Every shot is an ffmpeg lavfi source trimmed to an exact frame count; gradual transitions are
``xfade`` over two streams of exactly ``frames + 1`` frames each (whose first, pure-A output frame is dropped), and
everything is joined with the ``concat`` filter, so frame ``k`` of the output is known before encoding. After
encoding, the decoded frame count is checked with ``ffprobe -count_frames`` and a mismatch is an error.

Frame layout of a video (0-based, decode order)::

    | shot 0 body | transition 0 | shot 1 body | transition 1 | ... | shot n-1 body |

``Segment.frames`` counts the pure frames of a shot (its body); ``Transition.frames`` the blended frames between two
bodies (0 for a hard cut). A transition that spans frames ``[a, a + d)`` has cut range ``[a, a + d]`` (``a + d`` is
the first pure frame of the new shot; for a hard cut ``a`` itself) and canonical cut ``a + d // 2``.

Only stdlib here (ffmpeg runs as a subprocess); no dagster, no heavy imports.
"""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import subprocess
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------------------
# Constants shared with the probe and the pipeline (the `expect` field of the truth).
# ---------------------------------------------------------------------------------------------------------------

EXPECT_OK = "ok"
REJECT_TOO_SHORT = "reject:too_short"
REJECT_TRUNCATED = "reject:truncated"
REJECT_CORRUPT = "reject:corrupt"
REJECT_EMPTY_FILE = "reject:empty_file"
REJECT_NOT_A_VIDEO = "reject:not_a_video"
REJECT_NO_VIDEO_STREAM = "reject:no_video_stream"
FILTER_BLACK = "filter:black"
FILTER_FROZEN = "filter:frozen"

# Special files and the verdict the pipeline must reach on each.
SPECIAL_EXPECT: dict[str, str] = {
    "black": FILTER_BLACK,  # an all-black (but valid) video: filtered by the quality stage
    "frozen": FILTER_FROZEN,  # one frame shown for the whole video: filtered by the quality stage
    "short": REJECT_TOO_SHORT,  # 0.3 s, shorter than the minimum clip
    "truncated": REJECT_TRUNCATED,  # a faststart mp4 cut in half bytes-wise: header intact, data missing
    "zero_bytes": REJECT_EMPTY_FILE,  # an empty .mp4
    "not_video": REJECT_NOT_A_VIDEO,  # a text file named .mp4
    "audio_only": REJECT_NO_VIDEO_STREAM,  # an .mp4 that holds only an audio stream
}
SPECIAL_KINDS: tuple[str, ...] = tuple(SPECIAL_EXPECT)

TRANSITION_KINDS = ("cut", "dissolve", "fade", "wipe")
# xfade transition used for each gradual kind (a wipe picks its direction from the spec's seed).
_XFADE = {"dissolve": ("fade",), "fade": ("fadeblack",), "wipe": ("wipeleft", "wiperight", "wipeup", "wipedown")}

# Named colours usable as ``color:<name>`` with their BT.601 limited-range luma (used to keep consecutive colour
# shots far apart in luma: equal-luma colours, e.g. red and green, are a cut only for a colour-aware detector).
COLOR_LUMA: dict[str, int] = {
    "blue": 41, "purple": 61, "red": 81, "magenta": 106, "gray": 126, "lime": 145, "orange": 164,
    "cyan": 170, "yellow": 210, "white": 235, "black": 16,
}
# Sources whose content does not move (the quality stage may see their shots as static).
STATIC_SOURCES = frozenset({"smptehdbars", "rgbtestsrc", "black", "static"})
MOVING_SOURCES = ("testsrc2", "mandelbrot", "gradients", "sierpinski", "pan")
PLAIN_SOURCES = ("testsrc2", "mandelbrot", "smptehdbars", "gradients", "sierpinski", "rgbtestsrc", "pan", "black",
                 "static")
# Mean luma (0..255, full range as decoded to gray) of each source, measured at 320x240 and 640x360. Used with the
# rules of distinct() so that consecutive generated shots differ by a mean abs luma difference of >= ~45 (>= ~55
# next to a fast pan, whose own frame-to-frame difference reaches ~35), well above any in-shot change.
SOURCE_LUMA: dict[str, int] = {
    "testsrc2": 125, "mandelbrot": 146, "smptehdbars": 102, "gradients": 125, "sierpinski": 16, "rgbtestsrc": 42,
    "pan": 124, "static": 128, "black": 0,
    "color:blue": 29, "color:purple": 52, "color:red": 76, "color:magenta": 105, "color:gray": 128, "color:lime": 150,
    "color:orange": 173, "color:cyan": 179, "color:yellow": 226, "color:white": 255,
}
# Textured pairs measured too close (mean abs luma difference < 45 between some of their frames) or alike.
_WEAK_PAIRS = frozenset(frozenset(p) for p in [
    ("testsrc2", "static"), ("mandelbrot", "pan"), ("gradients", "pan"), ("mandelbrot", "gradients"),
    ("sierpinski", "rgbtestsrc"),
])
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


# Codec -> (default container, encoder arguments). -threads 1: the box is shared and files are small.
_ENCODERS: dict[str, tuple[str, list[str]]] = {
    "h264": ("mp4", ["-c:v", "libx264", "-preset", "veryfast", "-crf", "{q}", "-pix_fmt", "yuv420p"]),
    "hevc": ("mp4", ["-c:v", "libx265", "-preset", "ultrafast", "-crf", "{q}", "-pix_fmt", "yuv420p",
                     "-x265-params", "log-level=error:pools=1:frame-threads=1"]),
    "vp9": ("webm", ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-crf", "{q}", "-b:v", "0",
                     "-row-mt", "0", "-pix_fmt", "yuv420p"]),
    "mpeg4": ("avi", ["-c:v", "mpeg4", "-q:v", "{q}", "-pix_fmt", "yuv420p"]),
}
_DEFAULT_QUALITY = {"h264": 23, "hevc": 28, "vp9": 35, "mpeg4": 4}
_CONTAINERS = {"mp4": "mp4", "mkv": "matroska", "mov": "mov", "webm": "webm", "avi": "avi"}
_AUDIO_ENCODER = {"mp4": ["-c:a", "aac", "-b:a", "64k"], "mov": ["-c:a", "aac", "-b:a", "64k"],
                  "mkv": ["-c:a", "aac", "-b:a", "64k"], "webm": ["-c:a", "libopus", "-b:a", "48k"],
                  "avi": ["-c:a", "libmp3lame", "-b:a", "64k"]}
AUDIO_RATE = 48000
FLASH_FRAMES = (1, 2)  # flash lengths in frames, used in turn by the flashes of a segment
VFR_TIMEBASE = 90000


# ---------------------------------------------------------------------------------------------------------------
# Specs
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """One shot."""

    source: str  # lavfi-based source kind (PLAIN_SOURCES or "color:<name>"); "pan" = fast pan/zoom over a texture
    frames: int  # pure frames of the shot (transitions come on top, see the module docstring)
    flashes: tuple[int, ...] = ()  # body offsets where a near-white 1-2 frame camera flash starts; never cuts


@dataclass(frozen=True)
class Transition:
    """How one shot turns into the next."""

    kind: str  # "cut" | "dissolve" | "fade" (through black) | "wipe"
    frames: int = 0  # blended frames of a gradual transition (0 for a cut)


@dataclass(frozen=True)
class VideoSpec:
    """A whole synthetic video; rendering it is deterministic."""

    name: str  # file stem
    width: int  # even
    height: int  # even
    fps: str  # nominal rate as ffmpeg writes it: "30", "30000/1001", "25", "24", "60"
    codec: str  # "h264" | "hevc" | "vp9" | "mpeg4"
    segments: tuple[Segment, ...]  # shots in order
    transitions: tuple[Transition, ...]  # len(segments) - 1 joins
    vfr: bool = False  # re-time the frames to irregular timestamps (frame count unchanged)
    audio: bool = False  # add a sine audio track as long as the video
    container: str | None = None  # "mp4" | "mkv" | "mov" | "webm" | "avi"; None = the codec's default
    quality: int | None = None  # CRF (or mpeg4 q:v); None = the codec's default
    seed: int = 0  # seeds the random-looking sources (gradients, sierpinski, pan path, wipe direction)
    expect: str = EXPECT_OK  # verdict the pipeline must reach on this file


def spec_container(spec: VideoSpec) -> str:
    return spec.container or _ENCODERS[spec.codec][0]


@dataclass(frozen=True)
class _Layout:
    """Where every shot and transition sits in the output (frame indices)."""

    body_start: tuple[int, ...]
    trans_start: tuple[int, ...]
    num_frames: int


def _layout(spec: VideoSpec) -> _Layout:
    pos, bodies, trans = 0, [], []
    for i, seg in enumerate(spec.segments):
        bodies.append(pos)
        pos += seg.frames
        if i < len(spec.transitions):
            trans.append(pos)
            pos += spec.transitions[i].frames
    return _Layout(tuple(bodies), tuple(trans), pos)


def validate(spec: VideoSpec) -> None:
    """Raise ValueError on a spec that cannot be rendered exactly."""
    if not spec.segments:
        raise ValueError(f"{spec.name}: no segments")
    if len(spec.transitions) != len(spec.segments) - 1:
        raise ValueError(f"{spec.name}: {len(spec.segments)} segments need {len(spec.segments) - 1} transitions")
    if spec.width % 2 or spec.height % 2 or spec.width < 16 or spec.height < 16:
        raise ValueError(f"{spec.name}: width and height must be even and >= 16")
    if spec.codec not in _ENCODERS:
        raise ValueError(f"{spec.name}: codec {spec.codec!r} not in {sorted(_ENCODERS)}")
    if spec.container is not None and spec.container not in _CONTAINERS:
        raise ValueError(f"{spec.name}: container {spec.container!r} not in {sorted(_CONTAINERS)}")
    if spec.vfr and spec_container(spec) == "avi":
        raise ValueError(f"{spec.name}: AVI cannot hold variable-frame-rate video")
    Fraction(spec.fps)  # raises on a malformed rate
    for t in spec.transitions:
        if t.kind not in TRANSITION_KINDS:
            raise ValueError(f"{spec.name}: transition kind {t.kind!r} not in {TRANSITION_KINDS}")
        if (t.kind == "cut") != (t.frames == 0) or t.frames < 0:
            raise ValueError(f"{spec.name}: a cut has 0 frames, a gradual transition at least 1 ({t})")
    for seg in spec.segments:
        _source_chain(seg.source, spec.width, spec.height, spec.fps, 1, 0)  # raises on an unknown source
        if seg.frames < 1:
            raise ValueError(f"{spec.name}: segment with {seg.frames} frames")
        for off, length in _flash_spans(seg):
            if off < 0 or off + length > seg.frames:
                raise ValueError(f"{spec.name}: flash at {off} (+{length}) outside a {seg.frames}-frame segment")


def _flash_spans(seg: Segment) -> list[tuple[int, int]]:
    return [(off, FLASH_FRAMES[k % len(FLASH_FRAMES)]) for k, off in enumerate(sorted(seg.flashes))]


# ---------------------------------------------------------------------------------------------------------------
# Truth
# ---------------------------------------------------------------------------------------------------------------


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
    flashes, flash_frames = [], []
    segments = []
    for seg, b in zip(spec.segments, lay.body_start):
        for off, length in _flash_spans(seg):
            flashes.append(b + off)
            flash_frames.extend(range(b + off, b + off + length))
        segments.append({"source": seg.source, "start": b, "frames": seg.frames,
                         "static": _is_static(seg.source), "motion": _motion(seg.source)})
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


def _is_static(source: str) -> bool:
    return source in STATIC_SOURCES or source.startswith("color:")


def _motion(source: str) -> str:
    if _is_static(source):
        return "none"
    return "fast" if source == "pan" else "slow"


# ---------------------------------------------------------------------------------------------------------------
# Filter graph
# ---------------------------------------------------------------------------------------------------------------


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
        head = f"gradients=s={size}:r={rate}:seed={seed % 4294967295}:speed=0.02:n=3"
    elif source == "sierpinski":
        # The carpet flips every pixel each frame (1 px dots moving 1 px); the triangle rendered at 4x and averaged
        # down moves smoothly.
        head = (f"sierpinski=s={4 * w}x{4 * h}:r={rate}:seed={seed % 4294967295}:type=triangle,"
                f"scale={w}:{h}:flags=area")
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


_FLASH_LUT = "lutyuv=y='200+val*0.2':u='128+(val-128)*0.15':v='128+(val-128)*0.15'"


def _filter_graph(spec: VideoSpec) -> tuple[str, int]:
    """The filter_complex producing [v] and the number of frames it yields."""
    lay = _layout(spec)
    segs, trans = spec.segments, spec.transitions
    rate = spec.fps
    rnd = random.Random(spec.seed)
    chains: list[str] = []
    pieces: list[str] = []  # labels in output order
    for i, seg in enumerate(segs):
        lead_in = trans[i - 1].frames + 1 if i > 0 and trans[i - 1].frames else 0
        lead_out = trans[i].frames if i < len(trans) else 0
        # The tail overlaps the last body frame: xfade's first (pure-A) output frame is dropped.
        n = lead_in + seg.frames + lead_out
        outs = [f"b{i}"] + ([f"h{i}"] if lead_in else []) + ([f"t{i}"] if lead_out else [])
        src = _source_chain(seg.source, spec.width, spec.height, rate, n, spec.seed * 1000 + i)
        if len(outs) == 1:
            chains.append(f"{src}[s{i}]")
            body_in = f"[s{i}]"
        else:
            chains.append(f"{src},split={len(outs)}" + "".join(f"[s{i}{o}]" for o in outs))
            body_in = f"[s{i}b{i}]"
        body = f"{body_in}trim=start_frame={lead_in}:end_frame={lead_in + seg.frames},setpts=PTS-STARTPTS"
        spans = _flash_spans(seg)
        if spans:
            cond = "+".join(f"between(n,{o},{o + ln - 1})" for o, ln in spans)
            body += f",{_FLASH_LUT}:enable='{cond}'"
        chains.append(f"{body}[b{i}]")
        if lead_in:
            chains.append(f"[s{i}h{i}]trim=start_frame=0:end_frame={lead_in},setpts=PTS-STARTPTS[h{i}]")
        if lead_out:
            a = lead_in + seg.frames - 1
            chains.append(f"[s{i}t{i}]trim=start_frame={a}:end_frame={a + lead_out + 1},setpts=PTS-STARTPTS[t{i}]")
        pieces.append(f"[b{i}]")
        if i < len(trans) and trans[i].frames:
            t = trans[i]
            xf = rnd.choice(_XFADE[t.kind])
            dur = float((t.frames + 1) / Fraction(rate))
            chains.append(
                f"[t{i}][h{i + 1}]xfade=transition={xf}:duration={dur:.9f}:offset=0,"
                f"trim=start_frame=1:end_frame={t.frames + 1},setpts=PTS-STARTPTS[x{i}]"
            )
            pieces.append(f"[x{i}]")
    tail = _cfr_pts(rate)
    if spec.vfr:
        tail += f",settb=1/{VFR_TIMEBASE},setpts='{_vfr_pts_expr(rate)}'"
    chains.append(f"{''.join(pieces)}concat=n={len(pieces)}:v=1:a=0,{tail}[v]")
    return ";".join(chains), lay.num_frames


def _audio_input(spec: VideoSpec, num_frames: int) -> list[str]:
    """A sine tone exactly as long as the video, as a separate lavfi input.

    Why not inside -filter_complex: ffmpeg 5.1 then feeds the encoder 1024-sample frames and libopus/libvorbis
    refuse them ("more samples than frame size"); a plain input gets frames sized for its encoder.
    """
    samples = round(num_frames * AUDIO_RATE / Fraction(spec.fps))
    freq = 220 + 110 * (spec.seed % 5)
    return ["-f", "lavfi", "-i", f"sine=frequency={freq}:sample_rate={AUDIO_RATE},atrim=end_sample={samples}"]


def _vfr_pts_expr(rate: str) -> str:
    """Irregular, strictly increasing timestamps (in 1/90000 units) for frame N of a nominal-``rate`` stream.

    Frame durations wobble between ~0.45 and ~1.55 nominal durations, and from frame 24 on every frame lasts twice
    as long on average (a camera that drops to half rate), as phones record in low light.
    """
    return f"floor({VFR_TIMEBASE}*(N+0.45*sin(1.3*N)+max(N-24,0))/({rate}))"


# ---------------------------------------------------------------------------------------------------------------
# ffmpeg helpers
# ---------------------------------------------------------------------------------------------------------------


def ffmpeg_bin() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        raise RuntimeError("ffmpeg is not installed or not on PATH (Debian: apt-get install ffmpeg)")
    return path


def ffprobe_bin() -> str:
    path = shutil.which("ffprobe")
    if path is None:
        raise RuntimeError("ffprobe is not installed or not on PATH (Debian: apt-get install ffmpeg)")
    return path


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ffmpeg failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()[-2000:]}")


def _ffmpeg(*args: str) -> list[str]:
    return [ffmpeg_bin(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args]


def count_frames(path: str | Path) -> int:
    """Decoded frame count of the first video stream (``ffprobe -count_frames``); 0 when there is none."""
    proc = subprocess.run(
        [ffprobe_bin(), "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
         "stream=nb_read_frames", "-of", "json", str(path)],
        capture_output=True, text=True,
    )
    streams = json.loads(proc.stdout or "{}").get("streams") or []
    value = streams[0].get("nb_read_frames") if streams else None
    return int(value) if value not in (None, "N/A") else 0


def frame_times(path: str | Path) -> list[float]:
    """Presentation time (s) of every decoded frame, in output order."""
    proc = subprocess.run(
        [ffprobe_bin(), "-v", "error", "-select_streams", "v:0",
         "-show_entries", "frame=pts_time,best_effort_timestamp_time",
         "-of", "json", str(path)],
        capture_output=True, text=True, check=True,
    )
    out = []
    for f in json.loads(proc.stdout).get("frames", []):
        v = f.get("pts_time", f.get("best_effort_timestamp_time"))
        out.append(round(float(v), 6))
    return out


def _encode_args(codec: str, container: str, quality: int | None, audio: bool) -> list[str]:
    q = _DEFAULT_QUALITY[codec] if quality is None else quality
    args = [a.replace("{q}", str(q)) for a in _ENCODERS[codec][1]] + ["-threads", "1"]
    if codec == "hevc" and container in ("mp4", "mov"):
        args += ["-tag:v", "hvc1"]
    if audio:
        args += _AUDIO_ENCODER[container]
    args += ["-f", _CONTAINERS[container]]
    return args


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


# ---------------------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------------------


def render(spec: VideoSpec, out_dir: str | Path, verify: bool = True,
           truth_dir: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Encode ``spec`` into ``out_dir/<name>.<container>`` and write its truth as ``<name>.json`` into
    ``truth_dir`` (default: beside the video; ``generate`` and the CLI keep it out of the video folder).

    With ``verify`` the decoded frame count is checked against the truth (RuntimeError on mismatch).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    truth = spec_truth(spec)
    graph, n = _filter_graph(spec)
    container = truth["container"]
    path = out_dir / truth["file"]
    cmd = _ffmpeg(*(_audio_input(spec, n) if spec.audio else []), "-filter_complex_threads", "1",
                  "-filter_complex", graph, "-map", "[v]")
    if spec.audio:
        cmd += ["-map", "0:a"]
    # -frames:v is only a guard (the graph yields exactly n frames); with a separate audio input it would end the
    # file when the video is done and cut the audio short.
    cmd += ([] if spec.audio else ["-frames:v", str(n)]) + ["-fps_mode", "passthrough"]
    if spec.vfr:
        cmd += ["-enc_time_base", f"1/{VFR_TIMEBASE}"]
        if container in ("mp4", "mov"):
            cmd += ["-video_track_timescale", str(VFR_TIMEBASE)]
    else:
        cmd += ["-r", spec.fps]
    cmd += _encode_args(spec.codec, container, spec.quality, spec.audio) + [str(path)]
    _run(cmd)
    if spec.vfr:
        times = frame_times(path)
        truth["frame_times_s"] = times
        if len(times) > 1:
            truth["duration_s"] = round(times[-1] + (times[-1] - times[-2]), 6)
    if verify:
        got = count_frames(path)
        if got != n:
            raise RuntimeError(f"{path.name}: decoded {got} frames, the spec has {n}")
    _write_truth(path, truth, truth_dir)
    log.info("rendered %s: %d frames, %d cuts", path.name, n, len(truth["cuts"]))
    return path, truth


def _special_truth(name: str, kind: str, container: str, **over: Any) -> dict[str, Any]:
    """Truth of a file without a decodable video stream."""
    truth = {
        "file": f"{name}.{container}", "fps": None, "fps_str": None, "num_frames": 0,
        "duration_s": 0.0, "width": None, "height": None, "codec": None, "container": container, "vfr": False,
        "has_audio": False, "cuts": [], "cut_ranges": [], "transitions": [], "flashes": [], "flash_frames": [],
        "segments": [], "expect": SPECIAL_EXPECT[kind], "variant_of": None, "special": kind,
    }
    truth.update(over)
    return truth


def render_special(kind: str, out_dir: str | Path, *, name: str | None = None, width: int = 320, height: int = 240,
                   fps: str = "30", seed: int = 0, truth_dir: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
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
        spec = VideoSpec(name=name, width=width, height=height, fps=fps, codec="h264",
                         segments=(Segment(source, frames),), transitions=(), seed=seed, expect=SPECIAL_EXPECT[kind])
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
        _run(_ffmpeg("-f", "lavfi", "-i", f"sine=frequency=440:sample_rate={AUDIO_RATE}:duration=2",
                     "-c:a", "aac", "-b:a", "64k", "-threads", "1", "-f", "mp4", str(path)))
        truth = _special_truth(name, kind, "mp4", has_audio=True, duration_s=2.0)
    else:  # truncated
        frames = round(2 * rate)
        spec = VideoSpec(name=name + "_full", width=width, height=height, fps=fps, codec="h264",
                         segments=(Segment("testsrc2", frames // 2), Segment("smptehdbars", frames - frames // 2)),
                         transitions=(Transition("cut"),), seed=seed)
        full_dir = out_dir / f".{name}_tmp"
        full, full_truth = render(spec, full_dir)
        # Move the index to the front (faststart) so the header survives and only media data is missing.
        fast = full_dir / "fast.mp4"
        _run(_ffmpeg("-i", str(full), "-c", "copy", "-movflags", "+faststart", str(fast)))
        data = fast.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        shutil.rmtree(full_dir, ignore_errors=True)
        truth = {**full_truth, "file": path.name, "expect": SPECIAL_EXPECT[kind], "special": kind,
                 "declared_frames": full_truth["num_frames"], "num_frames": count_frames(path),
                 "size_bytes_full": len(data)}
    _write_truth(path, truth, truth_dir)
    return path, truth


# ---------------------------------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------------------------------

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
    flashes, flash_frames = [], []
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
        transitions=trans, cuts=cuts, cut_ranges=ranges, flashes=flashes, flash_frames=flash_frames,
        segments=[{**g, "start": _ceil_div(g["start"], s),
                   "frames": (_ceil_div(g["start"] + g["frames"], s) - _ceil_div(g["start"], s))}
                  for g in truth.get("segments", [])],
        speed=str(s),
    )
    return new


def perturb(src: str | Path, truth: dict[str, Any], k: int, out_dir: str | Path, seed: int = 0, *,
            ops: Iterable[str] | None = None, speed: Fraction | None = None,
            truth_dir: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
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
        filters = [_cfr_pts(rate), f"setpts=ceil(N*{s.denominator}/{s.numerator})",
                   f"fps={rate}"] + filters
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
    new.update(file=path.name, width=w, height=h, codec=codec, container=container, variant_of=truth["file"],
               perturbations=applied)
    got = count_frames(path)
    if got != new["num_frames"]:
        raise RuntimeError(f"{path.name}: decoded {got} frames, the variant's truth has {new['num_frames']}")
    if truth.get("vfr"):
        new["frame_times_s"] = frame_times(path)
    _write_truth(path, new, truth_dir)
    return path, new


# ---------------------------------------------------------------------------------------------------------------
# A varied, deterministic set of videos
# ---------------------------------------------------------------------------------------------------------------

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
    _Template("mixed", (854, 480), "30", "h264", None, 8.0, 5, ("cut", "dissolve", "fade", "wipe"), flashes=2,
              audio=True),
    _Template("long", (426, 240), "24", "h264", None, 150.0, 40, ("cut", "cut", "dissolve", "fade", "wipe"),
              flashes=6),
    _Template("hd", (1280, 720), "30", "h264", None, 2.0, 2, ("cut",), audio=True),
    _Template("fullhd", (1920, 1080), "25", "hevc", None, 1.6, 2, ("dissolve",)),
    _Template("ntsc", (640, 480), "30000/1001", "mpeg4", "mp4", 5.0, 4, ("cut", "fade", "wipe"), flashes=1),
    _Template("still_nocut", (320, 240), "24", "vp9", None, 1.0, 1, (),
              sources=("testsrc2", "mandelbrot", "gradients")),
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
    kinds = [t.transitions[(j + rng.randrange(len(t.transitions))) % len(t.transitions)] if j else
             t.transitions[0] for j in range(shots - 1)] if t.transitions else []
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
    return VideoSpec(name=name, width=t.size[0], height=t.size[1], fps=t.fps, codec=t.codec, segments=segments,
                     transitions=tuple(trans), vfr=t.vfr, audio=t.audio, container=t.container, seed=seed)


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
    parts = [f"{truth['width']}x{truth['height']}", f"{truth['fps_str']}fps{' vfr' if truth.get('vfr') else ''}",
             f"{truth['codec']}/{truth['container']}", f"{truth['num_frames']} frames",
             f"{len(truth['cuts'])} cuts", f"{len(truth['flashes'])} flashes"]
    kinds = sorted({t["kind"] for t in truth["transitions"] if t["kind"] != "cut"})
    if kinds:
        parts.append("+".join(kinds))
    if truth.get("has_audio"):
        parts.append("audio")
    if truth.get("variant_of"):
        parts.append(f"variant of {truth['variant_of']} ({', '.join(truth.get('perturbations', []))})")
    return f"{name}  {'  '.join(parts)}  expect={truth['expect']}"


def generate(out_dir: str | Path, count: int, variants: int = 0, seed: int = 0, include_specials: bool = True,
             max_duration_s: float = DEFAULT_MAX_DURATION_S,
             progress: Callable[[str], None] | None = None, truth_dir: str | Path | None = None) -> list[Path]:
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
