"""One clip as a training sample's video: frames [start, end) of the source, upright, H.264 in a faststart MP4.

Frame-exact like ``clips.cut_clip`` (the frames are read with ``clips.iter_frames``: one seek, then numbered by the
frame index), and in addition scaled down to ``max_short_side`` (never up), encoded by the ``ffmpeg`` command with a
fixed thread count and bit-exact muxing, so the same clip and settings give the same bytes: the shard built from them
keeps its name and sha256 across re-runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from videolake.platform.shards.config import ShardConfig
from videolake.platform.video.clips import iter_frames
from videolake.platform.video.orientation import Orientation

if TYPE_CHECKING:
    from videolake.platform.shards.face_blur import FaceBlurrer

# Bump when the recipe changes (it is part of the stage version, so old samples are not reused).
ENCODE_VERSION = 3  # 2: encoded by the ffmpeg command; 3: scaled there too


@dataclass(frozen=True)
class EncodedClip:
    data: bytes  # the MP4 file
    width: int  # encoded (upright, scaled) frame width
    height: int
    num_frames: int


def target_size(width: int, height: int, max_short_side: int) -> tuple[int, int]:
    """The encoded size of an upright ``width`` x ``height`` picture: short side at most ``max_short_side`` (never
    enlarged), aspect kept, both sides even (4:2:0 needs them)."""
    short = min(width, height)
    scale = min(1.0, max_short_side / short)
    w, h = round(width * scale), round(height * scale)
    return max(2, w - w % 2), max(2, h - h % 2)


class ClipEncoder:
    """Encodes the frames it is fed (upright, scaled, constant rate) into an MP4; ``finish`` returns the clip.

    The frames are decoded here (PyAV: frame-exact, upright) and scaled and encoded by the ``ffmpeg`` command's
    swscale and libx264, fed raw yuv420p on a pipe. Why not PyAV's own libx264: the same frames encoded in-process came out in up
    to five sizes of one mp4 in ten tries (in Ray workers, and in any process that had imported torch), while the
    ``ffmpeg`` command gave one sha256 every time; a shard's name is a digest of its bytes, so it must be that one.
    """

    def __init__(self, fps: float, config: ShardConfig, expected: int) -> None:
        import av

        if not fps or fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.av, self.config, self.expected = av, config, expected
        self.rate = Fraction(fps).limit_denominator(1001 * 1000)
        fd, self.tmp = tempfile.mkstemp(suffix=".mp4", prefix="videolake-sample-")
        os.close(fd)
        self.log = tempfile.TemporaryFile()
        self.proc: subprocess.Popen | None = None
        self.size = (0, 0)
        self.written = 0
        self.orientation: Orientation | None = None
        # blur_faces: frames pass through the face blur (shards.face_blur), which holds a few back until its next
        # detection; close() lets the rest out.
        settings = config.blur_settings()
        self.blur: FaceBlurrer | None = None
        if settings is not None:
            from videolake.platform.shards.face_blur import FaceBlurrer

            self.blur = FaceBlurrer(settings)

    def _start(self, width: int, height: int) -> None:
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            raise RuntimeError("ffmpeg is not installed: training shards encode with it (`make setup` installs it)")
        self.size = target_size(width, height, self.config.max_short_side)
        self.source = (width, height)
        # Scaled by the encoder process (swscale, bicubic: FFmpeg's default), so decoding here and scaling +
        # encoding there run side by side.
        scale = [] if self.size == self.source else ["-vf", f"scale={self.size[0]}:{self.size[1]}:flags=bicubic"]
        self.proc = subprocess.Popen(
            [
                ffmpeg,
                "-nostdin",
                "-v",
                "error",
                "-y",
                "-f",
                "rawvideo",
                "-pix_fmt",
                "yuv420p",
                "-s",
                f"{width}x{height}",
                "-framerate",
                f"{self.rate.numerator}/{self.rate.denominator}",
                "-i",
                "pipe:0",
                *scale,
                "-an",
                "-c:v",
                "libx264",
                "-preset",
                self.config.preset,
                "-crf",
                str(self.config.crf),
                "-threads",
                str(self.config.threads),
                "-pix_fmt",
                "yuv420p",
                "-fflags",
                "+bitexact",
                "-movflags",
                "+faststart",
                "-f",
                "mp4",
                self.tmp,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        _widen_pipe(self.proc.stdin)

    def feed(self, frame) -> None:
        if self.orientation is None:
            # Read once a clip: the display matrix is the stream's (FFmpeg copies it onto every frame), and reading
            # a frame's side data cost 0.7 ms a frame, a third of decoding a 720p frame.
            self.orientation = Orientation.from_frame(frame)
        if not self.orientation.is_identity:
            upright = self.orientation.apply(frame.to_ndarray(format="rgb24"))
            frame = self.av.VideoFrame.from_ndarray(upright, format="rgb24")
        if self.proc is None:
            self._start(frame.width, frame.height)
        if (frame.width, frame.height) != self.source:
            raise ValueError(
                f"the frame size changed within the clip: {frame.width}x{frame.height}, was "
                f"{self.source[0]}x{self.source[1]}"
            )
        if self.blur is not None:
            for rgb in self.blur.push(frame.to_ndarray(format="rgb24")):
                self._write(self.av.VideoFrame.from_ndarray(rgb, format="rgb24"))
            return
        self._write(frame)

    def _write(self, frame) -> None:
        raw = frame if frame.format.name == "yuv420p" else frame.reformat(format="yuv420p")
        assert self.proc is not None and self.proc.stdin is not None  # started above, with a pipe
        try:
            _write_planes(self.proc.stdin, raw)
        except BrokenPipeError as exc:
            raise ValueError(f"the encoder stopped: {self._error()}") from exc
        self.written += 1

    def _error(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace").strip()[-500:] or "no message"

    def close(self) -> None:
        """End the input: the encoder flushes on its own while the caller decodes the next clip."""
        if self.blur is not None and self.proc is not None:
            for rgb in self.blur.flush():  # the frames the face blur still holds
                self._write(self.av.VideoFrame.from_ndarray(rgb, format="rgb24"))
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def finish(self, src_path: str) -> EncodedClip:
        try:
            if self.proc is None:
                raise ValueError(f"no frame to encode from {src_path}")
            self.close()
            if self.proc.wait() != 0:
                raise ValueError(f"ffmpeg could not encode the clip of {src_path}: {self._error()}")
            if self.written != self.expected:
                raise ValueError(f"encoded {self.written} of {self.expected} frames of {src_path}")
            with open(self.tmp, "rb") as fh:
                return EncodedClip(data=fh.read(), width=self.size[0], height=self.size[1], num_frames=self.written)
        finally:
            self.abort()

    def abort(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


def _widen_pipe(pipe) -> None:
    """Let the decoder run a frame or more ahead of the encoder: a 64 KiB pipe holds a twentieth of a 720p frame,
    so each write waited for the encoder to read. Linux only (F_SETPIPE_SZ); elsewhere the default stays."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass


def _write_planes(pipe, frame) -> None:
    """Write a yuv420p frame as FFmpeg's rawvideo reads it (planes back to back, no row padding). A plane without
    padding goes straight from the decoder's buffer: ``to_ndarray().tobytes()`` copied each 720p frame twice and
    cost 1.8 ms a frame here, a third of decoding it."""
    import numpy as np

    for plane in frame.planes:
        if plane.line_size == plane.width:
            pipe.write(memoryview(plane))
        else:
            rows = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
            pipe.write(np.ascontiguousarray(rows[:, : plane.width]).data)


def encode_clip(src_path: str, start_frame: int, end_frame: int, fps: float, config: ShardConfig) -> EncodedClip:
    """Encode frames [start_frame, end_frame) of ``src_path`` at a constant ``fps`` (a VFR source at its average
    rate). Raises ValueError when a frame of the range does not decode or the count comes out wrong."""
    encoder = ClipEncoder(fps, config, end_frame - start_frame)
    try:
        for _, frame in iter_frames(src_path, start_frame, end_frame, DECODE_THREADS):
            encoder.feed(frame)
    except BaseException:
        encoder.abort()
        raise
    return encoder.finish(src_path)


# One decoder thread: a unit holds one Ray CPU (its encoder process runs beside it), and frame threads cost 12 % more
# CPU time for the same frames. Not part of the stage version: it does not change a byte.
DECODE_THREADS = 1

# A gap of up to this many frames between two clips is decoded through rather than sought over: a seek lands on the
# keyframe before the next clip and decodes from there anyway (a GOP is typically 1-10 s).
MAX_DECODED_GAP = 120
# Encoders left flushing (x264's lookahead, the MP4's faststart rewrite) while the next clip decodes.
MAX_FLUSHING = 1


def encode_clips(
    src_path: str, ranges: list[tuple[int, int]], fps: float | list[float], config: ShardConfig
) -> list[EncodedClip | Exception]:
    """``encode_clip`` for each range of one video (sorted, non-overlapping), at ``fps`` (one rate, or one per
    range: ``clips.clip_rate``), decoding each run of nearby clips ONCE: FFmpeg's ``-ss`` per clip decodes from the keyframe before each clip, this decodes every frame once
    (``videolake bench shards`` measures it against FFmpeg). A range that fails is its own exception in the result
    (after a decode error the rest of its run is encoded clip by clip), never the whole video's."""
    rates = list(fps) if isinstance(fps, list) else [fps] * len(ranges)
    out: list[EncodedClip | Exception | None] = [None] * len(ranges)
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    runs: list[list[int]] = []
    for i in order:
        if (
            runs
            and ranges[i][0] >= ranges[runs[-1][-1]][1]
            and ranges[i][0] - ranges[runs[-1][-1]][1] <= MAX_DECODED_GAP
        ):
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        _encode_run(src_path, [ranges[i] for i in run], [rates[i] for i in run], config, run, out)
    return [r if r is not None else ValueError("not encoded") for r in out]


def _encode_run(src_path, run_ranges, rates, config, idx, out) -> None:
    pos, encoder = 0, None
    # Clips whose input is complete, still flushing: the next clip is decoded meanwhile (at most MAX_FLUSHING).
    flushing: list[tuple[int, ClipEncoder]] = []
    try:
        for n, frame in iter_frames(src_path, run_ranges[0][0], run_ranges[-1][1], DECODE_THREADS):
            while pos < len(run_ranges) and n >= run_ranges[pos][1]:
                pos += 1
            if pos >= len(run_ranges):
                break
            start, end = run_ranges[pos]
            if n < start:
                continue
            if encoder is None:
                encoder = ClipEncoder(rates[pos], config, end - start)
            encoder.feed(frame)
            if n == end - 1:
                encoder.close()
                flushing.append((idx[pos], encoder))
                if len(flushing) > MAX_FLUSHING:
                    k, done = flushing.pop(0)
                    out[k] = done.finish(src_path)
                encoder, pos = None, pos + 1
        while flushing:
            k, done = flushing.pop(0)
            out[k] = done.finish(src_path)
    except Exception:  # noqa: BLE001 - fall back to one clip at a time for what is left of the run
        if encoder is not None:
            encoder.abort()
        for _, pending in flushing:
            pending.abort()
        for k in range(len(run_ranges)):
            if out[idx[k]] is None:
                try:
                    start, end = run_ranges[k]
                    out[idx[k]] = encode_clip(src_path, start, end, rates[k], config)
                except Exception as exc:  # noqa: BLE001 - the clip's own failure, recorded by the caller
                    out[idx[k]] = exc
        return
    if encoder is not None:
        encoder.abort()


def count_frames(path: str) -> int:
    """Frames an MP4 decodes to (every frame decoded: what the gate and the tests check)."""
    import av

    with av.open(path) as container:
        return sum(1 for _ in container.decode(container.streams.video[0]))
