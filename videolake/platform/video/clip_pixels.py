"""The pixels scorers ask of a video's clips (``ClipView.frames``), decoded in one pass over the video.

Why: the near-duplicate fingerprint samples 16 frames of every clip, and clips cover their video, so reading them
clip by clip (a seek each, then decoding from the GOP's keyframe) decoded the video again, and more: 0.6 CPU
seconds for a 20 s 360p file whose detection pass costs 0.4. ``VideoPixels`` computes the sampled frame numbers of
all the video's clips on the first request of a (count, size) and reads them with ``clips.iter_wanted_frames``: one
single-threaded pass that skips the frames nobody wants and nothing references (~45 % of an x264 stream with
B-frames) and stops after the last wanted frame. Each wanted frame is scaled once, by one reused area-averaging
scaler, to the size asked, and turned upright. Clips are served in order, their frames dropped once served, so
memory holds the frames of about one clip; a request for a clip behind the pass (out of order) starts a new pass,
so the pixels never depend on the order.

Better still, no second pass: the detection pass (split stage, luma detector) keeps the sampled frames the
fingerprint asks for by default (``FrameKeeper``: every frame scaled while it decodes, the clips' samples stored
with the video's frame statistics as ``frames.Thumbnails``), and ``VideoPixels`` serves a clip from them when they
hold all its sampled frames at the size asked. Both routes decode without the loop filter, single-threaded, and
scale with the same area scaler, so a clip's pixels are the same whichever route served them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

# What the near-duplicate fingerprint asks of each clip by default (quality.NearDupScorer: ``dup_frames`` frames of
# at most ``max_pixels``): the frames the detection pass keeps (``FrameKeeper``), so the score stage decodes nothing.
KEPT_COUNT = 16
KEPT_MAX_PIXELS = 128 * 72
# A detection pass keeps a scaled copy of at most this many frames (27.6 KB each at 128x72: 124 MB) until it knows
# the cuts; a longer video keeps its first ones, and the clips beyond are decoded again by the score stage.
KEPT_MAX_FRAMES = 4500


def scaled_rgb(scaler: Any, frame: Any, max_pixels: int) -> np.ndarray:
    """``frame`` as upright RGB scaled to at most ``max_pixels`` (aspect kept, never enlarged) by ``scaler`` (one
    reused ``VideoReformatter``, area averaging: frames shrink 5-15x, and ``to_ndarray(width=...)`` builds a bicubic
    scaler per frame, 5x the cost)."""
    from videolake.platform.captioning.clip_frames import max_side_for
    from videolake.platform.video.clips import _fit
    from videolake.platform.video.orientation import Orientation

    w, h = _fit(frame.width, frame.height, max_side_for(frame.width, frame.height, max_pixels))
    rgb = scaler.reformat(frame, width=w, height=h, format="rgb24", interpolation="AREA").to_ndarray()
    return Orientation.from_frame(frame).apply(rgb)


class RgbScaler:
    """``scaled_rgb`` through one ``VideoReformatter``, made at the first frame (PyAV is imported where used)."""

    def __init__(self, max_pixels: int) -> None:
        self.max_pixels = max_pixels
        self._reformatter: Any = None

    def __call__(self, frame: Any) -> np.ndarray:
        if self._reformatter is None:
            from av.video.reformatter import VideoReformatter

            self._reformatter = VideoReformatter()
        return scaled_rgb(self._reformatter, frame, self.max_pixels)


class FrameKeeper:
    """A tap for a decoding pass (``SampledDecoder.chunks(tap=...)``): keeps every frame scaled to ``max_pixels``
    (the first ``max_frames``), then ``sampled(ranges, count)`` gives the clips' sampled frames as ``Thumbnails``.

    Why: the detection pass decodes every frame anyway; cuts, hence the clips and their sampled frames, are known
    only at its end. Scaling each frame costs 0.15 ms at 360p, 1.1 ms at 1080p, against a second pass over the video
    (0.26 s for 20 s at 360p even when it skips every frame it can)."""

    def __init__(self, max_pixels: int = KEPT_MAX_PIXELS, max_frames: int = KEPT_MAX_FRAMES) -> None:
        self.max_pixels, self.max_frames = max_pixels, max_frames
        self.frames: list[np.ndarray] = []
        self._rgb = RgbScaler(max_pixels)

    def __call__(self, frame: Any) -> None:
        if len(self.frames) < self.max_frames:
            self.frames.append(self._rgb(frame))

    def sampled(self, ranges: list[tuple[int, int]], count: int = KEPT_COUNT) -> Any:
        """The kept frames that ``count`` samples of each range name (``clips.sample_indices``), for the ranges
        whose samples were all kept; None when none."""
        from videolake.platform.video.clips import sample_indices
        from videolake.platform.video.frames import Thumbnails

        samples = [sample_indices(s, e, count) for s, e in ranges]
        samples = [idx for idx in samples if idx and idx[-1] < len(self.frames)]
        if not samples:
            return None
        # One array holds them, so one thumbnail size: a stream whose frame size changes midway (a broadcast
        # capture) keeps the ranges of its first size; the others are decoded again when scored.
        shape = self.frames[samples[0][0]].shape
        wanted = sorted({i for idx in samples if all(self.frames[i].shape == shape for i in idx) for i in idx})
        if not wanted:
            return None
        images = np.stack([self.frames[i] for i in wanted])
        return Thumbnails(index=np.asarray(wanted, dtype=np.int64), images=images, max_pixels=self.max_pixels)


Key = tuple[int, int]  # (count, max_pixels) of a request


class VideoPixels:
    """A ``quality.PixelSource`` over one local video and its clips (scene_clips rows with start_frame, end_frame):
    ``pixels(clip, count, max_pixels)`` -> (n, H, W, 3) uint8 RGB, n = min(count, clip frames), the frames of
    ``clips.sample_indices``, each scaled to at most ``max_pixels`` (aspect kept, never enlarged).

    ``requests``: the (count, max_pixels) every scorer declared (``quality.frame_requests``). One decoding pass
    serves all of them: each frame any request samples is decoded once and scaled once per request that samples it
    (so a model scorer adds its model's cost, not another decode). A request not declared gets a pass of its own."""

    def __init__(
        self,
        path: str | Callable[[], str],
        clips: list[dict],
        kept: Any = None,
        requests: Iterable[tuple[int, int]] = (),
    ) -> None:
        self._path = path
        self._kept = kept  # frames.Thumbnails the detection pass kept, or None
        self._kept_at = {int(i): k for k, i in enumerate(kept.index)} if kept is not None else {}
        self._ranges = sorted({(int(c["start_frame"]), int(c["end_frame"])) for c in clips})
        self._declared: list[Key] = list(dict.fromkeys((int(c), int(m)) for c, m in requests))
        self._passes: dict[Key, _Pass] = {}  # by request; the declared requests share one pass
        self.passes_started = 0  # how many decoding passes ran (tests: one for all declared requests, in order)
        self.kept_served = 0  # clips served from the frames the detection pass kept

    def path(self) -> str:
        return self._path if isinstance(self._path, str) else self._path()

    def _kept_samples(self, key: Key, r: tuple[int, int]) -> list[int] | None:
        from videolake.platform.video.clips import sample_indices

        if self._kept is None or self._kept.max_pixels != key[1]:
            return None
        wanted = sample_indices(r[0], r[1], key[0])
        return wanted if wanted and all(i in self._kept_at for i in wanted) else None

    def __call__(self, clip: dict, count: int, max_pixels: int) -> np.ndarray:
        key = (int(count), int(max_pixels))
        rng = (int(clip["start_frame"]), int(clip["end_frame"]))
        wanted = self._kept_samples(key, rng)
        if wanted is not None:
            self.kept_served += 1
            return self._kept.images[[self._kept_at[i] for i in wanted]]
        p = self._passes.get(key)
        if p is None or not p.can_serve(key, rng):
            keys = self._declared if key in self._declared else [key]
            wants = {
                k: sorted(
                    {*(r for r in self._ranges if self._kept_samples(k, r) is None), *([rng] if k == key else [])}
                )
                for k in keys
            }
            p = _Pass(self.path(), {k: v for k, v in wants.items() if v})
            for k in keys:
                self._passes[k] = p
            self.passes_started += 1
        return p.take(key, rng)


class _Pass:
    """One decoding pass serving the sampled frames of each request's ``ranges``, each request's in order."""

    def __init__(self, path: str, wants: dict[Key, list[tuple[int, int]]]) -> None:
        from videolake.platform.video.clips import frame_index, sample_indices

        self.path = path
        self.samples = {k: {r: sample_indices(r[0], r[1], k[0]) for r in ranges} for k, ranges in wants.items()}
        index = frame_index(path)
        for per_range in self.samples.values():
            for (start, end), frames in per_range.items():
                if not frames or start < 0 or end > index.num_frames:
                    raise ValueError(
                        f"frame range [{start}, {end}) is beyond the video's {index.num_frames} frames: {path}"
                    )
        self._frames: Iterator[tuple[int, Any]] | None = None
        self._buffer: dict[tuple[Key, int], np.ndarray] = {}
        self._rgb = {k: RgbScaler(k[1]) for k in self.samples}
        self._position = -1  # the last frame number the pass has decoded
        self._served: set[tuple[Key, tuple[int, int]]] = set()
        self._users: dict[tuple[Key, int], int] = {}  # (request, frame number) -> unserved ranges that sample it
        self._keys_of: dict[int, list[Key]] = {}  # frame number -> the requests that sample it
        for k, per_range in self.samples.items():
            for frames in per_range.values():
                for i in frames:
                    self._users[(k, i)] = self._users.get((k, i), 0) + 1
                    if k not in self._keys_of.setdefault(i, []):
                        self._keys_of[i].append(k)

    def can_serve(self, key: Key, rng: tuple[int, int]) -> bool:
        wanted = self.samples.get(key, {}).get(rng)
        return (
            wanted is not None
            and (key, rng) not in self._served
            and all(i > self._position or (key, i) in self._buffer for i in wanted)
        )

    def take(self, key: Key, rng: tuple[int, int]) -> np.ndarray:
        from videolake.platform.video.clips import iter_wanted_frames

        wanted = self.samples[key][rng]
        if self._frames is None:
            self._frames = iter_wanted_frames(self.path, list(self._keys_of))
        while self._position < wanted[-1]:
            try:
                i, frame = next(self._frames)
            except StopIteration:
                raise ValueError(f"the frames of [{rng[0]}, {rng[1]}) did not decode: {self.path}") from None
            for k in self._keys_of.get(i, ()):
                if self._users.get((k, i)):
                    self._buffer[(k, i)] = self._rgb[k](frame)
            self._position = i
        self._served.add((key, rng))
        out = np.stack([self._buffer[(key, i)] for i in wanted])
        for i in wanted:  # dropped once every range of this request that samples it is served
            self._users[(key, i)] -= 1
            if not self._users[(key, i)]:
                del self._buffer[(key, i)]
        return out
