"""Per-frame statistics computed in the single decode pass shared by scene detection and quality scoring.

Why one pass: decoding dominates the CPU stage. The detector that decodes every frame also records these cheap
statistics, so quality scores need no second decode (see ``videolake bench cpu``).

The pass itself: ``SampledDecoder`` reads a sparse grid of Y/U/V samples (~64 luma samples per row) straight from
each decoded frame's planes and hands them on in chunks; ``FrameStatsAccumulator`` turns chunks into ``FrameStats``
with a few vectorised numpy operations per chunk. ``compute_frame_stats(path)`` does both for detectors that return
no statistics of their own (the PySceneDetect wrappers).

Units (for the quality scorer): luma is the raw decoded Y value (limited range: black 16, white 235);
``sharpness`` is the variance of the 4-neighbour Laplacian of the sampled luma (0 for a flat frame, ~1e3-1e4 for
detailed content); ``edge_density`` the share of samples with |dx| + |dy| >= EDGE_THRESHOLD; ``luma_diff`` is
never exactly 0 on a lossy "frozen" video (encoder noise, ~0.02): compare with a tolerance or use ``dhash``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FrameStats:
    """Statistics of every decoded frame of one video, index = frame number (decode order).

    All arrays have length ``num_frames``. Luma values are on the 0..255 scale, measured on the downscaled luma plane.
    """

    pts_s: np.ndarray  # float64, presentation time of each frame in seconds
    luma_mean: np.ndarray  # float32, mean luma
    luma_diff: np.ndarray  # float32, mean abs luma difference to the previous frame (frame 0: 0)
    sharpness: np.ndarray  # float32, variance of the Laplacian of luma
    edge_density: np.ndarray  # float32, share of pixels on strong short edges (a text-area proxy), 0..1
    dhash: np.ndarray  # uint64, 64-bit difference hash of the frame
    width: int  # decoded (full) frame size
    height: int
    # Scaled RGB frames the detection pass kept for the clips' pixel scorers (clip_pixels.Thumbnails), or None.
    thumbnails: Any = None

    @property
    def num_frames(self) -> int:
        return int(self.luma_mean.shape[0])

    def slice(self, start: int, end: int) -> FrameStats:
        """The statistics of frames [start, end)."""
        return FrameStats(
            pts_s=self.pts_s[start:end],
            luma_mean=self.luma_mean[start:end],
            luma_diff=self.luma_diff[start:end],
            sharpness=self.sharpness[start:end],
            edge_density=self.edge_density[start:end],
            dhash=self.dhash[start:end],
            width=self.width,
            height=self.height,
        )

    def to_npz_bytes(self) -> bytes:
        import io

        buf = io.BytesIO()
        np.savez_compressed(
            buf,
            pts_s=self.pts_s,
            luma_mean=self.luma_mean,
            luma_diff=self.luma_diff,
            sharpness=self.sharpness,
            edge_density=self.edge_density,
            dhash=self.dhash,
            size=np.array([self.width, self.height], dtype=np.int64),
            **(self.thumbnails.arrays() if self.thumbnails is not None else {}),
        )
        return buf.getvalue()

    @classmethod
    def from_npz_bytes(cls, data: bytes) -> FrameStats:
        import io

        z = np.load(io.BytesIO(data))
        w, h = (int(v) for v in z["size"])
        return cls(
            pts_s=z["pts_s"],
            luma_mean=z["luma_mean"],
            luma_diff=z["luma_diff"],
            sharpness=z["sharpness"],
            edge_density=z["edge_density"],
            dhash=z["dhash"],
            width=w,
            height=h,
            thumbnails=Thumbnails.from_arrays(z),
        )


@dataclass(frozen=True)
class Thumbnails:
    """Frames of a video kept, scaled, by the pass that decoded it (clip_pixels.FrameKeeper): the sampled frames of
    its clips, which the score stage's pixel scorers then read without decoding the video again."""

    index: np.ndarray  # int64 (n,), ascending frame numbers
    images: np.ndarray  # uint8 (n, H, W, 3), upright RGB, each scaled to at most ``max_pixels``
    max_pixels: int

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "thumb_index": self.index,
            "thumb_images": self.images,
            "thumb_max_pixels": np.array([self.max_pixels], dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, z: Any) -> Thumbnails | None:
        if "thumb_index" not in z:
            return None
        return cls(index=z["thumb_index"], images=z["thumb_images"], max_pixels=int(z["thumb_max_pixels"][0]))


# ---------------------------------------------------------------------------------------------------------------------
# The shared decode pass: sampled planes, chunk by chunk.
#
# Why sampling instead of scaling: at 360p FFmpeg decodes a frame in ~0.4 ms on one core, so any per-frame work
# (an RGB conversion, a swscale resize: 0.1-0.5 ms) would dominate. Reading every s-th pixel of the Y, U and V planes
# straight from the decoder's buffers costs ~10 us per frame; everything else is computed with numpy on chunks of
# frames, so per-frame Python overhead stays at a handful of calls.
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeOptions:
    # Luma samples per row of the sampled grid (stride = round(width / sample_width)); chroma is sampled at half
    # that density. 64 keeps per-frame cost ~10 us and is enough for cuts, histograms and coarse quality stats.
    sample_width: int = 64
    # Skip FFmpeg's in-loop deblocking filter (codec option skip_loop_filter=all): ~10-15% less decode CPU on
    # h264/hevc/vp9. The small error it adds (and lets drift within a GOP) is far below what cut detection and the
    # coarse statistics notice: videolake.evaluation.scenes checks that cuts are identical with and without it.
    fast_decode: bool = True
    # Decoder threads: 1 = no threading (least total CPU, what a CPU-bound pipeline running one video per core
    # wants); 0 = FFmpeg's automatic frame+slice threading (lower latency, ~5-10% more CPU).
    threads: int = 1
    # Frames per numpy chunk: bounds memory (chunk x grid bytes) while amortising numpy call overhead.
    chunk_frames: int = 256


@dataclass(frozen=True)
class VideoInfo:
    width: int  # full decoded frame size
    height: int
    fps: float  # average frame rate of the stream (frames / duration for variable frame rate files)
    codec: str
    pix_fmt: str


@dataclass(frozen=True)
class SampledChunk:
    """Sampled planes of frames [start, start + n)."""

    start: int
    y: np.ndarray  # (n, hs, ws) uint8 luma samples
    uv: np.ndarray  # (n, 2, hc, wc) uint8 chroma samples (U, V) at half the luma density (128 = grey for gray video)
    pts_s: np.ndarray  # (n,) float64 presentation times in seconds


# 8-bit planar YUV layouts read straight from the decoder (anything else is converted to yuv420p first).
_PLANAR_8BIT = {
    "yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "yuv440p", "yuvj440p",
    "yuv411p", "yuv410p", "yuva420p", "yuva422p", "yuva444p",
}  # fmt: skip


_MALLOC_TUNED = False


def keep_freed_memory() -> None:
    """Ask glibc to keep freed memory for reuse instead of returning it to the OS (once per process).

    Why: every chunk allocates a few MB of numpy temporaries; by default glibc serves blocks that large with fresh
    mmap()s and unmaps them on free, so each chunk page-faults its temporaries in again (~40k faults, ~0.1 s of
    system CPU per 3,000 frames: 7% of a 360p decode). Raising the mmap and trim thresholds lets the heap recycle
    them; the process keeps its peak heap (tens of MB) a little longer. A no-op where glibc is not the allocator.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 64 << 20)
        libc.mallopt(m_trim_threshold, 256 << 20)
    except (OSError, AttributeError):
        pass


class SampledDecoder:
    """Opens a video (raising ``ValueError`` with a reason when it cannot) and yields ``SampledChunk``s.

    One decode pass, frames numbered in the decoder's output (presentation) order from 0.
    """

    def __init__(self, path: str, options: DecodeOptions | None = None) -> None:
        import av  # lazy: keeps `import videolake.platform.video.frames` cheap

        self.path = str(path)
        self.options = options or DecodeOptions()
        keep_freed_memory()
        try:
            self._container = av.open(self.path)
        except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot open {self.path}: {exc}") from exc
        if not self._container.streams.video:
            self._container.close()
            raise ValueError(f"cannot decode {self.path}: no video stream")
        stream = self._container.streams.video[0]
        ctx = stream.codec_context
        if not ctx.width or not ctx.height:
            self._container.close()
            raise ValueError(f"cannot decode {self.path}: the video stream has no frame size")
        if self.options.threads == 1:
            ctx.thread_count = 1
        else:
            ctx.thread_count = self.options.threads
            stream.thread_type = "AUTO"
        if self.options.fast_decode:
            ctx.options = {"skip_loop_filter": "all"}
        self._stream = stream
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        self.info = VideoInfo(
            width=int(ctx.width),
            height=int(ctx.height),
            fps=float(rate) if rate else 0.0,
            codec=str(ctx.name),
            pix_fmt=str(ctx.pix_fmt or ""),
        )
        self.num_frames = 0

    def close(self) -> None:
        self._container.close()

    def __enter__(self) -> SampledDecoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _frames(self):
        """Decoded frames in output order; an exception object in place of each packet that fails to decode."""
        import av

        stream = self._stream
        try:
            packets = self._container.demux(stream)
            for packet in packets:
                try:
                    frames = stream.decode(packet)
                except (av.FFmpegError, ValueError) as exc:
                    yield exc
                    continue
                yield from frames
        except (av.FFmpegError, ValueError) as exc:  # the container itself is broken from here on
            yield exc

    def chunks(self, tap: Callable[[Any], None] | None = None):
        """Yield ``SampledChunk``s covering every decoded frame. Raises ``ValueError`` if no frame decodes.

        ``tap`` is called with every decoded frame (a PyAV ``VideoFrame``, in output order) before it is sampled:
        a consumer that needs other pixels of the same frames (TransNetV2's 48x27 RGB) shares this decode pass
        instead of running its own. The frames it saw by the time a chunk is yielded are that chunk's frames."""
        log = logging.getLogger(__name__)
        width, height = self.info.width, self.info.height
        step = max(1, int(round(width / max(8, self.options.sample_width))))
        # Multiples of 4: the luma grid is made of 4x4 blocks of samples (2x2 in chroma, sampled at half density).
        ws, hs = (width // step) & ~3, (height // step) & ~3
        if ws < 4 or hs < 4:
            raise ValueError(f"cannot decode {self.path}: frame size {width}x{height} is too small")
        ox, oy = (width - ws * step) // 2 + step // 2, (height - hs * step) // 2 + step // 2
        wc, hc = ws // 2, hs // 2
        n_chunk = max(1, self.options.chunk_frames)
        ybuf = np.empty((n_chunk, hs, ws), np.uint8)
        uvbuf = np.empty((n_chunk, 2, hc, wc), np.uint8)
        pts = np.empty(n_chunk, np.float64)
        geometry: dict[tuple[str, int, int], tuple] = {}  # (format, w, h) -> per-plane slicing

        def plane_slicer(frame):
            key = (frame.format.name, frame.width, frame.height)
            g = geometry.get(key)
            if g is None:
                g = geometry[key] = _plane_geometry(frame, step, ox, oy, ws, hs, wc, hc, width, height)
            return g

        i = 0
        start = 0
        count = 0
        fps = self.info.fps or 25.0
        errors = 0
        for frame in self._frames():
            if isinstance(frame, Exception):  # a packet that does not decode: skipped, like FFmpeg does
                errors += 1
                if errors <= 3:
                    log.warning("%s: skipping undecodable data after frame %d: %s", self.path, count, frame)
                continue
            if tap is not None:
                tap(frame)
            mode, ysl, usl, vsl = plane_slicer(frame)
            if mode == "convert":
                frame = frame.reformat(format="yuv420p", width=width, height=height)
                mode, ysl, usl, vsl = plane_slicer(frame)
            planes = frame.planes
            p = planes[0]
            ybuf[i] = np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[ysl]
            if mode == "yuv":
                p = planes[1]
                uvbuf[i, 0] = np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[usl]
                p = planes[2]
                uvbuf[i, 1] = np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[vsl]
            elif mode == "nv":
                p = planes[1]
                uv = np.frombuffer(p, np.uint8).reshape(-1, p.line_size)
                uvbuf[i, 0] = uv[usl]
                uvbuf[i, 1] = uv[vsl]
            else:  # gray
                uvbuf[i] = 128
            t = frame.time
            pts[i] = t if t is not None else count / fps
            i += 1
            count += 1
            if i == n_chunk:
                yield SampledChunk(start, ybuf[:i].copy(), uvbuf[:i].copy(), pts[:i].copy())
                start += i
                i = 0
        if i:
            yield SampledChunk(start, ybuf[:i].copy(), uvbuf[:i].copy(), pts[:i].copy())
        self.num_frames = count
        if count == 0:
            raise ValueError(
                f"cannot decode {self.path}: no decodable video frame" + (f" ({errors} bad packets)" if errors else "")
            )
        if errors:
            log.warning("%s: %d undecodable packets skipped, %d frames decoded", self.path, errors, count)


def _plane_geometry(frame, step: int, ox: int, oy: int, ws: int, hs: int, wc: int, hc: int, width: int, height: int):
    """How to read the sampled grid of each plane of frames like ``frame``: (mode, y, u, v index tuples)."""
    if frame.width != width or frame.height != height:
        return ("convert", None, None, None)  # mid-stream resolution change: rescaled to the first frame's size
    name = frame.format.name
    ysl = (slice(oy, oy + hs * step, step), slice(ox, ox + ws * step, step))

    def chroma(cw: int, ch: int, interleave: int = 1, offset: int = 0):
        # Chroma samples sit at every other luma sample position, mapped into the chroma plane's coordinates.
        sx, sy = max(1, round(2 * step * cw / width)), max(1, round(2 * step * ch / height))
        cx = min(int(ox * cw / width), max(0, cw - wc * sx))
        cy = min(int(oy * ch / height), max(0, ch - hc * sy))
        return (
            slice(cy, cy + hc * sy, sy),
            slice(interleave * cx + offset, interleave * (cx + wc * sx), interleave * sx),
        )

    if name in _PLANAR_8BIT:
        u = frame.planes[1]
        sl = chroma(u.width, u.height)
        return ("yuv", ysl, sl, sl)
    if name in ("nv12", "nv21"):
        cw, ch = (width + 1) // 2, (height + 1) // 2
        usl, vsl = chroma(cw, ch, 2, 0), chroma(cw, ch, 2, 1)
        return ("nv", ysl, *((vsl, usl) if name == "nv21" else (usl, vsl)))
    if name in ("gray", "gray8"):
        return ("gray", ysl, None, None)
    return ("convert", None, None, None)


# Strong-gradient threshold for edge_density: |dx| + |dy| on the sampled luma (0..255 scale). Text and graphics
# overlays have sharp, high-contrast strokes that exceed it; natural texture and soft edges mostly do not.
EDGE_THRESHOLD = 80


def grid_sums(a: np.ndarray, block: int) -> np.ndarray:
    """Sums over ``block`` x ``block`` blocks of ``a[..., h, w]`` (h, w multiples of block) -> uint16 ``[..., h/b, w/b]``.

    Strided slice additions: ~1.5 us per 64x36 frame, 10x faster than reshape-sum or reduceat.
    """
    v = a.astype(np.uint16)
    rows = v[..., 0::block, :]
    for i in range(1, block):
        rows = rows + v[..., i::block, :]
    out = rows[..., 0::block]
    for i in range(1, block):
        out = out + rows[..., i::block]
    return out


def luma_grid(y: np.ndarray) -> np.ndarray:
    """Mean of each 4x4 block of sampled luma: float32 ``[n, hs/4, ws/4]`` (16x9 for 16:9 video)."""
    return grid_sums(y, 4).astype(np.float32) * np.float32(1 / 16)


class FrameStatsAccumulator:
    """Builds ``FrameStats`` from ``SampledChunk``s, chunk by chunk (vectorised numpy, no per-frame Python)."""

    def __init__(self) -> None:
        self._parts: dict[str, list[np.ndarray]] = {
            k: [] for k in ("pts_s", "luma_mean", "luma_diff", "sharpness", "edge_density", "dhash")
        }
        self._prev: np.ndarray | None = None  # last sampled luma frame of the previous chunk

    def add(self, chunk: SampledChunk, grid: np.ndarray | None = None) -> None:
        """Add a chunk; ``grid`` is its ``luma_grid`` when the caller has computed it already."""
        y = chunk.y
        n = y.shape[0]
        if grid is None:
            grid = luma_grid(y)
        p = self._parts
        p["pts_s"].append(chunk.pts_s)
        p["luma_mean"].append(grid.mean(axis=(1, 2), dtype=np.float32))
        # |a - b| on uint8 without widening: min(a - b, b - a) with wrap-around (few, small temporaries: this
        # runs for every frame, and big fresh temporaries cost more in page faults than in arithmetic).
        full = y if self._prev is None else np.concatenate([self._prev[None], y])
        a, b = full[1:], full[:-1]
        d = a - b
        np.minimum(d, b - a, out=d)
        per_frame = np.float32(1 / (y.shape[1] * y.shape[2]))
        diff = d.reshape(len(d), -1).sum(axis=1, dtype=np.uint32) * per_frame
        if self._prev is None:
            diff = np.concatenate([np.zeros(1, np.float32), diff])
        p["luma_diff"].append(diff.astype(np.float32))
        self._prev = y[-1].copy()
        yi = y.astype(np.int16)
        # 4-neighbour Laplacian of the interior, in place.
        lap = yi[:, 1:-1, 1:-1] * np.int16(4)
        lap -= yi[:, :-2, 1:-1]
        lap -= yi[:, 2:, 1:-1]
        lap -= yi[:, 1:-1, :-2]
        lap -= yi[:, 1:-1, 2:]
        lf = lap.reshape(n, -1).astype(np.float32)
        m = np.float32(lf.shape[1])
        mean = lf.sum(axis=1) / m
        p["sharpness"].append(np.maximum(np.einsum("ij,ij->i", lf, lf) / m - mean * mean, 0).astype(np.float32))
        grad = np.abs(yi[:, 1:, 1:] - yi[:, :-1, 1:])
        grad += np.abs(yi[:, 1:, 1:] - yi[:, 1:, :-1])
        p["edge_density"].append(
            np.count_nonzero((grad >= EDGE_THRESHOLD).reshape(n, -1), axis=1) * np.float32(1 / grad[0].size)
        )
        p["dhash"].append(dhash64(grid if grid.shape[1] >= 8 and grid.shape[2] >= 9 else y))

    def result(self, width: int, height: int) -> FrameStats:
        cat = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in self._parts.items()}
        return FrameStats(
            # in the order the frames decode: the k-th frame shown at the k-th smallest time (a decoder that pairs
            # packed B-frames with each other's guessed timestamps hands them out unsorted; see clips.py)
            pts_s=np.sort(cat["pts_s"].astype(np.float64)),
            luma_mean=cat["luma_mean"].astype(np.float32),
            luma_diff=cat["luma_diff"].astype(np.float32),
            sharpness=cat["sharpness"].astype(np.float32),
            edge_density=cat["edge_density"].astype(np.float32),
            dhash=cat["dhash"].astype(np.uint64),
            width=int(width),
            height=int(height),
        )


def block_means(a: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Mean of ``a[..., h, w]`` over a rows x cols grid of near-equal blocks -> float32 ``[..., rows, cols]``."""
    h, w = a.shape[-2:]
    if h < rows:  # fewer pixels than blocks: repeat them so every block holds at least one
        a = np.repeat(a, -(-rows // h), axis=-2)
    if w < cols:
        a = np.repeat(a, -(-cols // w), axis=-1)
    h, w = a.shape[-2:]
    re = np.linspace(0, h, rows + 1).astype(int)
    ce = np.linspace(0, w, cols + 1).astype(int)
    s = np.add.reduceat(np.add.reduceat(a.astype(np.float32), re[:-1], axis=-2), ce[:-1], axis=-1)
    return s / (np.diff(re)[:, None] * np.diff(ce)[None, :]).astype(np.float32)


_DHASH_WEIGHTS = (np.uint64(1) << np.arange(64, dtype=np.uint64)).reshape(8, 8)


def dhash64(img: np.ndarray) -> np.ndarray:
    """64-bit difference hash of each frame of ``img[n, h, w]`` (sampled luma or its block grid): on a 9x8
    block-mean image, bit (r, c) = block (r, c) darker than block (r, c + 1)."""
    m = block_means(img, 8, 9)
    bits = (m[:, :, :-1] < m[:, :, 1:]).astype(np.uint64)
    return (bits * _DHASH_WEIGHTS).sum(axis=(1, 2), dtype=np.uint64)


def compute_frame_stats(path: str, options: DecodeOptions | None = None) -> FrameStats:
    """Decode ``path`` once and return its ``FrameStats`` (for detectors that do not return stats themselves).

    Raises ``ValueError`` with a reason when the file cannot be decoded.
    """
    acc = FrameStatsAccumulator()
    with SampledDecoder(path, options) as dec:
        for chunk in dec.chunks():
            acc.add(chunk)
        return acc.result(dec.info.width, dec.info.height)
