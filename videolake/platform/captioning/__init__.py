"""Captioning: clip frames -> a vision-language model -> one clip_captions row per clip.

Light to import (no ray, vllm or torch at module level): the Dagster code location imports it for the config and
``code_version``. The pieces:
    base.py            CaptionerConfig (each backend's settings nested: VllmEngineConfig, EndpointConfig),
                       code_version, the CaptionerBackend contract and the CAPTIONERS registry
    prompts.py         versioned prompt templates (plain and structured-JSON)
    frames.py          frame extraction (CPU work) with the video metadata vLLM needs
    vllm_backend.py    ``vllm``: the offline engine in each actor
    openai_backend.py  ``openai``: an OpenAI-compatible endpoint, concurrency-limited, with retries
    model_cache.py     local dir in place, object-store model copied once to node-local disk (verified)
    pipeline.py        caption_clips: Ray Data extraction tasks -> ActorPoolStrategy of captioner actors
    metrics.py         CaptionMetrics: throughput, tokens/s, load time, stragglers, accelerator-seconds, goodput
    tiny_model.py      a tiny random-weight Qwen-VL for tests and the demo (its captions are random text)
    bench.py           caption stage vs raw LLM.generate on the same frames and prompts
"""

from videolake.platform.captioning.base import (
    CAPTIONERS,
    DEFAULT_VLLM_ENV,
    STATUS_FAILED,
    STATUS_OK,
    CaptionerBackend,
    CaptionerConfig,
    EndpointConfig,
    FrameConfig,
    SamplingConfig,
    VllmEngineConfig,
    code_version,
    get_captioner,
)
from videolake.platform.captioning.prompts import PROMPTS, PromptTemplate, get_prompt

__all__ = [
    "CAPTIONERS",
    "DEFAULT_VLLM_ENV",
    "PROMPTS",
    "STATUS_FAILED",
    "STATUS_OK",
    "CaptionerBackend",
    "CaptionerConfig",
    "EndpointConfig",
    "FrameConfig",
    "PromptTemplate",
    "SamplingConfig",
    "VllmEngineConfig",
    "caption_clips",
    "code_version",
    "get_captioner",
    "get_prompt",
]


def __getattr__(name: str):
    # caption_clips pulls pyarrow and the pipeline module: resolved on first use, not at import.
    if name == "caption_clips":
        from videolake.platform.captioning.pipeline import caption_clips

        return caption_clips
    raise AttributeError(name)
