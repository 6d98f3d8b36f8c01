"""The pieces of a training shard: buckets, deterministic tar members, the upright frame-exact mp4 encoder, and the
shard plan (per bucket, bounded by samples and bytes, deterministic names)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from videolake.platform.shards.buckets import bucket_of
from videolake.platform.shards.config import ShardConfig
from videolake.platform.shards.encode import encode_clip, target_size
from videolake.platform.shards.tarfile_det import END_OF_ARCHIVE, read_samples, sample_fragment, write_shard
from videolake.platform.stages.shard import plan_shards

CFG = ShardConfig()


@pytest.mark.parametrize(
    "size,frames,bucket",
    [
        ((1280, 720), 63, "resolution_720/aspect_16_9/frames_0_63"),
        ((1920, 1080), 64, "resolution_1080/aspect_16_9/frames_64_127"),
        ((852, 480), 200, "resolution_480/aspect_16_9/frames_128_255"),
        ((352, 288), 256, "resolution_240/aspect_4_3/frames_256_plus"),
        ((720, 1280), 10, "resolution_720/aspect_9_16/frames_0_63"),
        ((480, 480), 100, "resolution_480/aspect_1_1/frames_64_127"),
        ((2560, 1080), 300, "resolution_1080/aspect_21_9/frames_256_plus"),
        ((100, 80), 1, "resolution_0/aspect_4_3/frames_0_63"),
    ],
)
def test_bucket_names(size, frames, bucket):
    assert bucket_of(*size, frames, CFG) == bucket


def test_target_size_never_upscales_and_keeps_even_sides():
    assert target_size(1920, 1080, 720) == (1280, 720)
    assert target_size(1080, 1920, 720) == (720, 1280)
    assert target_size(320, 240, 720) == (320, 240)
    assert target_size(321, 241, 720) == (320, 240)
    assert target_size(640, 360, 120) == (212, 120)


def test_tar_members_are_deterministic_and_read_by_tarfile():
    files = {"txt": b"a red car", "mp4": b"\x00\x01" * 300, "json": b'{"caption": "a red car"}'}
    frag = sample_fragment("vid_00000000_00000010", files)
    assert frag == sample_fragment("vid_00000000_00000010", dict(reversed(list(files.items()))))
    assert len(frag) % 512 == 0
    buf = io.BytesIO()
    n = write_shard([frag, sample_fragment("vid_00000010_00000020", {"txt": b"b"})], buf)
    assert n == len(buf.getvalue()) and buf.getvalue().endswith(END_OF_ARCHIVE)
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == [
        "vid_00000000_00000010.json",
        "vid_00000000_00000010.mp4",
        "vid_00000000_00000010.txt",
        "vid_00000010_00000020.txt",
    ]
    assert {(i.mtime, i.uid, i.gid, i.uname, i.mode) for i in infos} == {(0, 0, 0, "", 0o644)}
    samples = read_samples(buf.getvalue())
    assert [k for k, _ in samples] == ["vid_00000000_00000010", "vid_00000010_00000020"]
    assert samples[0][1] == files
    with pytest.raises(ValueError):
        sample_fragment("a.b", files)


def _rows(bucket: str, sizes: list[int]) -> list[dict]:
    return [
        {
            "clip_id": f"v_{i:08d}_{i + 1:08d}",
            "bucket": bucket,
            "sample_bytes": s,
            "sample_sha256": hashlib.sha256(str(i).encode()).hexdigest(),
        }
        for i, s in enumerate(sizes)
    ]


def test_shard_plan_per_bucket_bounded_and_deterministic():
    cfg = ShardConfig(max_shard_samples=3, max_shard_bytes=10_000)
    rows = _rows("resolution_240/aspect_4_3/frames_0_63", [1000] * 7) + _rows(
        "resolution_360/aspect_16_9/frames_0_63", [6000, 6000, 20_000]
    )
    plan = plan_shards(list(reversed(rows)), cfg, "2026-03-01")
    assert [(s["bucket"].split("/")[0], len(s["clip_ids"])) for s in plan] == [
        ("resolution_240", 3),
        ("resolution_240", 3),
        ("resolution_240", 1),
        ("resolution_360", 1),
        ("resolution_360", 1),
        ("resolution_360", 1),
    ]  # a sample over the cap: alone
    assert plan[0]["clip_ids"] == sorted(plan[0]["clip_ids"])
    assert plan[0]["key"].startswith("shards/2026-03-01/resolution_240/aspect_4_3/frames_0_63/shard-2026-03-01-00000-")
    assert plan == plan_shards(rows, cfg, "2026-03-01")
    changed = [dict(r) for r in rows]
    changed[0]["sample_sha256"] = "0" * 64  # another sample: the first shard gets another name, the rest keep theirs
    other = plan_shards(changed, cfg, "2026-03-01")
    assert other[0]["key"] != plan[0]["key"] and [s["key"] for s in other[1:]] == [s["key"] for s in plan[1:]]


# ------------------------------------------------------------------------------------------------ encoding

W, H, FRAMES = 320, 240, 30


def _pattern_video(path: Path, degrees: int | None = None) -> None:
    """Blue frames with a red box top-left; frame i carries i as the grey level of a bottom strip (so a frame's
    number can be read back from its pixels); with ``degrees`` a display matrix as phones write it."""
    with av.open(str(path), mode="w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=25, options={"preset": "ultrafast", "g": "8", "qp": "0"})
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        if degrees is not None:
            stream.set_display_rotation(degrees)
        for i in range(FRAMES):
            pic = np.zeros((H, W, 3), np.uint8)
            pic[:, :, 2] = 255
            pic[:48, :64] = (255, 0, 0)
            pic[H - 40 :, :] = i * 8
            frame = av.VideoFrame.from_ndarray(pic, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, 25)
            out.mux(stream.encode(frame.reformat(format="yuv420p")))
        out.mux(stream.encode(None))


def _decode(data: bytes, tmp: Path) -> list[np.ndarray]:
    p = tmp / "decoded.mp4"
    p.write_bytes(data)
    with av.open(str(p)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])]


def _ffprobe(ffmpeg: str, data: bytes, tmp: Path) -> dict:
    p = tmp / "probed.mp4"
    p.write_bytes(data)
    out = subprocess.run(
        [
            ffmpeg.replace("ffmpeg", "ffprobe"),
            "-v",
            "error",
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=codec_name,pix_fmt,width,height,nb_read_frames,r_frame_rate:stream_side_data=rotation",
            "-of",
            "json",
            str(p),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["streams"][0]


def test_encode_is_frame_exact_faststart_and_byte_reproducible(ffmpeg, tmp_path):
    src = tmp_path / "src.mp4"
    _pattern_video(src)
    a = encode_clip(str(src), 9, 21, 25.0, CFG)
    assert (a.width, a.height, a.num_frames) == (320, 240, 12)
    info = _ffprobe(ffmpeg, a.data, tmp_path)
    assert (info["codec_name"], info["pix_fmt"], int(info["nb_read_frames"]), info["r_frame_rate"]) == (
        "h264",
        "yuv420p",
        12,
        "25/1",
    )
    assert a.data.index(b"moov") < a.data.index(b"mdat")  # faststart
    levels = [int(round(f[H - 20, W // 2].mean() / 8)) for f in _decode(a.data, tmp_path)]
    assert levels == list(range(9, 21))  # exactly source frames 9..20
    assert encode_clip(str(src), 9, 21, 25.0, CFG).data == a.data


def test_phone_footage_comes_out_upright_and_scaled(ffmpeg, tmp_path):
    src = tmp_path / "phone.mp4"
    _pattern_video(src, degrees=90)  # 90 degrees counter-clockwise: a portrait picture in landscape coding
    out = encode_clip(str(src), 0, 10, 25.0, ShardConfig(max_short_side=120))
    assert (out.width, out.height, out.num_frames) == (120, 160, 10)
    info = _ffprobe(ffmpeg, out.data, tmp_path)
    assert (info["width"], info["height"]) == (120, 160) and not info.get("side_data_list")
    first = _decode(out.data, tmp_path)[0]
    # rotated 90 ccw, the coded top-left red box lands bottom-left
    assert first[150, 5, 0] > 200 and first[150, 5, 2] < 60
    assert first[5, 5, 2] > 200
    assert bucket_of(out.width, out.height, out.num_frames, CFG) == "resolution_0/aspect_3_4/frames_0_63"


def test_a_range_outside_the_video_is_a_clear_error(tmp_path):
    src = tmp_path / "src.mp4"
    _pattern_video(src)
    with pytest.raises(ValueError, match="outside"):
        encode_clip(str(src), 20, 40, 25.0, CFG)


def test_clips_of_one_run_match_clips_encoded_alone_and_a_failure_stays_its_own(ffmpeg, tmp_path, monkeypatch):
    """encode_clips decodes a run of nearby clips once and lets each clip's encoder flush while the next decodes:
    the bytes are those of encoding each clip alone; a decode error inside the third clip fails that clip only,
    also the one still flushing when it struck is delivered."""
    import videolake.platform.shards.encode as enc

    src = tmp_path / "src.mp4"
    _pattern_video(src)
    ranges = [(0, 8), (8, 16), (16, 24)]
    alone = [encode_clip(str(src), s, e, 25.0, CFG).data for s, e in ranges]
    assert len(set(alone)) == 3
    assert [r.data for r in enc.encode_clips(str(src), ranges, 25.0, CFG)] == alone

    real = enc.iter_frames

    def breaks_at_frame_19(path, start, end, *args):
        for n, frame in real(path, start, end, *args):
            if n == 19:
                raise ValueError("frame 19 does not decode")
            yield n, frame

    monkeypatch.setattr(enc, "iter_frames", breaks_at_frame_19)
    out = enc.encode_clips(str(src), ranges, 25.0, CFG)
    assert [o.data for o in out[:2]] == alone[:2]
    assert isinstance(out[2], ValueError) and "frame 19" in str(out[2])
