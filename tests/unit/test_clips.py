"""Clip frames and clip files are frame-exact: compared pixel by pixel with a full sequential decode of the source."""

from __future__ import annotations

import subprocess
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from videolake.platform.objectstore import LocalObjectStore
from videolake.platform.video import clips as C
from videolake.platform.video.clips import (
    ClipConfig,
    cut_clip,
    iter_frames,
    read_clip_frames,
    sample_indices,
    store_clip,
)

H264 = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]


def _ff(ffmpeg: str, *args: str) -> None:
    subprocess.run([ffmpeg, "-nostdin", "-v", "error", "-y", *args], check=True)


@pytest.fixture(scope="module")
def videos(ffmpeg, tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("clips")
    out = {
        # keyframes every 10 frames and B-frames: seeks land mid-video, decode order != presentation order
        "cfr30": d / "cfr30.mp4",
        "ntsc": d / "ntsc.mp4",
        "vfr": d / "vfr.mkv",
    }
    _ff(
        ffmpeg,
        "-f",
        "lavfi",
        "-t",
        "2",
        "-i",
        "testsrc2=size=320x240:rate=30",
        *H264,
        "-g",
        "10",
        "-bf",
        "2",
        str(out["cfr30"]),
    )
    _ff(
        ffmpeg,
        "-f",
        "lavfi",
        "-t",
        "2.002",
        "-i",
        "testsrc2=size=320x240:rate=30000/1001",
        *H264,
        "-g",
        "7",
        "-bf",
        "2",
        str(out["ntsc"]),
    )
    # 30 frames at 30 fps, then 15 at 10 fps (45 frames, 2.5 s)
    _ff(
        ffmpeg,
        "-f",
        "lavfi",
        "-t",
        "1",
        "-i",
        "testsrc2=size=320x240:rate=30",
        "-f",
        "lavfi",
        "-t",
        "1.5",
        "-i",
        "mandelbrot=size=320x240:rate=10",
        "-filter_complex",
        "[0:v]settb=1/90000[a];[1:v]settb=1/90000[b];[a][b]concat=n=2:v=1[v]",
        "-map",
        "[v]",
        "-fps_mode",
        "vfr",
        *H264,
        "-g",
        "5",
        str(out["vfr"]),
    )
    return {k: str(v) for k, v in out.items()}


def _all_frames(path: str, fmt: str = "rgb24") -> list[np.ndarray]:
    with av.open(path) as c:
        return [f.to_ndarray(format=fmt) for f in c.decode(c.streams.video[0])]


def test_sample_indices():
    assert sample_indices(10, 40, 3) == [15, 25, 35]
    assert sample_indices(0, 3, 8) == [0, 1, 2]
    assert sample_indices(100, 101, 4) == [100]
    assert sample_indices(5, 5, 4) == []


@pytest.mark.parametrize("name, n", [("cfr30", 60), ("ntsc", 60), ("vfr", 45)])
def test_read_clip_frames_equal_the_sources_frames(videos, name, n):
    ref = _all_frames(videos[name])
    assert len(ref) == n
    for start, end, k in [(0, 8, 4), (13, 47, 5), (23, 24, 1), (n - 9, n, 3), (31, 44, 13)]:
        got = read_clip_frames(videos[name], start, end, k, max_side=None)
        want = sample_indices(start, end, k)
        assert len(got) == len(want)
        for i, frame in zip(want, got):
            assert np.array_equal(frame, ref[i]), f"{name}: frame {i} of [{start}, {end})"


def test_iter_frames_numbers_every_frame_of_a_range(videos):
    ref = _all_frames(videos["vfr"], "gray")
    got = [(i, f.to_ndarray(format="gray")) for i, f in iter_frames(videos["vfr"], 27, 38)]  # across the rate change
    assert [i for i, _ in got] == list(range(27, 38))
    assert all(np.array_equal(a, ref[i]) for i, a in got)


def test_read_clip_frames_resizes_longer_side(videos):
    (small,) = read_clip_frames(videos["cfr30"], 0, 30, 1, max_side=160)
    assert small.shape == (120, 160, 3) and small.dtype == np.uint8
    (same,) = read_clip_frames(videos["cfr30"], 0, 30, 1, max_side=1000)  # never enlarged
    assert same.shape == (240, 320, 3)


def test_read_clip_frames_rejects_bad_ranges(videos, tmp_path):
    with pytest.raises(ValueError, match="outside"):
        read_clip_frames(videos["cfr30"], 50, 70, 4)
    with pytest.raises(ValueError, match="empty"):
        read_clip_frames(videos["cfr30"], 10, 10, 4)
    data = bytearray(Path(videos["cfr30"]).read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 6000):
        data[i] = (i * 131) % 256
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="decode"):
        read_clip_frames(str(broken), 0, 60, 60)
    # the probe rejects the same file at ingest, so such a range never reaches the captioner
    from videolake.platform.video.probe import CORRUPT, probe_video

    assert probe_video(str(broken)).reject_reason == CORRUPT


def _luma_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


@pytest.mark.parametrize("name, fps", [("cfr30", 30.0), ("ntsc", 30000 / 1001)])
def test_cut_clip_is_frame_exact(videos, tmp_path, name, fps):
    ref = _all_frames(videos[name], "gray")
    out = cut_clip(videos[name], 17, 43, fps, str(tmp_path / "clip.mp4"))
    with av.open(out) as c:
        assert c.streams.video[0].average_rate == Fraction(30000, 1001) if name == "ntsc" else Fraction(30)
    got = _all_frames(out, "gray")
    assert len(got) == 43 - 17
    # first and last frames are the source's frames 17 and 42 (re-encoded: close, and closer than the neighbours)
    for k, src in [(0, 17), (len(got) - 1, 42)]:
        d = _luma_distance(got[k], ref[src])
        assert d < 2.0
        assert d < _luma_distance(got[k], ref[src - 1]) and d < _luma_distance(got[k], ref[src + 1])


def test_store_clip_is_content_addressed_and_idempotent(videos, tmp_path, monkeypatch):
    store = LocalObjectStore(str(tmp_path / "store"))
    uri = store_clip(store, videos["cfr30"], "vid1", 10, 40, 30.0, prefix="clips")
    assert [o.uri for o in store.list("clips/")] == [uri]

    def must_not_encode(*args, **kwargs):
        raise AssertionError("a stored clip was encoded again")

    monkeypatch.setattr(C, "cut_clip", must_not_encode)
    assert store_clip(store, videos["cfr30"], "vid1", 10, 40, 30.0, prefix="clips") == uri
    assert len(store.list("clips/")) == 1
    monkeypatch.undo()
    # other parameters, other key
    other = store_clip(store, videos["cfr30"], "vid1", 10, 40, 30.0, prefix="clips", config=ClipConfig(crf=30))
    assert other != uri and len(store.list("clips/")) == 2
    with store.open_local(store.key_from_uri(uri)) as path:
        assert len(_all_frames(path, "gray")) == 30


@pytest.mark.parametrize("name, n", [("cfr30", 60), ("ntsc", 60), ("vfr", 45)])
def test_iter_wanted_frames_equal_the_sources_frames(videos, name, n):
    """One pass that skips unwanted non-reference frames: each wanted frame is the source's frame of that number,
    pixel for pixel (fast=False: with the loop filter, as a plain decode)."""
    ref = _all_frames(videos[name])
    wanted = [n - 1, 3, 4, 17, 18, 29, 30, 31, 44, 3]
    got = [(i, f.to_ndarray(format="rgb24")) for i, f in C.iter_wanted_frames(videos[name], wanted, fast=False)]
    assert [i for i, _ in got] == sorted(set(wanted))
    for i, frame in got:
        assert np.array_equal(frame, ref[i]), f"{name}: frame {i}"
    fast = dict((i, f.to_ndarray(format="gray")) for i, f in C.iter_wanted_frames(videos[name], wanted))
    assert sorted(fast) == sorted(set(wanted))  # without the loop filter: the same frames, nearly the same pixels
    gray = _all_frames(videos[name], "gray")
    assert max(np.abs(fast[i].astype(int) - gray[i]).mean() for i in fast) < 2.0


def test_iter_wanted_frames_rejects_frames_beyond_the_video(videos):
    with pytest.raises(ValueError, match="outside the video's 60 frames"):
        list(C.iter_wanted_frames(videos["cfr30"], [5, 60]))


def test_video_pixels_decode_every_clip_in_one_pass(videos):
    """The clips' sampled frames come from one pass served in order; a clip asked again, behind the pass, starts a
    new pass and gets the same frames."""
    from videolake.platform.video.clip_pixels import VideoPixels

    path = videos["ntsc"]
    clips = [{"start_frame": s, "end_frame": e} for s, e in [(0, 13), (13, 40), (40, 60)]]
    pixels = VideoPixels(path, clips)
    got = [pixels(c, 4, 160 * 120) for c in clips]
    assert pixels.passes_started == 1
    assert [g.shape for g in got] == [(4, 120, 160, 3)] * 3
    ref = _all_frames(path, "gray")
    for clip, frames in zip(clips, got):  # the sampled frames, scaled: their mean luma follows the source's
        for k, i in enumerate(sample_indices(clip["start_frame"], clip["end_frame"], 4)):
            luma = frames[k].astype(float) @ [0.299, 0.587, 0.114]
            assert abs(luma.mean() - ref[i].mean()) < 6.0, (clip, i)
    again = pixels(clips[0], 4, 160 * 120)
    assert pixels.passes_started == 2 and np.array_equal(again, got[0])
    assert pixels(clips[1], 2, 80 * 60).shape == (2, 60, 80, 3) and pixels.passes_started == 3


def test_the_detection_pass_keeps_the_frames_a_second_pass_would_decode(videos):
    """The luma detection's pass keeps each clip's sampled frames (FrameKeeper); served from them, no pass decodes
    the video, and they are the very pixels a decoding pass gives (same decode settings, same scaler)."""
    from videolake.platform.scenes import get_detector
    from videolake.platform.video.clip_pixels import FrameKeeper, VideoPixels
    from videolake.platform.video.frames import FrameStats

    path = videos["cfr30"]
    keeper = FrameKeeper(max_pixels=128 * 72)
    result = get_detector("luma").detect(path, tap=keeper)
    assert len(keeper.frames) == result.num_frames == 60
    ranges = [(0, 13), (13, 40), (40, 60)]
    kept = keeper.sampled(ranges, count=4)
    assert kept.index.tolist() == sorted(i for s, e in ranges for i in sample_indices(s, e, 4))
    stored = FrameStats.from_npz_bytes(FrameStats(**{**vars(result.stats), "thumbnails": kept}).to_npz_bytes())
    assert np.array_equal(stored.thumbnails.images, kept.images) and stored.thumbnails.max_pixels == 128 * 72
    clips = [{"start_frame": s, "end_frame": e} for s, e in ranges]
    served = VideoPixels(path, clips, stored.thumbnails)
    decoded = VideoPixels(path, clips)
    for clip in clips:
        assert np.array_equal(served(clip, 4, 128 * 72), decoded(clip, 4, 128 * 72))
    assert (served.kept_served, served.passes_started, decoded.passes_started) == (3, 0, 1)
    # another count or size than kept: decoded, in one pass
    assert served(clips[1], 8, 128 * 72).shape == (8, 82, 110, 3) and served.passes_started == 1
    capped = FrameKeeper(max_frames=20)
    get_detector("luma").detect(path, tap=capped)
    assert len(capped.frames) == 20 and capped.sampled([(0, 13), (13, 40)], 4).index.tolist() == sample_indices(
        0, 13, 4
    )


def test_every_declared_request_is_served_by_one_pass(videos):
    """Two scorers' declared requests (different counts and sizes), asked scorer by scorer over a batch of clips as
    the score stage asks: one decoding pass serves both, with the very pixels a pass of each alone gives."""
    from videolake.platform.video.clip_pixels import VideoPixels

    path = videos["ntsc"]
    clips = [{"start_frame": s, "end_frame": e} for s, e in [(0, 13), (13, 40), (40, 60)]]
    small, large = (16, 64 * 48), (4, 160 * 120)
    shared = VideoPixels(path, clips, requests=[small, large])
    got = {key: [shared(c, *key) for c in clips] for key in (small, large)}  # all clips of one, then the other
    assert shared.passes_started == 1
    for key in (small, large):
        alone = VideoPixels(path, clips)
        for clip, frames in zip(clips, got[key]):
            assert np.array_equal(frames, alone(clip, *key)), (key, clip)
        assert alone.passes_started == 1
    assert [g.shape[0] for g in got[small]] == [13, 16, 16] and got[large][0].shape == (4, 120, 160, 3)
    shared(clips[2], 2, 80 * 60)  # a request nobody declared: a pass of its own
    assert shared.passes_started == 2


def test_a_seek_into_a_file_whose_decoder_output_swaps_timestamps_reads_the_frame_a_full_read_gives():
    """box.mp4 (a real phone clip from the corpus) comes out of its decoder with neighbouring timestamps swapped
    throughout; a read of frame 60 alone once returned frame 59's picture. Any range gives the pictures a read
    from the start gives."""
    from videolake.evaluation.corpus import fetch

    path = str(fetch(names=["box.mp4"])["box.mp4"])
    C._INDEX_CACHE.clear()
    alone = [(n, f.to_ndarray(format="gray")) for n, f in iter_frames(path, 60, 61)]
    C._INDEX_CACHE.clear()
    seek = dict((n, f.to_ndarray(format="gray")) for n, f in iter_frames(path, 58, 63))
    whole = dict((n, f.to_ndarray(format="gray")) for n, f in iter_frames(path, 0, 63))
    assert [n for n, _ in alone] == [60]
    assert np.array_equal(alone[0][1], whole[60])
    assert all(np.array_equal(seek[n], whole[n]) for n in range(58, 63))
