"""Run configuration of the CPU assets (editable in the UI's launchpad), mapped onto the engine's frozen configs.

The defaults here are the production defaults; a field left at its default takes the engine's default.
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from videolake.platform.stages.split import SplitConfig


class RawVideosConfig(dg.Config):
    min_duration_s: float = Field(default=1.0, description="Videos shorter than this are rejected (too_short).")
    preflight_frames: int = Field(default=8, description="Frames decoded at probe time to reject undecodable files.")
    full_decode: bool = Field(
        default=False,
        description="Decode every frame at probe time to reject files corrupt in the middle. Off by default: scene "
        "detection decodes every frame anyway (a failure there is recorded as detect_error), and a second full "
        "decode would halve CPU-stage throughput.",
    )

    def to_engine(self):
        from videolake.platform.video.probe import ProbeConfig

        return ProbeConfig(
            min_duration_s=self.min_duration_s, preflight_frames=self.preflight_frames, full_decode=self.full_decode
        )


class SceneClipsConfig(dg.Config):
    detector: str = Field(
        default="luma",
        description="Scene detector: luma (default), adaptive, content or transnetv2 (the network; "
        "slow on CPU: ~25 frames per CPU-second), or an installed plugin's name (docs/plugins.md).",
    )
    detector_params: dict[str, str] = Field(
        default_factory=dict,
        description="Overrides of the detector's typed parameters, e.g. {threshold: '27'}; "
        "each value is parsed against the detector's config (`videolake scenes --detector D --list-params`).",
    )
    max_clip_s: float = Field(default=20.0, description="Longer scenes are split into near-equal clips.")
    clip_mode: str = Field(default="ranges", description="'ranges' (frame ranges of the source) or 'files'.")

    def to_engine(self) -> SplitConfig:
        return SplitConfig(
            detector=self.detector,
            detector_params=dict(self.detector_params),
            max_clip_s=self.max_clip_s,
            clip_mode=self.clip_mode,
        )


class FilteredClipsConfig(dg.Config):
    thresholds: dict[str, float] = Field(
        default_factory=dict,
        description="Overrides of QualityConfig thresholds by field name, e.g. {max_black_ratio: 0.3}.",
    )
    extra_scorers: list[str] = Field(
        default_factory=list,
        description="Scorers to run after the built-in ones: installed scorer plugins by name (docs/plugins.md). "
        "Their scores land in the scores column, their rules in reject_reason.",
    )
    scorer_params: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Settings of scorer plugins: {scorer: {field: value}}, each value parsed against the scorer's "
        "typed config, e.g. {aesthetic: {min_score: '4.5'}}.",
    )

    def to_engine(self):
        from videolake.platform.filters.quality import DEFAULT_SCORERS, QualityConfig

        scorers = (*DEFAULT_SCORERS, *(s for s in self.extra_scorers if s not in DEFAULT_SCORERS))
        return QualityConfig(
            **self.thresholds, scorers=scorers, scorer_params={k: dict(v) for k, v in self.scorer_params.items()}
        )


class TrainingShardsConfig(dg.Config):
    max_short_side: int = Field(
        default=720,
        description="Largest short side of a sample's mp4 in pixels; a clip is scaled down to it, never up.",
    )
    crf: int = Field(default=23, description="x264 constant rate factor of the samples (lower: better, bigger).")
    preset: str = Field(default="veryfast", description="x264 speed preset of the samples.")
    max_shard_samples: int = Field(default=1000, description="Most samples in one tar shard.")
    max_shard_bytes: int = Field(default=1 << 30, description="Most bytes in one tar shard.")
    caption_track: str = Field(
        default="default",
        description="The caption track whose captions the samples carry (clip_captions.caption_track; "
        "docs/captioning.md). A release of these shards names it.",
    )
    blur_faces: bool = Field(
        default=False,
        description="Blur every face the detector (MTCNN) finds in the samples' frames before encoding; faces it "
        "misses stay (docs/privacy.md). The release card says whether its shards were blurred.",
    )

    def to_engine(self):
        from videolake.platform.shards.config import ShardConfig

        return ShardConfig(
            max_short_side=self.max_short_side,
            crf=self.crf,
            preset=self.preset,
            max_shard_samples=self.max_shard_samples,
            max_shard_bytes=self.max_shard_bytes,
            caption_track=self.caption_track,
            blur_faces=self.blur_faces,
        )
