"""The ``openai`` backend: an OpenAI-compatible chat endpoint (e.g. an existing ``vllm serve`` deployment).

The endpoint's base URL and API key come from environment variables whose NAMES are in the config (never the
secret itself). Frames go as base64 JPEG/PNG ``image_url`` parts (the chat API has no decoded-video part, so
``input_mode`` "video" is sent as images too). At most ``max_concurrency`` requests are in flight per actor
(a thread pool); 429, 5xx, timeouts and connection errors are retried with exponential backoff and jitter
(``Retry-After`` wins when the server sends it); other 4xx answers fail the clip at once with the server's message.
A prompt with a JSON schema is sent as ``response_format`` json_schema.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from videolake.platform.captioning.base import CAPTIONERS, CaptionerBackend, CaptionerConfig, CaptionResult, clip_seed
from videolake.platform.captioning.prompts import check_structured_output
from videolake.platform.runtime.failures import failure_class

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointError(RuntimeError):
    """A request that failed for good in this attempt: a non-retryable status (``transient`` False: the endpoint
    refuses this request), or retries exhausted on timeouts, connection errors, 429 or 5xx (``transient`` True: a
    later run can succeed, so the caption stage captions the clip again then)."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def encode_image(frame: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> str:
    """A data URL of one RGB frame."""
    from PIL import Image

    buf = io.BytesIO()
    img = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), mode="RGB")
    if fmt == "png":
        img.save(buf, format="PNG")
        mime = "image/png"
    else:
        img.save(buf, format="JPEG", quality=quality)
        mime = "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


@CAPTIONERS.register("openai")
class OpenAICaptioner(CaptionerBackend):
    def __init__(self, config: CaptionerConfig, store: Any | None = None) -> None:
        super().__init__(config, store=store)
        self.client: Any = None  # an httpx.Client after setup()
        self.pool: ThreadPoolExecutor | None = None
        self.base_url = ""
        self.model = config.endpoint.served_model_name or config.model

    def load(self) -> None:
        import httpx

        ep = self.config.endpoint
        base = os.environ.get(ep.base_url_env, "").strip()
        if not base:
            raise RuntimeError(f"the openai captioner needs the endpoint's base URL in ${ep.base_url_env}")
        self.base_url = base.rstrip("/")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(ep.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(ep.timeout_s),
            limits=httpx.Limits(max_connections=ep.max_concurrency),
        )
        self.pool = ThreadPoolExecutor(max_workers=ep.max_concurrency, thread_name_prefix="caption-http")
        self.engine, self.engine_version = "openai", ""
        try:  # reachability and model name, so a misconfiguration shows up in the log before the first clip
            models = self._request("GET", "/models").get("data", [])
            served = [m.get("id") for m in models]
            if served and self.model not in served:
                log.warning("endpoint %s serves %s, not %r", self.base_url, served, self.model)
            owner = next((m.get("owned_by") for m in models if m.get("id") == self.model), None)
            self.engine = f"openai:{owner}" if owner else "openai"
        except EndpointError as exc:
            log.warning("endpoint %s: listing models failed: %s", self.base_url, exc)
        self.engine_version = self._server_version()

    def _server_version(self) -> str:
        """What the server says its version is: vLLM's ``GET /version`` (beside ``/v1``); "" when it says nothing."""
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        try:
            r = self.client.get(f"{root}/version")
            if r.status_code < 400:
                return str(r.json().get("version") or "")
        except Exception as exc:  # noqa: BLE001 - an endpoint without it: provenance says unknown
            log.info("endpoint %s: no server version (%s)", self.base_url, exc)
        return ""

    def engine_info(self) -> tuple[str, str]:
        """``openai:<owner>`` (the served model's ``owned_by``, vLLM says ``vllm``) and the server's version."""
        return getattr(self, "engine", "openai"), getattr(self, "engine_version", "")

    def unload(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        if self.client is not None:
            self.client.close()
            self.client = None

    # -- requests -------------------------------------------------------------------------------------------------

    def request_body(self, item: dict[str, Any]) -> dict[str, Any]:
        fmt = self.config.endpoint.image_format
        frames = item["frames"]
        media = [
            {"type": "image_url", "image_url": {"url": encode_image(frames[t], fmt)}}
            for t in range(frames.shape[0] if self.config.input_mode != "text" else 0)
        ]
        s = self.config.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.prompt.messages(media, item.get("source_caption")),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "seed": clip_seed(s.seed, item["clip_id"]),
        }
        if s.min_tokens:
            body["min_tokens"] = min(s.min_tokens, s.max_tokens)  # vLLM's server extension of the chat API
        if self.prompt.structured:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "clip_caption", "schema": dict(self.prompt.json_schema), "strict": True},
            }
        return body

    def caption(self, items: list[dict[str, Any]]) -> list[CaptionResult]:
        assert self.pool is not None, "setup() first"
        return list(self.pool.map(self._caption_one, items))

    def _caption_one(self, item: dict[str, Any]) -> CaptionResult:
        t0 = time.perf_counter()
        try:
            resp = self._request("POST", "/chat/completions", json=self.request_body(item))
        except Exception as exc:  # noqa: BLE001 - one clip's failure, with its reason
            return CaptionResult(
                error=f"endpoint error: {exc}", latency_s=time.perf_counter() - t0, failure_class=failure_class(exc)
            )
        latency = time.perf_counter() - t0
        usage = resp.get("usage") or {}
        choices = resp.get("choices") or []
        if not choices:
            return CaptionResult(error="endpoint error: no choices in the response", latency_s=latency)
        choice = choices[0]
        text = ((choice.get("message") or {}).get("content") or "").strip()
        res = CaptionResult(
            caption=text or None,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
        )
        if not text:
            res.error = f"empty output (finish_reason={choice.get('finish_reason')})"
        elif (reason := check_structured_output(self.prompt, text)) is not None:
            res.error = f"{reason} (finish_reason={choice.get('finish_reason')})"
        return res

    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One HTTP call with retries on 429/5xx/timeouts/connection errors; returns the JSON body."""
        import httpx

        ep = self.config.endpoint
        last = ""
        for attempt in range(ep.max_retries + 1):
            retry_after = None
            try:
                r = self.client.request(method, path, **kwargs)
                if r.status_code < 400:
                    return r.json()
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                if r.status_code not in RETRY_STATUS:
                    raise EndpointError(last, transient=False)  # the request itself is refused: the same again fails
                retry_after = _retry_after(r.headers.get("retry-after"))
            except httpx.TransportError as exc:  # connect errors, timeouts, dropped connections
                last = f"{type(exc).__name__}: {exc}"
            if attempt == ep.max_retries:
                break
            delay = retry_after if retry_after is not None else ep.backoff_s * (2**attempt) * (0.5 + random.random())
            log.info("%s %s failed (%s); retry %d/%d in %.2fs", method, path, last, attempt + 1, ep.max_retries, delay)
            time.sleep(delay)
        raise EndpointError(f"{last} (after {ep.max_retries} retries)", transient=True)


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, min(float(value), 60.0)) if value else None
    except ValueError:
        return None
