"""Time comes from timestamps: probe, split, scoring and shard encoding agree on what a clip is (its frames as they
decode, their presentation times), on files whose headers say otherwise.

Each file is cut by the split stage's own ``split_one`` (luma detection, as in production) and checked against a full
PyAV decode of it: the frame count, each clip's start and duration (the frames' sorted timestamps; the last frame
lasts to the end of its packet, empty AVI repeat chunks included), the bound, and that every clip decodes as the
shard encoder reads it and encodes to exactly its frames, lasting as long as it did in the source.

The synthetic files (made here with ffmpeg) and what their headers claim:

- ``rep.avi``: MJPEG, every 5th frame of a 10 fps source kept with its timestamp: the AVI muxer fills the gaps with
  empty "repeat the previous frame" chunks (76 index entries at 10 fps, 16 frames 0.5 s apart).
- ``vfr.mp4`` / ``vfr.mkv``: H.264 with B-frames, 30 frames at 30 fps, 30 at 10 fps, then 2 frames 0.5 s apart.
- ``lies.avi``: an AVI whose header (avih total frames, strh length) claims 20 frames (2 s); 60 frames (6 s) decode.
- ``edit.mp4``: a stream copy cut at 0.55 s, inside a GOP: its edit list drops the packets before the cut.
- ``bf.avi``: MPEG-4 Part 2 (XVID) with B-frames in an AVI.
- ``opengop.mp4``: H.264 with open GOPs: after each keyframe (every 24 frames) come B-frames shown before it.
- ``still.mp4``: 2 s at 10 fps, one frame held for 25 s, 2 s at 10 fps: the held frame is a clip over any bound.
- ``sizes.ts``: an MPEG-TS whose frame size changes from 320x240 to 352x288 at frame 50 in one continuous scene:
  probe and scene detection read it, the shard encoder takes no size change within a clip.

And the real ones of the corpus (Debian's opencv-doc): ``tree.avi`` (Cinepak, 444 index entries at 15 fps, 68 frames
over 29.6 s: one 29.6 s clip under a 20 s bound while the split used the header's rate) and ``Megamind.avi``
(MPEG-4 Part 2 with packed B-frames: the decoder hands its frames out with each other's guessed timestamps, and
every clip failed shard encoding with "frames 3..3 did not decode").
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from videolake.platform.objectstore import LocalObjectStore
from videolake.platform.shards.config import ShardConfig
from videolake.platform.shards.encode import encode_clips
from videolake.platform.stages.split import SplitConfig, split_one
from videolake.platform.video.clips import clip_rate, decode_error, frame_index, iter_frames, iter_wanted_frames
from videolake.platform.video.probe import probe_video


def _ff(ffmpeg: str, *args: str) -> None:
    subprocess.run([ffmpeg, "-nostdin", "-v", "error", "-y", *args], check=True)


def _lie_about_length(path: Path, frames: int) -> None:
    """Patch the AVI main header's total frames and the video stream header's length to ``frames``."""
    data = bytearray(path.read_bytes())
    avih, strh = data.find(b"avih"), data.find(b"strh")
    assert data[strh + 8 : strh + 12] == b"vids"
    struct.pack_into("<I", data, avih + 8 + 16, frames)
    struct.pack_into("<I", data, strh + 8 + 32, frames)
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def synth(ffmpeg, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clip-time")
    src = ["-f", "lavfi", "-i"]
    _ff(ffmpeg, *src, "testsrc2=size=320x240:rate=10", "-t", "8", "-vf", "select='not(mod(n\\,5))'",
        "-fps_mode", "passthrough", "-c:v", "mjpeg", "-q:v", "5", str(d / "rep.avi"))  # fmt: skip
    for ext in ("mp4", "mkv"):
        _ff(ffmpeg, *src, "testsrc2=size=320x240:rate=30", "-t", "5",
            "-vf", "setpts='if(lt(N,30),N/30,if(lt(N,60),1+(N-30)/10,4+(N-60)/2))/TB'",
            "-fps_mode", "passthrough", "-c:v", "libx264", "-bf", "2", "-g", "30", str(d / f"vfr.{ext}"))  # fmt: skip
    _ff(ffmpeg, *src, "testsrc2=size=320x240:rate=10", "-t", "6", "-c:v", "mjpeg", "-q:v", "5", str(d / "lies.avi"))
    _lie_about_length(d / "lies.avi", 20)
    _ff(ffmpeg, *src, "testsrc2=size=320x240:rate=25", "-t", "3", "-c:v", "libx264", "-g", "10", "-bf", "2",
        str(d / "cfr.mp4"))  # fmt: skip
    _ff(ffmpeg, "-ss", "0.55", "-i", str(d / "cfr.mp4"), "-c", "copy", str(d / "edit.mp4"))
    _ff(ffmpeg, *src, "testsrc2=size=320x240:rate=25", "-t", "4", "-c:v", "mpeg4", "-bf", "2", "-vtag", "XVID",
        "-q:v", "4", str(d / "bf.avi"))  # fmt: skip
    _ff(ffmpeg, *src, "testsrc2=size=320x240:rate=25", "-t", "4", "-c:v", "libx264", "-bf", "3", "-b_strategy", "0",
        "-x264-params", "open-gop=1:keyint=24:min-keyint=24:scenecut=0:b-adapt=0", str(d / "opengop.mp4"))  # fmt: skip
    _ff(ffmpeg, "-f", "lavfi", "-t", "4.1", "-i", "testsrc2=size=320x240:rate=10",
        "-vf", "setpts='if(lt(N,20),N,if(eq(N,20),20,270+N-21))'", "-fps_mode", "passthrough",
        "-c:v", "libx264", "-bf", "0", "-g", "10", "-video_track_timescale", "1000", str(d / "still.mp4"))  # fmt: skip
    _ff(ffmpeg, *src, "testsrc2=size=320x240:rate=25", "-t", "2", "-c:v", "libx264", "-g", "25", str(d / "a.ts"))
    _ff(ffmpeg, *src, "testsrc2=size=352x288:rate=25", "-ss", "2", "-t", "2", "-c:v", "libx264", "-g", "25",
        "-output_ts_offset", "2", str(d / "b.ts"))  # fmt: skip
    (d / "sizes.ts").write_bytes((d / "a.ts").read_bytes() + (d / "b.ts").read_bytes())
    return {p.name: p for p in d.iterdir()}


@pytest.fixture(scope="module")
def real(real_footage) -> dict[str, Path]:
    return real_footage(["tree.avi", "Megamind.avi"])


def truth(path: Path) -> tuple[int, np.ndarray]:
    """A full decode: the number of frames and when each starts (sorted timestamps, seconds) with, last, the end
    of the stream's content (the furthest packet end, empty repeat chunks included; edit-list-dropped packets not)."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        tb = s.time_base
        end = max((p.pts + (p.duration or 0)) * tb for p in c.demux(s) if p.pts is not None and not p.is_discard)
    with av.open(str(path)) as c:
        times = sorted(f.time for f in c.decode(video=0))
    return len(times), np.array([*times, float(end)])


def cut(path: Path, root: Path, max_clip_s: float) -> tuple[list[dict], dict]:
    """The scene_clips rows ``split_one`` writes for ``path`` landed in a local store, and its probe."""
    store = LocalObjectStore(str(root))
    key = f"landing/{path.name}"
    (root / "landing").mkdir(parents=True, exist_ok=True)
    shutil.copy(path, root / key)
    out = probe_video(str(root / key))
    assert out.ok, out.detail
    p = out.probe
    video = {
        "video_id": path.name,
        "source_uri": store.uri(key),
        "fps": p.fps,
        "num_frames": p.num_frames,
        "duration_s": p.duration_s,
    }
    return split_one(video, store=store, config=SplitConfig(max_clip_s=max_clip_s)), video


# name -> (max_clip_s, probe (num_frames, duration_s), clip ranges, clip durations)
EXPECTED = {
    "rep.avi": (2.0, (16, 7.6), [(0, 3), (3, 6), (6, 9), (9, 12), (12, 16)], [1.5, 1.5, 1.5, 1.5, 1.6]),
    "vfr.mp4": (2.0, (62, 4.533), [(0, 35), (35, 50), (50, 62)], [1.5, 1.5, 1.533]),
    "vfr.mkv": (2.0, (62, 4.533), [(0, 35), (35, 50), (50, 62)], [1.5, 1.5, 1.533]),
    "lies.avi": (2.0, (60, 6.0), [(0, 20), (20, 40), (40, 60)], [2.0, 2.0, 2.0]),
    "edit.mp4": (2.0, (61, 2.44), [(0, 30), (30, 61)], [1.2, 1.24]),
    "bf.avi": (2.0, (100, 4.0), [(0, 50), (50, 100)], [2.0, 2.0]),
    "opengop.mp4": (1.0, (100, 4.0), [(0, 25), (25, 50), (50, 75), (75, 100)], [1.0, 1.0, 1.0, 1.0]),
    "still.mp4": (20.0, (41, 29.0), [(0, 20), (20, 21), (21, 41)], [2.0, 25.0, 2.0]),
    "sizes.ts": (20.0, (100, 3.92), [(0, 100)], [3.92]),
    "tree.avi": (20.0, (68, 29.6), [(0, 34), (34, 68)], [14.667, 14.933]),
    "Megamind.avi": (20.0, (270, 11.261), [(0, 98), (98, 154), (154, 200), (200, 270)], [4.087, 2.336, 1.919, 2.92]),
}
UNDECODABLE = {"sizes.ts": "the frame size changes within the clip at frame 50: 352x288, was 320x240"}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_clips_are_measured_from_a_full_decode_and_every_clip_encodes(name, synth, real, tmp_path):
    path = {**synth, **real}[name]
    max_clip_s, (frames, seconds), ranges, durations = EXPECTED[name]
    rows, video = cut(path, tmp_path, max_clip_s)
    n, t = truth(path)
    # the probe counts what decodes and measures the time the frames span, whatever the header says
    assert (video["num_frames"], round(video["duration_s"], 3)) == (n, seconds) == (frames, seconds)
    assert video["duration_s"] == pytest.approx(t[-1] - t[0], abs=1e-6)
    assert [(r["start_frame"], r["end_frame"]) for r in rows] == ranges
    assert [round(r["duration_s"], 3) for r in rows] == durations
    for r in rows:
        s, e = r["start_frame"], r["end_frame"]
        assert r["start_s"] == pytest.approx(t[s], abs=1e-6)
        assert r["duration_s"] == pytest.approx(t[e] - t[s], abs=1e-6)
        assert r["duration_s"] <= max_clip_s + 1e-9 or e - s == 1  # only a single held frame is ever longer
    # every clip reads as the shard encoder reads it, and encodes to its frames at its measured length
    assert {
        (r["start_frame"], r["end_frame"]): decode_error(str(path), r["start_frame"], r["end_frame"]) for r in rows
    } == {(s, e): UNDECODABLE.get(name) for s, e in ranges}
    if name in UNDECODABLE:
        return
    rates = [clip_rate(r["start_frame"], r["end_frame"], r["duration_s"], video["fps"]) for r in rows]
    encoded = encode_clips(str(path), ranges, rates, ShardConfig())
    for (s, e), clip, r in zip(ranges, encoded, rows):
        assert not isinstance(clip, Exception), clip
        assert clip.num_frames == e - s
        mp4 = tmp_path / f"{s}.mp4"
        mp4.write_bytes(clip.data)
        assert _mp4_frames_and_seconds(mp4) == (e - s, pytest.approx(r["duration_s"], rel=1e-3))


def _mp4_frames_and_seconds(path: Path) -> tuple[int, float]:
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        frames = list(c.decode(s))
        last = frames[-1]
        rate = Fraction(s.average_rate)
        return len(frames), float(last.pts * s.time_base) + 1 / float(rate)


def test_the_old_header_rate_split_made_tree_one_clip_over_the_bound(real):
    # What the split did before: frames times the detector's header rate (15 fps) made 68 frames one "4.5 s" clip
    # that spans 29.6 s of the file; measured by timestamps it is two clips under 20 s.
    from videolake.platform.scenes.segments import cuts_to_ranges, frame_times

    n, t = truth(real["tree.avi"])
    assert cuts_to_ranges([], n, 14.999925, 20.0) == [(0, 68)]
    assert round(float(t[68] - t[0]), 1) == 29.6
    timed = cuts_to_ranges([], n, 14.999925, 20.0, times=frame_times(t[:-1], n, float(t[-1]), 2.3))
    assert timed == [(0, 34), (34, 68)]


@pytest.mark.slow  # ~7 s: every frame of Megamind.avi compared
def test_packed_b_frames_are_read_in_the_order_they_decode(real):
    """Megamind.avi's decoder output order is the right one (mean luma change 2.9 a frame against 3.8 in the order
    of its guessed timestamps); every reader numbers frames that way."""
    import av

    path = str(real["Megamind.avi"])
    with av.open(path) as c:
        out = [(f.pts, f.to_ndarray(format="gray").astype(np.float32)) for f in c.decode(video=0)]
    pts = [p for p, _ in out]
    assert pts[:8] == [1, 2, 3, 5, 4, 6, 8, 7]  # the decoder's guessed timestamps, out of order
    frames = np.stack([f for _, f in out])
    in_pts_order = frames[np.argsort(pts, kind="stable")]
    assert round(float(np.abs(np.diff(frames, axis=0)).mean()), 1) == 2.9
    assert round(float(np.abs(np.diff(in_pts_order, axis=0)).mean()), 1) == 3.8
    assert frame_index(path).sequential is True
    got = [(i, f.to_ndarray(format="gray")) for i, f in iter_frames(path, 98, 154, 1)]
    assert [i for i, _ in got] == list(range(98, 154))
    assert all(np.array_equal(a, frames[i]) for i, a in got)
    wanted = [0, 3, 4, 100, 269]
    sampled = {i: f.to_ndarray(format="gray") for i, f in iter_wanted_frames(path, wanted, fast=False)}
    assert sorted(sampled) == wanted and all(np.array_equal(sampled[i], frames[i]) for i in wanted)


def test_a_read_that_meets_frames_out_of_timestamp_order_goes_on_by_counting(real):
    """Were the AVI rule missing, the seek path meets Megamind's swapped frames, goes on by counting from there
    and remembers the video: the frames read are the decoder's, in its order."""
    import dataclasses

    import av

    from videolake.platform.video import clips

    path = str(real["Megamind.avi"])
    with av.open(path) as c:
        frames = [f.to_ndarray(format="gray") for f in c.decode(video=0)]
    index = clips.frame_index(path)
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    clips._INDEX_CACHE[key] = dataclasses.replace(index, sequential=False)
    got = [(i, f.to_ndarray(format="gray")) for i, f in iter_frames(path, 0, 98, 1)]
    assert [i for i, _ in got] == list(range(98))
    assert all(np.array_equal(a, frames[i]) for i, a in got)
    assert clips.frame_index(path).sequential is True


def test_frame_statistics_keep_the_frames_times_in_decode_order(real):
    from videolake.platform.video.frames import compute_frame_stats

    stats = compute_frame_stats(str(real["Megamind.avi"]))
    assert stats.num_frames == 270
    assert bool(np.all(np.diff(stats.pts_s) > 0))
    assert round(float(stats.pts_s[0]), 4) == 0.0417 and round(float(stats.pts_s[-1]), 4) == 11.2613


def test_score_sets_aside_the_undecodable_and_the_too_long_clip(synth, tmp_path):
    """The score stage's rows for sizes.ts and still.mp4: the clip that would not encode is rejected undecodable
    with the encoder's error, the held frame too_long with its measured duration; the other clips pass."""
    from videolake.platform.filters.quality import QualityConfig
    from videolake.platform.stages.score import score_one

    lenient = QualityConfig(
        min_clip_s=0.1,
        max_black_ratio=1.0,
        min_brightness=0.0,
        max_frozen_ratio=1.0,
        min_motion=0.0,
        max_motion=255.0,
        min_sharpness=0.0,
        max_text_area=1.0,
        dup_max_distance=-1,
    )
    store = LocalObjectStore(str(tmp_path))
    verdicts = {}
    for name in ("sizes.ts", "still.mp4"):
        rows, video = cut(synth[name], tmp_path, 20.0)
        video.update(width=320, height=240)
        scored = score_one((video, rows), store=store, quality_config=lenient)
        for r in scored:
            verdicts[(name, *r["clip_id"].rsplit("_", 2)[1:])] = (
                r["passed"],
                r["reject_reason"],
                r["reject_detail"],
                r["source_uri"],
            )
    sizes, still = store.uri("landing/sizes.ts"), store.uri("landing/still.mp4")
    too_long = (
        "duration_s 25.000 > max_clip_s 20 (measured from the frames' timestamps; a frame or scene the split could "
        "not cut shorter)"
    )
    assert verdicts == {
        ("sizes.ts", "00000000", "00000100"): (False, "undecodable", UNDECODABLE["sizes.ts"], sizes),
        ("still.mp4", "00000000", "00000020"): (True, None, None, still),
        ("still.mp4", "00000020", "00000021"): (False, "too_few_frames;too_long", too_long, still),
        ("still.mp4", "00000021", "00000041"): (True, None, None, still),
    }


def test_decode_errors_checks_nearby_clips_in_one_pass_and_keeps_each_clips_error_its_own(synth):
    from videolake.platform.video.clips import decode_errors

    path = str(synth["sizes.ts"])
    ranges = [(60, 100), (0, 40), (40, 60)]
    change = "the frame size changes within the clip at frame 50: 352x288, was 320x240"
    assert decode_errors(path, ranges) == [None, None, change]
    assert [decode_error(path, s, e) for s, e in ranges] == [None, None, change]
    # a range past the end fails alone; the others of its run are checked again one by one
    assert decode_errors(path, [(0, 40), (40, 101)]) == [
        None,
        f"frame range [40, 101) is outside the video's 100 frames: {path}",
    ]


def test_captions_describe_each_clip_at_its_own_measured_rate(real, tmp_path):
    """clip_captions' input rows carry each clip's rate (its frames over its measured duration), not the video's:
    tree.avi's two clips are 34 frames over 14.667 s and 14.933 s, the video 68 frames over 29.6 s."""
    import datetime as dt

    from videolake.platform.captioning.stage import clips_to_caption
    from videolake.platform.lake.schemas import FILTERED_CLIPS, RAW_VIDEOS, SCENE_CLIPS
    from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table
    from videolake.platform.video.probe import raw_video_row

    day = dt.date(2026, 4, 2)
    rng = PartitionRange.of([day.isoformat()])
    rows, video = cut(real["tree.avi"], tmp_path / "store", 20.0)
    lake = Lake(str(tmp_path / "lake"))
    raw = {
        **raw_video_row(video["video_id"], video["source_uri"], 1, probe_video(str(real["tree.avi"]))),
        "partition_date": day,
        "ingested_at": dt.datetime.now(dt.UTC),
    }
    lake.write_partitions("raw_videos", rows_to_table([raw], RAW_VIDEOS), rng)
    lake.write_partitions("scene_clips", rows_to_table([{**r, "partition_date": day} for r in rows], SCENE_CLIPS), rng)
    scored = [
        {
            "clip_id": r["clip_id"],
            "video_id": r["video_id"],
            "duration_s": r["duration_s"],
            "passed": True,
            "partition_date": day,
        }
        for r in rows
    ]
    lake.write_partitions("filtered_clips", rows_to_table(scored, FILTERED_CLIPS), rng)
    inputs = clips_to_caption(lake, rng).to_pylist()
    assert [(r["start_frame"], r["end_frame"], round(r["fps"], 3)) for r in inputs] == [(0, 34, 2.318), (34, 68, 2.277)]
    assert round(video["fps"], 3) == 2.297


def test_open_gop_reads_are_frame_exact_from_the_frames_shown_before_a_keyframe(synth):
    """Frames 21..23 of opengop.mp4 are B-frames that follow keyframe 24 in the file and are shown before it: a
    clip starting at any of them reads exactly the frames a full decode numbers so."""
    import av

    path = str(synth["opengop.mp4"])
    with av.open(path) as c:
        s = c.streams.video[0]
        packets = [(p.pts, p.is_keyframe) for p in c.demux(s) if p.size]
    key = [i for i, (_, k) in enumerate(packets) if k][1]
    assert [pts < packets[key][0] for pts, _ in packets[key + 1 : key + 4]] == [True, True, True]  # open GOP
    with av.open(path) as c:
        frames = [f.to_ndarray(format="gray") for f in c.decode(video=0)]
    for start, end in ((21, 24), (22, 26), (24, 30), (47, 49)):
        got = [(i, f.to_ndarray(format="gray")) for i, f in iter_frames(path, start, end, 1)]
        assert [i for i, _ in got] == list(range(start, end))
        assert all(np.array_equal(a, frames[i]) for i, a in got)
