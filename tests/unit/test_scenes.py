"""Scene detection on real encoded videos with known cuts (rendered by videolake.synth at test time).

The luma detector must hit hard cuts exactly, put exactly one cut inside each gradual transition, and stay silent
on flashes, fast pans, black and frozen videos; `videolake scenes` must print exactly one JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from videolake.evaluation.scenes import score_cuts
from videolake.platform.scenes import get_detector
from videolake.platform.video.frames import DecodeOptions, SampledDecoder, compute_frame_stats
from videolake.synth import Segment, Transition, VideoSpec, render

REPO = Path(__file__).resolve().parents[2]

# name -> spec; every video is 320x240 (or 426x240) and a few seconds long, so the whole file runs in well under 2 min.
SPECS = {
    "hard": VideoSpec(
        "hard",
        320,
        240,
        "25",
        "h264",
        (
            Segment("testsrc2", 30),
            Segment("mandelbrot", 28),
            Segment("smptehdbars", 32),
            Segment("color:orange", 30),
            Segment("rgbtestsrc", 30),
        ),
        (Transition("cut"),) * 4,
    ),
    "gradual": VideoSpec(
        "gradual",
        320,
        240,
        "25",
        "h264",
        (Segment("testsrc2", 30), Segment("smptehdbars", 30), Segment("mandelbrot", 30), Segment("rgbtestsrc", 30)),
        (Transition("dissolve", 16), Transition("fade", 20), Transition("wipe", 12)),
        seed=3,
    ),
    "flash": VideoSpec("flash", 320, 240, "25", "h264", (Segment("testsrc2", 100, flashes=(20, 60)),), ()),
    "pan": VideoSpec("pan", 320, 240, "30", "h264", (Segment("pan", 120),), (), seed=5),
    "still": VideoSpec("still", 320, 240, "25", "h264", (Segment("mandelbrot", 90),), ()),
    "black": VideoSpec("black", 320, 240, "25", "h264", (Segment("black", 50),), ()),
    "frozen": VideoSpec("frozen", 320, 240, "25", "h264", (Segment("static", 50),), ()),
    "hevc_2997": VideoSpec(
        "hevc_2997",
        320,
        240,
        "30000/1001",
        "hevc",
        (Segment("smptehdbars", 25), Segment("testsrc2", 25), Segment("mandelbrot", 25)),
        (Transition("cut"),) * 2,
    ),
    "vp9": VideoSpec(
        "vp9",
        426,
        240,
        "24",
        "vp9",
        (Segment("testsrc2", 24), Segment("smptehdbars", 24), Segment("mandelbrot", 24)),
        (Transition("cut"),) * 2,
    ),
    "mpeg4": VideoSpec(
        "mpeg4",
        320,
        240,
        "25",
        "mpeg4",
        (Segment("mandelbrot", 25), Segment("rgbtestsrc", 25), Segment("testsrc2", 25)),
        (Transition("cut"),) * 2,
    ),
    "vfr": VideoSpec(
        "vfr",
        320,
        240,
        "30",
        "h264",
        (Segment("testsrc2", 30), Segment("mandelbrot", 30), Segment("smptehdbars", 30)),
        (Transition("cut"),) * 2,
        vfr=True,
        container="mkv",
    ),
}


@pytest.fixture(scope="session")
def videos(tmp_path_factory, ffmpeg) -> dict[str, tuple[str, dict]]:
    out = tmp_path_factory.mktemp("scenes")
    rendered = {}
    for name, spec in SPECS.items():
        path, truth = render(spec, out)
        rendered[name] = (str(path), truth)
    return rendered


@pytest.fixture(scope="session")
def luma():
    return get_detector("luma")


@pytest.mark.slow
def test_hard_cuts_are_frame_exact(videos, luma):
    path, truth = videos["hard"]
    res = luma.detect(path)
    assert res.cuts == [30, 58, 90, 120] == truth["cuts"]
    assert res.num_frames == truth["num_frames"] == 150
    assert res.fps == pytest.approx(25.0)


def test_one_cut_inside_each_gradual_transition(videos, luma):
    path, truth = videos["gradual"]
    res = luma.detect(path)
    assert truth["cut_ranges"] == [[30, 46], [76, 96], [126, 138]]
    assert len(res.cuts) == 3
    for cut, (lo, hi) in zip(res.cuts, truth["cut_ranges"]):
        assert lo <= cut <= hi
    assert score_cuts(res.cuts, truth["cut_ranges"]) == (3, 0, 0)


@pytest.mark.parametrize("name", ["flash", "pan", "still", "black", "frozen"])
def test_no_cut_videos(videos, luma, name):
    path, truth = videos[name]
    res = luma.detect(path)
    assert truth["cuts"] == []
    assert res.cuts == []
    assert res.num_frames == truth["num_frames"]


@pytest.mark.parametrize("name", ["hevc_2997", "vp9", "mpeg4", "vfr"])
def test_hard_cuts_across_codecs_rates_and_vfr(videos, luma, name):
    path, truth = videos[name]
    res = luma.detect(path)
    assert res.cuts == truth["cuts"]
    assert res.num_frames == truth["num_frames"]


def test_fast_decode_does_not_change_cuts(videos):
    fast, exact = get_detector("luma"), get_detector("luma", fast_decode=False)
    for name in ("hard", "gradual", "flash"):
        path, _ = videos[name]
        assert fast.detect(path).cuts == exact.detect(path).cuts


def test_frame_stats_come_with_the_cuts(videos, luma):
    path, truth = videos["hard"]
    res = luma.detect(path)
    st = res.stats
    n = truth["num_frames"]
    assert st is not None and st.num_frames == n and (st.width, st.height) == (320, 240)
    for arr in (st.pts_s, st.luma_mean, st.luma_diff, st.sharpness, st.edge_density, st.dhash):
        assert arr.shape == (n,)
    assert st.pts_s[0] == 0.0 and st.pts_s[-1] == pytest.approx((n - 1) / 25)
    assert np.all(np.diff(st.pts_s) > 0)
    # The biggest frame-to-frame luma change is at a cut; a solid colour shot has no texture at all.
    assert int(np.argmax(st.luma_diff)) in truth["cuts"]
    assert float(st.sharpness[95]) == 0.0 and float(st.edge_density[95]) == 0.0  # color:orange
    assert float(st.sharpness[10]) > 100.0 and float(st.edge_density[10]) > 0.0  # testsrc2
    # compute_frame_stats (for detectors that return none) gives the same numbers.
    again = compute_frame_stats(path)
    np.testing.assert_array_equal(again.luma_mean, st.luma_mean)
    np.testing.assert_array_equal(again.dhash, st.dhash)


def test_stats_of_black_and_frozen_videos(videos):
    black = compute_frame_stats(videos["black"][0])
    assert float(black.luma_mean.max()) <= 17.0  # limited-range black decodes as 16
    assert float(black.luma_diff.max()) == 0.0
    frozen = compute_frame_stats(videos["frozen"][0])
    assert len(set(frozen.dhash.tolist())) == 1
    assert float(frozen.luma_diff.max()) < 1.0


def test_sampled_decoder_numbers_every_frame(videos):
    path, truth = videos["vfr"]
    with SampledDecoder(path, DecodeOptions(sample_width=32)) as dec:
        chunks = list(dec.chunks())
    assert [c.start for c in chunks] == [0]
    assert dec.num_frames == truth["num_frames"] == sum(c.y.shape[0] for c in chunks)
    assert chunks[0].y.shape[1:] == (24, 32) and chunks[0].uv.shape[1:] == (2, 12, 16)
    np.testing.assert_allclose(chunks[0].pts_s, truth["frame_times_s"], atol=1e-3)


def test_undecodable_file_raises_value_error(tmp_path, luma):
    bad = tmp_path / "not_a_video.mp4"
    bad.write_text("this is not a video\n" * 50)
    with pytest.raises(ValueError, match="not_a_video.mp4"):
        luma.detect(str(bad))
    with pytest.raises(ValueError):
        luma.detect(str(tmp_path / "missing.mp4"))


@pytest.mark.parametrize("name", ["adaptive", "content"])
def test_pyscenedetect_wrappers_find_hard_cuts(videos, name):
    path, truth = videos["hard"]
    res = get_detector(name).detect(path)
    assert res.cuts == truth["cuts"]
    assert res.num_frames == truth["num_frames"]
    assert res.stats is None
    with pytest.raises(ValueError):
        get_detector(name).detect(__file__)


def test_score_cuts():
    ranges = [[10, 10], [30, 40], [60, 60]]
    assert score_cuts([10, 35, 60], ranges) == (3, 0, 0)
    assert score_cuts([11, 35, 36], ranges) == (1, 2, 2)
    assert score_cuts([], ranges) == (0, 0, 3)
    assert score_cuts([5], []) == (0, 1, 0)
    # +-1 frame tolerance, and predictions inside an ignore range count neither way.
    assert score_cuts([11, 35, 59], ranges, tolerance=1) == (3, 0, 0)
    assert score_cuts([12, 35, 60], ranges, tolerance=1) == (2, 1, 1)
    assert score_cuts([2, 10, 35, 60], ranges, ignore=[[0, 3]]) == (3, 0, 0)
    assert score_cuts([2, 10], ranges, ignore=[[5, 6]]) == (1, 1, 2)


def test_detector_params_are_typed_and_validated():
    from videolake.platform.params import ParamError
    from videolake.platform.scenes.base import detector_params

    det = get_detector("luma", threshold="9.5", min_scene_len="12", letterbox="false", max_excess=2)
    assert (det.config.threshold, det.config.min_scene_len, det.config.letterbox) == (9.5, 12, False)
    assert det.config.max_excess == 2.0 and isinstance(det.config.max_excess, float)
    assert json.loads(det.params_json())["min_scene_len"] == 12
    with pytest.raises(ParamError, match=r"'luma'.*unknown parameter 'treshold'; known: .*threshold"):
        get_detector("luma", treshold=3)
    with pytest.raises(ParamError, match="'min_scene_len' must be an integer, got 'soon'"):
        get_detector("luma", min_scene_len="soon")
    with pytest.raises(ParamError, match="'min_scene_len' must be an integer, got 2.5"):
        get_detector("adaptive", min_scene_len=2.5)
    with pytest.raises(ParamError, match=r"'filter_mode' must be one of \['merge', 'suppress'\], got 'both'"):
        get_detector("content", filter_mode="both")
    with pytest.raises(ParamError, match="'threshold' must be <= 1.0, got 1.5"):
        get_detector("transnetv2", threshold=1.5)
    with pytest.raises(ParamError, match="must be true or false"):
        get_detector("luma", letterbox="maybe")
    assert get_detector("transnetv2", device="cpu", windows_per_batch="8").config.windows_per_batch == 8
    rows = {r["name"]: r for r in detector_params("transnetv2")}
    assert rows["device"]["choices"] == ("auto", "cpu", "cuda") and rows["threshold"]["type"] == "float"
    assert all(r["help"] for name in ("luma", "adaptive", "content", "transnetv2") for r in detector_params(name))


def _fade_hold(tmp_path, hold: int) -> str:
    """2 s of testsrc2 fading out over 15 frames, ``hold`` black frames, a 15-frame fade in to 3 s of mandelbrot."""
    out = tmp_path / f"fade_hold_{hold}.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x240:rate=25,trim=end_frame=75,fade=t=out:st=2.4:d=0.6",
            "-f",
            "lavfi",
            "-i",
            f"color=black:size=320x240:rate=25,trim=end_frame={hold}",
            "-f",
            "lavfi",
            "-i",
            "mandelbrot=size=320x240:rate=25,trim=end_frame=75,fade=t=in:st=0:d=0.6",
            "-filter_complex",
            "[0][1][2]concat=n=3:v=1:a=0,format=yuv420p",
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            str(out),
        ],
        check=True,
    )
    return str(out)


def test_fade_out_to_black_and_back_in_is_one_cut(tmp_path, luma, ffmpeg):
    # Black frames 75..84, fade out 60..74, fade in 85..99: one transition, one cut in the middle of the black.
    res = luma.detect(_fade_hold(tmp_path, 10))
    assert res.num_frames == 160 and res.cuts == [80]


def test_long_black_stretch_is_a_clip_of_its_own(tmp_path, luma, ffmpeg):
    # 37 black frames (1.5 s > black_hold_s): cuts at its first frame and at the first frame after it, so the black
    # stretch is one clip (the quality stage rejects it as black) and each shot keeps its own fade.
    from videolake.platform.filters.quality import QualityConfig

    res = luma.detect(_fade_hold(tmp_path, 37))
    assert res.num_frames == 187 and res.cuts == [75, 113]
    black = res.stats.slice(75, 113)
    assert float((black.luma_mean < QualityConfig().black_luma).mean()) > QualityConfig().max_black_ratio
    # With a longer allowed hold the same video is one transition again.
    assert get_detector("luma", black_hold_s=2.0).detect(_fade_hold(tmp_path, 37)).cuts == [94]


def test_letterboxed_picture_keeps_its_cuts(videos, tmp_path, ffmpeg):
    # The hard video pillarboxed into 16:9 (as films and 4:3 footage often are): bars dilute every change.
    path, truth = videos["hard"]
    boxed = tmp_path / "boxed.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-i",
            path,
            "-vf",
            "pad=560:240:120:0:black",
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            str(boxed),
        ],
        check=True,
    )
    assert get_detector("luma").detect(str(boxed)).cuts == truth["cuts"]


@pytest.mark.parametrize("middle, fps, frames, seed", [("testsrc2", "24", 10, 100), ("smptehdbars", "25", 12, 3)])
def test_wipes_out_of_and_into_a_fast_pan(tmp_path, luma, ffmpeg, middle, fps, frames, seed):
    # A fast pan changes the picture about as much per frame as a wipe does, so a wipe out of it (or into it) does
    # not beat the motion on both sides; it beats the quiet side's, and its change sweeps across the picture.
    spec = VideoSpec(
        f"pan_wipes_{middle}",
        320,
        240,
        fps,
        "h264",
        (Segment("pan", 40), Segment(middle, 40), Segment("pan", 40)),
        (Transition("wipe", frames), Transition("wipe", frames)),
        seed=seed,
    )
    path, truth = render(spec, tmp_path)
    assert truth["cut_ranges"] == [[40, 40 + frames], [80 + frames, 80 + 2 * frames]]
    res = luma.detect(str(path))
    assert score_cuts(res.cuts, truth["cut_ranges"]) == (2, 0, 0)
    for cut, (lo, hi) in zip(res.cuts, truth["cut_ranges"]):
        assert abs(cut - (lo + hi) / 2) <= frames / 3  # about when half the picture has switched


def test_pan_onto_a_flat_area_is_no_cut(tmp_path, ffmpeg):
    # A pan that uncovers a flat part of the scene makes an edge that sweeps across the picture too, and the flat
    # side stays still; but the edge travels with the moving picture: no cut, even with the quiet side weighed
    # permissively.
    path, _ = render(VideoSpec("pan_flat", 426, 240, "25", "h264", (Segment("pan", 180),), (), seed=1037), tmp_path)
    assert get_detector("luma", sweep_ratio=1.5).detect(str(path)).cuts == []


def _scenes_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def test_cli_prints_exactly_one_json_object(videos):
    path, truth = videos["hard"]
    proc = _scenes_cli("-m", "videolake.cli", "scenes", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1 and proc.stdout.endswith("\n")
    data = json.loads(proc.stdout)
    assert data == {"cuts": truth["cuts"], "fps": 25.0, "num_frames": truth["num_frames"]}


@pytest.mark.slow
def test_cli_typed_params_and_transnetv2(videos):
    path, truth = videos["hard"]
    proc = _scenes_cli("-m", "videolake.cli", "scenes", path, "--param", "min_scene_len=abc")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "'min_scene_len' must be an integer, got 'abc'" in proc.stderr and "Traceback" not in proc.stderr
    proc = _scenes_cli("-m", "videolake.cli", "scenes", "--detector", "transnetv2", "--list-params")
    assert proc.returncode == 0 and {r["name"] for r in json.loads(proc.stdout)} >= {"threshold", "device"}
    proc = _scenes_cli("-m", "videolake.cli", "scenes", path, "--detector", "transnetv2", "--param", "device=cpu")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("\n") == 1
    assert json.loads(proc.stdout) == {"cuts": truth["cuts"], "fps": 25.0, "num_frames": truth["num_frames"]}


def test_cli_options_and_other_detectors(videos):
    path, truth = videos["hard"]
    proc = _scenes_cli("-m", "videolake.cli", "scenes", path, "--detector", "content", "--threshold", "27")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cuts"] == truth["cuts"]
    # A huge threshold finds nothing; a bad option is an error on stderr, not a traceback on stdout.
    proc = _scenes_cli("-m", "videolake.cli", "scenes", path, "--threshold", "1000")
    assert json.loads(proc.stdout)["cuts"] == []
    proc = _scenes_cli("-m", "videolake.cli", "scenes", path, "--detector", "nope")
    assert proc.returncode != 0 and proc.stdout == "" and "nope" in proc.stderr


def test_cli_undecodable_file_exits_non_zero(tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2000))
    proc = _scenes_cli("-m", "videolake.cli", "scenes", str(bad))
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert "broken.mp4" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_imports_nothing_heavy(videos):
    path, _ = videos["hard"]
    proc = _scenes_cli("-X", "importtime", "-m", "videolake.cli", "scenes", path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "numpy" in imported and "av" in imported  # the importtime output is really there
    for heavy in ("dagster", "ray", "vllm", "torch", "cv2", "scenedetect", "pandas", "pyarrow", "deltalake"):
        assert heavy not in imported, heavy
