"""CaptionerResource names the engine's settings for Dagster; every default is the engine's (one source)."""

from __future__ import annotations

import dataclasses

from videolake.platform.captioning.base import CaptionerConfig, FrameConfig
from videolake.resources.captioner import CaptionerResource


def test_resource_defaults_are_the_engine_defaults():
    # on CPU actors the graph capture is skipped; every other field is the engine's own default
    assert CaptionerResource(model="/models/m").to_config() == CaptionerConfig(model="/models/m", enforce_eager=True)


def test_gpu_actors_capture_graphs_unless_told_otherwise():
    assert CaptionerResource(model="/m", num_gpus_per_actor=1.0).to_config().enforce_eager is False
    assert CaptionerResource(model="/m", num_gpus_per_actor=1.0, enforce_eager=True).to_config().enforce_eager is True


def test_every_frame_setting_reaches_the_engine():
    names = [f.name for f in dataclasses.fields(FrameConfig)]
    values = {"sample_fps": 2.0, "min_frames": 3, "max_frames": 6, "max_pixels": 224 * 224}
    assert sorted(values) == sorted(names)
    assert CaptionerResource(model="/m", **values).to_config().frames == FrameConfig(**values)
