"""Rotated (phone-style) videos: the probe records rotation and display size, caption frames and clip files come out
upright. Truth for the rotated files is the ffmpeg CLI's own autorotated decode (an independent implementation of the
display matrix), plus the pixel pattern: coded frames are blue with a RED box at the top-left corner and a GREEN box
at the top-right corner, so each of the eight orientations puts the two boxes at a different pair of corners.
"""

from __future__ import annotations

import subprocess
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from videolake.platform.captioning.base import FrameConfig
from videolake.platform.captioning.clip_frames import read_frames
from videolake.platform.video.clips import cut_clip, read_clip_frames
from videolake.platform.video.orientation import IDENTITY, Orientation, display_matrix
from videolake.platform.video.probe import probe_video

W, H = 320, 240  # coded size of every test file
FRAMES = 36
PATTERN = (
    f"color=c=blue:size={W}x{H}:rate=24,drawbox=x=0:y=0:w=64:h=48:color=red:t=fill,"
    f"drawbox=x={W - 64}:y=0:w=64:h=48:color=lime:t=fill"
)


def _ff(ffmpeg: str, *args: str) -> None:
    subprocess.run([ffmpeg, "-nostdin", "-v", "error", "-y", *args], check=True)


def _write_pyav(path: Path, degrees: int, hflip: bool) -> None:
    """A file whose display matrix PyAV writes (ccw degrees + mirror), from the coded pattern frames."""
    with av.open(str(path), mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=24, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.set_display_rotation(degrees, hflip=hflip)
        picture = np.zeros((H, W, 3), np.uint8)
        picture[:, :, 2] = 255
        picture[:48, :64] = (255, 0, 0)
        picture[:48, W - 64 :] = (0, 255, 0)
        for i in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = i
            frame.time_base = Fraction(1, 24)
            out.mux(stream.encode(frame.reformat(format="yuv420p")))
        out.mux(stream.encode(None))


@pytest.fixture(scope="module")
def rotated(ffmpeg, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rotated")
    _ff(
        ffmpeg,
        "-f",
        "lavfi",
        "-i",
        PATTERN,
        "-frames:v",
        str(FRAMES),
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-pix_fmt",
        "yuv420p",
        "-g",
        "12",
        str(d / "upright.mp4"),
    )
    out = {"upright": d / "upright.mp4"}
    for tag in (90, 180, 270):  # ffmpeg 5.1 writes the tag as a display matrix when remuxing
        out[f"tag{tag}"] = d / f"tag{tag}.mp4"
        _ff(
            ffmpeg,
            "-i",
            str(d / "upright.mp4"),
            "-c",
            "copy",
            "-metadata:s:v:0",
            f"rotate={tag}",
            str(out[f"tag{tag}"]),
        )
    out["mirror"] = d / "mirror.mp4"
    _write_pyav(out["mirror"], 0, hflip=True)
    return out


def _corners(picture: np.ndarray) -> dict[str, str]:
    """Colour name at the four corners (sampled 8% in from each edge)."""
    h, w = picture.shape[:2]
    dy, dx = max(1, int(h * 0.08)), max(1, int(w * 0.08))
    spots = {"tl": (dy, dx), "tr": (dy, w - 1 - dx), "bl": (h - 1 - dy, dx), "br": (h - 1 - dy, w - 1 - dx)}

    def name(px) -> str:
        r, g, b = (int(v) for v in px[:3])
        return "red" if r > 150 and g < 100 else "green" if g > 150 and r < 100 else "blue" if b > 150 else "?"

    return {k: name(picture[y, x]) for k, (y, x) in spots.items()}


def _ffmpeg_display(ffmpeg: str, path: Path, tmp: Path) -> np.ndarray:
    """The first frame as the ffmpeg CLI shows it (autorotate applies the display matrix), as RGB."""
    raw = tmp / (path.stem + ".rgb")
    probe = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=width,height:stream_side_data=rotation",
            "-of",
            "default=nw=1",
            str(path),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    fields = dict(line.split("=", 1) for line in probe.split() if "=" in line)
    w, h = int(fields["width"]), int(fields["height"])
    if int(float(fields.get("rotation", 0))) % 180:
        w, h = h, w
    _ff(ffmpeg, "-i", str(path), "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", str(raw))
    return np.frombuffer(raw.read_bytes(), np.uint8).reshape(h, w, 3)


# (file, rotation column, display size, corners of the upright picture)
EXPECTED = [
    ("upright", 0, (320, 240), {"tl": "red", "tr": "green", "bl": "blue", "br": "blue"}),
    # tkhd matrix (0,-1,1,0): a quarter turn counter-clockwise = 270 clockwise
    ("tag90", 270, (240, 320), {"tl": "green", "tr": "blue", "bl": "red", "br": "blue"}),
    ("tag180", 180, (320, 240), {"tl": "blue", "tr": "blue", "bl": "green", "br": "red"}),
    # tkhd matrix (0,1,-1,0), what an iPhone writes for portrait: a quarter turn clockwise
    ("tag270", 90, (240, 320), {"tl": "blue", "tr": "red", "bl": "blue", "br": "green"}),
    ("mirror", 0, (320, 240), {"tl": "green", "tr": "red", "bl": "blue", "br": "blue"}),
]


@pytest.mark.parametrize("name, rotation, size, corners", EXPECTED)
def test_probe_records_rotation_and_display_size(rotated, name, rotation, size, corners):
    p = probe_video(str(rotated[name])).probe
    assert (p.width, p.height) == (W, H)  # coded size, as stored
    assert (p.rotation, p.display_width, p.display_height) == (rotation, *size)


@pytest.mark.parametrize("name, rotation, size, corners", [e for e in EXPECTED if e[0] != "mirror"])
def test_expected_corners_are_what_ffmpeg_displays(ffmpeg, rotated, tmp_path, name, rotation, size, corners):
    """The truth table above agrees with the ffmpeg CLI (5.1 autorotate knows rotations, not mirrors)."""
    shown = _ffmpeg_display(ffmpeg, rotated[name], tmp_path)
    assert (shown.shape[1], shown.shape[0]) == size
    assert _corners(shown) == corners


@pytest.mark.parametrize("name, rotation, size, corners", EXPECTED)
def test_clip_frames_are_upright(rotated, name, rotation, size, corners):
    frames = read_clip_frames(str(rotated[name]), 6, 30, 3, max_side=160)  # frames 10, 18, 26 (after a seek)
    assert len(frames) == 3
    for f in frames:
        assert (f.shape[1], f.shape[0]) == ((160, 120) if size[0] > size[1] else (120, 160))
        assert _corners(f) == corners


@pytest.mark.parametrize("name, rotation, size, corners", EXPECTED)
def test_caption_frames_are_upright(rotated, name, rotation, size, corners):
    clip = read_frames(str(rotated[name]), 0, FRAMES, 24.0, FrameConfig(min_frames=2, max_frames=2, max_pixels=W * H))
    assert clip.frames.shape == (2, size[1], size[0], 3)
    for f in clip.frames:
        assert _corners(f) == corners


@pytest.mark.parametrize("name, rotation, size, corners", EXPECTED)
def test_clip_files_are_encoded_upright_without_a_display_matrix(rotated, tmp_path, name, rotation, size, corners):
    out = cut_clip(str(rotated[name]), 12, 24, 24.0, str(tmp_path / "clip.mp4"))
    with av.open(out) as c:
        frames = list(c.decode(c.streams.video[0]))
    assert len(frames) == 12
    assert all(display_matrix(f) is None for f in frames)
    assert (frames[0].width, frames[0].height) == size
    assert _corners(frames[0].to_ndarray(format="rgb24")) == corners
    assert probe_video(out).probe.rotation == 0


def test_orientation_table():
    """All eight matrices FFmpeg can express: rotation (clockwise), mirror and the picture they give."""
    one = 1 << 16
    pic = np.arange(6).reshape(2, 3)  # [[0 1 2] [3 4 5]]
    cases = {  # (a, b, c, d) -> (rotation, mirrored, displayed picture)
        (one, 0, 0, one): (0, False, [[0, 1, 2], [3, 4, 5]]),
        (0, one, -one, 0): (90, False, [[3, 0], [4, 1], [5, 2]]),
        (-one, 0, 0, -one): (180, False, [[5, 4, 3], [2, 1, 0]]),
        (0, -one, one, 0): (270, False, [[2, 5], [1, 4], [0, 3]]),
        (-one, 0, 0, one): (0, True, [[2, 1, 0], [5, 4, 3]]),
        (0, one, one, 0): (270, True, [[0, 3], [1, 4], [2, 5]]),
        (one, 0, 0, -one): (180, True, [[3, 4, 5], [0, 1, 2]]),
        (0, -one, -one, 0): (90, True, [[5, 2], [4, 1], [3, 0]]),
    }
    for (a, b, c, d), (rotation, mirrored, shown) in cases.items():
        o = Orientation.from_matrix((a, b, 0, c, d, 0, 0, 0, 1 << 30))
        assert (o.rotation, o.mirrored) == (rotation, mirrored), (a, b, c, d)
        assert o.apply(pic).tolist() == shown, (a, b, c, d)
        assert o.display_size(3, 2) == (len(shown[0]), len(shown))
    assert Orientation.from_matrix((one, 0, 0, 0, one, 0, 0, 0, 1 << 30)) == IDENTITY
