"""Versioned prompt templates. A template never changes under its name: a new wording gets a new version, so the
prompt_version column names exactly the words the model saw (and code_version marks old partitions stale).

A template whose ``json_schema`` is set asks for structured output: the vllm backend constrains decoding to the
schema (vLLM structured outputs) and the openai backend sends ``response_format`` json_schema; an output that does
not parse as JSON is a failed row ("invalid JSON output").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PromptTemplate:
    version: str  # the registered name, recorded in clip_captions.prompt_version
    text: str  # the user instruction that follows the clip's frames
    system: str | None = None  # system message; None = the chat template's default
    json_schema: Mapping[str, Any] | None = None  # set = structured JSON output constrained to this schema

    @property
    def structured(self) -> bool:
        return self.json_schema is not None

    def json_schema_str(self) -> str | None:
        return None if self.json_schema is None else json.dumps(self.json_schema, sort_keys=True)

    def sha256(self) -> str:
        """The hash of exactly what this prompt sends besides the clip: system text, user text (a second pass's
        ``{caption}`` placeholder unfilled) and JSON schema; recorded on every row (clip_captions.prompt_sha256)."""
        doc = {"system": self.system, "user": self.text, "json_schema": self.json_schema_str()}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def user_text(self, source_caption: str | None = None) -> str:
        """The user text; a text-only (second-pass) prompt gets the source caption in its ``{caption}`` slot."""
        return self.text.replace(CAPTION_SLOT, source_caption or "") if CAPTION_SLOT in self.text else self.text

    def messages(self, media: list[dict[str, Any]], source_caption: str | None = None) -> list[dict[str, Any]]:
        """Chat messages: optional system turn, then one user turn with the media parts followed by the text (a
        text-only prompt: the text alone, as a plain string)."""
        out: list[dict[str, Any]] = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        text = self.user_text(source_caption)
        out.append({"role": "user", "content": [*media, {"type": "text", "text": text}] if media else text})
        return out


CAPTION_SLOT = "{caption}"  # where a second-pass prompt takes the source track's caption


_CAPTION_SCHEMA = {
    "type": "object",
    "properties": {
        "caption": {"type": "string", "description": "one or two sentences describing the clip"},
        "objects": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "motion": {"type": "string", "enum": ["static", "slow", "fast"]},
        "camera": {"type": "string", "enum": ["static", "pan", "zoom", "handheld", "other"]},
    },
    "required": ["caption", "objects", "motion", "camera"],
    "additionalProperties": False,
}

PROMPTS: dict[str, PromptTemplate] = {
    p.version: p
    for p in (
        PromptTemplate(
            version="v1-describe",
            text=(
                "Describe this video clip in one or two sentences for a text-to-video training set: the main "
                "subjects, what they do, the setting, and the camera motion. Do not guess names or text you "
                "cannot read."
            ),
        ),
        PromptTemplate(
            version="v1-json",
            text=(
                "Describe this video clip. Answer with JSON only: a short caption, up to eight visible objects, "
                "how fast things move (static, slow, fast) and the camera motion (static, pan, zoom, handheld, other)."
            ),
            json_schema=_CAPTION_SCHEMA,
        ),
        PromptTemplate(
            version="v1-enhance",
            system="You rewrite video captions for a text-to-video training set.",
            text=(
                "Rewrite this video caption as one fluent, detailed paragraph of at most three sentences. Keep every "
                "fact it states and add none it does not.\n\nCaption: " + CAPTION_SLOT
            ),
        ),
    )
}


def get_prompt(version: str, override_text: str | None = None) -> PromptTemplate:
    """The registered template ``version``; ``override_text`` replaces its text (an experiment before registering)."""
    try:
        template = PROMPTS[version]
    except KeyError:
        raise KeyError(f"unknown prompt version {version!r}; known: {', '.join(sorted(PROMPTS))}") from None
    if override_text is not None and override_text != template.text:
        template = dataclasses.replace(template, text=override_text)
    return template


def check_structured_output(template: PromptTemplate, text: str) -> str | None:
    """None when ``text`` satisfies the template's output contract, else the reason it does not."""
    if not template.structured:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"invalid JSON output: {exc}"
    if not isinstance(value, dict):
        return f"invalid JSON output: expected an object, got {type(value).__name__}"
    missing = [k for k in template.json_schema.get("required", []) if k not in value]  # type: ignore[union-attr]
    if missing:
        return f"invalid JSON output: missing keys {missing}"
    return None


def structured_fields(text: str) -> tuple[str | None, dict[str, str] | None]:
    """(caption, fields) of a structured output: its ``caption`` field (None when missing or blank) and every field
    as text (strings as they are, other values as JSON), for clip_captions.caption_fields."""
    try:
        value = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(value, dict):
        return None, None
    fields = {str(k): v if isinstance(v, str) else json.dumps(v, sort_keys=True) for k, v in value.items()}
    caption = value.get("caption")
    caption = caption.strip() if isinstance(caption, str) else ""
    return (caption or None), fields
