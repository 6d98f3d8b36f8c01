"""The caption bench's pre-decoded frames (FrameCache) and the captioner actors' pool settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from videolake.benchmarks.caption import _extract_all, make_bench_clips
from videolake.platform.captioning.base import CaptionerConfig, FrameConfig
from videolake.platform.captioning.clip_frames import FrameCache, extract_frames

FRAMES = FrameConfig(sample_fps=4.0, min_frames=4, max_frames=4, max_pixels=112 * 112)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_bench_clips(tmp_path_factory.mktemp("videos"), videos=2, clips_per_video=3)


def _rows(table):
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}


def test_cached_clips_come_back_as_decoded_and_the_others_are_decoded(tmp_path, clips):
    config = CaptionerConfig(model="unused", frames=FRAMES)
    cached = clips.slice(0, 4)  # 4 of the 6 clips in the cache
    extracted = _extract_all(cached, config, None)
    cache = FrameCache.write(str(tmp_path), extracted, FRAMES, "video")

    out = cache.extract(_rows(clips))
    expected = extract_frames(_rows(clips), frame_config=FRAMES, input_mode="video")

    assert list(out["clip_id"]) == clips.column("clip_id").to_pylist()
    for i in range(clips.num_rows):
        assert out["frames"][i].shape == expected["frames"][i].shape == (4, 97, 129, 3)
        assert np.array_equal(out["frames"][i], expected["frames"][i])
        assert out["frames"][i].flags.writeable
        assert json.loads(out["video_meta"][i]) == json.loads(expected["video_meta"][i])
        assert out["num_frames"][i] == 4 and out["frame_error"][i] == ""
    # the order of the batch is kept even when cached and decoded clips interleave
    shuffled = clips.take([5, 0, 4, 1])
    got = cache.extract(_rows(shuffled))
    assert list(got["clip_id"]) == shuffled.column("clip_id").to_pylist()
    assert np.array_equal(got["frames"][0], expected["frames"][5])
    assert np.array_equal(got["frames"][3], expected["frames"][1])


def test_a_cache_made_with_other_frame_settings_is_refused(tmp_path, clips):
    config = CaptionerConfig(model="unused", frames=FRAMES)
    FrameCache.write(str(tmp_path), _extract_all(clips, config, None), FRAMES, "video")
    other = FrameConfig(sample_fps=4.0, min_frames=2, max_frames=2, max_pixels=112 * 112)
    with pytest.raises(ValueError, match="other frame settings"):
        FrameCache(str(tmp_path), other, "video").extract(_rows(clips))
    with pytest.raises(ValueError, match="other frame settings"):
        FrameCache(str(tmp_path), FRAMES, "images").extract(_rows(clips))


def test_caption_actors_run_one_call_at_a_time_in_their_main_thread():
    from videolake.platform.captioning.stage import actor_pool

    pool = actor_pool(CaptionerConfig(model="unused", num_actors=3))
    assert (pool.min_size, pool.max_size) == (3, 3)
    assert pool.max_concurrent_calls_per_actor == 1
    assert pool.enable_true_multi_threading is True
