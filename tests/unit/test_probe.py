"""probe_video on real files made by ffmpeg: exact header facts for good files, a specific reason for each bad one."""

from __future__ import annotations

import dataclasses
import hashlib
import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from videolake.platform.lake.schemas import RAW_VIDEOS
from videolake.platform.video import probe as P
from videolake.platform.video.probe import ProbeConfig, probe_video, raw_video_row

SRC = "testsrc2=size=320x240:rate={rate}"


def _ff(ffmpeg: str, *args: str) -> None:
    subprocess.run([ffmpeg, "-nostdin", "-v", "error", "-y", *args], check=True)


@pytest.fixture(scope="module")
def media(ffmpeg, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("probe")
    lavfi = lambda rate, t: ["-f", "lavfi", "-t", t, "-i", SRC.format(rate=rate)]  # noqa: E731
    h264 = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
    # good files
    _ff(
        ffmpeg,
        *lavfi(30, "2"),
        "-f",
        "lavfi",
        "-t",
        "2",
        "-i",
        "sine=frequency=440",
        *h264,
        "-c:a",
        "aac",
        str(d / "h264_audio.mp4"),
    )
    _ff(ffmpeg, *lavfi("30000/1001", "2.002"), *h264, str(d / "ntsc.mp4"))
    _ff(
        ffmpeg,
        *lavfi(30, "1"),
        "-c:v",
        "libx265",
        "-preset",
        "ultrafast",
        "-x265-params",
        "log-level=error",
        str(d / "hevc.mp4"),
    )
    _ff(ffmpeg, *lavfi(30, "1"), "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", str(d / "vp9.webm"))
    _ff(ffmpeg, *lavfi(25, "1.2"), "-c:v", "mpeg4", str(d / "mpeg4.avi"))
    # variable frame rate: 30 frames at 30 fps then 10 frames at 10 fps = 40 frames over 2.0 s
    _ff(
        ffmpeg,
        "-f",
        "lavfi",
        "-t",
        "1",
        "-i",
        SRC.format(rate=30),
        "-f",
        "lavfi",
        "-t",
        "1",
        "-i",
        "mandelbrot=size=320x240:rate=10",
        "-filter_complex",
        "[0:v]settb=1/90000[a];[1:v]settb=1/90000[b];[a][b]concat=n=2:v=1[v]",
        "-map",
        "[v]",
        "-fps_mode",
        "vfr",
        *h264,
        str(d / "vfr.mkv"),
    )
    # bad files
    (d / "empty.mp4").write_bytes(b"")
    (d / "text.mp4").write_text("this is a shopping list, not a video\n" * 20)
    _ff(ffmpeg, "-f", "lavfi", "-t", "1.5", "-i", "sine=frequency=440", "-c:a", "aac", str(d / "audio.m4a"))
    _ff(ffmpeg, *lavfi(30, "0.3"), *h264, str(d / "short.mp4"))
    data = (d / "h264_audio.mp4").read_bytes()  # moov at the end (ffmpeg's default)
    (d / "cut_half.mp4").write_bytes(data[: len(data) // 2])
    _ff(ffmpeg, "-i", str(d / "h264_audio.mp4"), "-c", "copy", "-movflags", "+faststart", str(d / "faststart.mp4"))
    fs = (d / "faststart.mp4").read_bytes()  # moov first: the index survives, the media data is cut
    (d / "cut_half_faststart.mp4").write_bytes(fs[: len(fs) // 2])
    avi = (d / "mpeg4.avi").read_bytes()  # the index (idx1) is at the end: the header's length shows the cut
    (d / "cut_half.avi").write_bytes(avi[: len(avi) // 2])
    _ff(ffmpeg, "-i", str(d / "h264_audio.mp4"), "-map", "0:v", "-c", "copy", str(d / "h264.mkv"))
    mkv = (d / "h264.mkv").read_bytes()
    (d / "cut_half.mkv").write_bytes(mkv[: len(mkv) // 2])
    # Complete files whose coded frames are fewer than the container's entries, or start before what is shown:
    # an AVI with empty "repeat the previous frame" chunks (the muxer fills the gaps of a 6 fps stream on a 30 fps
    # time base: 116 index entries, 24 coded frames, 3.867 s), and an MP4 with an edit list that drops its first
    # 0.5 s (cut at a non-keyframe with stream copy).
    _ff(
        ffmpeg,
        *lavfi(30, "4"),
        "-vf",
        "select='not(mod(n\\,5))'",
        "-fps_mode",
        "vfr",
        "-c:v",
        "mpeg4",
        "-r",
        "30",
        str(d / "repeat_chunks.avi"),
    )
    _ff(ffmpeg, "-ss", "0.5", "-i", str(d / "h264_audio.mp4"), "-map", "0:v", "-c", "copy", str(d / "edit_list.mp4"))
    webm = (d / "vp9.webm").read_bytes()  # WebM declares no frame count: the declared duration shows the cut
    (d / "cut_half.webm").write_bytes(webm[: len(webm) // 2])
    rng = random.Random(7)
    mid = bytearray(data)
    for i in range(len(mid) // 3, len(mid) // 3 + 4000):
        mid[i] = rng.randrange(256)
    (d / "corrupt_middle.mp4").write_bytes(bytes(mid))
    (d / "random.bin").write_bytes(bytes(rng.randrange(256) for _ in range(20000)))
    return d


def test_h264_with_audio_exact(media):
    out = probe_video(str(media / "h264_audio.mp4"))
    assert (out.reject_reason, out.detail) == (None, None)
    assert out.probe == P.ProbeResult(
        container="mp4",
        codec="h264",
        width=320,
        height=240,
        fps=30.0,
        duration_s=2.0,
        num_frames=60,
        has_audio=True,
        rotation=0,
        display_width=320,
        display_height=240,
    )


def test_ntsc_rate_is_exact(media):
    p = probe_video(str(media / "ntsc.mp4")).probe
    assert p.fps == pytest.approx(30000 / 1001, rel=1e-12)
    assert p.num_frames == 60
    assert p.duration_s == pytest.approx(60 * 1001 / 30000, rel=1e-12)
    assert p.has_audio is False


@pytest.mark.parametrize(
    "name, container, codec, fps, frames",
    [
        ("hevc.mp4", "mp4", "hevc", 30.0, 30),
        ("vp9.webm", "webm", "vp9", 30.0, 30),
        ("mpeg4.avi", "avi", "mpeg4", 25.0, 30),
    ],
)
def test_codecs_and_containers(media, name, container, codec, fps, frames):
    out = probe_video(str(media / name))
    assert out.reject_reason is None, out.detail
    p = out.probe
    assert (p.container, p.codec, p.width, p.height, p.fps, p.num_frames) == (container, codec, 320, 240, fps, frames)
    assert p.duration_s == pytest.approx(frames / fps, abs=1e-3)


def test_variable_frame_rate_duration_from_timestamps(media):
    p = probe_video(str(media / "vfr.mkv")).probe
    # 30 frames of 1/30 s + 10 frames of 1/10 s; a nominal-rate count would say 40 / 30 = 1.333 s
    assert p.num_frames == 40
    assert p.duration_s == pytest.approx(2.0, abs=1e-3)
    assert p.fps == pytest.approx(20.0, abs=1e-2)


def test_an_avi_with_empty_repeat_chunks_plays_to_its_end_and_is_ok(media):
    out = probe_video(str(media / "repeat_chunks.avi"))
    assert out.ok, out.detail
    # frames as the decoder yields them (the pipeline numbers frames in decode order), over the whole duration
    assert (out.probe.num_frames, round(out.probe.duration_s, 3)) == (24, 3.867)


def test_an_mp4_with_an_edit_list_is_ok(media):
    out = probe_video(str(media / "edit_list.mp4"))
    assert out.ok, out.detail
    assert out.probe.duration_s == pytest.approx(1.5, abs=0.05)


@pytest.mark.parametrize(
    "name, reason, detail_has",
    [
        ("empty.mp4", P.EMPTY_FILE, "0 bytes"),
        ("text.mp4", P.NOT_A_VIDEO, "signature"),
        ("audio.m4a", P.NO_VIDEO_STREAM, "audio"),
        ("short.mp4", P.TOO_SHORT, "0.300 s"),
        ("cut_half.mp4", P.TRUNCATED, "file ends"),
        ("cut_half_faststart.mp4", P.TRUNCATED, "of the 2.000 s"),
        ("cut_half.avi", P.TRUNCATED, "its header declares"),
        ("cut_half.mkv", P.TRUNCATED, "of the 2.000 s"),
        ("cut_half.webm", P.TRUNCATED, "of the 1.000 s"),
        ("corrupt_middle.mp4", P.CORRUPT, "does not decode"),
    ],
)
def test_bad_files_get_their_reason(media, name, reason, detail_has):
    out = probe_video(str(media / name))
    assert out.reject_reason == reason, out.detail
    assert detail_has in out.detail
    assert not out.ok


def test_too_short_keeps_its_header_facts(media):
    p = probe_video(str(media / "short.mp4")).probe
    assert (p.codec, p.num_frames, p.width) == ("h264", 9, 320)


def test_preflight_only_misses_a_corrupt_middle_but_full_decode_finds_it(media):
    path = str(media / "corrupt_middle.mp4")
    assert probe_video(path, ProbeConfig(full_decode=False)).reject_reason is None
    assert probe_video(path, ProbeConfig(full_decode=True)).reject_reason == P.CORRUPT


def test_min_duration_is_configurable(media):
    assert probe_video(str(media / "short.mp4"), ProbeConfig(min_duration_s=0.25)).reject_reason is None


def test_random_bytes_never_raise(media):
    out = probe_video(str(media / "random.bin"))
    assert out.reject_reason in P.REJECT_REASONS


def test_raw_video_row_matches_schema(media):
    names = [f.name for f in RAW_VIDEOS if f.name not in ("partition_date", "ingested_at")]
    ok = raw_video_row("v1", "file:///a.mp4", 123, probe_video(str(media / "h264_audio.mp4")))
    bad = raw_video_row("v2", "file:///b.mp4", 0, probe_video(str(media / "empty.mp4")), duplicate_uris=["file:///c"])
    assert list(ok) == names and list(bad) == names
    assert (ok["status"], ok["reject_reason"], ok["num_frames"], ok["has_audio"]) == ("ok", None, 60, True)
    assert (ok["rotation"], ok["display_width"], ok["display_height"]) == (0, 320, 240)
    assert (bad["rotation"], bad["display_width"], bad["display_height"]) == (None, None, None)
    assert (bad["status"], bad["reject_reason"], bad["codec"], bad["duplicate_uris"]) == (
        "rejected",
        "empty_file",
        None,
        ["file:///c"],
    )
    schema = pa.schema([RAW_VIDEOS.field(n) for n in names])
    table = pa.Table.from_pylist([ok, bad], schema=schema)
    assert table.num_rows == 2
    # every ProbeResult field is a raw_videos column (stages.ingest copies them by name)
    assert {f.name for f in dataclasses.fields(P.ProbeResult)} <= set(names)


def test_rejected_row_for_an_unread_object():
    from videolake.platform.video.probe import rejected_row, unread_video_id

    names = [f.name for f in RAW_VIDEOS if f.name not in ("partition_date", "ingested_at")]
    row = rejected_row("file:///l/a%FF.mp4", 0, "invalid_name", "the name is not valid UTF-8 (rename it)")
    assert list(row) == names
    assert row["video_id"] == "err-" + hashlib.sha256(b"file:///l/a%FF.mp4").hexdigest()
    assert unread_video_id(row["source_uri"]) == row["video_id"]
    assert (row["status"], row["reject_reason"], row["reject_detail"], row["codec"], row["size_bytes"]) == (
        "rejected",
        "invalid_name",
        "the name is not valid UTF-8 (rename it)",
        None,
        0,
    )
