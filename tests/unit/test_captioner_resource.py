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


def test_the_test_model_policy_is_decided_in_one_place(tmp_path, monkeypatch):
    from videolake.definitions import gate_overrides
    from videolake.platform.captioning.base import SamplingConfig
    from videolake.platform.gates import LENIENT_CAPTION_CONTENT
    from videolake.resources.test_model import TinyModelPolicy

    monkeypatch.setenv("VIDEOLAKE_DATA_DIR", str(tmp_path))
    tiny = CaptionerResource(temperature=0.2, top_p=0.99, max_tokens=16, seed=3)
    policy = tiny.test_model()
    assert policy == TinyModelPolicy(path=str(tmp_path / "models" / "tiny-qwen2_5_vl"))
    cfg = tiny.to_config()
    assert (cfg.model, cfg.model_name) == (policy.path, "tiny-random-qwen2.5-vl")
    # sampling only ever widened: temperature up to 0.7, a wider top_p kept, the rest as configured
    assert cfg.sampling == SamplingConfig(temperature=0.7, top_p=0.99, max_tokens=16, seed=3)
    assert gate_overrides(tiny) == LENIENT_CAPTION_CONTENT

    real = CaptionerResource(model="/models/m", temperature=0.2, top_p=0.9, max_tokens=16, seed=3)
    assert real.test_model() is None
    cfg = real.to_config()
    assert (cfg.model, cfg.model_name) == ("/models/m", None)
    assert cfg.sampling == SamplingConfig(temperature=0.2, top_p=0.9, max_tokens=16, seed=3)
    assert gate_overrides(real) is None
    assert real.ensure_model() == "/models/m"
