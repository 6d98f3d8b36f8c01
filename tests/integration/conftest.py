"""Session fixtures for the integration tests: a tiny random-weight Qwen2.5-VL (built once per session, offline),
a small partition of clip rows cut from ffmpeg-generated videos (with one corrupt source and one range beyond the
end of its video), and a local Ray cluster. Nothing here is committed: everything is generated into session tmp dirs.

Test modules get the partition's ids from the ``clip_ids`` fixture, never by importing this file (several conftest.py
files share the module name "conftest").
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess

import pyarrow as pa
import pytest

# vLLM on CPU in the test process and in anything it starts (docs/stack-facts.md).
for _key, _value in {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
}.items():
    os.environ.setdefault(_key, _value)

FPS = 24
VIDEO_FRAMES = 72  # 3 s at 24 fps
PARTITION = dt.date(2024, 1, 2)


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    """A real S3 server (SeaweedFS) for the session, started in a fresh directory and stopped at the end. Started
    once: every module that uses it writes under a prefix of its own (a fresh uuid), so they share the bucket
    without seeing each other's objects. The outage test (test_s3_store.py) stops and restarts a server of its
    own, never this one."""
    from s3_server import start_seaweed

    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """The tiny checkpoint, built once per test run (~20 s, mostly importing transformers) in a folder its
    pytest-xdist workers share, where the caption server serves it from (tests/vllm_server.py): whichever process
    asks first builds it, the others wait for it and find it built."""
    from run_dir import run_dir
    from vllm_server import tiny_model_path

    from videolake.platform.captioning.tiny_model import build_tiny_qwen_vl

    return build_tiny_qwen_vl(tiny_model_path(run_dir(tmp_path_factory)))


@pytest.fixture(scope="session")
def tiny_captioner(tiny_model_dir):
    """The captioner of the tests that run clip_captions on the tiny model (the CPU settings of tiny_bench_config).
    The random-weight model's text is random: at a low temperature it can emit only special tokens for a clip (an
    empty caption, a `failed` row by design)."""
    from videolake.resources.captioner import CaptionerResource

    return CaptionerResource(
        model=tiny_model_dir,
        model_name="tiny-qwen2.5-vl-random",
        enforce_eager=True,
        temperature=0.7,
        top_p=0.95,
        max_tokens=16,
        sample_fps=4.0,
        max_frames=4,
        max_pixels=112 * 112,
        num_actors=1,
        engine_threads=1,  # as the tiny model's policy (TINY_MODEL_ENGINE_THREADS)
    )


def _make_video(ffmpeg: str, path, source: str) -> None:
    subprocess.run(
        [
            ffmpeg,
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            f"{source}=size=320x240:rate={FPS}",
            "-frames:v",
            str(VIDEO_FRAMES),
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            "-g",
            str(FPS),
            str(path),
        ],
        check=True,
    )


@pytest.fixture(scope="session")
def caption_videos(tmp_path_factory, ffmpeg) -> dict[str, str]:
    """Two 72-frame 320x240 videos and a corrupt one (the first 4 KB of a real video): name -> file:// URI."""
    d = tmp_path_factory.mktemp("caption-videos")
    _make_video(ffmpeg, d / "a.mp4", "testsrc2")
    _make_video(ffmpeg, d / "b.mp4", "mandelbrot")
    (d / "corrupt.mp4").write_bytes((d / "a.mp4").read_bytes()[:4096])
    return {name: (d / f"{name}.mp4").resolve().as_uri() for name in ("a", "b", "corrupt")}


# (clip_id, video, start, end): 4 good clips, one undecodable source, one range beyond the end of its video.
GOOD_CLIPS = [
    ("va_00000000_00000036", "a", 0, 36),
    ("va_00000036_00000072", "a", 36, 72),
    ("vb_00000000_00000030", "b", 0, 30),
    ("vb_00000030_00000072", "b", 30, 72),
]
BAD_CLIPS = [("vc_00000000_00000030", "corrupt", 0, 30), ("va_00000060_00000200", "a", 60, 200)]


@pytest.fixture(scope="session")
def clip_ids() -> dict[str, list[str]]:
    """The partition's clip ids (sorted): "good" decode, "bad" do not, "all" both."""
    good, bad = sorted(c[0] for c in GOOD_CLIPS), sorted(c[0] for c in BAD_CLIPS)
    return {"good": good, "bad": bad, "all": sorted(good + bad), "corrupt": BAD_CLIPS[0][0], "beyond": BAD_CLIPS[1][0]}


@pytest.fixture(scope="session")
def clip_partition(caption_videos) -> pa.Table:
    """One day's clip rows, as the caption asset hands them to the engine (scene_clips joined with raw fps)."""
    rows = GOOD_CLIPS + BAD_CLIPS
    return pa.table(
        {
            "clip_id": [r[0] for r in rows],
            "video_id": [f"v{r[1][0]}" for r in rows],
            "source_uri": [caption_videos[r[1]] for r in rows],
            "start_frame": pa.array([r[2] for r in rows], pa.int64()),
            "end_frame": pa.array([r[3] for r in rows], pa.int64()),
            "fps": [float(FPS)] * len(rows),
            "clip_uri": pa.nulls(len(rows), pa.string()),
            "partition_date": pa.array([PARTITION] * len(rows), pa.date32()),
        }
    )


@pytest.fixture(scope="module")
def ray_local(request):
    """A local Ray cluster (the Dagster RayResource's role in production): the suite's shared one for the modules
    in tests/shared_ray.py's FILES, else one started for the module and stopped after its last test (a module that
    reads Ray-wide state, such as the metrics of the whole node, gets a Ray no other module used)."""
    import ray
    import shared_ray

    with shared_ray.module_ray(request.path):
        yield ray
