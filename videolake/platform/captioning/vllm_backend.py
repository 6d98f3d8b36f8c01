"""The ``vllm`` backend: vLLM's offline engine inside each captioner actor (Qwen2.5-VL / Qwen3-VL family).

One ``vllm.LLM`` per actor, loaded once in ``setup()``; each batch is one ``LLM.generate`` call so the engine
schedules all of the batch's clips together. Frames go in as a video with its metadata (fps, duration,
total_num_frames, frames_indices, do_sample_frames=False: the frames are already sampled, and without metadata
vLLM raises "Video metadata is required") or as separate images. The prompt is the model's own chat template
applied to the versioned prompt. A prompt with a JSON schema gets vLLM structured outputs.

vllm is imported in ``load()`` only: this module is imported by the Dagster code location.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from typing import Any

from videolake.platform.captioning.base import CAPTIONERS, CaptionerBackend, CaptionerConfig, CaptionResult, clip_seed
from videolake.platform.captioning.prompts import check_structured_output

log = logging.getLogger(__name__)


def apply_env(env: dict[str, str] | Any) -> None:
    """Set the config's vLLM environment in this process where not already set (in-process use: bench, tests;
    inside Ray actors the same values arrive through runtime_env)."""
    for key, value in dict(env).items():
        os.environ.setdefault(key, str(value))


@CAPTIONERS.register("vllm")
class VLLMCaptioner(CaptionerBackend):
    def __init__(self, config: CaptionerConfig, store: Any | None = None) -> None:
        super().__init__(config, store=store)
        self.llm: Any = None  # a vllm.LLM after setup(); vllm is imported there, never at module level
        self.model_dir: str | None = None
        self.model_copy_s = 0.0
        self.model_copied = False
        self._prompt_cache: dict[tuple[str, int], str] = {}

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def load(self) -> None:
        from videolake.platform.captioning.model_cache import resolve_model

        apply_env(self.config.env)
        local = resolve_model(
            self.config.model, cache_dir=self.config.model_cache_dir, store_factory=store_factory_for(self.store)
        )
        self.model_dir, self.model_copy_s, self.model_copied = local.path, local.seconds, local.copied
        self.llm = create_llm(self.config, self.model_dir)
        import vllm

        self._engine_version = str(vllm.__version__)
        self.warm_up()

    def engine_info(self) -> tuple[str, str]:
        """vLLM and the version of the vllm package the engine was built from."""
        return "vllm", getattr(self, "_engine_version", "")

    def warm_up_requests(self) -> int:
        """The warm-up's batch: the largest one the engine will step (batch_size, at most max_num_seqs at once), or
        fewer when the work is smaller (``largest_batch``)."""
        largest = min(self.config.batch_size, self.config.vllm.max_num_seqs)
        if self.largest_batch is not None:
            largest = min(largest, self.largest_batch)
        return max(1, largest)

    def warm_up(self) -> None:
        """A full batch of the largest configured input (max_frames at max_pixels) through the whole path before the
        first real batch: lazy initialisation (processor, per-shape kernels) is paid here, inside model load time,
        and a max_model_len too small for the configured frames fails at setup instead of on every clip. A full
        batch is the largest one the work will send: ``largest_batch`` when the stage has fewer clips to do than
        batch_size (a daily partition of three clips does not warm up 32 requests on a CPU engine: 18 s)."""
        import math

        import numpy as np

        fc = self.config.frames
        side = max(28, int(math.isqrt(fc.max_pixels)))
        n = fc.max_frames + (fc.max_frames % 2 if self.config.input_mode == "video" else 0)
        meta = {
            "fps": 2.0,
            "duration": n / 2.0,
            "total_num_frames": n,
            "frames_indices": list(range(n)),
            "video_backend": "pyav",
            "do_sample_frames": False,
        }
        count = self.warm_up_requests()
        text_only = self.config.input_mode == "text"
        # The configured sampling (temperature, top-p, max_tokens, structured outputs) and per-request seeds: the
        # warm-up then runs every decode batch size and the sampler's own path once. With greedy 2-token requests
        # the first real batch paid for them instead (CPU engine: ~2.5x a steady batch).
        # Distinct frames per request: identical ones hit vLLM's multimodal cache, and the vision encoder would
        # then never see a full batch before the first real one.
        rng = np.random.default_rng(0)
        prompts, params = self.build_requests(
            [
                {
                    "clip_id": f"warm-up-{i}",
                    "frames": rng.integers(0, 256, (0 if text_only else n, side, side, 3), dtype=np.uint8),
                    "video_meta": meta,
                    "source_caption": f"A warm-up caption number {i} of a clip.",
                }
                for i in range(count)
            ]
        )
        t0 = time.perf_counter()
        self.llm.generate(prompts, params, use_tqdm=False)
        log.info("warm-up: %d requests of %d frames %dx%d in %.1fs", count, n, side, side, time.perf_counter() - t0)

    def unload(self) -> None:
        self.llm = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - best effort
            pass

    # -- requests -------------------------------------------------------------------------------------------------

    def chat_prompt(self, num_frames: int) -> str:
        """The model's chat template applied to the prompt with one video (or ``num_frames`` images)."""
        key = (self.config.input_mode, num_frames if self.config.input_mode == "images" else 1)
        if key not in self._prompt_cache:
            media = [{"type": "video"}] if self.config.input_mode == "video" else [{"type": "image"}] * num_frames
            tokenizer = self.llm.get_tokenizer()
            self._prompt_cache[key] = tokenizer.apply_chat_template(
                self.prompt.messages(media), tokenize=False, add_generation_prompt=True
            )
        return self._prompt_cache[key]

    def sampling_params(self, clip_id: str):
        from vllm import SamplingParams

        s = self.config.sampling
        kwargs: dict[str, Any] = dict(
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            min_tokens=min(s.min_tokens, s.max_tokens),
            seed=clip_seed(s.seed, clip_id),
        )
        if self.prompt.structured:
            from vllm.sampling_params import StructuredOutputsParams

            kwargs["structured_outputs"] = StructuredOutputsParams(
                json=self.prompt.json_schema_str(), disable_any_whitespace=True
            )
        return SamplingParams(**kwargs)

    def build_requests(self, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
        """vLLM prompts and sampling params for decoded clips (also used by bench.py for the raw baseline)."""
        prompts, params = [], []
        for item in items:
            if self.config.input_mode == "text":  # a second pass: the source track's caption, no frames
                text = self.llm.get_tokenizer().apply_chat_template(
                    self.prompt.messages([], item.get("source_caption")), tokenize=False, add_generation_prompt=True
                )
                prompts.append({"prompt": text})
                params.append(self.sampling_params(item["clip_id"]))
                continue
            frames = item["frames"]
            mm: dict[str, Any]
            if self.config.input_mode == "video":
                mm = {"video": (frames, item["video_meta"])}
            else:
                mm = {"image": [frames[t] for t in range(frames.shape[0])]}
            prompts.append({"prompt": self.chat_prompt(frames.shape[0]), "multi_modal_data": mm})
            params.append(self.sampling_params(item["clip_id"]))
        return prompts, params

    def caption(self, items: list[dict[str, Any]]) -> list[CaptionResult]:
        prompts, params = self.build_requests(items)
        t0 = time.perf_counter()
        try:
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        except BaseException:
            self.abort_unfinished()
            raise
        # Offline generate returns the whole batch at once: each clip's latency is the batch's wall time.
        latency = time.perf_counter() - t0
        return [self._result(out, latency) for out in outputs]

    def abort_unfinished(self) -> None:
        """Drop the requests a failed generate left in the engine. Without this the next generate call steps them
        again (and fails again, or never finishes): the per-clip retry would inherit the whole broken batch."""
        engine = self.llm.llm_engine
        try:
            ids = list(engine.output_processor.request_states)
            if ids:
                engine.abort_request(ids, internal=True)
                log.warning("aborted %d unfinished requests after a failed generate", len(ids))
        except Exception as exc:  # noqa: BLE001 - vLLM internals moved: say so, the retry will tell
            log.error("could not abort unfinished requests: %s: %s", type(exc).__name__, exc)

    def _result(self, out: Any, latency: float) -> CaptionResult:
        prompt_tokens = len(out.prompt_token_ids or [])
        if not out.outputs:
            return CaptionResult(
                error="model error: no completion returned", prompt_tokens=prompt_tokens, latency_s=latency
            )
        completion = out.outputs[0]
        text = (completion.text or "").strip()
        res = CaptionResult(
            caption=text or None,
            prompt_tokens=prompt_tokens,
            output_tokens=len(completion.token_ids or []),
            latency_s=latency,
        )
        if not text:
            res.error = f"empty output (finish_reason={completion.finish_reason})"
        elif (reason := check_structured_output(self.prompt, text)) is not None:
            res.error = f"{reason} (finish_reason={completion.finish_reason})"
        return res


def store_factory_for(store: Any | None):
    """A model-store factory: the given store for URIs inside it, the default (file://) resolution otherwise."""
    if store is None:
        return None
    from videolake.platform.captioning.model_cache import default_store_factory

    def factory(uri: str):
        try:
            store.key_from_uri(uri.rstrip("/"))
            return store
        except ValueError:
            return default_store_factory(uri)

    return factory


def create_llm(config: CaptionerConfig, model_dir: str):
    """``vllm.LLM`` for a captioner config (shared by the backend and the bench's raw baseline)."""
    from vllm import LLM

    if config.input_mode == "video":
        limit = {"video": 1, "image": 0}
    elif config.input_mode == "text":
        limit = {"video": 0, "image": 0}
    else:
        limit = {"image": config.frames.max_frames, "video": 0}
    engine = config.vllm
    kwargs: dict[str, Any] = dict(
        model=model_dir,
        enforce_eager=engine.enforce_eager,
        max_model_len=engine.max_model_len,
        max_num_seqs=engine.max_num_seqs,
        limit_mm_per_prompt=limit,
        dtype=engine.dtype,
        seed=config.sampling.seed,
    )
    if config.num_gpus_per_actor > 0:
        kwargs["gpu_memory_utilization"] = engine.gpu_memory_utilization
    else:
        # CPU platform: with chunked prefill, vLLM (0.32) rewinds the seeded generator of a request whose partial-
        # prefill token it discards, which CPU generators cannot do ("CPU Generator does not use offset": the whole
        # batch fails as soon as a batch's prompts exceed max_num_batched_tokens). Whole prefills avoid it.
        kwargs["enable_chunked_prefill"] = False
        kwargs["max_num_batched_tokens"] = max(engine.max_model_len, 4096)
    if config.model_revision and "://" not in config.model and not os.path.isdir(config.model):
        kwargs["revision"] = config.model_revision  # only meaningful for hub ids (offline here: HF_HUB_OFFLINE=1)
    kwargs.update(dict(engine.engine_kwargs))
    return LLM(**kwargs)
