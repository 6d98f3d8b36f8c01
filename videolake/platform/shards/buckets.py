"""The bucket of a clip: resolution x aspect ratio x length, named as a path.

    resolution_<R>/aspect_<W>_<H>/frames_<LO>_<HI>      e.g. resolution_720/aspect_16_9/frames_64_127
                                                          the last length bucket: frames_256_plus

- resolution: the largest of ``ShardConfig.resolutions`` that is <= the short side of the ENCODED clip (a
  1280x720 clip is 720, a 852x480 clip 480, a 352x288 clip 240); a short side below the smallest value is
  ``resolution_0``;
- aspect: the nearest of ``ShardConfig.aspects`` (9:16, 3:4, 1:1, 4:3, 16:9, 21:9) to width/height on a log
  scale (a portrait phone clip, upright, is 9:16);
- length: the frame-count range of ``ShardConfig.frame_edges`` (0-63, 64-127, 128-255, 256+).

Training samples a bucket per batch (Open-Sora's resolution x frame-count buckets; Cosmos-Curator's
``resolution_720/aspect_ratio_16_9/frames_0_255`` folders), so every frame of a batch has one shape.
"""

from __future__ import annotations

import math

from videolake.platform.shards.config import ShardConfig


def resolution_bucket(width: int, height: int, config: ShardConfig) -> int:
    short = min(width, height)
    fits = [r for r in config.resolutions if r <= short]
    return fits[-1] if fits else 0


def aspect_bucket(width: int, height: int, config: ShardConfig) -> str:
    ratio = math.log(width / height)

    def distance(a: str) -> float:
        w, _, h = a.partition(":")
        return abs(math.log(int(w) / int(h)) - ratio)

    return min(config.aspects, key=distance)


def frames_bucket(num_frames: int, config: ShardConfig) -> str:
    lo = 0
    for edge in config.frame_edges:
        if num_frames < edge:
            return f"frames_{lo}_{edge - 1}"
        lo = edge
    return f"frames_{lo}_plus"


def bucket_of(width: int, height: int, num_frames: int, config: ShardConfig) -> str:
    """The bucket name of an encoded clip of ``width`` x ``height`` pixels and ``num_frames`` frames."""
    if width <= 0 or height <= 0:
        raise ValueError(f"a clip has a positive size, got {width}x{height}")
    aspect = aspect_bucket(width, height, config).replace(":", "_")
    return f"resolution_{resolution_bucket(width, height, config)}/aspect_{aspect}/{frames_bucket(num_frames, config)}"
