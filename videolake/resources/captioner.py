"""The captioner resource: which model, prompt, sampling and actor layout the clip_captions asset uses.

Its settings also form the asset's code_version (see videolake.assets.captions), so changing the model, revision,
prompt or sampling marks existing partitions stale in the UI.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg
from pydantic import Field

from videolake.platform.captioning.base import (
    DEFAULT_TRACK,
    CaptionerConfig,
    EndpointConfig,
    FrameConfig,
    SamplingConfig,
    VllmEngineConfig,
    vllm_env,
)
from videolake.resources.test_model import TinyModelPolicy, tiny_model_policy

# Every default below is the engine's (one source per setting): the resource only names them for Dagster's launchpad.
# The fields stay flat (they are the launchpad/run-config surface); ``to_config`` builds the nested configs.
_ENGINE = CaptionerConfig(model="")
_SAMPLING, _FRAMES, _VLLM, _ENDPOINT = SamplingConfig(), FrameConfig(), VllmEngineConfig(), EndpointConfig()


class CaptionerResource(dg.ConfigurableResource):
    track: str = Field(
        default=DEFAULT_TRACK,
        description="The caption track these settings write (clip_captions.caption_track). The resource's own "
        "settings are the `default` track; VIDEOLAKE_CAPTION_TRACKS declares others (docs/captioning.md).",
    )
    source_track: str | None = Field(
        default=None,
        description="A second pass: the track whose ok captions this text-only track rewrites (input_mode 'text').",
    )
    backend: str = Field(default=_ENGINE.backend, description="Captioner backend: 'vllm' (offline engine) or 'openai'.")
    model: str = Field(
        default="",
        description="Model directory or object-store URI (copied once to the node-local cache). Empty: the tiny "
        "random-weight test model, built offline on first use under data/models (its captions are random text).",
    )
    model_name: str | None = Field(default=None, description="Name recorded in clip_captions.model (default: model).")
    model_revision: str | None = Field(default=None, description="Model revision recorded with every caption.")
    prompt_version: str = Field(default=_ENGINE.prompt_version, description="Name of the versioned prompt template.")
    prompt: str | None = Field(default=None, description="Overrides the template's text (hashed into code_version).")
    temperature: float = Field(default=_SAMPLING.temperature, description="Sampling temperature.")
    top_p: float = Field(default=_SAMPLING.top_p, description="Nucleus sampling probability mass.")
    max_tokens: int = Field(default=_SAMPLING.max_tokens, description="Maximum generated tokens per caption.")
    min_tokens: int = Field(
        default=_SAMPLING.min_tokens,
        description="Tokens the model must write before it may stop (vLLM min_tokens; 0: none).",
    )
    seed: int = Field(default=_SAMPLING.seed, description="Base sampling seed (per-clip seeds derive from it).")
    sample_fps: float = Field(default=_FRAMES.sample_fps, description="Frames sampled per second of clip.")
    min_frames: int = Field(default=_FRAMES.min_frames, description="At least this many frames per clip.")
    max_frames: int = Field(default=_FRAMES.max_frames, description="At most this many frames per clip.")
    max_pixels: int = Field(default=_FRAMES.max_pixels, description="Frames are resized to at most this many pixels.")
    input_mode: str = Field(
        default=_ENGINE.input_mode,
        description="'video' (frames + metadata), 'images', or 'text' (a second pass: the source track's caption).",
    )
    batch_size: int = Field(
        default=_ENGINE.batch_size, description="Clips per actor batch (>= max_num_seqs keeps vLLM busy)."
    )
    num_actors: int = Field(
        default=_ENGINE.num_actors, description="Captioner actors (model replicas) in the Ray actor pool."
    )
    num_gpus_per_actor: float = Field(default=_ENGINE.num_gpus_per_actor, description="GPUs per actor (0 on CPU).")
    num_cpus_per_actor: float = Field(
        default=_ENGINE.num_cpus_per_actor, description="CPUs per actor; fractional avoids 2-core deadlocks."
    )
    max_model_len: int = Field(default=_VLLM.max_model_len, description="vLLM max_model_len.")
    max_num_seqs: int = Field(default=_VLLM.max_num_seqs, description="vLLM concurrent sequences per engine.")
    enforce_eager: bool | None = Field(
        default=None, description="Skip CUDA graph capture; unset: True for CPU actors, False for GPU actors."
    )
    engine_threads: int | None = Field(
        default=None,
        description="OpenMP threads of each engine (OMP_NUM_THREADS in its actors); unset: 2, or 1 for the tiny "
        "test model, whose matrices are too small for a second thread to help.",
    )
    model_cache_dir: str | None = Field(default=None, description="Node-local model cache directory.")
    openai_base_url_env: str = Field(default=_ENDPOINT.base_url_env, description="Env var with the endpoint URL.")
    openai_api_key_env: str = Field(default=_ENDPOINT.api_key_env, description="Env var with the API key.")
    openai_served_model_name: str | None = Field(
        default=_ENDPOINT.served_model_name,
        description="The model's name at the endpoint (vLLM's --served-model-name); unset: the model setting. "
        "clip_captions.model and the code_version still name the model setting.",
    )
    backend_params: dict[str, str] = Field(
        default={}, description="A plugin backend's settings by name (typed by its Config; a bad one fails the step)."
    )

    def test_model(self) -> TinyModelPolicy | None:
        """The tiny test model's policy when no model is configured (videolake.resources.test_model), else None."""
        return tiny_model_policy(self.model)

    def model_path(self) -> str:
        """The configured model, or the tiny test model (built once, offline) when none is configured."""
        policy = self.test_model()
        return policy.path if policy else self.model

    def to_config(self):
        policy = self.test_model()
        sampling = SamplingConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            min_tokens=self.min_tokens,
            seed=self.seed,
        )
        return CaptionerConfig(
            model=self.model_path(),
            track=self.track,
            source_track=self.source_track,
            backend=self.backend,
            model_name=self.model_name or (policy.model_name if policy else None),
            model_revision=self.model_revision,
            model_cache_dir=self.model_cache_dir,
            prompt_version=self.prompt_version,
            prompt=self.prompt,
            sampling=policy.sampling(sampling) if policy else sampling,
            frames=FrameConfig(
                sample_fps=self.sample_fps,
                min_frames=self.min_frames,
                max_frames=self.max_frames,
                max_pixels=self.max_pixels,
            ),
            input_mode=self.input_mode,
            batch_size=self.batch_size,
            num_actors=self.num_actors,
            num_cpus_per_actor=self.num_cpus_per_actor,
            num_gpus_per_actor=self.num_gpus_per_actor,
            vllm=VllmEngineConfig(
                max_model_len=self.max_model_len,
                max_num_seqs=self.max_num_seqs,
                enforce_eager=self.enforce_eager if self.enforce_eager is not None else not self.num_gpus_per_actor,
            ),
            endpoint=EndpointConfig(
                base_url_env=self.openai_base_url_env,
                api_key_env=self.openai_api_key_env,
                served_model_name=self.openai_served_model_name,
            ),
            backend_params=dict(self.backend_params),
            env=vllm_env(self.engine_threads_or_default()),
        )

    def engine_threads_or_default(self) -> int | None:
        """The engine's OpenMP threads: as configured, else the tiny test model's, else None (DEFAULT_VLLM_ENV's)."""
        if self.engine_threads is not None:
            return self.engine_threads
        policy = self.test_model()
        return policy.engine_threads if policy else None

    def ensure_model(self, log=None) -> str:
        """Build the tiny test model on first use (seconds, offline); a configured model is used as given."""
        policy = self.test_model()
        return policy.ensure_built(log) if policy else self.model


def captioner_from_env(default_gpus: float = 0.0):
    """The captioner settings. Model and prompt are plain settings (not secrets), read here so that they also
    define the caption asset's code_version."""
    env = os.environ
    kwargs: dict[str, Any] = {
        "backend": env.get("VIDEOLAKE_CAPTION_BACKEND", "vllm"),
        "model": env.get("VIDEOLAKE_CAPTION_MODEL", ""),
        "model_revision": env.get("VIDEOLAKE_CAPTION_MODEL_REVISION") or None,
        "prompt_version": env.get("VIDEOLAKE_CAPTION_PROMPT_VERSION", "v1-describe"),
        "num_actors": int(env.get("VIDEOLAKE_CAPTION_ACTORS", "1")),
        "num_gpus_per_actor": float(env.get("VIDEOLAKE_CAPTION_GPUS_PER_ACTOR", str(default_gpus))),
        "openai_served_model_name": env.get("VIDEOLAKE_OPENAI_SERVED_MODEL") or None,
    }
    if kwargs["num_gpus_per_actor"] > 0:
        kwargs["num_cpus_per_actor"] = 1.0
    return CaptionerResource(**kwargs)


TRACKS_ENV = "VIDEOLAKE_CAPTION_TRACKS"  # a YAML file declaring the caption tracks beside the default one


def load_caption_tracks(path: str | None = None) -> dict[str, dict[str, Any]]:
    """The caption tracks declared beside the default one: name -> overrides of the captioner's settings (the
    CaptionerResource's fields: model, prompt_version, prompt, temperature, seed, max_frames, source_track ...).

    Read from ``path`` (default: the file $VIDEOLAKE_CAPTION_TRACKS names; none: no other track), a YAML mapping::

        tracks:
          seed7: {seed: 7}
          json: {prompt_version: v1-json, max_tokens: 256}
          enhanced: {source_track: default, input_mode: text, prompt_version: v1-enhance}

    A name is lower-case letters, digits and '_'; ``default`` is the resource's own settings and cannot be
    redeclared; an unknown setting or a source_track that is not a track fails here, when the code location loads.
    """
    import yaml

    from videolake.platform.captioning.base import check_track_name

    path = path if path is not None else os.environ.get(TRACKS_ENV, "").strip()
    if not path:
        return {}
    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh) or {}
    tracks = doc.get("tracks", {}) if isinstance(doc, dict) else None
    if not isinstance(tracks, dict):
        raise ValueError(f"{path}: expected a mapping `tracks: {{NAME: {{setting: value}}}}`")
    known = set(CaptionerResource.model_fields) - {"track"}
    out: dict[str, dict[str, Any]] = {}
    for name, overrides in tracks.items():
        check_track_name(str(name))
        if name == DEFAULT_TRACK:
            raise ValueError(
                f"{path}: track {DEFAULT_TRACK!r} is the captioner's own settings; name the track otherwise"
            )
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"{path}: track {name!r}: unknown settings {unknown}; known: {sorted(known)}")
        out[str(name)] = overrides
    for name, overrides in out.items():
        source = overrides.get("source_track")
        if source is not None and source != DEFAULT_TRACK and source not in out:
            raise ValueError(f"{path}: track {name!r}: source_track {source!r} is not a declared track")
    return out


def track_captioner(captioner: CaptionerResource, track: str, overrides: dict[str, Any]) -> CaptionerResource:
    """The settings of caption track ``track``: ``captioner``'s (the default track's, as configured for the run)
    with the track's ``overrides`` on top."""
    fields = {k: getattr(captioner, k) for k in CaptionerResource.model_fields}
    return CaptionerResource(**{**fields, **overrides, "track": track})
