"""scene_clips with ``detector="transnetv2"`` on a Ray cluster that has GPUs: the videos still to do are detected by
the batched TransNetV2 pipeline (windows of several videos per network call on GPU actors), and the units only cut
ranges and write rows.

This machine has no GPU: the cluster here declares one logical GPU (``ray.init(num_gpus=1)``), so Ray schedules the
predictor actor exactly as on a GPU node, and the network itself runs on CPU (``device="cpu"``). What a real GPU
changes is the network's speed, measured on one H200 in docs/stack-facts.md, not the route.
"""

from __future__ import annotations

import shutil

import pytest
from transnet_specs import HARD, SHORT

from videolake.platform.filters.quality import QualityConfig
from videolake.platform.lake.schemas import clip_id
from videolake.platform.lake.table import Lake, PartitionRange
from videolake.platform.objectstore.local import LocalObjectStore
from videolake.platform.stages.ingest import ingest_partitions, list_landing
from videolake.platform.stages.score import score_partitions
from videolake.platform.stages.split import SplitConfig, _split_payload, detect_error_rows, split_partitions
from videolake.platform.video.frames import FrameStats
from videolake.platform.video.probe import ProbeConfig
from videolake.synth import render

DAY = "2026-04-02"
PARAMS = {"device": "cpu", "windows_per_batch": 16, "torch_threads": 1}


@pytest.fixture(scope="module")
def gpu_ray():
    import ray

    if ray.is_initialized():  # a session left by an earlier module has no GPU resource
        ray.shutdown()
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _landed(tmp_path, ffmpeg) -> tuple[Lake, LocalObjectStore, dict[str, list[int]]]:
    store = LocalObjectStore(str(tmp_path / "store"))
    truth = {}
    for spec in (HARD, SHORT):
        path, t = render(spec, tmp_path / "render")
        landed = tmp_path / "store" / "landing" / DAY / f"{spec.name}.mp4"
        landed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, landed)
        truth[spec.name] = t["cuts"]
    lake = Lake(str(tmp_path / "lake"))
    days = PartitionRange.of([DAY])
    ingest_partitions(lake, store, list_landing(store, "landing", [DAY]), ProbeConfig(), days)
    return lake, store, truth


@pytest.mark.slow
def test_transnetv2_runs_on_the_clusters_gpus_and_a_rerun_reuses_every_video(gpu_ray, tmp_path, ffmpeg):
    lake, store, truth = _landed(tmp_path, ffmpeg)
    days = PartitionRange.of([DAY])
    config = SplitConfig(detector="transnetv2", detector_params=PARAMS)
    run = split_partitions(lake, store, days, config)
    assert run.extra["videos_detected_on_gpus"] == 2
    assert run.progress.as_metadata()["units_computed"] == 2

    clips = lake.read_partitions("scene_clips", days).to_pylist()
    videos = {v["video_id"]: v["source_uri"] for v in lake.read_partitions("raw_videos", days).to_pylist()}
    by_source = {}
    for c in sorted(clips, key=lambda c: (c["source_uri"], c["start_frame"])):
        by_source.setdefault(c["source_uri"].rsplit("/", 1)[-1].removesuffix(".mp4"), []).append(c)
    assert set(by_source) == {HARD.name, SHORT.name} and len(videos) == 2
    for name, rows in by_source.items():
        # the cuts the network found on the (logical) GPU route are the ground truth's, as clip boundaries
        assert [r["start_frame"] for r in rows[1:]] == truth[name], (name, rows)
        assert all(r["detector"] == "transnetv2" and r["detect_error"] is None for r in rows)
        # the decode tasks stored the frame statistics of their pass; every row of the video names them
        (uri,) = {r["frame_stats_uri"] for r in rows}
        stats = FrameStats.from_npz_bytes(store.get_bytes(store.key_from_uri(uri)))
        assert stats.num_frames == rows[-1]["end_frame"]
        assert [r["start_s"] for r in rows] == [float(stats.pts_s[r["start_frame"]]) for r in rows]
    # so scorers working from statistics decode no video again for them (the source is read only to check that
    # each passed clip decodes as the shard encoder will read it): every clip is scored
    score_partitions(lake, store, days, QualityConfig(dup_max_distance=-1))
    scored = lake.read_partitions("filtered_clips", days).to_pylist()
    assert sorted(r["clip_id"] for r in scored) == sorted(c["clip_id"] for c in clips)
    assert not [r for r in scored if "score_error" in (r["reject_reason"] or "")]
    assert not [r for r in scored if "undecodable" in (r["reject_reason"] or "")]
    assert len({c["clip_id"] for c in clips}) == len(clips) == len(truth[HARD.name]) + len(truth[SHORT.name]) + 2

    again = split_partitions(lake, store, days, config)
    assert again.extra["videos_detected_on_gpus"] == 0  # finished units are not sent to the GPUs again
    assert again.progress.as_metadata()["units_reused"] == 2
    assert sorted(c["clip_id"] for c in lake.read_partitions("scene_clips", days).to_pylist()) == sorted(
        c["clip_id"] for c in clips
    )


def test_a_video_the_gpu_route_could_not_decode_is_a_detect_error(tmp_path):
    store = LocalObjectStore(str(tmp_path))
    store.put_bytes("landing/x.mp4", b"not a video")
    video = {
        "video_id": "v1",
        "source_uri": store.uri("landing/x.mp4"),
        "fps": 25.0,
        "num_frames": 10,
        "detected": {"cuts": [], "fps": 0.0, "num_frames": 0, "error": "cannot open landing/x.mp4: invalid data"},
    }
    with pytest.raises(ValueError, match="cannot open landing/x.mp4: invalid data"):
        _split_payload(video, store=store, config=SplitConfig(detector="transnetv2", detector_params=PARAMS))
    # what the unit records instead: one whole-video clip carrying the reason, which the quality stage rejects
    config = SplitConfig(detector="transnetv2", detector_params=PARAMS)
    (row,) = detect_error_rows(video, "cannot open landing/x.mp4: invalid data", config)
    assert row == {
        "clip_id": clip_id("v1", 0, 10),
        "video_id": "v1",
        "source_uri": video["source_uri"],
        "clip_index": 0,
        "start_frame": 0,
        "end_frame": 10,
        "start_s": 0.0,
        "end_s": 0.4,
        "duration_s": 0.4,
        "clip_uri": None,
        "detector": "transnetv2",
        "detector_params": '{"device": "cpu", "torch_threads": 1, "windows_per_batch": 16}',
        "detect_error": "cannot open landing/x.mp4: invalid data",
        "max_clip_s": 20.0,
        "frame_stats_uri": None,
    }


class _CountingStore(LocalObjectStore):
    """The local store, counting how often a unit asks for a local copy of an object (a download on S3)."""

    opened = 0

    def open_local(self, key):
        type(self).opened += 1
        return super().open_local(key)


@pytest.mark.parametrize(
    "clip_mode, detected, opens",
    [
        ("ranges", True, 0),  # cuts from the GPU pre-pass, clips as frame ranges: the video is not fetched again
        ("files", True, 1),  # clip files are encoded from the video: fetched once
        ("ranges", False, 1),  # the detector runs in the unit: fetched once
    ],
)
def test_a_unit_fetches_the_video_only_when_it_needs_its_bytes(tmp_path, ffmpeg, clip_mode, detected, opens):
    store = _CountingStore(str(tmp_path / "store"))
    path, truth = render(SHORT, tmp_path / "render")
    store.put_bytes("landing/short.mp4", path.read_bytes())
    n, fps = truth["num_frames"], float(truth["fps"])
    video = {"video_id": "v1", "source_uri": store.uri("landing/short.mp4"), "fps": fps, "num_frames": n}
    if detected:
        video["detected"] = {"cuts": list(truth["cuts"]), "fps": fps, "num_frames": n, "error": None}
    config = SplitConfig(
        detector="transnetv2" if detected else "luma",
        detector_params=PARAMS if detected else {},
        clip_mode=clip_mode,
        clip_prefix="clips",
    )
    _CountingStore.opened = 0
    rows = _split_payload(video, store=store, config=config)
    assert _CountingStore.opened == opens
    bounds = [0, *truth["cuts"], n]
    if detected:  # the rows follow the given cuts exactly
        assert [(r["start_frame"], r["end_frame"]) for r in rows] == list(zip(bounds, bounds[1:]))
    assert all((r["clip_uri"] is not None) == (clip_mode == "files") for r in rows)
    # the rows name where their detection's frame statistics are: luma keeps them; a GPU pre-pass result names the
    # ones its decode task stored (none here)
    uris = {r["frame_stats_uri"] for r in rows}
    if detected:
        assert uris == {None}
    else:
        (uri,) = uris
        assert store.exists(store.key_from_uri(uri))


def test_scoring_reads_the_stats_the_rows_name_and_decodes_only_without_them(tmp_path, ffmpeg, monkeypatch):
    from videolake.platform.filters.quality import QualityConfig, score_video_clips
    from videolake.platform.stages.score import score_one
    from videolake.platform.video import frames
    from videolake.platform.video.frames import FrameStats

    # The source is opened once a video in any case: every passed clip is checked to decode as the shard encoder
    # will read it (stages.score.set_aside). The statistics are computed again only where the rows name none.
    computed = []
    compute = frames.compute_frame_stats
    monkeypatch.setattr(frames, "compute_frame_stats", lambda *a, **k: computed.append(1) or compute(*a, **k))

    store = _CountingStore(str(tmp_path / "store"))
    path, truth = render(SHORT, tmp_path / "render")
    store.put_bytes("landing/short.mp4", path.read_bytes())
    n, fps = truth["num_frames"], float(truth["fps"])
    video = {
        "video_id": "v1",
        "source_uri": store.uri("landing/short.mp4"),
        "fps": fps,
        "num_frames": n,
        "width": 320,
        "height": 240,
    }
    rows = _split_payload(dict(video), store=store, config=SplitConfig(detector="luma"))
    uri = rows[0]["frame_stats_uri"]
    stats = FrameStats.from_npz_bytes(store.get_bytes(store.key_from_uri(uri)))
    assert stats.num_frames == n
    quality = QualityConfig(dup_max_distance=-1)  # scorers of statistics only
    _CountingStore.opened = 0
    scored = score_one((video, rows), store=store, quality_config=quality)
    assert (_CountingStore.opened, len(computed)) == (1, 0)  # opened for the decode check; no statistics again
    assert scored == score_video_clips(rows, stats, video, quality)
    assert [r["clip_id"] for r in scored] == [r["clip_id"] for r in rows]
    # rows naming no statistics (a detector that keeps none), or naming a deleted object: one decode, same clips
    for stats_uri in (None, store.uri("cache/framestats/gone.npz")):
        _CountingStore.opened = 0
        computed.clear()
        again = score_one(
            (video, [{**r, "frame_stats_uri": stats_uri} for r in rows]), store=store, quality_config=quality
        )
        assert (_CountingStore.opened, len(computed)) == (1, 1)
        assert [r["clip_id"] for r in again] == [r["clip_id"] for r in rows]
    # the near-duplicate fingerprint (on by default) looks at pixels: the luma detection kept each clip's sampled
    # frames with the statistics; without them (statistics computed again) the video, opened once for all its
    # clips, is decoded for them, and the fingerprints are the same
    assert stats.thumbnails is not None and stats.thumbnails.max_pixels == 128 * 72
    hashes = {}
    for stats_uri in (uri, None):
        _CountingStore.opened = 0
        fingerprinted = score_one(
            (video, [{**r, "frame_stats_uri": stats_uri} for r in rows]), store=store, quality_config=QualityConfig()
        )
        assert _CountingStore.opened == 1
        assert [r["clip_id"] for r in fingerprinted] == [r["clip_id"] for r in rows]
        assert any(r["near_hashes"] for r in fingerprinted)
        hashes[stats_uri] = [r["near_hashes"] for r in fingerprinted]
    assert hashes[uri] == hashes[None]


class _ScriptedAutoscaler:
    """A FAKE autoscaler (no Kubernetes here): records resource requests; GPUs appear ``after`` polls once asked."""

    def __init__(self, after: int | None):
        self.after, self.requests, self.polls = after, [], 0

    def request(self, bundles):
        self.requests.append(list(bundles))

    def resources(self):
        self.polls += 1
        asked = bool(self.requests and self.requests[-1])
        if asked and self.after is not None and self.polls > self.after:
            return {"CPU": 8.0, "GPU": 2.0}
        return {"CPU": 8.0}


def test_an_empty_gpu_group_is_asked_for_and_waited_on():
    from videolake.platform.scenes.transnet_ray import wait_for_gpus

    fake = _ScriptedAutoscaler(after=3)
    got = wait_for_gpus(2, wait_s=5.0, cluster_resources=fake.resources, request=fake.request, poll_s=0.001)
    assert got == {"CPU": 8.0, "GPU": 2.0}
    assert fake.requests == [[{"GPU": 1.0}, {"GPU": 1.0}]]
    assert fake.polls == 4

    never = _ScriptedAutoscaler(after=None)  # no GPU comes: the CPUs detect
    got = wait_for_gpus(1, wait_s=0.05, cluster_resources=never.resources, request=never.request, poll_s=0.01)
    assert "GPU" not in got and never.requests == [[{"GPU": 1.0}]] and never.polls >= 3

    nothing = _ScriptedAutoscaler(after=0)  # no GPU group: nothing is asked for
    assert wait_for_gpus(0, cluster_resources=nothing.resources, request=nothing.request) == {"CPU": 8.0}
    assert nothing.requests == []


def test_the_autoscaler_request_is_made_and_cleared_on_a_real_ray(gpu_ray):
    from ray.autoscaler.sdk import request_resources

    from videolake.platform.scenes.transnet_ray import wait_for_gpus

    # the cluster here already has its (logical) GPU: no request, the resources come back as they are
    assert float(wait_for_gpus(4, wait_s=0.1)["GPU"]) == 1.0
    request_resources(bundles=[{"GPU": 1.0}])  # the real API the route calls, then clears
    request_resources(bundles=[])
