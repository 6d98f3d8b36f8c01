"""Synthetic test videos with exact ground truth (cuts, gradual transitions, flashes, expected pipeline verdict).

Why synthetic: the scene detector, the probe and the quality scorers are evaluated against truth that is exact by
construction. Every shot is an ffmpeg lavfi source trimmed to an exact frame count; gradual transitions are
``xfade`` over two streams of exactly ``frames + 1`` frames each (whose first, pure-A output frame is dropped), and
everything is joined with the ``concat`` filter, so frame ``k`` of the output is known before encoding. After
encoding, the decoded frame count is checked with ``ffprobe -count_frames`` and a mismatch is an error.

Modules, each with one job (this package re-exports their public names):

- ``verdicts``: the ``expect`` values of a truth and the special kinds with the verdict each must get;
- ``sources``: the lavfi sources a shot is made of, their luma and ``distinct``;
- ``specs``: ``Segment``, ``Transition``, ``VideoSpec``, the frame layout and ``validate``;
- ``graph``: the ffmpeg filter graph (and audio input) that renders a spec frame-exactly;
- ``ffmpeg``: the ffmpeg/ffprobe binaries, encoder arguments (single-threaded, bit-exact: one seed, one set of
  bytes), ``count_frames`` and ``frame_times``;
- ``truth``: ``spec_truth`` and the ``<stem>.json`` truth files (``default_truth_dir``);
- ``rendering``: ``render``, which encodes a spec and verifies it;
- ``specials``: ``render_special``, the odd files the pipeline must reject or filter;
- ``variants``: ``perturb``, perturbed copies with recomputed truth;
- ``corpus``: ``plan`` and ``generate``, a varied deterministic set (the ``videolake synth`` command).

Only stdlib here (ffmpeg runs as a subprocess); no dagster, no heavy imports.
"""

from videolake.synth.corpus import DEFAULT_MAX_DURATION_S, TEMPLATES, generate, plan, summary_line
from videolake.synth.ffmpeg import AUDIO_RATE, VFR_TIMEBASE, count_frames, ffmpeg_bin, ffprobe_bin, frame_times
from videolake.synth.rendering import render
from videolake.synth.sources import (
    COLOR_LUMA,
    MOVING_SOURCES,
    PLAIN_SOURCES,
    SOURCE_LUMA,
    STATIC_SOURCES,
    distinct,
)
from videolake.synth.specials import render_special
from videolake.synth.specs import (
    FLASH_FRAMES,
    TRANSITION_KINDS,
    Segment,
    Transition,
    VideoSpec,
    spec_container,
    validate,
)
from videolake.synth.truth import default_truth_dir, spec_truth
from videolake.synth.variants import PERTURBATIONS, perturb
from videolake.synth.verdicts import (
    EXPECT_OK,
    FILTER_BLACK,
    FILTER_FROZEN,
    REJECT_CORRUPT,
    REJECT_EMPTY_FILE,
    REJECT_NO_VIDEO_STREAM,
    REJECT_NOT_A_VIDEO,
    REJECT_TOO_SHORT,
    REJECT_TRUNCATED,
    SPECIAL_EXPECT,
    SPECIAL_KINDS,
)

__all__ = [
    "AUDIO_RATE",
    "COLOR_LUMA",
    "DEFAULT_MAX_DURATION_S",
    "EXPECT_OK",
    "FILTER_BLACK",
    "FILTER_FROZEN",
    "FLASH_FRAMES",
    "MOVING_SOURCES",
    "PERTURBATIONS",
    "PLAIN_SOURCES",
    "REJECT_CORRUPT",
    "REJECT_EMPTY_FILE",
    "REJECT_NOT_A_VIDEO",
    "REJECT_NO_VIDEO_STREAM",
    "REJECT_TOO_SHORT",
    "REJECT_TRUNCATED",
    "SOURCE_LUMA",
    "SPECIAL_EXPECT",
    "SPECIAL_KINDS",
    "STATIC_SOURCES",
    "Segment",
    "TEMPLATES",
    "TRANSITION_KINDS",
    "Transition",
    "VFR_TIMEBASE",
    "VideoSpec",
    "count_frames",
    "default_truth_dir",
    "distinct",
    "ffmpeg_bin",
    "ffprobe_bin",
    "frame_times",
    "generate",
    "perturb",
    "plan",
    "render",
    "render_special",
    "spec_container",
    "spec_truth",
    "summary_line",
    "validate",
]
