"""The tiny random-weight test model: everything that choosing it changes, decided in this one module.

With no captioning model configured, videolake captions with a tiny random-weight Qwen2.5-VL built offline (tests,
the demo, a laptop with no model hub). Its captions are random text, so three things differ from a real model:
- the name recorded in clip_captions.model (``tiny-random-qwen2.5-vl``, never mistaken for a real checkpoint);
- wider sampling and a floor on the output length (vLLM's ``min_tokens``): near-greedy, the random weights often
  emit only special tokens, and even with wide sampling they sometimes stop at once (an empty caption, a failed
  row that fails the blocking failure-rate gate of a demo day). With a real model nothing changes: an empty output
  stays a failed row;
- the caption content gates (length, repetition, refusal) warn instead of block; the structural ones still block;
- its engine runs one OpenMP thread (``TINY_MODEL_ENGINE_THREADS``): a second one never helps matrices this small,
  and on a busy machine it made the engine several times slower.

The captioner resource, the code location's gate checks and ``videolake doctor`` ask ``tiny_model_policy(model)``
for the policy; none of them decides anything about the test model itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from videolake.platform.captioning.base import TINY_MODEL_ENGINE_THREADS, SamplingConfig
from videolake.platform.captioning.tiny_model import TINY_MODEL_DIRNAME


@dataclass(frozen=True)
class TinyModelPolicy:
    path: str  # where the model lives; built there on first use (seconds, offline)
    model_name: str = "tiny-random-qwen2.5-vl"  # recorded in clip_captions.model
    min_temperature: float = 0.7  # sampling at least this wide, so that captions are (random) text
    min_top_p: float = 0.95
    min_tokens: int = 8  # the model may not stop before this many tokens: never an empty caption
    engine_threads: int = TINY_MODEL_ENGINE_THREADS  # OpenMP threads of its engine (base.py says why)

    def sampling(self, configured: SamplingConfig) -> SamplingConfig:
        return replace(
            configured,
            temperature=max(configured.temperature, self.min_temperature),
            top_p=max(configured.top_p, self.min_top_p),
            min_tokens=min(max(configured.min_tokens, self.min_tokens), configured.max_tokens),
        )

    def gate_overrides(self) -> dict[str, Any]:
        """Gate config on top of the defaults: the caption content gates warn (random text cannot pass them)."""
        from videolake.platform.gates import LENIENT_CAPTION_CONTENT

        return LENIENT_CAPTION_CONTENT

    def ensure_built(self, log: Any = None) -> str:
        from videolake.platform.captioning.tiny_model import build_tiny_qwen_vl

        if log:
            log.warning(
                "No captioning model configured: using the tiny RANDOM-WEIGHT Qwen2.5-VL test model at "
                f"{self.path}. Its captions are random text; set VIDEOLAKE_CAPTION_MODEL to a real checkpoint."
            )
        return build_tiny_qwen_vl(self.path)

    def describe(self) -> str:
        state = "built" if os.path.isdir(self.path) else "built on first use"
        return f"no model configured: the tiny random-weight test model ({state} at {self.path})"


def tiny_model_policy(model: str) -> TinyModelPolicy | None:
    """The test model's policy when no model is configured (``model`` empty), else None: a real model is used as
    configured. The model directory is under $VIDEOLAKE_DATA_DIR/models, read when asked, not at import."""
    if model:
        return None
    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    return TinyModelPolicy(path=os.path.join(data, "models", TINY_MODEL_DIRNAME))
