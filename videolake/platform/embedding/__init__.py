"""Clip embeddings and semantic deduplication: clip frames -> one L2-normalised vector per clip -> duplicate groups.

Light to import (no torch or transformers at module level; never dagster). The pieces:
    base.py           EmbedderConfig, the Embedder contract (resources, setup / __call__ / teardown) and the
                      EMBEDDERS registry, model_label, embedding_version
    torch_backend.py  ``torch_clip``: a Hugging Face CLIP vision tower with projection, frames mean-pooled per clip
    tiny_model.py     a tiny random-weight CLIP for tests (its vectors are random features)
    semantic.py       NeMo Curator-style semantic dedup: k-means, pairs within clusters at cosine >= 1 - eps,
                      connected components, one kept clip per group; the similarity summary to choose eps from
"""

from videolake.platform.embedding.base import (
    EMBEDDERS,
    STATUS_FAILED,
    STATUS_OK,
    Embedder,
    EmbedderConfig,
    embedding_version,
    get_embedder,
    model_label,
)

__all__ = [
    "EMBEDDERS",
    "STATUS_FAILED",
    "STATUS_OK",
    "Embedder",
    "EmbedderConfig",
    "embedding_version",
    "get_embedder",
    "model_label",
]
