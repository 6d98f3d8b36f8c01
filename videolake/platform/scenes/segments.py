"""Cuts -> clip frame ranges: scenes [start, end) that cover every frame, long scenes split into near-equal pieces.

Short scenes are kept as ranges (the quality stage rejects them with ``too_short``, its ``min_clip_s`` being the
one minimum duration), so the clips of a video always cover it and nothing is dropped silently.

Time comes from the frames' presentation timestamps (``frame_times``), not from a header rate: a file's header rate
says nothing about variable frame rates or AVI's empty "repeat the previous frame" chunks (``tree.avi``: 15 fps in
its header, 68 frames over 29.6 s), and a split in frames times a header rate made a 29.6 s clip under a 20 s bound.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def frame_times(
    pts_s: Sequence[float] | np.ndarray | None, num_frames: int, end_s: float | None, fps: float
) -> np.ndarray:
    """Seconds at which each of ``num_frames`` frames starts, and the last one ends (length ``num_frames + 1``).

    ``pts_s``: the frames' presentation times as they decode (sorted here: a decoder that pairs the timestamps of
    packed B-frames with the wrong frames, e.g. MPEG-4 Part 2 in AVI, still shows frame k at the k-th smallest
    time); used only when there is one per frame. ``end_s``: where the stream's content ends (the probe's measured
    span, after the first frame), which gives the last frame its real length (a frame an AVI repeats with empty
    chunks lasts until the next one); else the last frame lasts as long as the one before it. Without timestamps,
    ``fps`` (the probe's measured rate) numbers them; all zeros when there is none either.
    """
    n = max(0, int(num_frames))
    if pts_s is not None and len(pts_s) == n and n > 0:
        t = np.sort(np.asarray(pts_s, dtype=np.float64))
        if n > 1:
            last = t[-1] + (t[-1] - t[-2])
        else:
            last = t[-1] + (1.0 / fps if fps and fps > 0 else 0.0)
        if end_s is not None and end_s > t[-1]:
            last = float(end_s)
        return np.append(t, last)
    if fps and fps > 0:
        return np.arange(n + 1, dtype=np.float64) / float(fps)
    return np.zeros(n + 1, dtype=np.float64)


def cuts_to_ranges(
    cuts: list[int], num_frames: int, fps: float, max_clip_s: float, times: np.ndarray | None = None
) -> list[tuple[int, int]]:
    """Frame ranges of the scenes between ``cuts`` (first frames of new scenes), each at most ``max_clip_s`` long.

    ``times`` (``frame_times``: each frame's start and the last one's end, seconds) measures the scenes; without it
    the frames are ``1 / fps`` apart. A scene longer than ``max_clip_s`` is split into the fewest near-equal pieces
    in time that fit (at a constant rate, piece lengths differ by at most one frame); only a single frame that lasts
    longer than ``max_clip_s`` (a still held for half a minute) leaves a longer piece, which the quality stage
    rejects as ``too_long``. Short scenes are kept (see above).
    """
    if num_frames <= 0:
        return []
    if times is None or len(times) != num_frames + 1:
        times = frame_times(None, num_frames, None, fps)
    t = np.asarray(times, dtype=np.float64)
    bounds = [0] + sorted({int(c) for c in cuts if 0 < int(c) < num_frames}) + [num_frames]
    ranges: list[tuple[int, int]] = []
    for start, end in zip(bounds, bounds[1:]):
        ranges.extend(_split_scene(t, start, end, max_clip_s))
    return ranges


_EPS = 1e-9


def _split_scene(t: np.ndarray, start: int, end: int, max_clip_s: float) -> list[tuple[int, int]]:
    """The fewest pieces of [start, end) no longer than ``max_clip_s``, near-equal in time where that fits: cuts at
    equal shares of the scene's time (at a constant rate the frame-count split ``floor(n * i / pieces)``), else (a
    rate that changes a lot within the scene) the greedy cut that fills each piece up to the bound. A single frame
    longer than the bound is a piece of its own."""
    duration = float(t[end] - t[start])
    if max_clip_s <= 0 or duration <= max_clip_s + _EPS:
        return [(start, end)]
    greedy = []
    a = start
    while a < end:
        # the furthest end whose piece still fits; at least one frame
        b = a + int(np.searchsorted(t[a + 1 : end + 1], t[a] + max_clip_s + _EPS, side="right"))
        b = max(a + 1, b)
        greedy.append((a, b))
        a = b
    for pieces in range(len(greedy), len(greedy) + 3):
        equal = _equal_split(t, start, end, pieces)
        if len(equal) == pieces and _fits(t, equal, max_clip_s):
            return equal
    return greedy


def _equal_split(t: np.ndarray, start: int, end: int, pieces: int) -> list[tuple[int, int]]:
    duration = float(t[end] - t[start])
    edges = [start]
    for i in range(1, pieces):
        target = t[start] + duration * i / pieces
        # the last frame that starts at or before the piece's share of the time
        k = int(np.searchsorted(t[start:end], target + _EPS, side="right")) - 1 + start
        if k > edges[-1]:
            edges.append(k)
    edges.append(end)
    return list(zip(edges, edges[1:]))


def _fits(t: np.ndarray, ranges: list[tuple[int, int]], max_clip_s: float) -> bool:
    return all(t[b] - t[a] <= max_clip_s + _EPS for a, b in ranges)
