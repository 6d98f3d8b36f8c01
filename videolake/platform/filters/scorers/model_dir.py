"""A model scorer's model directory: where it is (a path, a ``file://`` URI or an object-store prefix) and what it
holds (``model.onnx`` and ``videolake-model.json``, which says how to feed the graph and what its output means).

Why one way: a plugin that scores with weights the project does not ship (an aesthetic head, a safety model of the
user's own) is pointed at them by one setting, the same on a laptop (a directory) and on a cluster (a prefix in the
bucket every worker can read), and the directory says itself how its graph wants its pixels, so the scorer's code
does not hard-code one model's preprocessing.

Locations:

- a local directory (``/models/aesthetic``, ``./models/aesthetic``) or ``file:///models/aesthetic``: used in place;
- ``s3://bucket/prefix/``: copied once into the node's model cache (``$VIDEOLAKE_MODEL_CACHE``, default
  ``~/.cache/videolake/models``) by the captioner's cache (``captioning.model_cache``: a copy is complete or
  absent, verified against the remote listing's files and sizes and its own sha256 manifest, and copied again when
  the remote model changed; a file lock makes one process per node copy it). The S3 connection is the workers' own:
  endpoint ``$VIDEOLAKE_S3_ENDPOINT_URL`` (empty: AWS), region ``$VIDEOLAKE_S3_REGION``, credentials from boto3's
  chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, a role), as the Ray pods have them (k8s/).

Each location resolves once per process (a Ray worker scores many videos).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

MODEL_FILE = "model.onnx"
SPEC_FILE = "videolake-model.json"
ENV_S3_ENDPOINT = "VIDEOLAKE_S3_ENDPOINT_URL"
ENV_S3_REGION = "VIDEOLAKE_S3_REGION"

LAYOUTS = ("NCHW", "NHWC")
CHANNELS = ("RGB", "BGR")
RESIZES = ("center_crop", "stretch")
INTERPOLATIONS = ("bicubic", "bilinear")


class ModelDirError(ValueError):
    """A model location that cannot be used: missing, incomplete, or with a ``videolake-model.json`` that does not
    describe the graph (the message names the location, the file and the field)."""


@dataclass(frozen=True)
class ModelSpec:
    """What ``videolake-model.json`` says (see docs/model-scorers.md): how to turn RGB frames into the graph's input,
    and what its output is."""

    input_size: tuple[int, int]  # (height, width) of the graph's input
    mean: tuple[float, float, float]  # per channel, in ``channels`` order, after ``pixel_scale``
    std: tuple[float, float, float]
    license: str
    source: str
    output_meaning: str
    output_range: tuple[float, float]
    layout: str = "NCHW"
    channels: str = "RGB"
    resize: str = "center_crop"  # shorter side to the input size, then the centre (CLIP's); stretch: both sides
    interpolation: str = "bicubic"
    pixel_scale: float = 1.0 / 255.0  # uint8 pixel * pixel_scale, then (x - mean) / std
    input_name: str | None = None  # None: the graph's first input
    output_name: str | None = None  # None: the graph's first output

    def prepare(self, frames: Sequence[np.ndarray]) -> np.ndarray:
        """uint8 RGB frames (each H x W x 3, sizes may differ) -> the graph's float32 input batch."""
        from PIL import Image

        height, width = self.input_size
        resample = Image.Resampling.BICUBIC if self.interpolation == "bicubic" else Image.Resampling.BILINEAR
        pixels = np.empty((len(frames), height, width, 3), dtype=np.float32)
        for i, frame in enumerate(frames):
            img = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8))
            if self.resize == "stretch":
                img = img.resize((width, height), resample=resample)
            else:
                scale = max(height / img.height, width / img.width)
                size = (max(width, round(img.width * scale)), max(height, round(img.height * scale)))
                img = img.resize(size, resample=resample)
                left, top = (size[0] - width) // 2, (size[1] - height) // 2
                img = img.crop((left, top, left + width, top + height))
            pixels[i] = np.asarray(img, dtype=np.float32)
        if self.channels == "BGR":
            pixels = pixels[..., ::-1]
        mean, std = np.asarray(self.mean, np.float32), np.asarray(self.std, np.float32)
        out: np.ndarray = (pixels * np.float32(self.pixel_scale) - mean) / std
        if self.layout == "NCHW":
            out = out.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(out, dtype=np.float32)


@dataclass(frozen=True)
class ModelDir:
    location: str  # as the user gave it
    path: str  # the local directory
    spec: ModelSpec

    @property
    def model_path(self) -> str:
        return os.path.join(self.path, MODEL_FILE)


StoreFactory = Callable[[str], Any]

_RESOLVED: dict[str, ModelDir] = {}
_LOCK = threading.Lock()


def env_store_factory(uri: str) -> Any:
    """The object store holding ``uri`` on this worker's own connection (see the module docstring)."""
    from videolake.platform.captioning.model_cache import default_store_factory

    parsed = urlparse(uri)
    if parsed.scheme != "s3":
        return default_store_factory(uri)
    from videolake.platform.objectstore.s3 import S3ObjectStore

    if not parsed.netloc:
        raise ModelDirError(f"model location {uri!r} names no bucket: use s3://bucket/prefix/")
    return S3ObjectStore(
        parsed.netloc,
        endpoint_url=os.environ.get(ENV_S3_ENDPOINT) or None,
        region=os.environ.get(ENV_S3_REGION) or "us-east-1",
    )


def local_dir(location: str, *, cache_dir: str | None = None, store_factory: StoreFactory | None = None) -> str:
    """A local directory with the files at ``location``: a path or ``file://`` URI in place, an object-store prefix
    copied into the model cache (``captioning.model_cache.resolve_model``)."""
    from videolake.platform.captioning.model_cache import resolve_model

    parsed = urlparse(location)
    if parsed.scheme == "file":
        location = unquote(parsed.path)
    elif "://" in location and parsed.scheme != "s3":
        raise ModelDirError(f"model location {location!r}: use a directory, file://... or s3://bucket/prefix/")
    if "://" not in location:
        if not os.path.isdir(location):
            raise ModelDirError(f"model directory {location} does not exist (or is not a directory)")
        return os.path.abspath(location)
    try:
        return resolve_model(location, cache_dir=cache_dir, store_factory=store_factory or env_store_factory).path
    except FileNotFoundError as exc:
        raise ModelDirError(f"model location {location}: {exc}") from exc


def load_model_dir(
    location: str, *, cache_dir: str | None = None, store_factory: StoreFactory | None = None
) -> ModelDir:
    """``location`` resolved to a local directory and its spec read, once per process."""
    if not location:
        raise ModelDirError("no model location given: a directory, file://... or s3://bucket/prefix/")
    with _LOCK:
        if location not in _RESOLVED:
            path = local_dir(location, cache_dir=cache_dir, store_factory=store_factory)
            _RESOLVED[location] = ModelDir(location=location, path=path, spec=read_spec(path, location))
        return _RESOLVED[location]


def forget(location: str | None = None) -> None:
    """Drop this process's resolution of ``location`` (all when None), so the next load resolves it again."""
    with _LOCK:
        if location is None:
            _RESOLVED.clear()
        else:
            _RESOLVED.pop(location, None)


def read_spec(path: str, location: str | None = None) -> ModelSpec:
    """The ``videolake-model.json`` of a local model directory, checked (``ModelDirError`` naming what is wrong)."""
    where = f"model directory {location or path}"
    if not os.path.isfile(os.path.join(path, MODEL_FILE)):
        raise ModelDirError(f"{where} has no {MODEL_FILE}")
    spec_path = Path(path) / SPEC_FILE
    if not spec_path.is_file():
        raise ModelDirError(f"{where} has no {SPEC_FILE} (it says how to feed {MODEL_FILE}: docs/model-scorers.md)")
    try:
        raw = json.loads(spec_path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelDirError(f"{where}: {SPEC_FILE} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ModelDirError(f"{where}: {SPEC_FILE} must hold a JSON object, got {type(raw).__name__}")
    return _spec(raw, f"{where}: {SPEC_FILE}")


_FIELDS = frozenset(
    {
        "input_size",
        "mean",
        "std",
        "layout",
        "channels",
        "resize",
        "interpolation",
        "pixel_scale",
        "input_name",
        "output_name",
        "output",
        "license",
        "source",
        "description",
    }
)


def _spec(raw: dict[str, Any], where: str) -> ModelSpec:
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise ModelDirError(f"{where}: unknown fields {unknown}; known: {sorted(_FIELDS)}")

    def need(name: str) -> Any:
        if name not in raw:
            raise ModelDirError(f"{where}: field {name!r} is required")
        return raw[name]

    def numbers(name: str, count: int, value: Any) -> tuple[float, ...]:
        ok = isinstance(value, list) and len(value) == count
        ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        if not ok:
            raise ModelDirError(f"{where}: {name!r} must be a list of {count} numbers, got {value!r}")
        return tuple(float(v) for v in value)

    def text(name: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ModelDirError(f"{where}: {name!r} must be a non-empty string, got {value!r}")
        return value

    def choice(name: str, options: tuple[str, ...], default: str) -> str:
        value = raw.get(name, default)
        if value not in options:
            raise ModelDirError(f"{where}: {name!r} must be one of {list(options)}, got {value!r}")
        return str(value)

    size = need("input_size")
    if isinstance(size, int) and not isinstance(size, bool):
        size = [size, size]
    height, width = numbers("input_size", 2, size)
    if height != int(height) or width != int(width) or min(height, width) < 1:
        raise ModelDirError(f"{where}: 'input_size' must be [height, width] in whole pixels, got {size!r}")
    std = numbers("std", 3, need("std"))
    if min(std) <= 0:
        raise ModelDirError(f"{where}: 'std' must be positive, got {list(std)}")
    output = need("output")
    if not isinstance(output, dict) or set(output) - {"meaning", "range"}:
        raise ModelDirError(f"{where}: 'output' must be an object with 'meaning' and 'range', got {output!r}")
    if "meaning" not in output or "range" not in output:
        raise ModelDirError(f"{where}: 'output' needs 'meaning' (what the score says) and 'range' ([low, high])")
    low, high = numbers("output.range", 2, output["range"])
    if not low < high:
        raise ModelDirError(f"{where}: 'output.range' must be [low, high] with low < high, got {[low, high]}")
    scale = raw.get("pixel_scale", 1.0 / 255.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
        raise ModelDirError(f"{where}: 'pixel_scale' must be a positive number, got {scale!r}")
    names = {k: (text(k, raw[k]) if raw.get(k) is not None else None) for k in ("input_name", "output_name")}
    mean = numbers("mean", 3, need("mean"))
    return ModelSpec(
        input_size=(int(height), int(width)),
        mean=(mean[0], mean[1], mean[2]),
        std=(std[0], std[1], std[2]),
        license=text("license", need("license")),
        source=text("source", need("source")),
        output_meaning=text("output.meaning", output["meaning"]),
        output_range=(low, high),
        layout=choice("layout", LAYOUTS, "NCHW"),
        channels=choice("channels", CHANNELS, "RGB"),
        resize=choice("resize", RESIZES, "center_crop"),
        interpolation=choice("interpolation", INTERPOLATIONS, "bicubic"),
        pixel_scale=float(scale),
        input_name=names["input_name"],
        output_name=names["output_name"],
    )
