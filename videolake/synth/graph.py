"""The ffmpeg filter graph that renders a ``VideoSpec`` frame-exactly (trimmed sources, ``xfade`` transitions over
exact overlaps, flashes, ``concat``, the VFR re-timing) and the audio input that matches its length.
"""

from __future__ import annotations

import random
from fractions import Fraction

from videolake.synth.ffmpeg import AUDIO_RATE, VFR_TIMEBASE
from videolake.synth.sources import _cfr_pts, _source_chain
from videolake.synth.specs import VideoSpec, _flash_spans, _layout

# xfade transition used for each gradual kind (a wipe picks its direction from the spec's seed).
_XFADE = {"dissolve": ("fade",), "fade": ("fadeblack",), "wipe": ("wipeleft", "wiperight", "wipeup", "wipedown")}


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
