"""Where a model scorer's ONNX graph runs: onnxruntime's CPU provider, or CUDA on a GPU worker.

Why one module: every ONNX scorer (``nsfw``, ``aesthetic``, and the next ones) takes the same ``device`` setting and
must mean the same by it, both when it builds its session and when it tells the stage what a video's task needs:

- ``cpu``: ``CPUExecutionProvider`` only; the task asks Ray for no GPU.
- ``cuda``: ``CUDAExecutionProvider`` (CPU kept after it for the few operators CUDA lacks); the task asks Ray for
  ``gpus`` GPUs, so Ray places it on a GPU worker. That worker's image must have onnxruntime-gpu (the CPU wheel has
  no CUDA provider): without it the session is refused with an error that says so, never silently run on the CPU.
- ``auto``: CUDA where this process's onnxruntime has the provider, else the CPU; asks Ray for no GPU, so it uses a
  GPU only where the task lands on one anyway (``cuda`` is the way to claim one).

Sessions are cached per process (model path, device, threads): a Ray worker scores many videos and the graph is
loaded once.
"""

from __future__ import annotations

import threading
from typing import Any

from videolake.platform.runtime.unit_resources import UnitResources

DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"

_SESSIONS: dict[tuple[str, str, int], Any] = {}
_LOCK = threading.Lock()


class DeviceError(RuntimeError):
    """The device a scorer was configured for cannot be used in this process (e.g. cuda without onnxruntime-gpu)."""


def _ort() -> Any:
    import onnxruntime  # type: ignore[import-untyped]

    return onnxruntime


def available_providers() -> list[str]:
    return list(_ort().get_available_providers())


def _check_device(device: str) -> None:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {list(DEVICES)}, got {device!r}")


def onnx_providers(device: str) -> list[str]:
    """The onnxruntime execution providers for ``device`` (auto, cpu or cuda), best first."""
    _check_device(device)
    if device == "cpu":
        return [CPU]
    available = available_providers()
    if CUDA in available:
        return [CUDA, CPU]
    if device == "cuda":
        raise DeviceError(
            f"device 'cuda' needs onnxruntime's {CUDA}, which this onnxruntime {_ort().__version__} does not have "
            f"(its providers: {available}): install onnxruntime-gpu on the GPU workers (the GPU image), "
            "or set device to 'cpu' or 'auto'"
        )
    return [CPU]


def onnx_session(model_path: str, device: str = "auto", threads: int = 1) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``model_path`` on ``device`` with ``threads`` intra-op threads (one
    inter-op thread: the stage runs one process per CPU), cached per process. With ``cuda``, a session that
    onnxruntime built without the CUDA provider (it falls back to the CPU when the CUDA libraries fail to load) is an
    error, not a silent CPU run."""
    _check_device(device)
    key = (str(model_path), device, int(threads))
    with _LOCK:
        if key not in _SESSIONS:
            ort = _ort()
            providers = onnx_providers(device)
            options = ort.SessionOptions()
            options.intra_op_num_threads = int(threads)
            options.inter_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = ort.InferenceSession(str(model_path), sess_options=options, providers=providers)
            if device == "cuda" and CUDA not in session.get_providers():
                raise DeviceError(
                    f"device 'cuda': onnxruntime built the session of {model_path} without {CUDA} (its providers: "
                    f"{session.get_providers()}); the CUDA libraries onnxruntime-gpu needs did not load on this worker"
                )
            _SESSIONS[key] = session
        return _SESSIONS[key]


def session_device(session: Any) -> str:
    """``cuda`` when the session runs on the CUDA provider, else ``cpu`` (for logs and measurements)."""
    return "cuda" if CUDA in session.get_providers() else "cpu"


def device_resources(device: str, gpus: float = 1.0, cpus: float = 1.0) -> UnitResources:
    """What one video's scoring task asks of Ray for a scorer on ``device``: ``gpus`` GPUs for ``cuda`` (so the task
    lands on a GPU worker), none otherwise."""
    _check_device(device)
    return UnitResources(num_cpus=cpus, num_gpus=float(gpus) if device == "cuda" else 0.0)
