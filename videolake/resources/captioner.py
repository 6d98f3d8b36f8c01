"""The captioner resource: which model, prompt, sampling and actor layout the clip_captions asset uses.

Its settings also form the asset's code_version (see videolake.assets.captions), so changing the model, revision,
prompt or sampling marks existing partitions stale in the UI.
"""

from __future__ import annotations

from typing import Optional

import dagster as dg
from pydantic import Field


class CaptionerResource(dg.ConfigurableResource):
    backend: str = Field(default="vllm", description="Captioner backend: 'vllm' (offline engine) or 'openai'.")
    model: str = Field(
        default="",
        description="Model directory or object-store URI/prefix (copied once to the node-local cache). Empty: the "
        "tiny random-weight test model, built offline on first use (its captions are random text).",
    )
    model_revision: Optional[str] = Field(default=None, description="Model revision recorded with every caption.")
    prompt_version: str = Field(default="v1-describe", description="Name of the versioned prompt template.")
    temperature: float = Field(default=0.0, description="Sampling temperature.")
    top_p: float = Field(default=1.0, description="Nucleus sampling probability mass.")
    max_tokens: int = Field(default=128, description="Maximum generated tokens per caption.")
    seed: int = Field(default=0, description="Sampling seed (deterministic captions for the same inputs).")
    sample_fps: float = Field(default=1.0, description="Frames sampled per second of clip.")
    max_frames: int = Field(default=8, description="At most this many frames per clip.")
    max_pixels: int = Field(default=224 * 224, description="Frames are resized to at most this many pixels.")
    input_mode: str = Field(default="video", description="'video' (frames + metadata) or 'images'.")
    batch_size: int = Field(default=8, description="Clips per actor batch.")
    num_actors: int = Field(default=1, description="Captioner actors (model replicas) in the Ray actor pool.")
    num_gpus_per_actor: float = Field(default=0.0, description="GPUs per actor (0 on CPU).")
    num_cpus_per_actor: float = Field(default=0.5, description="CPUs per actor; fractional avoids 2-core deadlocks.")
    max_model_len: int = Field(default=4096, description="vLLM max_model_len.")
    cache_dir: str = Field(default="data/model-cache", description="Node-local model cache directory.")
    openai_base_url_env: str = Field(default="VIDEOLAKE_OPENAI_BASE_URL", description="Env var with the endpoint URL.")
    openai_api_key_env: str = Field(default="VIDEOLAKE_OPENAI_API_KEY", description="Env var with the API key.")

    def to_config(self):
        from videolake.platform.captioning.base import CaptionerConfig

        return CaptionerConfig.from_dict(self.model_dump())
