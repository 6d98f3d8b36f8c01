"""Quality scores of scene clips, computed from the per-frame statistics of the detector's decode pass.

Every built-in score but one is an aggregate over the clip's slice of ``FrameStats`` (numpy, O(frames)); the
near-duplicate fingerprint (``near_dup``) looks at pixels: ``dup_frames`` frames decoded from the source.
Each scorer fills some filtered_clips columns and may name reject rules; a clip passes when no rule fires, else
``reject_reason`` is the ';'-joined list of the rules that fired, in the fixed order of ``reject_rules.REJECT_RULES``
(e.g. ``"too_short;black"``). Near-duplicates are a property of a set of clips, not of one clip, so they are
assigned afterwards: within a day (``assign_duplicates``), then across days (``dedup.cross_day``).

Every score is computed on all frames of the clip: the statistics are already there, so subsampling would only
make scores depend on a sampling choice.

A scorer is a plugin (the stage contract, as a detector's): its ``Config`` (typed, described settings from
``QualityConfig.scorer_params``), the ``resources`` one video's scoring needs, ``setup()`` once per worker process
(load a model) and ``teardown()`` at its exit, and ``score(clip)`` per clip. A scorer that needs pixels, not only
statistics, asks ``clip.frames(count, max_pixels)``: the engine decodes them from the source on first use. Values for
names that are not filtered_clips columns land in its ``scores`` map, and rule names the built-ins do not know sort
after theirs, so a new filter is one module (installed through the ``videolake.quality_scorers`` entry point) and its
test.
"""

from __future__ import annotations

import atexit
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from videolake.platform.dedup.near import NearDupConfig
from videolake.platform.filters.reject_rules import join_rules
from videolake.platform.lake.schemas import FILTERED_CLIPS, PARTITION_COLUMN
from videolake.platform.params import ParamError, plugin_params
from videolake.platform.registry import Registry
from videolake.platform.runtime.unit_resources import UnitResources
from videolake.platform.video.frames import FrameStats

log = logging.getLogger(__name__)


DEFAULT_SCORERS: tuple[str, ...] = (
    "frames",
    "duration",
    "resolution",
    "brightness",
    "black",
    "frozen",
    "motion",
    "sharpness",
    "text",
    "near_dup",
)

# The filtered_clips columns of a row, without the partition column (the caller adds it).
ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in FILTERED_CLIPS if f.name != PARTITION_COLUMN)
# The map column holding the scores of scorers that have no column of their own (plugins).
SCORES_COLUMN = "scores"


_NEAR = NearDupConfig()


@dataclass(frozen=True)
class QualityConfig:
    # Clips shorter than this are rejected too_short; the same 1 s as ProbeConfig.min_duration_s and the split
    # stage's min_clip_s (short scenes are kept as clips so they are rejected here, with a reason).
    min_clip_s: float = 1.0
    # Informational upper bound: 0 disables it; > 0 rejects longer clips as too_long. The split stage already cuts
    # long scenes into pieces of at most its own max_clip_s.
    max_clip_s: float = 0.0
    # Both sides must reach these (so orientation does not matter): 144p (256x144) passes, thumbnails do not.
    # Below 128 px vision encoders (224-448 px inputs) only see upscaled blur.
    min_width: int = 128
    min_height: int = 128
    # A frame is black when its mean luma (0..255) is below this. 24 rather than 16 so that both luma conventions
    # count black as black: full-range luma (black = 0) and the raw limited-range Y plane (black = 16); either way
    # 24 is below 10% grey.
    black_luma: float = 24.0
    # Clips with more than this share of black frames are rejected black.
    max_black_ratio: float = 0.5
    # Mean luma of the clip below / above which it is too_dark / too_bright (badly exposed, near-solid frames).
    # frames.py measures the raw Y plane (limited range: black 16, white 235), so white must fire below 235.
    min_brightness: float = 20.0
    max_brightness: float = 230.0
    # A frame is frozen when its mean abs luma difference to the previous frame is below this (encoder noise on a
    # still image stays under it; the slowest real motion is above).
    frozen_diff: float = 0.5
    # Clips with more than this share of frozen frames are rejected frozen (slideshows, paused streams).
    max_frozen_ratio: float = 0.8
    # Mean abs luma change between consecutive frames (the clip's first frame excluded: its difference crosses
    # the cut). Below min_motion: low_motion (nothing happens); above max_motion: high_motion (strobing, flashes,
    # noise). Measured with frames.py: testsrc2 2.3, mandelbrot zoom 2.6, sierpinski 54, cellauto noise 105.
    min_motion: float = 0.5
    max_motion: float = 60.0
    # Mean variance of the Laplacian of luma below which the clip is blurry. frames.py measures it on a grid
    # sampled to 64 px wide, so this is a coarse "is there any structure" check rather than a focus measure:
    # smooth gradients and solid frames score 0-2, a 320 px frame blurred with sigma 8 scores ~90, real scenes 1000+.
    min_sharpness: float = 50.0
    # Mean share of the frame on text-like edges above which the clip is mostly text (slides, credits) or
    # graphics noise. With frames.py's proxy (|dx|+|dy| >= 80 on the sampled grid): natural and synthetic scenes
    # and a subtitle line score 0.00-0.07, fractal and cellular-automaton patterns 0.27-0.79.
    max_text_area: float = 0.25
    # Near-duplicates (dedup.near, dedup.cross_day; defaults and their measurements in dedup.near.NearDupConfig):
    # frames sampled evenly over a clip for its fingerprint (PDQ hashes of each informative frame, bars removed).
    dup_frames: int = _NEAR.frames_per_clip
    # Two frames match when the whole of one is within this many bits (of 256) of a crop view of the other;
    # negative turns near-duplicate grouping off.
    dup_max_distance: int = _NEAR.max_distance
    # Two clips are near-duplicates when at least this share of one clip's frames match a frame of the other.
    dup_min_share: float = _NEAR.min_share
    # Semantic duplicates (embedding.semantic, as NeMo Curator's SemDeDup), judged only on days that have rows in
    # clip_embeddings (its asset exists when an embedding model is configured): two clips of one k-means cluster
    # are duplicates when their cosine similarity is >= 1 - semantic_eps. Negative: off. Choose it from the
    # similarity distribution clip_embeddings reports for the day.
    semantic_eps: float = 0.01
    # Target clips per k-means cluster (k = ceil(clips / this)); larger clusters miss fewer pairs and cost more.
    semantic_items_per_cluster: int = 1000
    # The dhash scorer (not run by default): a middle frame with less structure than this (variance of the
    # Laplacian on the sampled grid, as min_sharpness) is flat and gets no dhash.
    min_hash_structure: float = 10.0
    # A video's clips are scored this many at a time, each scorer once per batch (a model scorer runs its model on
    # the batch's frames); the one decoding pass keeps the frames of about one batch, so memory stays bounded on
    # long videos. Not part of any score.
    batch_clips: int = 16
    # The scorers to run (names in SCORERS); columns of scorers not run stay null.
    scorers: tuple[str, ...] = DEFAULT_SCORERS
    # The settings of scorers that declare a ``Config`` of their own (plugins): scorer name -> {field: value}, each
    # value parsed against that Config (typed and range-checked; text from run config is parsed). The built-in
    # scorers read the thresholds above.
    scorer_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def near_dup_config(self) -> Any:
        """The fingerprint and matching settings (dedup.near.NearDupConfig) these thresholds give."""
        from dataclasses import replace

        return replace(
            _NEAR, frames_per_clip=self.dup_frames, max_distance=self.dup_max_distance, min_share=self.dup_min_share
        )

    def semantic_config(self) -> Any:
        """The semantic rule's settings (embedding.semantic.SemanticDedupConfig); None when it is off."""
        from videolake.platform.embedding.semantic import SemanticDedupConfig

        if self.semantic_eps < 0:
            return None
        return SemanticDedupConfig(eps=self.semantic_eps, items_per_cluster=self.semantic_items_per_cluster)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scorers", tuple(self.scorers))
        object.__setattr__(self, "scorer_params", {str(k): dict(v) for k, v in dict(self.scorer_params).items()})
        unknown = sorted(set(self.scorer_params) - set(self.scorers))
        if unknown:
            raise ParamError(f"scorer_params names scorers that are not run: {unknown}; scorers: {list(self.scorers)}")


@dataclass(frozen=True)
class FrameRequest:
    """Frames a scorer reads of each clip: ``count`` spread evenly over the clip, each at most ``max_pixels``."""

    count: int
    max_pixels: int


# (clip row, count, max_pixels) -> uint8 RGB frames (count, H, W, 3) of the clip, upright, evenly spread over it.
PixelSource = Callable[[dict, int, int], np.ndarray]


@dataclass(frozen=True)
class ClipView:
    """What a scorer sees of one clip."""

    clip: dict[str, Any]  # the scene_clips row (clip_id, start_frame, end_frame, duration_s, ...)
    stats: FrameStats  # the statistics of the clip's frames only (0 frames when none are available)
    width: int | None  # the video's frame size (raw_videos, else the statistics' decoded size)
    height: int | None
    pixels: PixelSource | None = None  # decodes the clip's frames on demand (None: scored without its source)

    def frames(self, count: int = 4, max_pixels: int = 224 * 224) -> np.ndarray:
        """``count`` frames of the clip evenly spread over it (fewer when the clip is shorter), each downscaled to at
        most ``max_pixels``. Decoded from the source on demand (the video is opened once for all its clips); raises
        ``ValueError`` with a reason when the frames cannot be read, which rejects the video's clips as
        ``score_error``."""
        if self.pixels is None:
            raise ValueError(f"the pixels of clip {self.clip.get('clip_id')} are not available here")
        return self.pixels(self.clip, count, max_pixels)


class Scorer(ABC):
    """One quality aspect of a clip: fills ``columns`` and may fire the rules in ``rules``.

    ``columns`` names filtered_clips columns, or (plugins) score names stored in the ``scores`` map column; values
    there must be numbers. ``Config``: a frozen dataclass of the scorer's own settings, fields made with
    ``params.param`` (typed, described), filled from ``QualityConfig.scorer_params[name]``; None for the built-ins,
    which read ``QualityConfig``.
    """

    registered_name: ClassVar[str]
    columns: ClassVar[tuple[str, ...]] = ()
    rules: ClassVar[tuple[str, ...]] = ()
    Config: ClassVar[type | None] = None
    # Part of filtered_clips' stage version: bump it when the scorer's code changes its values, so that finished
    # units are recomputed rather than reused.
    version: ClassVar[str] = "1"
    # What scoring a video's clips needs from the cluster; filtered_clips runs every scorer of a video in one task,
    # scheduled with the union of the configured scorers' resources (a model-based scorer would ask for a GPU).
    resources: ClassVar[UnitResources] = UnitResources()

    def __init__(self, config: QualityConfig) -> None:
        self.config = config
        name = getattr(self, "registered_name", type(self).__name__)
        self.params = plugin_params(
            self.Config, config.scorer_params.get(name), f"quality scorer {name!r}", "QualityConfig"
        )

    def frames_wanted(self) -> FrameRequest | None:
        """The frames this scorer reads of each clip through ``ClipView.frames(count, max_pixels)``, declared so that
        the score stage decodes the frames of every scorer, and checks that the clips decode, in ONE pass over the
        video (``clip_pixels.VideoPixels``); a request not declared still works, at the cost of another pass.
        Default: None (statistics only)."""
        return None

    def unit_resources(self) -> UnitResources:
        """What this scorer needs of a worker with these settings (a model scorer set to a GPU asks for one).
        Default: the class's ``resources``."""
        return self.resources

    def setup(self) -> None:
        """Once per worker process, before the first clip (load a model here). Default: nothing."""

    def teardown(self) -> None:
        """When the worker process exits. Default: nothing."""

    @abstractmethod
    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        """Column values (None where not measurable) and the names of the rules that fire."""

    def score_batch(self, clips: list[ClipView]) -> list[tuple[dict[str, Any], list[str]]]:
        """``score`` of each of one video's clips, in order. A model scorer overrides it to run its model once on
        the frames of all the clips (one batch a video, on the worker that holds the model). Default: one by one."""
        return [self.score(clip) for clip in clips]


def gather_frames(
    clips: list[ClipView], count: int, max_pixels: int, each: Callable[[np.ndarray], np.ndarray] | None = None
) -> tuple[list[np.ndarray], list[int]]:
    """The sampled frames of a batch of clips in one list, and the index of the clip each came from: what a model
    scorer runs its model on once (``Scorer.score_batch``). Clips without pixels or statistics give none; ``each``
    maps one clip's frames first (e.g. cutting its bars)."""
    frames: list[np.ndarray] = []
    owner: list[int] = []
    for i, clip in enumerate(clips):
        if clip.pixels is None or clip.stats.num_frames == 0:
            continue
        got = clip.frames(count, max_pixels)
        frames.extend(each(got) if each is not None else got)
        owner.extend([i] * len(got))
    return frames, owner


# The modules of videolake/platform/filters/scorers/ (model scorers, not run by default unless DEFAULT_SCORERS names them).
MODEL_SCORER_MODULES: tuple[str, ...] = ("text_overlay", "nsfw", "faces", "aesthetic")

# Built-in scorers are defined below, model-based ones (not run by default) in the builtins' modules; installed
# packages add theirs through the entry-point group.
SCORERS: Registry[Scorer] = Registry(
    "quality scorer",
    builtins=tuple(f"videolake.platform.filters.scorers.{name}" for name in MODEL_SCORER_MODULES),
    entry_point_group="videolake.quality_scorers",
)


def _mean(values: np.ndarray) -> float | None:
    return float(np.mean(values, dtype=np.float64)) if values.size else None


@SCORERS.register("frames")
class FramesScorer(Scorer):
    """Every score needs at least two frames (motion and frozen compare a frame with the previous one)."""

    rules = ("too_few_frames",)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        return {}, (["too_few_frames"] if clip.stats.num_frames < 2 else [])


@SCORERS.register("duration")
class DurationScorer(Scorer):
    columns = ("duration_s",)
    rules = ("too_short", "too_long")
    version = "2"  # 2: too_long against the bound the clip was cut under too

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        d = float(clip.clip["duration_s"])
        rules = []
        if d < self.config.min_clip_s:
            rules.append("too_short")
        if (self.config.max_clip_s > 0 and d > self.config.max_clip_s) or _over_cut_bound(clip.clip):
            rules.append("too_long")
        return {"duration_s": d}, rules


def _over_cut_bound(clip: dict[str, Any]) -> bool:
    """The clip is longer than the bound scene_clips cut it under (its row's ``max_clip_s``): the split cuts scenes
    by their frames' timestamps, so only a single frame held longer than the bound (or a row cut before clips were
    timed) gets here, and such a clip is set aside here rather than stopping the day at the scene_clips gate."""
    bound = clip.get("max_clip_s")
    return bound is not None and float(bound) > 0 and float(clip["duration_s"]) > float(bound) + 1e-6


@SCORERS.register("resolution")
class ResolutionScorer(Scorer):
    columns = ("width", "height")
    rules = ("low_resolution",)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        w, h = clip.width, clip.height
        low = w is None or h is None or w < self.config.min_width or h < self.config.min_height
        return {"width": w, "height": h}, (["low_resolution"] if low else [])


@SCORERS.register("brightness")
class BrightnessScorer(Scorer):
    columns = ("brightness",)
    rules = ("too_dark", "too_bright")

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        b = _mean(clip.stats.luma_mean)
        rules = []
        if b is not None and b < self.config.min_brightness:
            rules.append("too_dark")
        if b is not None and b > self.config.max_brightness:
            rules.append("too_bright")
        return {"brightness": b}, rules


@SCORERS.register("black")
class BlackScorer(Scorer):
    columns = ("black_ratio",)
    rules = ("black",)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        luma = clip.stats.luma_mean
        r = _mean(luma < self.config.black_luma)
        return {"black_ratio": r}, (["black"] if r is not None and r > self.config.max_black_ratio else [])


@SCORERS.register("frozen")
class FrozenScorer(Scorer):
    """Share of the clip's frames (after its first) that do not differ from their previous frame."""

    columns = ("frozen_ratio",)
    rules = ("frozen",)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        diffs = clip.stats.luma_diff[1:]
        r = _mean(diffs < self.config.frozen_diff)
        return {"frozen_ratio": r}, (["frozen"] if r is not None and r > self.config.max_frozen_ratio else [])


@SCORERS.register("motion")
class MotionScorer(Scorer):
    """Mean abs luma change between consecutive frames, without the clip's first frame (its diff crosses the cut)."""

    columns = ("motion",)
    rules = ("low_motion", "high_motion")

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        m = _mean(clip.stats.luma_diff[1:])
        rules = []
        if m is not None and m < self.config.min_motion:
            rules.append("low_motion")
        if m is not None and m > self.config.max_motion:
            rules.append("high_motion")
        return {"motion": m}, rules


@SCORERS.register("sharpness")
class SharpnessScorer(Scorer):
    columns = ("sharpness",)
    rules = ("blurry",)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        s = _mean(clip.stats.sharpness)
        return {"sharpness": s}, (["blurry"] if s is not None and s < self.config.min_sharpness else [])


@SCORERS.register("text")
class TextScorer(Scorer):
    columns = ("text_area",)
    rules = ("text",)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        t = _mean(clip.stats.edge_density)
        return {"text_area": t}, (["text"] if t is not None and t > self.config.max_text_area else [])


@SCORERS.register("dhash")
class DhashScorer(Scorer):
    """The middle frame's dhash (the duplicate rule itself is applied across clips by ``assign_duplicates``)."""

    columns = ("dhash",)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        n = clip.stats.num_frames
        if not n or float(clip.stats.sharpness[n // 2]) < self.config.min_hash_structure:
            return {"dhash": None}, []  # no frame, or a flat one: nothing to compare
        return {"dhash": format(int(clip.stats.dhash[n // 2]), "016x")}, []


@SCORERS.register("near_dup")
class NearDupScorer(Scorer):
    """The clip's near-duplicate fingerprint (dedup.near): PDQ hashes of ``dup_frames`` frames spread over the clip,
    decoded from the source. The grouping itself is applied across clips and days (dedup.cross_day)."""

    columns = ("near_hashes",)
    # 2: frames of at most 128x72 pixels (was 128x128: 170x96 for 16:9), decoded in one pass without the in-loop
    # deblocking filter (clip_pixels); fingerprints of version 1 differ by a few bits and are not mixed with these.
    # 3: motion views of still clips (dedup.near.motion_hashes), after a marker row; version-2 prints still compare.
    version = "3"
    # PDQ works on a 64x64 downscale. Frames of at most 128x72 pixels (128x72 for 16:9, 110x83 for 4:3, 72x128
    # portrait) give the same recall and precision on the real-footage set as 256 px (dedup.near), and keep every
    # view within PDQ's 128 px for which dedup.near hashes all views of a frame in numpy (2.2 ms a frame, not 4.7).
    max_pixels: ClassVar[int] = 128 * 72

    def frames_wanted(self) -> FrameRequest | None:
        return None if self.config.dup_max_distance < 0 else FrameRequest(self.config.dup_frames, self.max_pixels)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        from videolake.platform.dedup.near import clip_fingerprint

        if self.config.dup_max_distance < 0 or clip.pixels is None or clip.stats.num_frames == 0:
            return {"near_hashes": None}, []
        frames = clip.frames(self.config.dup_frames, self.max_pixels)
        return {"near_hashes": clip_fingerprint(frames, self.config.near_dup_config()).tobytes()}, []


# ------------------------------------------------------------------------------------------------ rows


def _empty_row(clip: dict[str, Any], video: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(ROW_COLUMNS)
    row["clip_id"] = clip["clip_id"]
    row["video_id"] = clip["video_id"]
    row["source_uri"] = clip.get("source_uri") or (video or {}).get("source_uri")
    row["duration_s"] = float(clip["duration_s"])
    if video is not None:
        row["width"], row["height"] = video.get("width"), video.get("height")
    return row


def failed_clip_row(clip: dict[str, Any], video: dict[str, Any] | None, reason: str) -> dict[str, Any]:
    """A filtered_clips row for a clip that could not be scored (no statistics, detection or scoring failed):
    rejected with ``reason``, scores null."""
    row = _empty_row(clip, video)
    row["passed"] = False
    row["reject_reason"] = reason
    return row


def _video_size(video: dict[str, Any] | None, stats: FrameStats) -> tuple[int | None, int | None]:
    w = video.get("width") if video else None
    h = video.get("height") if video else None
    if not w or not h:
        w, h = (stats.width or None), (stats.height or None)
    return (int(w) if w else None), (int(h) if h else None)


def scorer_resources(config: QualityConfig) -> UnitResources:
    """What one video's scoring task needs: the union of the configured scorers' declared resources."""
    return UnitResources.union(SCORERS.get(name)(config).unit_resources() for name in config.scorers)


def frame_requests(config: QualityConfig) -> list[FrameRequest]:
    """The distinct frame requests of the configured scorers (``Scorer.frames_wanted``), in scorer order: what the
    score stage's one pass over a video decodes."""
    out: list[FrameRequest] = []
    for scorer in active_scorers(config):
        wanted = scorer.frames_wanted()
        if wanted is not None and wanted not in out:
            out.append(wanted)
    return out


def check_scorers(config: QualityConfig) -> None:
    """Fail at once, in the caller, on an unknown scorer or a parameter that does not fit its scorer (``KeyError``,
    ``ParamError``), rather than in every video's task, where the error would reject every clip as score_error."""
    for name in config.scorers:
        SCORERS.get(name)(config)


_ACTIVE: dict[str, list[Scorer]] = {}  # this process's set-up scorers, by config


def active_scorers(config: QualityConfig) -> list[Scorer]:
    """The configured scorers, built and set up once per process and config (a Ray worker process scores many
    videos: a model loads once), torn down when the process exits."""
    key = json.dumps(asdict(config), sort_keys=True, default=str)
    if key not in _ACTIVE:
        built = [SCORERS.get(name)(config) for name in config.scorers]
        for scorer in built:
            scorer.setup()
        if not _ACTIVE:
            atexit.register(_teardown_all)
        _ACTIVE[key] = built
    return _ACTIVE[key]


def _teardown_all() -> None:
    for scorers in _ACTIVE.values():
        for scorer in scorers:
            try:
                scorer.teardown()
            except Exception as exc:  # noqa: BLE001 - one scorer's teardown must not stop the others'
                log.warning("teardown of scorer %s failed: %s", scorer.registered_name, exc)
    _ACTIVE.clear()


def score_video_clips(
    clips: list[dict[str, Any]],
    stats: FrameStats,
    video: dict[str, Any] | None,
    config: QualityConfig | None = None,
    *,
    pixels: PixelSource | None = None,
) -> list[dict[str, Any]]:
    """filtered_clips rows (without partition_date, duplicates not yet assigned) for the clips of ONE video.

    ``clips`` are scene_clips rows, ``stats`` the video's frame statistics, ``video`` its raw_videos row (for the
    frame size; the statistics' size is used without it), ``pixels`` what decodes a clip's frames for the scorers
    that look at them. Frames beyond the statistics are not scored.
    """
    config = config or QualityConfig()
    scorers = active_scorers(config)
    width, height = _video_size(video, stats)
    views = []
    for clip in clips:
        start, end = int(clip["start_frame"]), int(clip["end_frame"])
        if end > stats.num_frames:
            log.warning(
                "clip %s ends at frame %d but the statistics cover %d frames", clip["clip_id"], end, stats.num_frames
            )
        frames = stats.slice(max(0, start), max(max(0, start), min(end, stats.num_frames)))
        views.append(ClipView(clip=clip, stats=frames, width=width, height=height, pixels=pixels))
    rows = []
    for clip in clips:
        row = _empty_row(clip, video)
        row["width"], row["height"] = width, height
        rows.append(row)
    rules: list[list[str]] = [[] for _ in clips]
    extra: list[dict[str, float | None]] = [{} for _ in clips]
    step = max(1, config.batch_clips)
    for at in range(0, len(views), step):
        for scorer in scorers:  # scorer by scorer: a model scorer sees a batch of the video's clips at once
            _score_batch(
                scorer, views[at : at + step], rows[at : at + step], rules[at : at + step], extra[at : at + step]
            )
    for row, row_rules, row_extra in zip(rows, rules, extra):
        row[SCORES_COLUMN] = row_extra or None
        row["reject_reason"] = join_rules(row_rules)
        row["passed"] = row["reject_reason"] is None
    return rows


def _score_batch(
    scorer: Scorer,
    views: list[ClipView],
    rows: list[dict[str, Any]],
    rules: list[list[str]],
    extra: list[dict[str, float | None]],
) -> None:
    """One scorer over one batch of clips: its values into the rows (columns) or their scores maps, its rules."""
    results = scorer.score_batch(views)
    if len(results) != len(views):
        raise RuntimeError(
            f"quality scorer {scorer.registered_name!r} returned {len(results)} results for {len(views)} clips"
        )
    for row, row_rules, row_extra, (values, fired) in zip(rows, rules, extra, results):
        for name, value in values.items():
            if name in _TABLE_COLUMNS:
                row[name] = value
            else:
                row_extra[name] = _score_number(scorer, name, value)
        row_rules.extend(fired)


_TABLE_COLUMNS = frozenset(ROW_COLUMNS) - {SCORES_COLUMN}


def _score_number(scorer: Scorer, name: str, value: Any) -> float | None:
    """A plugin score as stored in the ``scores`` map: a number or null; anything else is the scorer's bug."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"quality scorer {scorer.registered_name!r} returned {type(value).__name__} for score "
            f"{name!r}: scores that are not filtered_clips columns must be numbers"
        )
    return float(value)


def assign_duplicates(rows: list[dict[str, Any]], config: QualityConfig | None = None) -> list[dict[str, Any]]:
    """The near-duplicate verdicts of ONE day's rows among themselves (dedup.cross_day.assign_day without earlier
    days): in a group, the clip with the smallest clip_id is kept and named by ``duplicate_group`` on every member;
    the others are rejected ``duplicate``. Clips without a fingerprint take no part. Idempotent; returns new dicts
    in the input order. The stage then judges the days against each other (dedup.cross_day.reconcile)."""
    import datetime as dt

    from videolake.platform.dedup.cross_day import assign_day

    config = config or QualityConfig()
    if not rows:
        return []
    day = rows[0].get(PARTITION_COLUMN) or dt.date.min
    if config.dup_max_distance < 0:
        rows = [{**r, "near_hashes": None} for r in rows]
    return assign_day(rows, day, (), config.near_dup_config())
