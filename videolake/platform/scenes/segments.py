"""Cuts -> clip frame ranges: scenes [start, end) that cover every frame, long scenes split into equal pieces.

Short scenes are kept as ranges (the quality stage rejects them with ``too_short``, its ``min_clip_s`` being the
one minimum duration), so the clips of a video always cover it and nothing is dropped silently.
"""

from __future__ import annotations

import math


def cuts_to_ranges(cuts: list[int], num_frames: int, fps: float, max_clip_s: float) -> list[tuple[int, int]]:
    """Frame ranges of the scenes between ``cuts`` (first frames of new scenes), each at most ``max_clip_s`` long.

    A scene longer than ``max_clip_s`` is split into the fewest near-equal pieces that fit (piece lengths differ by
    at most one frame). Short scenes are kept (see above).
    """
    if num_frames <= 0:
        return []
    bounds = [0] + sorted({int(c) for c in cuts if 0 < int(c) < num_frames}) + [num_frames]
    max_frames = max(1, int(math.floor(max_clip_s * fps + 1e-9))) if fps > 0 and max_clip_s > 0 else None
    ranges: list[tuple[int, int]] = []
    for start, end in zip(bounds, bounds[1:]):
        n = end - start
        pieces = 1 if max_frames is None else max(1, math.ceil(n / max_frames))
        edges = [start + (n * i) // pieces for i in range(pieces + 1)]
        ranges.extend(zip(edges, edges[1:]))
    return ranges
