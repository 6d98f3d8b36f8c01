"""A blind pairwise caption judge: per clip, a model reads the two tracks' captions and answers which is better.

Why blind: a judge that always sees track A first learns (or has) a position bias, and the tally then measures the
order, not the captions. Each clip's order is drawn from (seed, clip_id) (``order_for``: ``AB`` shows track A's
caption first, ``BA`` track B's), recorded with the verdict, and the answer, which names a position ("1", "2" or
"tie"), is mapped back to the tracks: ``A``, ``B``, ``tie``, or ``invalid`` for an answer that names none.

The judge runs through the project's caption backends (base.py's registry: ``vllm``, the offline engine in this
process, or ``openai``, an OpenAI-compatible endpoint), so it loads, pins and serves a model the way captioning
does. The prompt is text only: the two captions and the question (the backends' frame path is built for one clip's
frames per request; a judge that looks at the clip is a later step). Each request samples with the per-clip seed
of ``base.clip_seed``, so a re-run repeats its verdicts, and by default decodes only "1", "2" or "tie" (vLLM
structured outputs, ``JudgeConfig.constrained``): a real judge then never rambles, and an unconstrained one that
answers anything else gets ``invalid``.

The engines are imported when the judge is opened, never at module level.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from videolake.platform.params import param

log = logging.getLogger(__name__)

ORDERS = ("AB", "BA")
ANSWERS = ("1", "2", "tie")  # what the judge may say: the caption shown first, second, or neither
JUDGE_PROMPT_VERSION = "judge-v1"
JUDGE_PROMPT = (
    "Two captions describe the same video clip for a text-to-video training set.\n"
    "Caption 1: {first}\n"
    "Caption 2: {second}\n"
    "Which caption is better: accurate, specific about subjects, actions, setting and camera motion, with no "
    "invented details, no repetition and no refusal? Answer with exactly one of: 1, 2, tie."
)
_ANSWER = re.compile(r"^\W*(?:caption\s*)?(1|2|tie)\b", re.IGNORECASE)

# (clip_id, prompt text) requests -> the model's answer text per request (None: no answer)
Generate = Callable[[list[tuple[str, str]]], list[str | None]]


@dataclass(frozen=True)
class JudgeConfig:
    """The judge model and how it answers. Text values are parsed by ``params.parse_params``."""

    model: str = param("", "the judge model: a local checkpoint directory (or the endpoint's model with openai)")
    backend: str = param("vllm", "caption backend that runs it", choices=("vllm", "openai"))
    seed: int = param(0, "seed of the per-clip caption order and of the per-clip sampling seeds")
    temperature: float = param(0.0, "sampling temperature (0: greedy)", min=0)
    max_tokens: int = param(8, "answer budget in tokens", min=1, max=512)
    max_caption_chars: int = param(2000, "each caption is cut to this many characters in the prompt", min=16)
    batch_size: int = param(32, "prompts per engine call", min=1)
    max_model_len: int = param(4096, "vLLM context length", min=256)
    enforce_eager: bool = param(True, "vLLM without CUDA graphs (starts faster; the CPU engine needs it)")
    num_gpus: float = param(0.0, "GPUs of the vLLM engine (0: the CPU build)", min=0)
    engine_threads: int = param(0, "OpenMP threads of a CPU engine (0: vLLM's default settings)", min=0)
    constrained: bool = param(
        True,
        "decode only the answers 1, 2 or tie (vLLM structured outputs; with openai, vLLM's server extension: "
        "turn it off for another server)",
    )


def order_for(seed: int, clip_id: str) -> str:
    """The clip's order, ``AB`` or ``BA``: deterministic in (seed, clip_id), about half of the clips each."""
    digest = hashlib.sha256(f"judge:{seed}:{clip_id}".encode()).digest()
    return ORDERS[digest[0] & 1]


def judge_prompt(first: str, second: str, max_chars: int = 2000) -> str:
    def cut(text: str) -> str:
        text = " ".join(text.split())
        return text if len(text) <= max_chars else text[:max_chars] + "…"

    return JUDGE_PROMPT.format(first=cut(first), second=cut(second))


def parse_answer(text: str | None) -> str | None:
    """The position the answer names: "1", "2" or "tie"; None when it names none."""
    match = _ANSWER.match(text or "")
    return match.group(1).lower() if match else None


def unmap(choice: str | None, order: str) -> str:
    """The verdict about the tracks for the position ``choice`` under ``order``."""
    if choice is None:
        return "invalid"
    if choice == "tie":
        return "tie"
    first, second = order[0], order[1]
    return first if choice == "1" else second


def make_judge(generate: Generate, seed: int = 0, max_caption_chars: int = 2000):
    """A judge for ``compare.compare_rows``: (clip_id, caption_a, caption_b) triples -> {verdict, order, answer}."""

    def judge(triples: list[tuple[str, str, str]]) -> list[dict[str, str | None]]:
        orders = [order_for(seed, cid) for cid, _, _ in triples]
        prompts = [
            (cid, judge_prompt(a, b, max_caption_chars) if o == "AB" else judge_prompt(b, a, max_caption_chars))
            for (cid, a, b), o in zip(triples, orders)
        ]
        answers = generate(prompts) if prompts else []
        if len(answers) != len(prompts):
            raise RuntimeError(f"the judge model gave {len(answers)} answers for {len(prompts)} prompts")
        return [{"verdict": unmap(parse_answer(ans), o), "order": o, "answer": ans} for ans, o in zip(answers, orders)]

    return judge


# -- through the caption backends --------------------------------------------------------------------------------------


def captioner_config(config: JudgeConfig):
    """The CaptionerConfig of the judge model: its sampling, a small engine, and the smallest warm-up (two frames of
    56x56: the judge sends no frames)."""
    from videolake.platform.captioning.base import (
        CaptionerConfig,
        FrameConfig,
        SamplingConfig,
        VllmEngineConfig,
        vllm_env,
    )

    if not config.model:
        raise ValueError("the judge needs a model (JudgeConfig.model)")
    return CaptionerConfig(
        model=config.model,
        backend=config.backend,
        sampling=SamplingConfig(
            temperature=config.temperature, top_p=1.0, max_tokens=config.max_tokens, seed=config.seed
        ),
        frames=FrameConfig(sample_fps=1.0, min_frames=2, max_frames=2, max_pixels=56 * 56),
        batch_size=config.batch_size,
        num_gpus_per_actor=config.num_gpus,
        vllm=VllmEngineConfig(
            max_model_len=config.max_model_len, max_num_seqs=config.batch_size, enforce_eager=config.enforce_eager
        ),
        env=vllm_env(config.engine_threads or None),
    )


def backend_generate(backend: Any, constrained: bool = True) -> Generate:
    """Text-only requests through a loaded backend: ``vllm`` (its engine, with the model's chat template) or
    ``openai`` (its endpoint client, with its retries). ``constrained``: the answer is one of ``ANSWERS``."""
    name = getattr(backend, "registered_name", type(backend).__name__)
    if getattr(backend, "llm", None) is not None:
        return _vllm_generate(backend, constrained)
    if getattr(backend, "client", None) is not None and hasattr(backend, "request_body"):
        return _openai_generate(backend, constrained)
    raise ValueError(f"the judge runs on the vllm or openai backend, not {name!r}")


def _vllm_params(backend: Any, clip_id: str, constrained: bool) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from videolake.platform.captioning.base import clip_seed

    s = backend.config.sampling
    return SamplingParams(
        temperature=s.temperature,
        top_p=s.top_p,
        max_tokens=s.max_tokens,
        seed=clip_seed(s.seed, clip_id),
        structured_outputs=StructuredOutputsParams(choice=list(ANSWERS)) if constrained else None,
    )


def _vllm_generate(backend: Any, constrained: bool) -> Generate:
    tokenizer = backend.llm.get_tokenizer()
    size = backend.config.batch_size

    def generate(requests: list[tuple[str, str]]) -> list[str | None]:
        out: list[str | None] = []
        for i in range(0, len(requests), size):
            chunk = requests[i : i + size]
            prompts = [
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
                )
                for _, text in chunk
            ]
            params = [_vllm_params(backend, cid, constrained) for cid, _ in chunk]
            t0 = time.perf_counter()
            results = backend.llm.generate(prompts, params, use_tqdm=False)
            log.info("judge: %d answers in %.1fs", len(chunk), time.perf_counter() - t0)
            out += [(r.outputs[0].text or "").strip() if r.outputs else None for r in results]
        return out

    return generate


def _openai_generate(backend: Any, constrained: bool) -> Generate:
    import numpy as np

    no_frames = np.zeros((0, 0, 0, 3), dtype=np.uint8)

    def one(request: tuple[str, str]) -> str | None:
        cid, text = request
        body = backend.request_body({"clip_id": cid, "frames": no_frames})
        body["messages"] = [{"role": "user", "content": text}]
        if constrained:
            body["structured_outputs"] = {"choice": list(ANSWERS)}  # vLLM's server extension of the chat API
        try:
            resp = backend._request("POST", "/chat/completions", json=body)
        except Exception as exc:  # noqa: BLE001 - one clip without an answer: its verdict is invalid
            log.warning("judge request for %s failed: %s", cid, exc)
            return None
        choices = resp.get("choices") or []
        return ((choices[0].get("message") or {}).get("content") or "").strip() if choices else None

    def generate(requests: list[tuple[str, str]]) -> list[str | None]:
        return list(backend.pool.map(one, requests))

    return generate


@contextlib.contextmanager
def open_backend(config: JudgeConfig, store: Any | None = None) -> Iterator[Any]:
    """The judge model's caption backend, loaded (its smallest warm-up) and torn down on exit."""
    from videolake.platform.captioning.base import get_captioner

    backend = get_captioner(captioner_config(config), store=store)
    backend.setup(largest_batch=1)
    try:
        yield backend
    finally:
        backend.teardown()


@contextlib.contextmanager
def open_judge(config: JudgeConfig, store: Any | None = None) -> Iterator[Callable]:
    """The judge of ``config`` with its model loaded (torn down on exit): a ``make_judge`` callable."""
    with open_backend(config, store) as backend:
        generate = backend_generate(backend, config.constrained)
        yield make_judge(generate, seed=config.seed, max_caption_chars=config.max_caption_chars)
