"""One clip as a training sample's video: frames [start, end) of the source, upright, H.264 in a faststart MP4.

Frame-exact like ``clips.cut_clip`` (the frames are read with ``clips.iter_frames``: one seek, then numbered by the
frame index), and in addition scaled down to ``max_short_side`` (never up), encoded with a fixed thread count and
FFmpeg's bitexact flags, so the same clip and settings give the same bytes: the shard built from them keeps its
name and sha256 across re-runs and machines.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from fractions import Fraction

from videolake.platform.clips import iter_frames
from videolake.platform.orientation import Orientation
from videolake.platform.shards.config import ShardConfig

# Bump when the recipe changes (it is part of the stage version, so old samples are not reused).
ENCODE_VERSION = 1


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


def encode_clip(src_path: str, start_frame: int, end_frame: int, fps: float, config: ShardConfig) -> EncodedClip:
    """Encode frames [start_frame, end_frame) of ``src_path`` at a constant ``fps`` (a VFR source at its average
    rate). Raises ValueError when a frame of the range does not decode or the count comes out wrong."""
    import av

    if not fps or fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    rate = Fraction(fps).limit_denominator(1001 * 1000)
    fd, tmp = tempfile.mkstemp(suffix=".mp4", prefix="videolake-sample-")
    os.close(fd)
    written, size = 0, (0, 0)
    try:
        with av.open(tmp, mode="w", format="mp4",
                     options={"movflags": "+faststart", "fflags": "+bitexact"}) as out:
            stream = None
            for _, frame in iter_frames(src_path, start_frame, end_frame):
                orientation = Orientation.from_frame(frame)
                if not orientation.is_identity:
                    upright = orientation.apply(frame.to_ndarray(format="rgb24"))
                    frame = av.VideoFrame.from_ndarray(upright, format="rgb24")
                if stream is None:
                    size = target_size(frame.width, frame.height, config.max_short_side)
                    stream = out.add_stream("libx264", rate=rate, options={
                        "crf": str(config.crf), "preset": config.preset, "threads": str(config.threads),
                        "flags": "+bitexact"})
                    stream.width, stream.height = size
                    stream.pix_fmt = "yuv420p"
                    stream.codec_context.time_base = 1 / rate
                f = frame.reformat(width=size[0], height=size[1], format="yuv420p", interpolation="BICUBIC")
                f.pts = written
                f.time_base = 1 / rate
                out.mux(stream.encode(f))
                written += 1
            if stream is not None:
                out.mux(stream.encode(None))
        if written != end_frame - start_frame:
            raise ValueError(f"encoded {written} of {end_frame - start_frame} frames of {src_path}")
        with open(tmp, "rb") as fh:
            data = fh.read()
    finally:
        os.remove(tmp)
    return EncodedClip(data=data, width=size[0], height=size[1], num_frames=written)


def count_frames(path: str) -> int:
    """Frames an MP4 decodes to (every frame decoded: what the gate and the tests check)."""
    import av

    with av.open(path) as container:
        return sum(1 for _ in container.decode(container.streams.video[0]))
