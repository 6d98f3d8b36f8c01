"""Running ffmpeg and ffprobe: finding the binaries, the encoder and container arguments of each codec, and the
probes (decoded frame count, frame times) that verify a written file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

# Codec -> (default container, encoder arguments). One seed must give the same bytes on any x86-64 machine with the
# same FFmpeg build. -threads 1 on every encoder (x265: pools/frame-threads): the output then depends neither on
# scheduling nor on the core count (x264 writes its thread count into the stream); the box is shared anyway.
_ENCODERS: dict[str, tuple[str, list[str]]] = {
    # mbtree=0: x264's macroblock-tree rate control runs float assembly that rounds differently per CPU (an AVX-512
    # machine wrote other bytes than an AVX2 one); without it x264's output is the same from SSSE3 to AVX-512.
    "h264": (
        "mp4",
        ["-c:v", "libx264", "-preset", "veryfast", "-crf", "{q}", "-pix_fmt", "yuv420p", "-x264-params", "mbtree=0"],
    ),
    # info=0: no SEI naming x265's build, compiler and platform.
    "hevc": (
        "mp4",
        [
            "-c:v",
            "libx265",
            "-preset",
            "ultrafast",
            "-crf",
            "{q}",
            "-pix_fmt",
            "yuv420p",
            "-x265-params",
            "log-level=error:pools=1:frame-threads=1:info=0",
        ],
    ),
    "vp9": (
        "webm",
        [
            "-c:v",
            "libvpx-vp9",
            "-deadline",
            "realtime",
            "-cpu-used",
            "8",
            "-crf",
            "{q}",
            "-b:v",
            "0",
            "-row-mt",
            "0",
            "-pix_fmt",
            "yuv420p",
        ],
    ),
    "mpeg4": ("avi", ["-c:v", "mpeg4", "-q:v", "{q}", "-pix_fmt", "yuv420p"]),
}
_DEFAULT_QUALITY = {"h264": 23, "hevc": 28, "vp9": 35, "mpeg4": 4}
_CONTAINERS = {"mp4": "mp4", "mkv": "matroska", "mov": "mov", "webm": "webm", "avi": "avi"}
_AUDIO_ENCODER = {
    "mp4": ["-c:a", "aac", "-b:a", "64k"],
    "mov": ["-c:a", "aac", "-b:a", "64k"],
    "mkv": ["-c:a", "aac", "-b:a", "64k"],
    "webm": ["-c:a", "libopus", "-b:a", "48k"],
    "avi": ["-c:a", "libmp3lame", "-b:a", "64k"],
}
AUDIO_RATE = 48000
VFR_TIMEBASE = 90000


def ffmpeg_bin() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        raise RuntimeError("ffmpeg is not installed or not on PATH (Debian: apt-get install ffmpeg)")
    return path


def ffprobe_bin() -> str:
    path = shutil.which("ffprobe")
    if path is None:
        raise RuntimeError("ffprobe is not installed or not on PATH (Debian: apt-get install ffmpeg)")
    return path


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ffmpeg failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr.strip()[-2000:]}")


def _ffmpeg(*args: str) -> list[str]:
    # One thread for every filter graph (-vf and -filter_complex alike): nothing depends on the core count.
    return [
        ffmpeg_bin(),
        "-hide_banner",
        "-nostdin",
        "-loglevel",
        "error",
        "-y",
        "-filter_threads",
        "1",
        "-filter_complex_threads",
        "1",
        *args,
    ]


# Output options of every file written, so that its bytes depend only on --seed and the FFmpeg build:
# -map_metadata -1: copy no tags from an input file (variants, the truncated special's remux);
# -fflags +bitexact: muxers write no version string, and Matroska/WebM no random segment and track UIDs;
# -flags:v/-flags:a +bitexact: encoders write no version string (stream tags, mpeg4's user data) and use only
# bit-exact DSP code.
_BITEXACT = ["-map_metadata", "-1", "-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact"]


def count_frames(path: str | Path) -> int:
    """Decoded frame count of the first video stream (``ffprobe -count_frames``); 0 when there is none."""
    proc = subprocess.run(
        [
            ffprobe_bin(),
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-count_frames",
            "-show_entries",
            "stream=nb_read_frames",
            "-of",
            "json",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    streams = json.loads(proc.stdout or "{}").get("streams") or []
    value = streams[0].get("nb_read_frames") if streams else None
    return int(value) if value not in (None, "N/A") else 0


def frame_times(path: str | Path) -> list[float]:
    """Presentation time (s) of every decoded frame, in output order."""
    proc = subprocess.run(
        [
            ffprobe_bin(),
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "frame=pts_time,best_effort_timestamp_time",
            "-of",
            "json",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = []
    for f in json.loads(proc.stdout).get("frames", []):
        v = f.get("pts_time", f.get("best_effort_timestamp_time"))
        out.append(round(float(v), 6))
    return out


def _encode_args(codec: str, container: str, quality: int | None, audio: bool) -> list[str]:
    q = _DEFAULT_QUALITY[codec] if quality is None else quality
    args = [a.replace("{q}", str(q)) for a in _ENCODERS[codec][1]] + ["-threads", "1"]
    if codec == "hevc" and container in ("mp4", "mov"):
        args += ["-tag:v", "hvc1"]
    if audio:
        args += _AUDIO_ENCODER[container]
    args += _BITEXACT + ["-f", _CONTAINERS[container]]
    return args
