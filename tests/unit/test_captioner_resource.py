"""CaptionerResource names the engine's settings for Dagster; every default is the engine's (one source)."""

from __future__ import annotations

import dataclasses

import pytest

from videolake.platform.captioning.base import (
    DEFAULT_VLLM_ENV,
    CaptionerConfig,
    EndpointConfig,
    FrameConfig,
    SamplingConfig,
    VllmEngineConfig,
)
from videolake.resources.captioner import CaptionerResource


def test_resource_defaults_are_the_engine_defaults():
    # on CPU actors the graph capture is skipped; every other field is the engine's own default
    assert CaptionerResource(model="/models/m").to_config() == CaptionerConfig(
        model="/models/m", vllm=VllmEngineConfig(enforce_eager=True)
    )


def test_gpu_actors_capture_graphs_unless_told_otherwise():
    assert CaptionerResource(model="/m", num_gpus_per_actor=1.0).to_config().vllm.enforce_eager is False
    assert CaptionerResource(model="/m", num_gpus_per_actor=1.0, enforce_eager=True).to_config().vllm.enforce_eager


def test_every_frame_setting_reaches_the_engine():
    names = [f.name for f in dataclasses.fields(FrameConfig)]
    values = {"sample_fps": 2.0, "min_frames": 3, "max_frames": 6, "max_pixels": 224 * 224}
    assert sorted(values) == sorted(names)
    assert CaptionerResource(model="/m", **values).to_config().frames == FrameConfig(**values)


# The nested configs of CaptionerConfig (by its field name) that flat resource fields map into, by field name.
NESTED = {"sampling": SamplingConfig, "frames": FrameConfig, "vllm": VllmEngineConfig, "endpoint": EndpointConfig}
PREFIXES = {"openai_": "endpoint"}  # resource field prefix -> the nested config its remainder names a field of
# Config fields the resource deliberately does not expose ("" = CaptionerConfig itself). A config field added
# without a resource field (or a note here) fails the test below.
NOT_ON_RESOURCE = {
    "": {"env", "extract_num_cpus", "extract_batch_size", *NESTED},  # env: only OMP_NUM_THREADS (ENV_FIELDS)
    "sampling": set(),
    "frames": set(),
    "vllm": {"dtype", "gpu_memory_utilization", "engine_kwargs"},
    "endpoint": {
        "max_concurrency",
        "timeout_s",
        "max_retries",
        "backoff_s",
        "image_format",
        "forward_env",
    },
}
# Resource fields that set one variable of config.env (the actors' environment): field -> variable.
ENV_FIELDS = {"engine_threads": "OMP_NUM_THREADS"}
# A non-default value for EVERY resource field. A resource field added without one here fails the test below.
NON_DEFAULT = {
    "track": "seed7",
    "source_track": "first_pass",
    "backend": "openai",
    "model": "/models/other",
    "model_name": "other-name",
    "model_revision": "r9",
    "prompt_version": "v1-json",
    "prompt": "Say what happens.",
    "temperature": 0.55,
    "top_p": 0.5,
    "max_tokens": 99,
    "min_tokens": 5,
    "seed": 7,
    "sample_fps": 2.5,
    "min_frames": 3,
    "max_frames": 5,
    "max_pixels": 200 * 200,
    "input_mode": "images",
    "batch_size": 9,
    "num_actors": 3,
    "num_gpus_per_actor": 0.5,
    "num_cpus_per_actor": 1.5,
    "max_model_len": 8192,
    "max_num_seqs": 5,
    "enforce_eager": True,  # GPU actors: unset would mean False
    "model_cache_dir": "/cache/models",
    "engine_threads": 3,
    "openai_base_url_env": "MY_BASE_URL",
    "openai_api_key_env": "MY_API_KEY",
    "openai_served_model_name": "served-name",
    "backend_params": {"style": "terse"},
}


def _target(name: str) -> tuple[str, str]:
    """(section, field) of CaptionerConfig that the resource field ``name`` maps into ("" = top level)."""
    if name in ENV_FIELDS:
        return "env", ENV_FIELDS[name]
    top = {f.name for f in dataclasses.fields(CaptionerConfig)} - set(NESTED)
    if name in top:
        return "", name
    for prefix, section in PREFIXES.items():
        if name.startswith(prefix):
            return section, name[len(prefix) :]
    hits = [sec for sec, cls in NESTED.items() if name in {f.name for f in dataclasses.fields(cls)}]
    assert len(hits) == 1, f"resource field {name!r} maps to {hits or 'no config field'}"
    return hits[0], name


def _value(config: CaptionerConfig, section: str, field: str):
    if section == "env":  # a variable of the actors' environment: a string
        value = config.env.get(field)
        return int(value) if value is not None and value.isdigit() else value
    return getattr(getattr(config, section) if section else config, field)


def test_every_resource_field_reaches_the_config_and_every_config_field_is_exposed_or_listed(tmp_path, monkeypatch):
    monkeypatch.setenv("VIDEOLAKE_DATA_DIR", str(tmp_path))  # model="" (the default) means the tiny test model
    fields = CaptionerResource.model_fields
    assert sorted(NON_DEFAULT) == sorted(fields), "give every CaptionerResource field a non-default value here"
    config = CaptionerResource(**NON_DEFAULT).to_config()
    targets = {}
    for name, value in NON_DEFAULT.items():
        assert value != fields[name].default, name
        section, field = targets[name] = _target(name)
        where = f"config.{section}.{field}" if section else f"config.{field}"
        assert _value(config, section, field) == value, f"{name} does not reach {where}"
        # and it is the resource field that put it there: left at its default, the config gets something else
        others = {k: v for k, v in NON_DEFAULT.items() if k != name}
        assert _value(CaptionerResource(**others).to_config(), section, field) != value, name
    assert {k: config.env[k] for k in config.env if k != "OMP_NUM_THREADS"} == {
        k: v for k, v in DEFAULT_VLLM_ENV.items() if k != "OMP_NUM_THREADS"
    }
    for section, cls in {"": CaptionerConfig, **NESTED}.items():
        exposed = {f for sec, f in targets.values() if sec == section}
        missing = {f.name for f in dataclasses.fields(cls)} - exposed
        assert missing == NOT_ON_RESOURCE[section], f"config.{section or 'CaptionerConfig'} fields not on the resource"


def test_the_test_model_policy_is_decided_in_one_place(tmp_path, monkeypatch):
    from videolake.definitions import gate_overrides
    from videolake.platform.gates import LENIENT_CAPTION_CONTENT
    from videolake.resources.test_model import TinyModelPolicy

    monkeypatch.setenv("VIDEOLAKE_DATA_DIR", str(tmp_path))
    tiny = CaptionerResource(temperature=0.2, top_p=0.99, max_tokens=16, seed=3)
    policy = tiny.test_model()
    assert policy == TinyModelPolicy(path=str(tmp_path / "models" / "tiny-qwen2_5_vl"))
    cfg = tiny.to_config()
    assert (cfg.model, cfg.model_name) == (policy.path, "tiny-random-qwen2.5-vl")
    # sampling only ever widened: temperature up to 0.7, a wider top_p kept, the rest as configured
    # the tiny model may not stop before 8 tokens (never an empty caption), within the configured budget
    assert cfg.sampling == SamplingConfig(temperature=0.7, top_p=0.99, max_tokens=16, min_tokens=8, seed=3)
    assert CaptionerResource(max_tokens=4).to_config().sampling.min_tokens == 4
    assert gate_overrides(tiny) == LENIENT_CAPTION_CONTENT
    # its engine runs one OpenMP thread unless told otherwise; a configured model keeps the default's two
    assert cfg.env == {**DEFAULT_VLLM_ENV, "OMP_NUM_THREADS": "1"}
    assert CaptionerResource(engine_threads=2).to_config().env["OMP_NUM_THREADS"] == "2"
    with pytest.raises(ValueError, match="omp_threads must be at least 1, got 0"):
        CaptionerResource(engine_threads=0).to_config()

    real = CaptionerResource(model="/models/m", temperature=0.2, top_p=0.9, max_tokens=16, seed=3)
    assert real.test_model() is None
    cfg = real.to_config()
    assert (cfg.model, cfg.model_name) == ("/models/m", None)
    assert cfg.env == DEFAULT_VLLM_ENV and DEFAULT_VLLM_ENV["OMP_NUM_THREADS"] == "2"
    assert cfg.sampling == SamplingConfig(temperature=0.2, top_p=0.9, max_tokens=16, min_tokens=0, seed=3)
    assert gate_overrides(real) is None
    assert real.ensure_model() == "/models/m"


def test_the_environment_names_the_backend_the_model_and_the_endpoints_name_for_it(monkeypatch):
    from videolake.resources.captioner import captioner_from_env

    monkeypatch.setenv("VIDEOLAKE_CAPTION_BACKEND", "openai")
    monkeypatch.setenv("VIDEOLAKE_CAPTION_MODEL", "/models/m")
    monkeypatch.setenv("VIDEOLAKE_OPENAI_SERVED_MODEL", "qwen3-vl")
    cfg = captioner_from_env().to_config()
    assert (cfg.backend, cfg.model, cfg.endpoint.served_model_name) == ("openai", "/models/m", "qwen3-vl")
    monkeypatch.setenv("VIDEOLAKE_OPENAI_SERVED_MODEL", "")
    assert captioner_from_env().to_config().endpoint.served_model_name is None
