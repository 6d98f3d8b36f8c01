"""The ``luma`` detector's settings (``LumaConfig``; the algorithm they tune is described in ``luma``).

A module of its own so that the decision (``luma``) and the wipe test (``sweep``) both read it without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from videolake.platform.params import param


@dataclass(frozen=True)
class LumaConfig:
    threshold: float = param(
        12.0,
        "minimum content change across a cut: mean abs difference of the 16x9 Y/U/V block "
        "grids (0..255) + hist_weight x histogram distance; lower finds cuts between similar "
        "shots, higher ignores more motion",
        min=0.0,
    )
    ratio: float = param(
        3.0,
        "the change across a hard cut must be this many times the largest frame-to-frame "
        "change just before and after it (the adaptive part: fast motion raises both)",
        min=1.0,
    )
    weak_share: float = param(
        0.58,
        "a hard cut may be as small as this share of ``threshold`` when it beats the "
        "motion around it by ``strong_ratio`` (cuts between similar shots)",
        min=0.0,
        max=1.0,
    )
    strong_ratio: float = param(4.0, "ratio to the neighbouring frame changes required below ``threshold``", min=1.0)
    hist_weight: float = param(60.0, "weight of the colour-histogram distance (0..1) in the content distance", min=0.0)
    gradual_ratio: float = param(
        2.25,
        "the same ratio for gradual candidates (spans of more than one frame), whose "
        "motion estimate is an upper bound; they must also exceed it by ``threshold``",
        min=1.0,
    )
    sweep_ratio: float = param(
        3.0,
        "a wipe out of (or into) fast motion: a gradual candidate that beats the motion "
        "of its quiet side only, by this ratio, is a cut when its change sweeps across the "
        "picture (each block switches once, along a boundary crossing the frame at constant "
        "speed, that the moving content does not travel with)",
        min=1.0,
    )
    min_hist_change: float = param(
        0.18,
        "gradual transitions must change the colour histograms at least this much "
        "(0..1): a pan or zoom moves the picture but keeps its colours",
        min=0.0,
    )
    max_excess: float = param(
        1.6,
        "a gradual candidate's frames must lie between its ends: max over inner frames m "
        "of (D(a, m) + D(m, e)) / D(a, e) (1.0 for a dissolve or wipe; motion blur and "
        "whip pans go far above). Spans through a flat frame (fades) are exempt",
        min=1.0,
    )
    max_transition: int = param(64, "longest gradual transition detected, in frames", min=1)
    flash_frames: int = param(
        4,
        "frames within which the content may return to what it was before a change for that change to be a flash",
        min=0,
    )
    flash_return: float = param(
        0.5, "a change that returns to within this share of its size is a flash", min=0.0, max=1.0
    )
    min_scene_len: int = param(8, "minimum frames between two cuts (the weaker one is dropped)", min=1)
    black_hold_s: float = param(
        1.0,
        "a fade out to black and back in is ONE cut (in the middle of the black) when "
        "the black lasts at most this long; a longer black stretch is a clip of its own (a "
        "cut into it and one out of it), which the quality stage rejects as black",
        min=0.0,
    )
    letterbox: bool = param(
        True,
        "ignore blocks that stay dark and still for the whole video (letterbox or "
        "pillarbox bars): they dilute every change of the picture inside them",
    )
    sample_width: int = param(64, "sampled luma width (see frames.DecodeOptions.sample_width)", min=16)
    fast_decode: bool = param(True, "skip the deblocking filter while decoding (see frames.DecodeOptions)")
    threads: int = param(1, "decoder threads (1 = least CPU; 0 = FFmpeg automatic)", min=0)
    motion_gap: int = param(4, "motion inside the shots is measured over this many frames (scaled to the span)", min=1)
    motion_window: int = param(
        6, "frames on each side of a candidate over which motion inside the shots is measured", min=1
    )
    noise_floor: float = param(
        1.0, "noise floor of the content distance, so a static shot does not make every tiny change a cut", min=0.0
    )
