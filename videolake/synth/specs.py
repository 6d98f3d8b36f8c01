"""What a synthetic video is: its shots (``Segment``), the joins between them (``Transition``) and the whole video
(``VideoSpec``), where every frame sits, and ``validate``, which refuses a spec that cannot be rendered exactly.

Frame layout of a video (0-based, decode order)::

    | shot 0 body | transition 0 | shot 1 body | transition 1 | ... | shot n-1 body |

``Segment.frames`` counts the pure frames of a shot (its body); ``Transition.frames`` the blended frames between two
bodies (0 for a hard cut). A transition that spans frames ``[a, a + d)`` has cut range ``[a, a + d]`` (``a + d`` is
the first pure frame of the new shot; for a hard cut ``a`` itself) and canonical cut ``a + d // 2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from videolake.synth.ffmpeg import _CONTAINERS, _ENCODERS
from videolake.synth.sources import _source_chain
from videolake.synth.verdicts import EXPECT_OK

TRANSITION_KINDS = ("cut", "dissolve", "fade", "wipe")
FLASH_FRAMES = (1, 2)  # flash lengths in frames, used in turn by the flashes of a segment


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
