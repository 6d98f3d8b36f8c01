"""A tiny random-weight Qwen-VL checkpoint, built offline in seconds, that the real vLLM engine loads on CPU.

Why: tests, the demo and the CPU benchmark must run the real vLLM code path (processor, chat template, vision
tower, M-RoPE, sampling) without a model hub and without a GPU. The weights are random, so the captions are
random text: the tiny model proves the path, not caption quality. Point the captioner at a real checkpoint
(e.g. Qwen2.5-VL-7B-Instruct) on a GPU machine for real captions.

Recipe (docs/stack-facts.md "vLLM on CPU with a tiny model"): a byte-level BPE tokenizer trained with ``tokenizers`` on a
few sentences (vocab ~512) plus the Qwen special tokens and a Qwen chat template; text model hidden 128, 2 layers,
2 heads, 1 kv head (head_dim 64), mrope_section [8, 12, 12]; vision depth 2, hidden 64, patch 14 (Qwen3-VL: 16),
spatial merge 2, temporal patch 2; processor max_pixels 224*224.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FAMILIES = ("qwen2_5_vl", "qwen3_vl")
TINY_MODEL_DIRNAME = "tiny-qwen2_5_vl"  # its directory under $VIDEOLAKE_DATA_DIR/models (the demo's, the bench's)

# Written last, after every other file: a directory without it is an incomplete build and is rebuilt.
COMPLETE_MARKER = ".videolake-tiny-model-complete"

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2-VL's chat template (system prompt by default; images and videos as vision_start/pad/vision_end).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = [
    "A person walks across a busy street while cars pass by in the rain.",
    "The camera pans slowly over a green forest and a calm blue lake at sunset.",
    "Two children play football on a sunny field; a dog runs after the ball.",
    "Close-up of hands typing on a keyboard in a dimly lit office at night.",
    "A colorful test pattern with moving bars, gradients and a bright white circle.",
    '{"caption": "a red car drives along a mountain road", "objects": ["car", "road"], "motion": "fast"}',
    "The video shows a kitchen where someone cuts vegetables and stirs a pot.",
    "Aerial view of a city skyline with tall buildings, clouds and a river.",
]

# Text model: head_dim = hidden / heads = 64, which vLLM's CPU attention accepts; mrope sums to head_dim / 2.
_TEXT = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
_MROPE_SECTION = [8, 12, 12]
_MAX_PIXELS = 224 * 224


def build_tiny_qwen_vl(out_dir: str | os.PathLike, family: str = "qwen2_5_vl", *, seed: int = 0) -> str:
    """Build the checkpoint into ``out_dir`` (cached: a complete directory is returned as is) and return its path.

    The build goes to a sibling temporary directory that is renamed into place at the end, so a crash never
    leaves a half-written model where a loader would find it; processes that ask at once build it once
    (videolake/platform/runtime/built_once.py).
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown tiny model family {family!r}; known: {', '.join(FAMILIES)}")
    from videolake.platform.runtime.built_once import build_once

    out = Path(out_dir).resolve()
    t0 = time.perf_counter()

    def build(tmp: Path) -> None:
        tokenizer = _build_tokenizer(tmp)
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
        vocab_size = _round_up(len(tokenizer), 64)
        if family == "qwen2_5_vl":
            _build_qwen2_5_vl(tmp, tokenizer, ids, vocab_size, seed)
        else:
            _build_qwen3_vl(tmp, tokenizer, ids, vocab_size, seed)
        (tmp / "generation_config.json").write_text(
            json.dumps(
                {
                    "bos_token_id": ids["<|endoftext|>"],
                    "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                    "pad_token_id": ids["<|endoftext|>"],
                },
                indent=2,
            )
        )
        (tmp / COMPLETE_MARKER).write_text(json.dumps({"family": family, "seed": seed, "random_weights": True}))

    if build_once(out, lambda d: (d / COMPLETE_MARKER).is_file(), build):
        log.info(
            "built tiny random-weight %s checkpoint at %s in %.1fs (captions will be random text)",
            family,
            out,
            time.perf_counter() - t0,
        )
    return str(out)


def _round_up(n: int, k: int) -> int:
    return (n + k - 1) // k * k


def _build_tokenizer(out: Path):
    """Byte-level BPE trained on a few sentences, wrapped as a transformers fast tokenizer with Qwen's specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=32768,
    )
    fast.chat_template = CHAT_TEMPLATE  # saved as chat_template.jinja, where tokenizer and processor find it
    return fast


def _save_processor(out: Path, tokenizer, family: str) -> None:
    Processor: Any  # one of two processor classes, by family
    VideoProcessor: Any
    if family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLProcessor as Processor
        from transformers import Qwen2VLImageProcessor as ImageProcessor
        from transformers import Qwen2VLVideoProcessor as VideoProcessor

        patch = 14
    else:
        from transformers import Qwen2VLImageProcessor as ImageProcessor
        from transformers import Qwen3VLProcessor as Processor
        from transformers import Qwen3VLVideoProcessor as VideoProcessor

        patch = 16
    factor = patch * 2  # patch * spatial_merge
    size = {"shortest_edge": factor * factor, "longest_edge": _MAX_PIXELS}
    image_processor = ImageProcessor(patch_size=patch, merge_size=2, temporal_patch_size=2, size=size)
    video_processor = VideoProcessor(
        patch_size=patch, merge_size=2, temporal_patch_size=2, size=size, do_sample_frames=False
    )
    processor = Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out)


def _save_random_model(out: Path, config, model_cls, seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    with torch.device("cpu"):
        model = model_cls(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)


def _config_kwargs(
    ids: dict[str, int], vocab_size: int, *, rope: dict, patch_size: int, text: dict, vision: dict
) -> dict:
    """The keyword arguments both families' configs share (tiny sizes, the tokenizer's special ids), with each
    family's own ``rope`` parameters, patch size and extra ``text``/``vision`` settings."""
    return dict(
        text_config=dict(
            **_TEXT,
            **text,
            vocab_size=vocab_size,
            max_position_embeddings=8192,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "mrope_section": _MROPE_SECTION, **rope},
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
            tie_word_embeddings=True,
            torch_dtype="bfloat16",
        ),
        vision_config=dict(
            depth=2,
            hidden_size=64,
            intermediate_size=128,
            num_heads=2,
            out_hidden_size=_TEXT["hidden_size"],
            patch_size=patch_size,
            spatial_merge_size=2,
            temporal_patch_size=2,
            **vision,
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )


def _build_qwen2_5_vl(out: Path, tokenizer, ids: dict[str, int], vocab_size: int, seed: int) -> None:
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    config = Qwen2_5_VLConfig(
        **_config_kwargs(
            ids,
            vocab_size,
            rope={"rope_theta": 1000000.0},
            patch_size=14,
            text={},
            vision=dict(window_size=112, fullatt_block_indexes=[1], tokens_per_second=2),
        )
    )
    _save_random_model(out, config, Qwen2_5_VLForConditionalGeneration, seed)
    _save_processor(out, tokenizer, "qwen2_5_vl")


def _build_qwen3_vl(out: Path, tokenizer, ids: dict[str, int], vocab_size: int, seed: int) -> None:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    config = Qwen3VLConfig(
        **_config_kwargs(
            ids,
            vocab_size,
            rope={"rope_theta": 5000000.0, "mrope_interleaved": True},
            patch_size=16,
            text={"head_dim": _TEXT["hidden_size"] // _TEXT["num_attention_heads"]},
            vision=dict(num_position_embeddings=256, deepstack_visual_indexes=[0]),
        )
    )
    _save_random_model(out, config, Qwen3VLForConditionalGeneration, seed)
    _save_processor(out, tokenizer, "qwen3_vl")
