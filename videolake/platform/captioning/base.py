"""The captioner contract: one frozen config (each backend's own settings nested in it), one abstract backend, a
registry of backends by name.

A GPU worker follows one contract (docs/ARCHITECTURE.md): it declares its resources (CPUs, GPUs per replica),
``setup()`` loads the model once per actor, ``__call__(batch)`` captions a Ray Data numpy batch, ``teardown()``
frees it. The same class runs inside a Ray Data ``ActorPoolStrategy`` (see pipeline.py) and in-process (bench.py,
tests).

Batch in (one row per clip; produced by clip_frames.extract_frames):
    clip_id, video_id, source_uri      str
    frames                             uint8 (T, H, W, 3) per row; an empty (0, 0, 0, 3) array when extraction failed
    frame_error                        str, "" when the frames were extracted, else the reason
    frame_error_class                  str, the failure class of frame_error (transient | permanent), "" when none
    video_meta                         str, JSON: fps, duration, total_num_frames, frames_indices (clip-relative)
    num_frames                         int32, frames extracted (0 on failure)
    frame_times_s                      str, JSON list: the frames' times in the source (seconds), "" when unknown
    source_caption                     str, a second-pass (text-only) track's input: the source track's caption
Batch out: the CLIP_CAPTIONS columns except partition_date (caption_track, status ok|failed, caption, error,
failure_class, model, model_revision, prompt_version, num_frames, prompt_tokens, output_tokens, latency_s,
captioned_at, and the provenance: prompt_sha256, sampling, engine, engine_version, frame_timestamps_s,
caption_fields, source_track) plus the metrics columns in ``METRIC_COLUMNS``. Every input row gives exactly one output row: a clip that fails is a ``failed`` row with its
reason, never a missing row and never a crashed batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from videolake.platform.registry import Registry
from videolake.platform.runtime.failures import PERMANENT, failure_class

log = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_FAILED = "failed"

# Environment for vLLM inside a Ray actor (docs/stack-facts.md): passed through runtime_env because a KubeRay worker does
# not inherit the driver's environment.
DEFAULT_VLLM_ENV: Mapping[str, str] = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core in the actor process: starts in seconds, not ~30 s
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache on the CPU platform; without it the CPU actor dies at start
    "HF_HUB_OFFLINE": "1",  # weights come from a local dir or the node cache, never from a hub
    "TOKENIZERS_PARALLELISM": "false",  # no tokenizer thread pools fighting the engine for cores
    "OMP_NUM_THREADS": "2",  # Ray sets 1 per fractional-CPU actor; the CPU engine wants the node's cores
}

# The tiny random-weight test model's engine runs one OpenMP thread. Its matrices are 64-256 wide, so a second thread
# never helps (a 3-clip warm-up: 0.5 s either way on an idle 2-core machine), and on a busy machine each of its many
# small parallel regions waits, spinning, for a thread that another process holds off the core: the same warm-up
# took 8.6 s with 2 threads and 1.3 s with 1 while two other processes kept both cores busy (the deployments and the
# test suite run caption steps beside other steps).
TINY_MODEL_ENGINE_THREADS = 1


def vllm_env(omp_threads: int | None = None) -> dict[str, str]:
    """DEFAULT_VLLM_ENV, with the engine's OpenMP threads (OMP_NUM_THREADS) set to ``omp_threads`` when given."""
    env = dict(DEFAULT_VLLM_ENV)
    if omp_threads is not None:
        if omp_threads < 1:
            raise ValueError(f"omp_threads must be at least 1, got {omp_threads}")
        env["OMP_NUM_THREADS"] = str(omp_threads)
    return env


# Per-row columns the backend adds for CaptionMetrics (dropped from the returned clip_captions table).
METRIC_COLUMNS = (
    "actor_id",  # str, the Ray actor (or process) that captioned the row
    "generate_s",  # float, this row's share of the generate call's wall time (batch seconds / rows in the batch)
    "actor_load_s",  # float, the actor's model load seconds (setup), repeated on each of its rows
    "actor_started_at",  # float, epoch seconds when the actor began setup()
    "actor_ready_at",  # float, epoch seconds when setup() finished
    "batch_finished_at",  # float, epoch seconds when this row's batch finished
)


@dataclass(frozen=True)
class SamplingConfig:
    """Decoding settings; part of code_version (they change the captions)."""

    temperature: float = 0.2  # 0 = greedy; low values keep captions factual
    top_p: float = 0.9  # nucleus sampling mass
    max_tokens: int = 128  # output budget per caption; a caption cut at this length is still ok (finish: length)
    min_tokens: int = 0  # tokens the model must write before it may stop (vLLM's min_tokens); 0: it may stop at once
    seed: int = 0  # base seed; each clip samples with a seed derived from (seed, clip_id), so re-runs repeat


@dataclass(frozen=True)
class FrameConfig:
    """How a clip becomes model input; part of code_version (it changes what the model sees)."""

    sample_fps: float = 1.0  # frames sampled per second of clip
    min_frames: int = 2  # at least this many frames (Qwen-VL's temporal patch is 2 frames)
    max_frames: int = 8  # at most this many frames per clip
    max_pixels: int = 448 * 448  # each frame is downscaled (aspect kept) to at most this many pixels


@dataclass(frozen=True)
class EndpointConfig:
    """The ``openai`` backend's endpoint. Secrets never live here: only the NAMES of environment variables."""

    base_url_env: str = "VIDEOLAKE_OPENAI_BASE_URL"  # env var holding e.g. http://vllm:8000/v1
    api_key_env: str = "VIDEOLAKE_OPENAI_API_KEY"  # env var holding the API key (may be unset for an open server)
    served_model_name: str | None = None  # the endpoint's model name; None = CaptionerConfig.model
    max_concurrency: int = 8  # requests in flight per actor (a thread pool of this size)
    timeout_s: float = 120.0  # per-request timeout
    max_retries: int = 4  # retries on 429, 5xx, timeouts and connection errors (exponential backoff)
    backoff_s: float = 0.5  # first backoff; doubles each retry (with jitter), Retry-After wins when sent
    image_format: str = "jpeg"  # frames are sent as base64 data URLs: jpeg (small) or png (lossless)
    forward_env: bool = True  # pass the two env vars to the actors via runtime_env (off: workers must have them)


@dataclass(frozen=True)
class VllmEngineConfig:
    """The ``vllm`` backend's engine: the ``vllm.LLM(...)`` settings of each actor (vllm_backend.create_llm). Not
    part of code_version: they change how fast and in how much memory captions come, not what they say."""

    max_model_len: int = 4096  # context length (prompt + video tokens + output)
    max_num_seqs: int = 32  # concurrent sequences per engine
    enforce_eager: bool = False  # True skips CUDA graph capture (faster start; use on CPU and in tests)
    dtype: str = "auto"  # weight dtype
    gpu_memory_utilization: float = 0.9  # share of GPU memory the engine may take (GPU actors only)
    engine_kwargs: Mapping[str, Any] = field(
        default_factory=dict
    )  # extra vllm.LLM(...) keyword arguments (override the above)


DEFAULT_TRACK = "default"  # the caption track of the captioner resource's own settings
TRACK_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")  # a track name is also part of an asset key and a path


def check_track_name(name: str) -> str:
    """``name`` when it is a valid track name (lower-case letters, digits, '_'; a letter first), else ValueError."""
    if not TRACK_NAME.match(name or ""):
        raise ValueError(f"caption track name {name!r}: use lower-case letters, digits and '_', a letter first")
    return name


@dataclass(frozen=True)
class CaptionerConfig:
    """Everything that decides how clips are captioned. Frozen; ``code_version`` hashes the output-relevant part."""

    model: str  # local checkpoint dir, or an object-store URI/prefix (copied once to the node cache)
    # The caption track these settings write (clip_captions.caption_track): each track's rows are its own, written
    # and replaced per (day, track) by its own step (docs/captioning.md).
    track: str = DEFAULT_TRACK
    # A second pass: a text-only track that rewrites the ok captions of ``source_track`` (input_mode "text").
    source_track: str | None = None
    backend: str = "vllm"  # "vllm" (offline engine in each actor) | "openai" (an OpenAI-compatible endpoint)
    model_name: str | None = None  # recorded in clip_captions.model; None = ``model`` as given
    model_revision: str | None = None  # recorded in clip_captions.model_revision and in code_version
    # node-local cache for object-store models; None = $VIDEOLAKE_MODEL_CACHE or ~/.cache/videolake/models
    model_cache_dir: str | None = None
    prompt_version: str = "v1-describe"  # a name in prompts.PROMPTS; recorded in clip_captions.prompt_version
    prompt: str | None = None  # overrides the registered prompt text (still hashed into code_version)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)  # decoding settings
    frames: FrameConfig = field(default_factory=FrameConfig)  # frame sampling settings
    # "video": frames as one video with metadata | "images": frames as separate images | "none": no frames are
    # decoded (only for backends that ignore them: the stand-in of `videolake bench scale`)
    input_mode: str = "video"
    batch_size: int = 32  # clips per actor call = per generate call; >= vllm.max_num_seqs keeps the engine full and
    # amortises Ray Data's per-batch cost (~0.1 s on a 2-core CPU node)
    num_actors: int = 1  # captioner actors (one model replica each)
    num_cpus_per_actor: float = (
        0.5  # fractional on purpose: whole CPUs per actor deadlock 2-core nodes (docs/stack-facts.md)
    )
    num_gpus_per_actor: float = 0.0  # GPUs per replica; 0 on CPU
    extract_num_cpus: float = 0.25  # CPUs per frame-extraction task (fractional so decoding overlaps the actors)
    extract_batch_size: int = 2  # clips per frame-extraction task
    # The actors' environment (Ray runtime_env; applied in-process too by the vllm backend). It stays here, not in
    # VllmEngineConfig: whether it is applied is the BACKEND's call (``CaptionerBackend.needs_engine_env``, True by
    # default), so the openai backend and plugin backends receive it as well, not only vllm. Its default is vLLM's
    # settings because vllm is the default backend.
    env: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VLLM_ENV))
    # Each backend's own settings, read only by that backend:
    vllm: VllmEngineConfig = field(default_factory=VllmEngineConfig)  # vllm backend only
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)  # openai backend only
    # A plugin backend's settings by name, typed by its ``Config`` (params.parse_params; text values are parsed).
    backend_params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.input_mode not in ("video", "images", "none", "text"):
            raise ValueError(f"input_mode must be 'video', 'images', 'none' or 'text', got {self.input_mode!r}")
        check_track_name(self.track)
        if self.source_track is not None and check_track_name(self.source_track) == self.track:
            raise ValueError(f"track {self.track!r} cannot be its own source_track")

    def check_second_pass(self) -> None:
        """A second pass is a text-only track: input_mode 'text' exactly when a source_track is set (checked when
        a stage runs, not at construction, so settings can be changed one at a time)."""
        if (self.input_mode == "text") != (self.source_track is not None):
            raise ValueError(
                f"track {self.track!r}: a text-only track (input_mode 'text') needs a source_track, and only it takes "
                f"one (input_mode {self.input_mode!r}, source_track {self.source_track!r})"
            )
        if self.batch_size < 1 or self.num_actors < 1:
            raise ValueError("batch_size and num_actors must be >= 1")
        if self.frames.max_frames < 1 or self.frames.min_frames < 1 or self.frames.min_frames > self.frames.max_frames:
            raise ValueError(f"need 1 <= min_frames <= max_frames, got {self.frames}")

    @property
    def model_label(self) -> str:
        """What clip_captions.model records."""
        return self.model_name or self.model

    def prompt_template(self):
        """The resolved prompt (registered template, text overridden by ``prompt`` when set)."""
        from videolake.platform.captioning.prompts import get_prompt

        return get_prompt(self.prompt_version, override_text=self.prompt)

    def replace(self, **changes: Any) -> CaptionerConfig:
        """A copy with ``changes``; nested settings change as a whole, e.g.
        ``cfg.replace(vllm=dataclasses.replace(cfg.vllm, max_num_seqs=64))``."""
        import dataclasses

        return dataclasses.replace(self, **changes)


def code_version(config: CaptionerConfig) -> str:
    """A short hash of everything that changes the captions: model, revision, prompt (version, text, schema),
    sampling, frame settings and input mode. Resources, batch sizes, the backend choice and the backends' own
    settings (``vllm``, ``endpoint``) are left out: they change how fast captions come, not what they say. The asset
    uses it as its Dagster code_version."""
    prompt = config.prompt_template()
    spec = {
        "model": config.model_label,
        "model_revision": config.model_revision,
        "prompt_version": prompt.version,
        "prompt_text": prompt.text,
        "prompt_system": prompt.system,
        "prompt_json_schema": prompt.json_schema,
        "sampling": asdict(config.sampling),
        "frames": asdict(config.frames),
        "input_mode": config.input_mode,
        "source_track": config.source_track,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:12]


def clip_seed(base_seed: int, clip_id: str) -> int:
    """A per-clip sampling seed: deterministic, independent of batching and actor placement."""
    digest = hashlib.sha256(f"{base_seed}:{clip_id}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


@dataclass
class CaptionResult:
    """One clip's outcome inside a backend, before it becomes an output row."""

    caption: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    # With ``error``: whether captioning again can succeed (platform/runtime/failures.py); None means permanent (an empty
    # or invalid output, a model that rejects the input).
    failure_class: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class CaptionerBackend(ABC):
    """A captioner replica. Subclasses register with ``@CAPTIONERS.register(name)`` and implement ``load`` and
    ``caption``; the base class turns batches into rows, isolates failures and records timings.

    Declared resources (per replica) come from the config: ``num_cpus`` and ``num_gpus``.
    """

    registered_name: ClassVar[str]
    # A plugin backend's typed settings: a frozen dataclass whose fields are made with ``params.param``, filled from
    # ``CaptionerConfig.backend_params`` into ``self.params``. None: the backend takes none (the built-ins read their
    # own nested configs, ``vllm`` and ``endpoint``).
    Config: ClassVar[type | None] = None
    # Whether the replica runs an inference engine that needs ``config.env`` (default: vLLM's) in its actor. An
    # actor with a runtime environment of its own cannot reuse Ray's pre-started workers, so backends without an
    # engine say False and start faster.
    needs_engine_env: ClassVar[bool] = True

    def __init__(self, config: CaptionerConfig, store: Any | None = None) -> None:
        self.config = config
        self.store = store  # ObjectStore holding an object-store model (None: file:// models only)
        self.prompt = config.prompt_template()
        self.params = backend_params(type(self), config)
        self.actor_id = _actor_id()
        self.load_s = 0.0
        self.started_at = 0.0
        self.ready_at = 0.0
        self._loaded = False
        # The most clips one call will get, when the caller knows (a stage with only a few clips to do); a backend's
        # warm-up sends no larger batch than that, nor one larger than batch_size. None: up to batch_size.
        self.largest_batch: int | None = None
        self.prompt_sha256 = self.prompt.sha256()

    # -- provenance (recorded on every row) ----------------------------------------------------------------------

    def engine_info(self) -> tuple[str, str]:
        """(engine, engine_version): what serves this backend's captions, as known after ``load()``. A backend
        reports its engine's own version (vllm.__version__, the server's answer), never a configured guess."""
        # a backend class used without registering (tests, benchmarks) is named by its class
        return getattr(type(self), "registered_name", type(self).__name__), _videolake_version()

    def sampling_used(self, clip_id: str) -> dict[str, Any]:
        """The sampling settings the request for ``clip_id`` was sent with (the per-clip seed included)."""
        s = self.config.sampling
        return {
            **asdict(s),
            "seed": clip_seed(s.seed, clip_id),
            "base_seed": s.seed,
            "structured": self.prompt.structured,
        }

    # -- declared resources ------------------------------------------------------------------------------------

    @property
    def num_cpus(self) -> float:
        return float(self.config.num_cpus_per_actor)

    @property
    def num_gpus(self) -> float:
        return float(self.config.num_gpus_per_actor)

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def setup(self, largest_batch: int | None = None) -> None:
        """Load the model once per actor (idempotent). The seconds it takes are reported as model load time.
        ``largest_batch``: the most clips any call will get, when the caller knows (the clips it has to do)."""
        if self._loaded:
            return
        self.largest_batch = largest_batch
        self.started_at = time.time()
        t0 = time.perf_counter()
        self.load()
        self.load_s = time.perf_counter() - t0
        self.ready_at = time.time()
        self._loaded = True
        log.info("captioner %s ready on %s in %.1fs", self.registered_name, self.actor_id, self.load_s)

    def teardown(self) -> None:
        """Free the model. Safe to call twice."""
        if self._loaded:
            self.unload()
            self._loaded = False

    @abstractmethod
    def load(self) -> None:
        """Load weights / open clients."""

    def unload(self) -> None:
        """Release what ``load`` took."""

    @abstractmethod
    def caption(self, items: list[dict[str, Any]]) -> list[CaptionResult]:
        """Caption decodable clips; one result per item, in order. Per-item errors go into the result; raise
        only when the whole call failed (the base class then retries item by item to isolate the bad one)."""

    # -- the Ray Data entry point -------------------------------------------------------------------------------

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.setup()
        n = len(batch["clip_id"])
        items = [_row(batch, i) for i in range(n)]
        results: list[CaptionResult | None] = [None] * n
        todo: list[int] = []
        for i, item in enumerate(items):
            if item["frame_error"]:
                results[i] = CaptionResult(
                    error=f"frame extraction failed: {item['frame_error']}",
                    failure_class=item["frame_error_class"] or PERMANENT,
                )
            else:
                todo.append(i)
        t0 = time.perf_counter()
        if todo:
            for i, res in zip(todo, self._caption_isolated([items[i] for i in todo])):
                results[i] = res
        generate_s = time.perf_counter() - t0
        finished = time.time()
        return self._rows(items, results, generate_s, finished)

    def _caption_isolated(self, items: list[dict[str, Any]]) -> list[CaptionResult]:
        try:
            out = self.caption(items)
            if len(out) != len(items):
                raise RuntimeError(f"backend returned {len(out)} results for {len(items)} clips")
            return out
        except Exception as exc:  # noqa: BLE001 - isolate the bad clip instead of failing the batch
            if len(items) == 1:
                return [
                    CaptionResult(error=f"model error: {type(exc).__name__}: {exc}", failure_class=failure_class(exc))
                ]
            log.warning("batch of %d failed (%s: %s); retrying clip by clip", len(items), type(exc).__name__, exc)
            return [self._caption_isolated([item])[0] for item in items]

    def _rows(self, items, results, generate_s: float, finished: float) -> dict[str, np.ndarray]:
        n = len(items)
        now = np.datetime64(int(finished * 1e6), "us")
        ok = [_is_ok(r) for r in results]
        errors = [None if good else _error_text(r) for r, good in zip(results, ok)]
        captions = [r.caption if g else None for r, g in zip(results, ok)]
        fields = self._structured_fields(captions, ok, errors)
        engine, engine_version = self.engine_info()
        return {
            "clip_id": _item_column(items, "clip_id"),
            "caption_track": _repeat(self.config.track, n),
            "video_id": _item_column(items, "video_id"),
            "source_uri": _item_column(items, "source_uri"),
            "status": np.array([STATUS_OK if g else STATUS_FAILED for g in ok], dtype=object),
            "caption": np.array(captions, dtype=object),
            "error": np.array(errors, dtype=object),
            "failure_class": np.array([_row_failure_class(r, g) for r, g in zip(results, ok)], dtype=object),
            "model": _repeat(self.config.model_label, n),
            "model_revision": _repeat(self.config.model_revision, n),
            "prompt_version": _repeat(self.prompt.version, n),
            "num_frames": np.array([it["num_frames"] for it in items], dtype=np.int32),
            **_usage_columns(results),
            "captioned_at": np.full(n, now, dtype="datetime64[us]"),
            "prompt_sha256": _repeat(self.prompt_sha256, n),
            "sampling": np.array(
                [json.dumps(self.sampling_used(it["clip_id"]), sort_keys=True) for it in items], dtype=object
            ),
            "engine": _repeat(engine, n),
            "engine_version": _repeat(engine_version, n),
            "frame_timestamps_s": _objects([list(it["frame_times_s"]) for it in items]),
            "caption_fields": _objects(fields),
            "source_track": _repeat(self.config.source_track, n),
            "actor_id": _repeat(self.actor_id, n),
            "generate_s": np.full(n, generate_s / max(n, 1), dtype=np.float64),
            "actor_load_s": np.full(n, self.load_s, dtype=np.float64),
            "actor_started_at": np.full(n, self.started_at, dtype=np.float64),
            "actor_ready_at": np.full(n, self.ready_at, dtype=np.float64),
            "batch_finished_at": np.full(n, finished, dtype=np.float64),
        }

    def _structured_fields(
        self, captions: list[str | None], ok: list[bool], errors: list[str | None]
    ) -> list[dict[str, str] | None]:
        """A structured prompt's fields per clip; updates ``captions`` (to the "caption" field), ``ok`` and ``errors``
        in place (a clip whose output has no usable caption field fails)."""
        fields: list[dict[str, str] | None] = [None] * len(captions)
        if not self.prompt.structured:
            return fields
        from videolake.platform.captioning.prompts import structured_fields

        for i, text in enumerate(captions):
            if text is None:
                continue
            caption, fields[i] = structured_fields(text)
            if caption is None:  # no usable "caption" field: the sample would have no text
                captions[i], fields[i], ok[i] = None, None, False
                errors[i] = "invalid JSON output: no non-blank caption field"
            else:
                captions[i] = caption
        return fields


def _is_ok(r: CaptionResult | None) -> bool:
    """Whether a clip's result is a caption: no error and non-blank text."""
    return r is not None and r.ok and bool(r.caption and r.caption.strip())


def _error_text(r: CaptionResult | None) -> str:
    """The error of a clip whose result is not a caption."""
    if r is not None and r.error:
        return r.error
    return "empty output: the model returned no caption text"


def _row_failure_class(r: CaptionResult | None, good: bool) -> str | None:
    """None for a caption, else the result's failure class (permanent when it has none)."""
    if good:
        return None
    return (r.failure_class if r is not None else None) or PERMANENT


def _usage_columns(results: list[CaptionResult | None]) -> dict[str, np.ndarray]:
    """Tokens and latency per clip (0 for a clip that never reached the model)."""
    return {
        "prompt_tokens": np.array([r.prompt_tokens if r else 0 for r in results], dtype=np.int64),
        "output_tokens": np.array([r.output_tokens if r else 0 for r in results], dtype=np.int64),
        "latency_s": np.array([r.latency_s if r else 0.0 for r in results], dtype=np.float64),
    }


def _item_column(items: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.array([it[key] for it in items], dtype=object)


def _repeat(value: Any, n: int) -> np.ndarray:
    return np.array([value] * n, dtype=object)


def _row(batch: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    # no "frames"/"video_meta" columns: input_mode "none" (nothing decoded, for backends that ignore frames)
    frames = batch["frames"][i] if "frames" in batch else _NO_FRAMES
    meta = batch["video_meta"][i] if "video_meta" in batch else ""
    return {
        "clip_id": str(batch["clip_id"][i]),
        "video_id": str(batch["video_id"][i]),
        "source_uri": str(batch["source_uri"][i]),
        "frames": np.asarray(frames, dtype=np.uint8),
        "frame_error": str(batch["frame_error"][i] or ""),
        "frame_error_class": str(batch["frame_error_class"][i] or "") if "frame_error_class" in batch else "",
        "video_meta": json.loads(meta) if meta else {},
        "num_frames": int(batch["num_frames"][i]),
        "frame_times_s": json.loads(times) if (times := _cell(batch, "frame_times_s", i)) else [],
        "source_caption": _cell(batch, "source_caption", i),
    }


def _cell(batch: dict[str, np.ndarray], column: str, i: int) -> str:
    return str(batch[column][i] or "") if column in batch else ""


def _objects(values: list[Any]) -> np.ndarray:
    """An object array of ``values`` (lists, dicts or None) that numpy does not turn into a 2-d array."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _videolake_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return "videolake " + version("videolake")
    except PackageNotFoundError:
        return "videolake (not installed)"


_NO_FRAMES = np.zeros((0, 0, 0, 3), dtype=np.uint8)


def _actor_id() -> str:
    """The Ray actor id when inside an actor, else host:pid (bench and tests call backends in-process)."""
    ray = sys.modules.get("ray")  # never import ray just to ask: in-process callers should not pay for it
    try:
        if ray is not None and ray.is_initialized():
            actor = ray.get_runtime_context().get_actor_id()
            if actor:
                return str(actor)[:16]
    except Exception:  # noqa: BLE001 - only a label
        pass
    return f"{os.uname().nodename}:{os.getpid()}"


# The built-ins import vllm/httpx only when a backend loads; plugins come through the entry-point group.
CAPTIONERS: Registry[CaptionerBackend] = Registry(
    "captioner backend",
    builtins=(
        "videolake.platform.captioning.vllm_backend",
        "videolake.platform.captioning.openai_backend",
        "videolake.platform.captioning.standin_backend",
    ),
    entry_point_group="videolake.caption_backends",
)


def captioner_class(name: str) -> type[CaptionerBackend]:
    """The registered backend class ``name`` (built-in or an installed plugin; no heavy imports)."""
    return CAPTIONERS.get(name)


def backend_params(cls: type[CaptionerBackend], config: CaptionerConfig) -> Any:
    """``config.backend_params`` typed by the backend class's ``Config``; ``params.ParamError`` names the backend and
    the parameter. The caption stage calls it before any actor starts, so a bad parameter fails the step at once."""
    from videolake.platform.params import plugin_params

    return plugin_params(
        cls.Config, config.backend_params, f"caption backend {config.backend!r}", "its own nested config"
    )


def get_captioner(config: CaptionerConfig, store: Any | None = None) -> CaptionerBackend:
    """An (unloaded) backend for ``config``; imports the implementations so they register (no heavy imports).

    ``store``: the ObjectStore an object-store model URI (``config.model``) lives in, e.g. the S3 store.
    """
    return captioner_class(config.backend)(config, store=store)
