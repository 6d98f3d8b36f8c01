"""``torch_clip``: a Hugging Face CLIP vision tower with its projection, run with plain PyTorch in each actor.

Why CLIP image embeddings mean-pooled over a few frames: it is the cheapest embedding that places two clips of the
same shot close together (whatever their encoding, crop or length), and it needs no video model. NeMo Curator's
video semantic dedup works on one vector per clip in the same way; a video encoder can replace this backend
behind the same contract.

Each frame goes through ``CLIPImageProcessor`` (resize, centre crop, normalise) and
``CLIPVisionModelWithProjection``; the frame vectors are L2-normalised (every frame weighs the same, whatever its
norm), averaged over the clip and normalised again (by the base class). The model is read from a local directory
only (``local_files_only``): actors never reach a model hub.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from videolake.platform.embedding.base import EMBEDDERS, Embedder
from videolake.platform.params import param

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TorchClipParams:
    """``torch_clip``'s own settings (``EmbedderConfig.params``)."""

    dtype: str = param(
        "auto",
        "weights and activations: auto = float16 on cuda, float32 on cpu",
        choices=("auto", "float32", "float16", "bfloat16"),
    )
    frames_per_forward: int = param(
        256, "frames per forward pass (bounds activation memory; a batch's clips are split across passes)", min=1
    )
    num_threads: int = param(0, "torch CPU threads in the actor; 0 = leave torch's default", min=0)


def resolve_device(device: str) -> str:
    """``auto`` -> cuda when torch sees a GPU, else cpu; ``cuda`` without a GPU is an error (a misplaced actor)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' but torch sees no GPU (was the actor scheduled with num_gpus?)")
    return device


def sample_frames(frames: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` frames evenly spread over the clip (the centre of each of ``count`` segments, as
    clips.sample_indices); all of them when there are fewer."""
    t = frames.shape[0]
    if t <= count:
        return frames
    return frames[[int((k + 0.5) * t / count) for k in range(count)]]


@EMBEDDERS.register("torch_clip")
class TorchClipEmbedder(Embedder):
    registered_name = "torch_clip"
    Config = TorchClipParams
    model: Any = None  # a transformers CLIPVisionModelWithProjection after load()
    processor: Any = None  # its CLIPImageProcessor

    def load(self) -> None:
        import torch
        from transformers import CLIPImageProcessor, CLIPVisionModelWithProjection

        p: TorchClipParams = self.params
        if p.num_threads:
            torch.set_num_threads(p.num_threads)
        self.device = resolve_device(self.config.device)
        if p.dtype == "auto":
            self.dtype = torch.float16 if self.device == "cuda" else torch.float32
        else:
            self.dtype = getattr(torch, p.dtype)
        self.processor = CLIPImageProcessor.from_pretrained(self.config.model, local_files_only=True)
        model = CLIPVisionModelWithProjection.from_pretrained(
            self.config.model, local_files_only=True, dtype=self.dtype
        )
        # transformers types the wrapped `to` as taking the model itself (its decorator's signature)
        self.model = model.to(self.device).eval()  # type: ignore[arg-type]
        self.dim = int(self.model.config.projection_dim)

    def unload(self) -> None:
        import torch

        self.model = None
        self.processor = None
        if getattr(self, "device", "cpu") == "cuda":
            torch.cuda.empty_cache()

    def embed(self, clips: Sequence[np.ndarray]) -> list[np.ndarray]:
        import torch

        sampled = [sample_frames(c, self.config.frames_per_clip) for c in clips]
        images = [frame for clip in sampled for frame in clip]
        owner = np.repeat(np.arange(len(sampled)), [len(c) for c in sampled])
        step = self.params.frames_per_forward
        parts = []
        with torch.inference_mode():
            for start in range(0, len(images), step):
                pixels = self.processor(images=images[start : start + step], return_tensors="pt")["pixel_values"]
                out = self.model(pixel_values=pixels.to(self.device, self.dtype)).image_embeds
                parts.append(torch.nn.functional.normalize(out.float(), dim=-1).cpu().numpy())
        per_frame = np.concatenate(parts).astype(np.float64)
        return [per_frame[owner == i].mean(axis=0) for i in range(len(sampled))]
