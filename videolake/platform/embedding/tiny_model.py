"""A tiny random-weight CLIP vision tower with projection, built offline in well under a second.

Why: tests and CPU demos must run the real ``torch_clip`` path (image processor, vision transformer, projection,
pooling) without a model hub. The weights are random, so the vectors say nothing about content beyond what random
features keep (equal pictures still give equal vectors, which is what the tests check). Point the embedder at a
real checkpoint (e.g. openai/clip-vit-base-patch32, downloaded beforehand) for real embeddings.

Sizes: hidden 32, 2 layers, 2 heads, patch 16, image 64 (16 patches), projection 16; the image processor resizes the
shorter side to 64 and centre-crops 64x64. Seeded, so two builds give the same weights.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Written last, after every other file: a directory without it is an incomplete build and is rebuilt.
COMPLETE_MARKER = ".videolake-tiny-model-complete"
TINY_CLIP_DIRNAME = "tiny-clip"  # a suggested directory name under $VIDEOLAKE_DATA_DIR/models

_VISION: dict[str, Any] = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    patch_size=16,
    image_size=64,
    projection_dim=16,
)


def build_tiny_clip(dest: str | os.PathLike, *, seed: int = 0) -> Path:
    """Build the model into ``dest`` (cached: a complete directory is returned as is) and return its path.

    The build goes to a sibling temporary directory renamed into place at the end, so a crash never leaves a
    half-written model where a loader would find it; processes that ask at once build it once
    (videolake/platform/runtime/built_once.py).
    """
    from videolake.platform.runtime.built_once import build_once

    out = Path(dest).resolve()
    t0 = time.perf_counter()

    def build(tmp: Path) -> None:
        import torch
        from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

        config = CLIPVisionConfig(**_VISION)
        with torch.random.fork_rng(devices=[]):  # seeded without disturbing the caller's random state
            torch.manual_seed(seed)
            model = CLIPVisionModelWithProjection(config).eval()
        model.save_pretrained(tmp, safe_serialization=True)
        size = _VISION["image_size"]
        CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size}).save_pretrained(tmp)
        (tmp / COMPLETE_MARKER).write_text(
            json.dumps({"model": "clip_vision_with_projection", "seed": seed, "random_weights": True})
        )

    if build_once(out, lambda d: (d / COMPLETE_MARKER).is_file(), build):
        log.info(
            "built tiny random-weight CLIP vision model at %s in %.2fs (its embeddings are random features)",
            out,
            time.perf_counter() - t0,
        )
    return out
