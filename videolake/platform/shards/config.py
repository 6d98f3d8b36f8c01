"""The settings of the training-shards stage: how a clip is encoded and how samples are packed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from videolake.platform.params import param


@dataclass(frozen=True)
class ShardConfig:
    """Every field changes the shards' bytes or names, so all of them are part of the stage version."""

    max_short_side: int = param(720, "largest short side of an encoded clip, pixels (a clip is never upscaled)", min=16)
    crf: int = param(23, "x264 constant rate factor (lower: better quality, bigger samples)", min=0, max=51)
    preset: str = param(
        "veryfast",
        "x264 speed preset",
        choices=("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"),
    )
    # One encoder thread per clip: the stage runs one clip per Ray CPU, and a fixed thread count keeps the bytes the
    # same on every machine (x264's output depends on its thread count).
    threads: int = param(1, "x264 threads per clip (the stage runs one clip per Ray CPU)", min=1)
    max_shard_samples: int = param(1000, "most samples in one tar shard", min=1)
    max_shard_bytes: int = param(
        1 << 30, "most bytes in one tar shard (a larger single sample gets a shard of its own)", min=1024
    )
    prefix: str = param("shards", "object-store prefix of the shards")
    # Face blur (shards.face_blur, docs/privacy.md): off by default; the release card says whether it was on.
    blur_faces: bool = param(
        False,
        "blur every face the detector (MTCNN) finds in a sample's frames before encoding; faces it misses are not "
        "blurred (docs/privacy.md)",
    )
    blur_min_confidence: float = param(
        0.9, "blur_faces: a detection is blurred when MTCNN's probability is at least this", min=0.0, max=1.0
    )
    blur_detect_every: int = param(
        5,
        "blur_faces: detect on every Nth frame (and the clip's last); a frame between two detections is blurred "
        "inside the boxes of both",
        min=1,
    )
    blur_detect_pixels: int = param(
        640 * 360, "blur_faces: frames are downscaled to at most this many pixels for detection", min=64 * 64
    )
    blur_margin: float = param(
        0.25, "blur_faces: each face box is enlarged by this share of its size on every side", min=0.0, max=2.0
    )
    caption_track: str = param("default", "the caption track whose captions the samples carry (clip_captions)")
    resolutions: tuple[int, ...] = field(
        default=(144, 240, 360, 480, 720, 1080, 1440, 2160),
        metadata={"help": "resolution buckets: a clip goes to the largest value <= its encoded short side"},
    )
    aspects: tuple[str, ...] = field(
        default=("9:16", "3:4", "1:1", "4:3", "16:9", "21:9"),
        metadata={"help": "aspect-ratio buckets (width:height): a clip goes to the nearest on a log scale"},
    )
    frame_edges: tuple[int, ...] = field(
        default=(64, 128, 256),
        metadata={"help": "length-bucket edges in frames: 0-63, 64-127, 128-255, 256+ by default"},
    )

    def blur_settings(self) -> Any:
        """The face blur's settings (shards.face_blur.BlurSettings); None when blur_faces is off."""
        from videolake.platform.shards.face_blur import BlurSettings

        if not self.blur_faces:
            return None
        return BlurSettings(
            min_confidence=self.blur_min_confidence,
            detect_every=self.blur_detect_every,
            detect_pixels=self.blur_detect_pixels,
            margin=self.blur_margin,
        )

    def __post_init__(self) -> None:
        if list(self.resolutions) != sorted(set(self.resolutions)) or not self.resolutions:
            raise ValueError(f"resolutions must be ascending and distinct, got {self.resolutions}")
        if list(self.frame_edges) != sorted(set(self.frame_edges)) or any(e <= 0 for e in self.frame_edges):
            raise ValueError(f"frame_edges must be ascending positive frame counts, got {self.frame_edges}")
        for a in self.aspects:
            w, _, h = a.partition(":")
            if not (w.isdigit() and h.isdigit() and int(w) > 0 and int(h) > 0):
                raise ValueError(f"an aspect bucket is W:H with positive integers, got {a!r}")
