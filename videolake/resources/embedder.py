"""The embedder resource: which model embeds clips for semantic deduplication (the clip_embeddings asset).

Off unless a model is configured (``model`` empty): there is no real embedding model on a machine without a model
hub, and a random-weight one would call unrelated clips duplicates. With a model, the code location gains the
clip_embeddings asset and its gates, and filtered_clips reads its vectors (QualityConfig.semantic_eps). Its settings
form the asset's code_version, so changing the model marks the existing partitions stale.
"""

from __future__ import annotations

import os

import dagster as dg
from pydantic import Field

from videolake.platform.embedding.base import EmbedderConfig

_ENGINE = EmbedderConfig(model="")


class EmbedderResource(dg.ConfigurableResource):
    model: str = Field(
        default="",
        description="Embedding model directory (Hugging Face layout). Empty: no "
        "clip_embeddings asset and no semantic duplicate rule.",
    )
    backend: str = Field(
        default=_ENGINE.backend,
        description="Embedder backend: a name in EMBEDDERS ('torch_clip' or an installed plugin).",
    )
    model_name: str | None = Field(
        default=None,
        description="Name recorded in clip_embeddings.model (default: "
        "the model directory's name and a hash of its config).",
    )
    frames_per_clip: int = Field(
        default=_ENGINE.frames_per_clip, description="Frames per clip, evenly spread; their embeddings are mean-pooled."
    )
    max_pixels: int = Field(default=_ENGINE.max_pixels, description="Frames are decoded to at most this many pixels.")
    batch_size: int = Field(default=_ENGINE.batch_size, description="Clips per backend call.")
    device: str = Field(
        default=_ENGINE.device,
        description="'auto' (cuda when the worker sees a GPU), 'cpu' or "
        "'cuda' (each unit then asks the cluster for a GPU).",
    )
    backend_params: dict[str, str] = Field(
        default={}, description="The backend's own settings by name (typed by its Config; a bad one fails the step)."
    )

    @property
    def enabled(self) -> bool:
        return bool(self.model)

    def to_config(self) -> EmbedderConfig:
        if not self.model:
            raise ValueError("no embedding model configured (VIDEOLAKE_EMBED_MODEL)")
        return EmbedderConfig(
            model=self.model,
            backend=self.backend,
            model_name=self.model_name,
            frames_per_clip=self.frames_per_clip,
            max_pixels=self.max_pixels,
            batch_size=self.batch_size,
            device=self.device,
            params=dict(self.backend_params),
        )


def embedder_from_env() -> EmbedderResource:
    """The embedder settings from the environment: VIDEOLAKE_EMBED_MODEL (a model directory; unset: off),
    VIDEOLAKE_EMBED_BACKEND, VIDEOLAKE_EMBED_DEVICE."""
    env = os.environ
    return EmbedderResource(
        model=env.get("VIDEOLAKE_EMBED_MODEL", ""),
        backend=env.get("VIDEOLAKE_EMBED_BACKEND", _ENGINE.backend),
        device=env.get("VIDEOLAKE_EMBED_DEVICE", _ENGINE.device),
    )
