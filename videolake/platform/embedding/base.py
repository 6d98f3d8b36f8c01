"""The clip embedder contract: one frozen config (the backend's own settings nested in it), one abstract backend, a
registry of backends by name. It mirrors the captioner's (captioning/base.py) so that the same Ray Data actor pool
runs either.

Why embeddings: semantic deduplication (semantic.py) compares clips by what they show, which catches the copies
that byte hashes and perceptual frame hashes miss (re-encodes, crops, other cuts of the same shot).

A worker follows one contract: the class declares its resources per replica (``resources``; ``cuda_resources`` when
``device="cuda"``), ``setup()`` loads the model once per actor, ``__call__(batch)`` embeds a Ray Data numpy batch,
``teardown()`` frees it.

Batch in (one row per clip; e.g. from captioning.clip_frames.extract_frames with ``EmbedderConfig.frame_config()``):
    clip_id        str
    frames         uint8 (T, H, W, 3) per row; an empty (0, 0, 0, 3) array when extraction failed
    frame_error    str, "" when the frames were extracted, else the reason
Batch out (one row per input row, in order):
    clip_id        str
    model          str, the model's name and revision (``model_label``): what produced the vector
    status         "ok" | "failed"
    error          str | None, the reason of a failed row
    failure_class  str | None, transient | permanent (platform/runtime/failures.py) for a failed row
    embedding      float32 1-D array, L2-normalised; empty (0,) for a failed row
    dim            int, the embedding's length (0 for a failed row)
Every input row gives exactly one output row: a clip that fails is a ``failed`` row with its reason, never a
missing row and never a crashed batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from videolake.platform.registry import Registry
from videolake.platform.runtime.failures import PERMANENT, failure_class
from videolake.platform.runtime.unit_resources import UnitResources

log = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_FAILED = "failed"
DEVICES = ("auto", "cpu", "cuda")
OUTPUT_COLUMNS = ("clip_id", "model", "status", "error", "failure_class", "embedding", "dim")

# Files whose content identifies a checkpoint's architecture and preprocessing (hashed into the model label).
_CONFIG_FILES = ("config.json", "preprocessor_config.json")
# Weight files: only their names and sizes are hashed (reading gigabytes to name a model is not worth it).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


@dataclass(frozen=True)
class EmbedderConfig:
    """Everything that decides how clips are embedded. Frozen; ``embedding_version`` hashes the output-relevant
    part."""

    model: str  # a local model directory (Hugging Face layout: config.json, preprocessor_config.json, weights)
    backend: str = "torch_clip"  # a name in EMBEDDERS
    model_name: str | None = None  # recorded in the ``model`` column; None = ``model_label(model)``
    frames_per_clip: int = 4  # frames sampled per clip (evenly spread); their frame embeddings are mean-pooled
    max_pixels: int = 448 * 448  # frames are decoded downscaled (aspect kept) to at most this many pixels
    batch_size: int = 32  # clips per actor call (Ray Data batch); the backend may split its forward passes further
    device: str = "auto"  # "auto": cuda when the replica sees a GPU, else cpu | "cpu" | "cuda" (fails without one)
    # The backend's own settings, typed by its ``Config`` (params.parse_params; text values are parsed).
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {list(DEVICES)}, got {self.device!r}")
        if self.frames_per_clip < 1 or self.batch_size < 1 or self.max_pixels < 1:
            raise ValueError("frames_per_clip, batch_size and max_pixels must be >= 1")

    @property
    def model_label(self) -> str:
        """What the ``model`` column records."""
        return self.model_name or model_label(self.model)

    def frame_config(self):
        """The captioning FrameConfig that extracts exactly ``frames_per_clip`` frames at ``max_pixels`` (pass it to
        ``clip_frames.extract_clip`` / ``extract_frames``)."""
        from videolake.platform.captioning.base import FrameConfig

        return FrameConfig(
            sample_fps=1.0, min_frames=self.frames_per_clip, max_frames=self.frames_per_clip, max_pixels=self.max_pixels
        )


def model_label(model_dir: str | os.PathLike) -> str:
    """``<dir name>@<8 hex>``: the hash covers config.json and preprocessor_config.json (parsed, without the
    ``transformers_version`` that a re-save changes) and the names and sizes of the weight files. Two checkpoints
    with the same architecture, preprocessing and file sizes but other weights get the same label: name the
    revision with ``EmbedderConfig.model_name`` when that matters (e.g. ``clip-vit-b32@<commit>``)."""
    path = os.path.abspath(os.fspath(model_dir))
    h = hashlib.sha256()
    for name in _CONFIG_FILES:
        file = os.path.join(path, name)
        if os.path.isfile(file):
            with open(file, encoding="utf-8") as f:
                data = json.load(f)
            if isinstance(data, dict):
                data.pop("transformers_version", None)
            h.update(name.encode() + json.dumps(data, sort_keys=True).encode())
    if os.path.isdir(path):
        for name in sorted(os.listdir(path)):
            if name.endswith(_WEIGHT_SUFFIXES):
                h.update(f"{name}:{os.path.getsize(os.path.join(path, name))}".encode())
    return f"{os.path.basename(path.rstrip(os.sep)) or path}@{h.hexdigest()[:8]}"


def embedding_version(config: EmbedderConfig) -> str:
    """A short hash of everything that changes the vectors: backend, model label, frames per clip, frame size and
    the backend's parsed settings. Batch size and device are left out (they change speed, not what is computed;
    cpu vs cuda float noise aside)."""
    cls = embedder_class(config.backend)
    params = backend_params(cls, config)
    spec = {
        "backend": config.backend,
        "model": config.model_label,
        "frames_per_clip": config.frames_per_clip,
        "max_pixels": config.max_pixels,
        "params": asdict(params) if params is not None else None,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:12]


class Embedder(ABC):
    """An embedder replica. Subclasses register with ``@EMBEDDERS.register(name)`` and implement ``load`` and
    ``embed``; the base class turns batches into rows, isolates failures, checks and L2-normalises the vectors."""

    registered_name: ClassVar[str]
    # The backend's typed settings: a frozen dataclass whose fields are made with ``params.param``, filled from
    # ``EmbedderConfig.params`` into ``self.params``. None: the backend takes none.
    Config: ClassVar[type | None] = None
    # What one replica needs from the cluster on the CPU (and with ``device="cuda"``). Fractional CPUs on purpose,
    # as the captioner's: whole CPUs per actor deadlock 2-core nodes next to the frame-extraction tasks. Under
    # Ray an actor that asks for no GPU sees none (CUDA_VISIBLE_DEVICES is emptied), so ``device="auto"`` with
    # ``resources`` runs on the CPU; ask for ``device="cuda"`` to be scheduled with ``cuda_resources``.
    resources: ClassVar[UnitResources] = UnitResources(num_cpus=0.5, num_gpus=0.0)
    cuda_resources: ClassVar[UnitResources] = UnitResources(num_cpus=0.5, num_gpus=1.0)

    def __init__(self, config: EmbedderConfig) -> None:
        self.config = config
        self.params = backend_params(type(self), config)
        self.model_label = config.model_label
        self.load_s = 0.0
        self._loaded = False

    @classmethod
    def replica_resources(cls, config: EmbedderConfig) -> UnitResources:
        """The resources to schedule one replica with: ``cuda_resources`` for ``device="cuda"``, else ``resources``."""
        return cls.cuda_resources if config.device == "cuda" else cls.resources

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def setup(self) -> None:
        """Load the model once per actor (idempotent)."""
        if self._loaded:
            return
        t0 = time.perf_counter()
        self.load()
        self.load_s = time.perf_counter() - t0
        self._loaded = True
        log.info("embedder %s (%s) ready in %.1fs", self.registered_name, self.model_label, self.load_s)

    def teardown(self) -> None:
        """Free the model. Safe to call twice."""
        if self._loaded:
            self.unload()
            self._loaded = False

    @abstractmethod
    def load(self) -> None:
        """Load the weights."""

    def unload(self) -> None:
        """Release what ``load`` took."""

    @abstractmethod
    def embed(self, clips: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        """One vector per clip (each a uint8 (T, H, W, 3) array with T >= 1), in order; need not be normalised.
        Raise when the call fails: the base class then retries clip by clip to isolate the bad one."""

    # -- the Ray Data entry point -------------------------------------------------------------------------------

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.setup()
        n = len(batch["clip_id"])
        ids = [str(batch["clip_id"][i]) for i in range(n)]
        vectors: list[np.ndarray | None] = [None] * n
        errors: list[str | None] = [None] * n
        classes: list[str | None] = [None] * n
        todo: list[int] = []
        frames: dict[int, np.ndarray] = {}
        for i in range(n):
            reason = str(batch["frame_error"][i] or "") if "frame_error" in batch else ""
            clip = np.asarray(batch["frames"][i])
            if reason:
                errors[i], classes[i] = f"frame extraction failed: {reason}", PERMANENT
            elif clip.ndim != 4 or clip.shape[0] == 0 or clip.shape[-1] != 3:
                errors[i], classes[i] = f"no frames: expected (T, H, W, 3) with T >= 1, got {clip.shape}", PERMANENT
            else:
                frames[i] = clip.astype(np.uint8, copy=False)
                todo.append(i)
        if todo:
            for i, (vec, err, cls) in zip(todo, self._embed_isolated([frames[i] for i in todo])):
                vectors[i], errors[i], classes[i] = vec, err, cls
        return self._rows(ids, vectors, errors, classes)

    def _embed_isolated(self, clips: list[np.ndarray]) -> list[tuple[np.ndarray | None, str | None, str | None]]:
        try:
            out = list(self.embed(clips))
            if len(out) != len(clips):
                raise RuntimeError(f"backend returned {len(out)} vectors for {len(clips)} clips")
        except Exception as exc:  # noqa: BLE001 - isolate the bad clip instead of failing the batch
            if len(clips) == 1:
                return [(None, f"model error: {type(exc).__name__}: {exc}", failure_class(exc))]
            log.warning("batch of %d failed (%s: %s); retrying clip by clip", len(clips), type(exc).__name__, exc)
            return [self._embed_isolated([clip])[0] for clip in clips]
        return [_checked(vec) for vec in out]

    def _rows(
        self, ids: list[str], vectors: list[np.ndarray | None], errors: list[str | None], classes: list[str | None]
    ) -> dict[str, np.ndarray]:
        n = len(ids)
        embedding = np.empty(n, dtype=object)
        for i, vec in enumerate(vectors):
            embedding[i] = vec if vec is not None else np.zeros(0, dtype=np.float32)
        ok = [v is not None for v in vectors]
        return {
            "clip_id": np.array(ids, dtype=object),
            "model": np.array([self.model_label] * n, dtype=object),
            "status": np.array([STATUS_OK if g else STATUS_FAILED for g in ok], dtype=object),
            "error": np.array([None if g else e for g, e in zip(ok, errors)], dtype=object),
            "failure_class": np.array([None if g else (c or PERMANENT) for g, c in zip(ok, classes)], dtype=object),
            "embedding": embedding,
            "dim": np.array([len(v) if v is not None else 0 for v in vectors], dtype=np.int32),
        }


def _checked(vec: Any) -> tuple[np.ndarray | None, str | None, str | None]:
    """The vector L2-normalised as float32, or why it cannot be (not 1-D, empty, non-finite, zero)."""
    v = np.asarray(vec, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        return None, f"bad embedding: expected a non-empty 1-D vector, got shape {v.shape}", PERMANENT
    if not np.all(np.isfinite(v)):
        return None, "bad embedding: non-finite values", PERMANENT
    norm = float(np.linalg.norm(v))
    if norm == 0.0:
        return None, "bad embedding: zero vector", PERMANENT
    return (v / norm).astype(np.float32), None, None


# The built-in imports torch/transformers only when it loads; plugins come through the entry-point group.
EMBEDDERS: Registry[Embedder] = Registry(
    "embedder backend",
    builtins=("videolake.platform.embedding.torch_backend",),
    entry_point_group="videolake.embedders",
)


def embedder_class(name: str) -> type[Embedder]:
    """The registered backend class ``name`` (built-in or an installed plugin; no heavy imports)."""
    return EMBEDDERS.get(name)


def backend_params(cls: type[Embedder], config: EmbedderConfig) -> Any:
    """``config.params`` typed by the backend class's ``Config``; ``params.ParamError`` names the backend and the
    parameter. Call it before any actor starts, so that a bad parameter fails the step at once."""
    from videolake.platform.params import plugin_params

    return plugin_params(cls.Config, config.params, f"embedder backend {config.backend!r}", "no settings")


def get_embedder(config: EmbedderConfig) -> Embedder:
    """An (unloaded) backend for ``config``; imports the implementations so they register (no heavy imports)."""
    return embedder_class(config.backend)(config)
