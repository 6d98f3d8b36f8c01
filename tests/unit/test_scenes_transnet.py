"""TransNetV2: windows as the package makes them, probabilities -> cuts, the detector on a real encoded video, and
the Ray Data pipeline (CPU decode tasks -> predictor actor batching windows of several videos) on a local Ray.

The network runs on CPU here (~20-30 frames/s on 2 cores): the videos are a few seconds long.
"""

from __future__ import annotations

import numpy as np
import pytest
import shared_ray
from transnet_specs import HARD, SHORT

from videolake.platform.scenes import get_detector
from videolake.platform.scenes.transnet import STEP, WINDOW, iter_windows, predictions_to_cuts
from videolake.synth import render


@pytest.fixture(scope="module")
def videos(tmp_path_factory, ffmpeg):
    out = tmp_path_factory.mktemp("transnet")
    return {spec.name: (str(p), t) for spec in (HARD, SHORT) for p, t in [render(spec, out)]}


@pytest.mark.parametrize("n", [1, 49, 50, 51, 75, 76, 100, 149, 150, 151])
def test_windows_match_the_package_padding(n):
    frames = np.arange(n, dtype=np.uint8).reshape(n, 1, 1, 1) * np.ones((1, 27, 48, 3), np.uint8)
    wins = list(iter_windows(iter(frames)))
    assert len(wins) == -(-n // STEP)
    # The package: 25 copies of frame 0, the frames, then copies of the last frame up to a multiple of 50 (+ 75).
    pad_end = 25 + STEP - (n % STEP if n % STEP else STEP)
    padded = np.concatenate([frames[:1]] * 25 + [frames] + [frames[-1:]] * pad_end)
    for w, win in enumerate(wins):
        assert win.shape == (WINDOW, 27, 48, 3)
        np.testing.assert_array_equal(win, padded[w * STEP : w * STEP + WINDOW])


def test_predictions_to_cuts():
    p = np.zeros(200, np.float32)
    p[29] = 0.9  # hard cut: the last frame of the old shot lights up -> cut at the next frame
    p[[80, 81]] = [0.7, 0.95]  # two frames: the frame after the peak
    p[120:131] = 0.8  # an 11-frame dissolve: its middle
    p[132] = 0.6  # closer than min_scene_len (10) to the dissolve's cut and weaker: dropped
    assert predictions_to_cuts(p, 0.5, 10) == [30, 82, 125]
    assert predictions_to_cuts(p, 0.5, 8) == [30, 82, 125, 133]
    assert predictions_to_cuts(p, 0.85, 10) == [30, 82]
    assert predictions_to_cuts(np.zeros(10, np.float32), 0.5, 8) == []


def _same_stats(a, b) -> None:
    for name in ("pts_s", "luma_mean", "luma_diff", "sharpness", "edge_density", "dhash"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert (a.width, a.height) == (b.width, b.height)


@pytest.mark.slow
def test_transnetv2_detector_finds_hard_cuts_and_keeps_the_frame_stats_of_its_decode(videos):
    from videolake.platform.video.frames import DecodeOptions, compute_frame_stats

    path, truth = videos["tn_hard"]
    res = get_detector("transnetv2", device="cpu").detect(path)
    assert res.cuts == truth["cuts"] == [30, 58, 90, 120]
    assert res.num_frames == 150 and res.fps == pytest.approx(25.0)
    # the statistics the quality stage scores with, from the same (full) decode pass: no second decode needed
    assert res.stats.num_frames == 150
    _same_stats(res.stats, compute_frame_stats(path, DecodeOptions(fast_decode=False)))


@pytest.mark.slow
def test_predictor_batches_windows_of_several_videos_in_one_call(videos):
    from videolake.platform.scenes.transnet import TransNetConfig, predict_video, shared_model
    from videolake.platform.scenes.transnet_ray import TransNetV2Predictor, assemble_video, decode_windows

    cfg = TransNetConfig(device="cpu", windows_per_batch=8)
    rows = [r for vid in ("tn_hard", "tn_short") for r in decode_windows({"video_id": vid, "path": videos[vid][0]})]
    assert [(r["video_id"], r["kind"], r["window"]) for r in rows] == [
        ("tn_hard", "window", 0),
        ("tn_hard", "window", 1),
        ("tn_hard", "window", 2),
        ("tn_hard", "meta", -1),
        ("tn_short", "window", 0),
        ("tn_short", "window", 1),
        ("tn_short", "meta", -1),
    ]
    batch = {k: np.array([r[k] for r in rows]) for k in rows[0] if k != "frames"}
    batch["frames"] = np.stack([r["frames"] for r in rows])
    predictor = TransNetV2Predictor(cfg)
    out = predictor(batch)
    assert predictor.calls == 1  # 5 windows of 2 videos in one network call
    assert "frames" not in out and out["probs"].shape == (7, STEP)
    for vid in ("tn_hard", "tn_short"):
        sel = out["video_id"] == vid
        group = {k: v[sel] for k, v in out.items()}
        row = assemble_video(group, cfg.threshold, cfg.min_scene_len)
        alone, _ = predict_video(videos[vid][0], shared_model(cfg), cfg)
        got = group["probs"][group["kind"] == "window"].reshape(-1)[: len(alone)]
        np.testing.assert_allclose(got, alone, atol=1e-5)  # batching across videos changes nothing
        assert list(row["cuts"][0]) == videos[vid][1]["cuts"]
        assert int(row["num_frames"][0]) == videos[vid][1]["num_frames"] and row["error"][0] == ""


@pytest.fixture(scope="module")
def ray_local():
    with shared_ray.module_ray(__file__):  # the suite's shared Ray (tests/shared_ray.py)
        yield


@pytest.mark.slow
def test_detect_scenes_ray_on_a_local_cluster(videos, ray_local, tmp_path):
    from videolake.platform.scenes.transnet import TransNetConfig
    from videolake.platform.scenes.transnet_ray import RayDetectConfig, detect_scenes_ray, ray_config_for_cluster

    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video" * 100)
    cfg = TransNetConfig(device="cpu", windows_per_batch=16, torch_threads=1)
    rc = ray_config_for_cluster({"CPU": 2.0})
    assert rc == RayDetectConfig(num_actors=1, num_gpus_per_actor=0.0, num_cpus_per_actor=0.5, decode_num_cpus=0.5)
    assert ray_config_for_cluster({"CPU": 64.0, "GPU": 4.0}).num_gpus_per_actor == 1.0
    from videolake.platform.objectstore.local import LocalObjectStore
    from videolake.platform.stages.split import FrameStatsSink, SplitConfig, stats_key

    store = LocalObjectStore(str(tmp_path / "store"))
    split = SplitConfig(detector="transnetv2", cache_prefix="stats")
    sink = FrameStatsSink(store, split, '{"device": "cpu"}')
    got = detect_scenes_ray(
        [("a", videos["tn_hard"][0]), ("b", videos["tn_short"][0]), ("c", str(bad))], cfg, rc, stats_sink=sink
    )
    assert list(got) == ["a", "b", "c"]
    # each decode task stored its video's frame statistics through the sink; the rows carry the URI it returned
    from videolake.platform.video.frames import DecodeOptions, FrameStats, compute_frame_stats

    keys = {vid: stats_key(split, vid, '{"device": "cpu"}') for vid in ("a", "b")}
    assert got["a"]["stats_uri"] == store.uri(keys["a"]) and got["b"]["stats_uri"] == store.uri(keys["b"])
    assert got["c"]["stats_uri"] is None  # the broken file has none
    for vid, name in (("a", "tn_hard"), ("b", "tn_short")):
        stored = FrameStats.from_npz_bytes(store.get_bytes(keys[vid]))
        _same_stats(stored, compute_frame_stats(videos[name][0], DecodeOptions(fast_decode=False)))
    assert sorted(o.key for o in store.list("stats/") if not o.is_folder) == sorted(keys.values())
    assert got["a"]["cuts"] == [30, 58, 90, 120] and got["a"]["num_frames"] == 150 and got["a"]["error"] == ""
    assert got["b"]["cuts"] == [40] and got["b"]["num_frames"] == 70 and got["b"]["fps"] == pytest.approx(25.0)
    assert got["c"]["cuts"] == [] and "broken.mp4" in got["c"]["error"]


def test_decode_windows_reads_uris_through_open_source(videos):
    import contextlib

    from videolake.platform.scenes.transnet_ray import decode_windows

    opened = []

    @contextlib.contextmanager
    def opener(uri):
        opened.append(uri)
        yield videos["tn_short"][0]

    rows = list(decode_windows({"video_id": "v", "path": "s3://bucket/short.mp4"}, open_source=opener))
    assert opened == ["s3://bucket/short.mp4"]
    assert [(r["kind"], r["path"]) for r in rows] == [("window", "s3://bucket/short.mp4")] * 2 + [
        ("meta", "s3://bucket/short.mp4")
    ]
    assert rows[-1]["num_frames"] == 70 and rows[-1]["error"] == ""
    missing = list(decode_windows({"video_id": "m", "path": "/nonexistent/x.mp4"}))
    assert len(missing) == 1 and missing[0]["kind"] == "meta" and "/nonexistent/x.mp4" in missing[0]["error"]
