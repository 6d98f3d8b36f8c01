"""Clips as frame ranges of their source, and what it takes to read or materialise one frame-exactly.

By default a clip is only a range [start_frame, end_frame) of its source video (scene_clips.clip_uri is null): no
re-encode, no extra storage. ``store_clip`` materialises a clip as its own file under a content-addressed key when
the pipeline runs with ``ClipConfig(mode="files")``.

Frame numbers are the scene detector's: the index of a frame in the decoder's output from the start of the stream
(presentation order; frames an MP4 edit list drops are not numbered). To reach frame ``n`` without decoding
everything before it, ``frame_index`` demuxes the video packets once (no decoding) and sorts their presentation
timestamps: frame ``n`` is the frame with the n-th smallest pts, which holds for constant, 29.97 and variable frame
rates alike. A read then seeks once, to the last keyframe at or before the first wanted frame, and decodes forward,
numbering each decoded frame by looking its pts up in the index. Where timestamps cannot identify frames (missing or
repeated pts, a seek that lands past the wanted frame, a decoder whose output disagrees with the sorted timestamps)
it falls back to decoding from the start and counting.

The frames' order is the decoder's output: that is what the scene detector numbers and what a player shows. An AVI
stores no presentation timestamps: FFmpeg guesses them from the packet order, and with MPEG-4 Part 2 "packed
B-frames" (Xvid/DivX, ``Megamind.avi``) the decoder hands the frames out in the right order with each other's guessed
timestamps (pts 1, 2, 3, 5, 4, 6, 8, 7 ...; the output order is the smooth one: mean luma change 2.9 a frame against
3.8 in timestamp order). Such a file is read by counting (``FrameIndex.sequential``), and a read that meets a frame
out of timestamp order goes on by counting from there (and remembers it for the video).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from videolake.platform.objectstore.base import ObjectStore, content_key
from videolake.platform.video.orientation import Orientation

log = logging.getLogger(__name__)

# Part of every clip key: bump when the encoding recipe changes so old objects are not reused (2: encoded upright).
CLIP_FORMAT_VERSION = 2


@dataclass(frozen=True)
class ClipConfig:
    mode: str = "ranges"  # "ranges": clips are frame ranges of the source (clip_uri null); "files": transcoded objects
    codec: str = "h264"  # clip file codec: h264 (libx264), hevc (libx265) or vp9 (libvpx-vp9), in an MP4 container
    crf: int = 23  # constant rate factor of the encoder (lower = better quality, bigger files)
    preset: str = "veryfast"  # x264/x265 speed preset (ignored for vp9, which runs in its realtime mode)
    prefix: str = "clips"  # object-store prefix of clip files (content-addressed keys below it)


# ------------------------------------------------------------------------------------------------ frame index


@dataclass(frozen=True)
class FrameIndex:
    """Where each frame of a video sits: index = frame number (decode order from the stream start)."""

    pts: np.ndarray  # int64, presentation timestamp of frame i in the stream's time_base, ascending
    keyframe: np.ndarray  # bool, frame i starts a GOP (a seek lands there)
    time_base: Fraction
    sequential: bool  # True when pts cannot identify frames: read by decoding from the start and counting
    width: int = 0  # coded frame width (before rotation), read with the index so no reader opens the file for it
    height: int = 0  # coded frame height (before rotation)

    @property
    def num_frames(self) -> int:
        return int(self.pts.shape[0])


_INDEX_CACHE: collections.OrderedDict[tuple, FrameIndex] = collections.OrderedDict()
_INDEX_CACHE_SIZE = 16  # videos whose index stays in memory (the captioner reads many clips of the same video)
_INDEX_LOCK = threading.Lock()


def frame_index(path: str) -> FrameIndex:
    """The frame index of a local video file; cached per (path, size, mtime) so a video is demuxed once."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    with _INDEX_LOCK:
        if key in _INDEX_CACHE:
            _INDEX_CACHE.move_to_end(key)
            return _INDEX_CACHE[key]
    index = _build_frame_index(path)
    with _INDEX_LOCK:
        _INDEX_CACHE[key] = index
        while len(_INDEX_CACHE) > _INDEX_CACHE_SIZE:
            _INDEX_CACHE.popitem(last=False)
    return index


def _build_frame_index(path: str) -> FrameIndex:
    import av

    pts: list[int] = []
    key: list[bool] = []
    sequential = False
    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            tb = stream.time_base or Fraction(1, 1)
            width, height = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
            # AVI has no timestamps of its own: with a codec that reorders frames, the guessed ones do not follow
            # the decoder's output (see the module docstring).
            if container.format.name == "avi" and bool(stream.codec_context.has_b_frames):
                sequential = True
            for packet in container.demux(stream):
                if packet.size == 0 or packet.is_discard:
                    continue
                if packet.pts is None:
                    sequential = True
                    pts.append(len(pts))
                else:
                    pts.append(int(packet.pts))
                key.append(bool(packet.is_keyframe))
    except Exception as exc:
        raise ValueError(f"cannot index the frames of {path}: {type(exc).__name__}: {exc}") from exc
    p = np.asarray(pts, dtype=np.int64)
    k = np.asarray(key, dtype=bool)
    order = np.argsort(p, kind="stable")
    p, k = p[order], k[order]
    if p.size > 1 and bool(np.any(np.diff(p) == 0)):
        sequential = True  # repeated timestamps: a pts does not name one frame
    return FrameIndex(pts=p, keyframe=k, time_base=tb, sequential=sequential, width=width, height=height)


def iter_frames(path: str, start_frame: int, end_frame: int, threads: int = 0) -> Iterator[tuple[int, Any]]:
    """Yield (frame number, av.VideoFrame) for every frame in [start_frame, end_frame), in order, with one seek.
    ``threads``: decoder threads (0: FFmpeg's choice, one per core and more; a Ray task holding one CPU does best
    with 1, which saves the threads' hand-over: 12 % of the CPU time of decoding 720p h264 here).

    Raises ValueError for a range outside the video or frames that do not decode.
    """
    index = frame_index(path)
    n = index.num_frames
    if not (0 <= start_frame < end_frame <= n):
        raise ValueError(f"frame range [{start_frame}, {end_frame}) is outside the video's {n} frames: {path}")
    if not index.sequential:
        got = yield from _iter_seek(path, index, start_frame, end_frame, threads)
        if got is True:
            return
        if got is not None:  # frames up to got - 1 were read; the timestamps stopped naming the frames there
            _mark_sequential(path, index)
            start_frame = got
    yield from _iter_sequential(path, start_frame, end_frame, threads)


def _mark_sequential(path: str, index: FrameIndex) -> None:
    """Remember that ``path``'s timestamps do not name its decoded frames: later reads count from the start."""
    import dataclasses

    log.info("%s: decoded frames out of timestamp order; it is read by counting frames", path)
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    with _INDEX_LOCK:
        _INDEX_CACHE[key] = dataclasses.replace(index, sequential=True)


def _check(frame: Any, i: int, path: str) -> None:
    if frame.is_corrupt:
        raise ValueError(f"frame {i} of {path} does not decode cleanly (the decoder concealed errors in it)")


def _threads(stream: Any, threads: int) -> None:
    if threads == 1:
        stream.codec_context.thread_count = 1
    else:
        stream.codec_context.thread_count = threads
        stream.thread_type = "AUTO"


def _frame_at(index: FrameIndex, pts: Any) -> int:
    """The number of the frame whose timestamp is ``pts``, or -1 when it names none (missing, or not in the index)."""
    if pts is None:
        return -1
    i = int(np.searchsorted(index.pts, pts))
    return i if i < index.num_frames and index.pts[i] == pts else -1


def _key_frame_before(index: FrameIndex, frame: int) -> int:
    """The last keyframe at or before ``frame`` (0 when none is marked): where a seek to it lands."""
    keys = np.flatnonzero(index.keyframe[: frame + 1])
    return int(keys[-1]) if keys.size else 0


def _iter_seek(path: str, index: FrameIndex, start: int, end: int, threads: int = 0):
    """Seek to the keyframe at or before ``start`` and decode forward. Returns True when the range was read; None
    (before yielding anything) when the timestamps turn out not to identify the frames, or the number of the next
    frame to read once they stop doing so, so the caller goes on by counting."""
    import av

    key_frame = _key_frame_before(index, start)
    expected = start
    before = -1  # the frame decoded last before the range (frames from the keyframe on come in timestamp order)
    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            _threads(stream, threads)
            if key_frame > 0:
                container.seek(int(index.pts[key_frame]), stream=stream, backward=True, any_frame=False)
            for packet in container.demux(stream):
                for frame in packet.decode():
                    i = _frame_at(index, frame.pts)
                    if i == start == expected and key_frame <= before != start - 1:
                        # the frame before the range came out of timestamp order (e.g. box.mp4, whose decoder
                        # output swaps neighbouring timestamps): this timestamp need not name this picture
                        return None
                    if i != expected:
                        if 0 <= i < expected and expected == start:
                            before = i
                            continue  # before the range (the GOP's head, or leading frames of an open GOP)
                        # A timestamp that names no frame; a frame already read, again (out of timestamp order); the
                        # seek landing past the range start, or a frame out ahead of its turn (or lost): counting
                        # from the start (or from the next frame to read) settles which
                        return None if expected == start else expected
                    _check(frame, i, path)
                    yield i, frame
                    expected += 1
                    if expected >= end:
                        return True
            expected = yield from _seek_flush(stream, index, expected, end, path)
    except av.FFmpegError as exc:  # (FFmpeg errors are ValueErrors too: wrap them first, with the range)
        raise ValueError(f"frames {expected}..{end - 1} of {path} do not decode: {type(exc).__name__}: {exc}") from exc
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"frames {expected}..{end - 1} of {path} do not decode: {type(exc).__name__}: {exc}") from exc
    return _seek_outcome(path, start, end, expected)


def _seek_flush(stream: Any, index: FrameIndex, expected: int, end: int, path: str):
    """Yield the decoder's delayed frames at the end of the stream that continue the range; returns the number of
    the next frame to read. (The decoder hands them all out at once, so a decode error comes before any is yielded.)"""
    for frame in stream.codec_context.decode(None):  # delayed frames at the end of the stream
        i = int(np.searchsorted(index.pts, frame.pts)) if frame.pts is not None else -1
        if i == expected and i < end:
            _check(frame, i, path)
            yield i, frame
            expected += 1
    return expected


def _seek_outcome(path: str, start: int, end: int, expected: int) -> bool | None:
    """``_iter_seek``'s result once the stream ended with ``expected`` the next frame to read: True when the range
    was read, None when nothing of it was (count from the start); raises when the video ends within the range."""
    if expected < end:
        if expected == start:
            return None
        raise ValueError(f"the video ends after frame {expected - 1}, before the range end {end}: {path}")
    return True


def _iter_sequential(path: str, start: int, end: int, threads: int = 0):
    import av

    i = 0
    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            _threads(stream, threads)
            for frame in container.decode(stream):
                if i >= start:
                    _check(frame, i, path)
                    yield i, frame
                i += 1
                if i >= end:
                    return
    except av.FFmpegError as exc:
        raise ValueError(
            f"frames {max(i, start)}..{end - 1} of {path} do not decode: {type(exc).__name__}: {exc}"
        ) from exc
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(
            f"frames {max(i, start)}..{end - 1} of {path} do not decode: {type(exc).__name__}: {exc}"
        ) from exc
    raise ValueError(f"the video ends after {i} frames, before the range end {end}: {path}")


def iter_wanted_frames(path: str, wanted: list[int], *, fast: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield (frame number, av.VideoFrame) for the frames ``wanted`` (any order, duplicates ignored), ascending, in
    ONE single-threaded pass from the start of the video that stops after the last of them.

    Why not ``iter_frames`` per range: a video's sampled frames (16 per clip for the near-duplicate fingerprint)
    cover all of it, and a seek per clip decodes each GOP's head again. Here every frame is decoded once at most,
    and a frame that is neither wanted nor a reference of other frames is not decoded at all: the decoder's
    ``skip_frame`` is set per packet (``NONREF`` for frames not wanted, ``DEFAULT`` for wanted ones), which skips
    ~45 % of an x264 stream with B-frames (none of a stream without them). ``fast``: FFmpeg's in-loop deblocking
    filter is skipped too (``skip_loop_filter=all``, as the detection pass does; ~15 % less CPU, an error far
    below what a 128 px thumbnail shows). Frames are numbered by their pts in ``frame_index``; where timestamps do
    not identify frames, it decodes everything and counts. Raises ValueError when a wanted frame does not decode.
    """
    need = sorted({int(i) for i in wanted})
    if not need:
        return
    index = frame_index(path)
    if need[0] < 0 or need[-1] >= index.num_frames:
        raise ValueError(f"frames {need[0]}..{need[-1]} are outside the video's {index.num_frames} frames: {path}")
    done: set[int] = set()
    got = yield from _iter_wanted(path, index, need, fast, skip=not index.sequential, done=done)
    if got is None:  # timestamps do not name frames: count them, decoding all
        if done:
            _mark_sequential(path, index)
        yield from _iter_wanted(path, index, [i for i in need if i not in done], fast, skip=False)


def _iter_wanted(path: str, index: FrameIndex, need: list[int], fast: bool, skip: bool, done: set | None = None):
    """``iter_wanted_frames``' pass; returns None when a pts does not name the next frame (not in the index, or out
    of order), ``done`` holding the frames yielded before."""
    import av

    done = set() if done is None else done
    if not need:
        return True
    wanted = set(need)
    left = len(need)
    counted = itertools.count()  # the frame numbers when not numbering by timestamp: decoder output order
    last = -1  # the last frame numbered
    held: tuple[int, Any] | None = None

    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            ctx = _single_thread_decoder(stream, fast)
            for packet in container.demux(stream):
                if skip:
                    ctx.skip_frame = _skip_frame(index, wanted, packet.pts)
                for frame in packet.decode():
                    i = _frame_at(index, frame.pts) if skip else next(counted)
                    # A frame numbered by its pts is handed on once the next one confirms the order (a decoder that
                    # pairs frames with each other's timestamps shows it one frame late).
                    if i <= last:  # (-1: the pts names no frame)
                        return None
                    last = i
                    if held is not None:
                        yield held
                        done.add(held[0])
                        left -= 1
                        held = None
                    if i in wanted and i not in done:
                        _check(frame, i, path)
                        held = (i, frame)
                        if not skip or left == 1:
                            yield held
                            done.add(i)
                            left -= 1
                            held = None
                        if not left:
                            return True
            if held is not None:
                yield held
                done.add(held[0])
                left -= 1
                if not left:
                    return True
    except av.FFmpegError as exc:
        raise ValueError(f"sampled frames of {path} do not decode: {type(exc).__name__}: {exc}") from exc
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"sampled frames of {path} do not decode: {type(exc).__name__}: {exc}") from exc
    if skip:  # frames went missing where timestamps number them: counting settles whether they decode
        return None
    raise ValueError(f"{left} of the {len(need)} sampled frames of {path} did not decode")


def _single_thread_decoder(stream: Any, fast: bool) -> Any:
    """``stream``'s codec context set to decode on one thread, without the deblocking filter when ``fast``."""
    ctx = stream.codec_context
    ctx.thread_count = 1
    if fast:
        ctx.options = {"skip_loop_filter": "all"}
    return ctx


def _skip_frame(index: FrameIndex, wanted: set[int], pts: Any) -> str:
    """The decoder's ``skip_frame`` for a packet: skip it unless it is a reference when its frame is not wanted."""
    k = int(np.searchsorted(index.pts, pts)) if pts is not None else -1
    return "NONREF" if 0 <= k < index.num_frames and k not in wanted else "DEFAULT"


def decode_error(path: str, start_frame: int, end_frame: int, threads: int = 1) -> str | None:
    """Why frames [start_frame, end_frame) of ``path`` cannot be read as the shard encoder reads them
    (``iter_frames`` from one seek, every frame clean, one frame size throughout: the encoder takes no size change
    within a clip), or None when they can. The score stage asks this of every clip it passes, so a clip that would
    not encode is rejected ``undecodable`` before any caption is spent on it."""
    size: tuple[int, int] | None = None
    count = 0
    try:
        for i, frame in iter_frames(path, start_frame, end_frame, threads):
            if size is None:
                size = (frame.width, frame.height)
            elif (frame.width, frame.height) != size:
                return (
                    f"the frame size changes within the clip at frame {i}: {frame.width}x{frame.height}, was "
                    f"{size[0]}x{size[1]}"
                )
            count += 1
    except ValueError as exc:
        return str(exc)[:500]
    if count != end_frame - start_frame:
        return f"{count} of the {end_frame - start_frame} frames of [{start_frame}, {end_frame}) decode"
    return None


def decode_errors(path: str, ranges: list[tuple[int, int]], threads: int = 1, max_gap: int = 120) -> list[str | None]:
    """``decode_error`` of each range, decoding each run of nearby ranges once (as the shard encoder does: a gap of
    up to ``max_gap`` frames is decoded through rather than sought over). A run whose pass fails is checked again
    range by range, so one range's error is never another's."""
    out: list[str | None] = [None] * len(ranges)
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    runs: list[list[int]] = []
    for i in order:
        last = ranges[runs[-1][-1]] if runs else None
        if last is not None and last[1] <= ranges[i][0] <= last[1] + max_gap:
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        start, end = ranges[run[0]][0], ranges[run[-1]][1]
        sizes: dict[int, tuple[int, int]] = {}
        counts = dict.fromkeys(run, 0)
        try:
            for n, frame in iter_frames(path, start, end, threads):
                for k in run:
                    s, e = ranges[k]
                    if s <= n < e and out[k] is None:
                        size = sizes.setdefault(k, (frame.width, frame.height))
                        if (frame.width, frame.height) != size:
                            out[k] = (
                                f"the frame size changes within the clip at frame {n}: {frame.width}x{frame.height}, "
                                f"was {size[0]}x{size[1]}"
                            )
                        counts[k] += 1
        except ValueError:
            for k in run:
                out[k] = decode_error(path, *ranges[k], threads=threads)
            continue
        for k in run:
            s, e = ranges[k]
            if out[k] is None and counts[k] != e - s:
                out[k] = f"{counts[k]} of the {e - s} frames of [{s}, {e}) decode"
    return out


def clip_rate(start_frame: int, end_frame: int, duration_s: float | None, video_fps: float | None) -> float:
    """A clip's frame rate: its frames over its measured duration (scene_clips.duration_s, from the frames'
    timestamps), so a clip encoded or described at a constant rate lasts as long as it did in its source (a
    variable-rate or repeat-frame stretch has a rate of its own); the video's rate only when no duration is known."""
    n = int(end_frame) - int(start_frame)
    if duration_s is not None and duration_s > 0 and n > 0:
        return n / float(duration_s)
    return float(video_fps or 0.0)


# ------------------------------------------------------------------------------------------------ frame sampling


def sample_indices(start_frame: int, end_frame: int, num_frames: int) -> list[int]:
    """``num_frames`` evenly spaced frame numbers in [start, end): the centre of each of ``num_frames`` equal
    segments (never the very first frame, which may still carry a transition). All frames when the clip is shorter."""
    n = end_frame - start_frame
    if n <= 0 or num_frames <= 0:
        return []
    if num_frames >= n:
        return list(range(start_frame, end_frame))
    return [start_frame + int((k + 0.5) * n / num_frames) for k in range(num_frames)]


def _fit(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def read_clip_frames(
    src_path: str, start_frame: int, end_frame: int, num_frames: int, max_side: int | None = 448
) -> list[np.ndarray]:
    """``num_frames`` evenly spaced RGB frames (H x W x 3 uint8) of the clip [start_frame, end_frame), frame numbers
    as in ``sample_indices``, each resized so its longer side is at most ``max_side`` (never enlarged) and turned
    upright by the video's display matrix (phone portrait footage comes out portrait).

    One seek per clip; only the sampled frames are converted to RGB. Raises ValueError for an undecodable range.
    """
    wanted = sample_indices(start_frame, end_frame, num_frames)
    if not wanted:
        raise ValueError(f"empty frame range [{start_frame}, {end_frame}) or num_frames={num_frames}: {src_path}")
    want = set(wanted)
    out: list[np.ndarray] = []
    for i, frame in iter_frames(src_path, wanted[0], wanted[-1] + 1):
        if i in want:
            w, h = _fit(frame.width, frame.height, max_side)
            out.append(Orientation.from_frame(frame).apply(frame.to_ndarray(width=w, height=h, format="rgb24")))
    if len(out) != len(wanted):
        raise ValueError(
            f"decoded {len(out)} of the {len(wanted)} sampled frames of [{start_frame}, {end_frame}): {src_path}"
        )
    return out


# ------------------------------------------------------------------------------------------------ clip files

# codec name -> (PyAV encoder, options builder)
_ENCODERS: dict[str, tuple[str, Any]] = {
    "h264": ("libx264", lambda crf, preset: {"crf": str(crf), "preset": preset}),
    "hevc": ("libx265", lambda crf, preset: {"crf": str(crf), "preset": preset, "x265-params": "log-level=error"}),
    "vp9": ("libvpx-vp9", lambda crf, preset: {"crf": str(crf), "b": "0", "deadline": "realtime", "cpu-used": "8"}),
}


def cut_clip(
    src_path: str,
    start_frame: int,
    end_frame: int,
    fps: float,
    out_path: str,
    codec: str = "h264",
    crf: int = 23,
    preset: str = "veryfast",
) -> str:
    """Encode frames [start_frame, end_frame) of ``src_path`` into an MP4 at ``out_path``: exactly end - start
    frames, the first being source frame ``start_frame`` (decoded with PyAV via ``iter_frames``, re-encoded).

    The clip is video only, at a constant ``fps`` (a variable-frame-rate range is retimed to its average rate), in
    yuv420p; odd source dimensions are rounded down to even ones (the 4:2:0 encoders need them). A source with a
    display matrix (rotation, mirror) is encoded upright, with no matrix of its own: players and training loaders
    that ignore display matrices see the same picture.
    """
    import av

    if codec not in _ENCODERS:
        raise ValueError(f"unknown clip codec {codec!r}; known: {', '.join(sorted(_ENCODERS))}")
    if not fps or fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    encoder, options = _ENCODERS[codec]
    rate = Fraction(fps).limit_denominator(1001 * 1000)
    written = 0
    with av.open(out_path, mode="w", format="mp4") as out:
        stream: av.VideoStream | None = None
        for _, frame in iter_frames(src_path, start_frame, end_frame):
            orientation = Orientation.from_frame(frame)
            if not orientation.is_identity:
                upright = orientation.apply(frame.to_ndarray(format="rgb24"))
                frame = av.VideoFrame.from_ndarray(upright, format="rgb24")
            if stream is None:
                added = out.add_stream(encoder, rate=rate, options=options(crf, preset))
                assert isinstance(added, av.VideoStream)  # every encoder of _ENCODERS is a video encoder
                stream = added
                stream.width = max(2, frame.width - frame.width % 2)
                stream.height = max(2, frame.height - frame.height % 2)
                stream.pix_fmt = "yuv420p"
                stream.codec_context.time_base = 1 / rate
            f = frame.reformat(width=stream.width, height=stream.height, format="yuv420p")
            f.pts = written
            f.time_base = 1 / rate
            out.mux(stream.encode(f))
            written += 1
        if stream is not None:
            out.mux(stream.encode(None))
    if written != end_frame - start_frame:
        raise ValueError(f"wrote {written} of {end_frame - start_frame} frames of {src_path}")
    return out_path


def clip_key(video_id: str, start_frame: int, end_frame: int, fps: float, config: ClipConfig) -> str:
    """Content-addressed key of a clip file: a digest of everything that determines its bytes."""
    spec = {
        "v": CLIP_FORMAT_VERSION,
        "video_id": video_id,
        "start": int(start_frame),
        "end": int(end_frame),
        "fps": round(float(fps), 6),
        "codec": config.codec,
        "crf": int(config.crf),
        "preset": config.preset,
    }
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return content_key(config.prefix, digest, ".mp4")


def store_clip(
    store: ObjectStore,
    src_path: str,
    video_id: str,
    start: int,
    end: int,
    fps: float,
    prefix: str = "clips",
    config: ClipConfig | None = None,
) -> str:
    """Encode the clip and upload it under its content-addressed key; returns the object's URI.

    A clip that is already stored is neither encoded nor uploaded again (``put_if_absent``), so task retries and
    re-runs never duplicate objects. ``prefix`` overrides ``config.prefix``.
    """
    config = config or ClipConfig()
    if prefix != config.prefix:
        config = ClipConfig(mode=config.mode, codec=config.codec, crf=config.crf, preset=config.preset, prefix=prefix)
    key = clip_key(video_id, start, end, fps, config)
    if store.exists(key):
        return store.uri(key)
    fd, tmp = tempfile.mkstemp(suffix=".mp4", prefix="videolake-clip-")
    os.close(fd)
    try:
        cut_clip(src_path, start, end, fps, tmp, codec=config.codec, crf=config.crf, preset=config.preset)
        return store.put_if_absent(key, tmp)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
