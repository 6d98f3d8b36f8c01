"""The ONNX device route of the model scorers (videolake.platform.filters.scorers.onnx_device): which onnxruntime providers a
``device`` setting picks, the clear error for ``cuda`` without onnxruntime-gpu, and the GPU a cuda scorer asks Ray
for. This machine's onnxruntime is the CPU wheel; a worker with onnxruntime-gpu is simulated by its provider list.
"""

from __future__ import annotations

import pytest

import videolake.platform.filters.scorers.aesthetic  # noqa: F401 - registers the scorers (the lead adds them to the list)
import videolake.platform.filters.scorers.nsfw  # noqa: F401
from videolake.platform.filters.quality import SCORERS, QualityConfig, scorer_resources
from videolake.platform.filters.scorers import onnx_device
from videolake.platform.filters.scorers.nsfw import model_path
from videolake.platform.filters.scorers.onnx_device import (
    CPU,
    CUDA,
    DeviceError,
    available_providers,
    device_resources,
    onnx_providers,
    onnx_session,
)
from videolake.platform.params import ParamError

GPU_WORKER = ["TensorrtExecutionProvider", CUDA, CPU]  # what onnxruntime-gpu reports
CPU_WHEEL = ["AzureExecutionProvider", CPU]  # what this machine's onnxruntime reports


def test_this_machines_providers():
    gpu = CUDA in available_providers()  # False here (the CPU wheel); True on a GPU worker with onnxruntime-gpu
    assert onnx_providers("cpu") == [CPU]
    assert onnx_providers("auto") == ([CUDA, CPU] if gpu else [CPU])


def test_auto_and_cuda_use_cuda_where_onnxruntime_has_it(monkeypatch):
    monkeypatch.setattr(onnx_device, "available_providers", lambda: GPU_WORKER)
    assert onnx_providers("auto") == [CUDA, CPU]
    assert onnx_providers("cuda") == [CUDA, CPU]
    assert onnx_providers("cpu") == [CPU]  # cpu stays on the CPU even on a GPU worker


def test_cuda_without_the_provider_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(onnx_device, "available_providers", lambda: CPU_WHEEL)
    assert onnx_providers("auto") == [CPU]
    with pytest.raises(DeviceError, match="CUDAExecutionProvider.*onnxruntime-gpu"):
        onnx_providers("cuda")
    with pytest.raises(ValueError, match="device must be one of"):
        onnx_providers("gpu")


def test_sessions_on_this_machine():
    session = onnx_session(model_path(), "cpu", 1)
    assert session.get_providers() == [CPU]
    assert onnx_session(model_path(), "cpu", 1) is session  # one per process, path, device and threads
    if CUDA in available_providers():  # a GPU worker: both run on CUDA
        assert onnx_session(model_path(), "cuda", 1).get_providers()[0] == CUDA
        assert onnx_session(model_path(), "auto", 1).get_providers()[0] == CUDA
        return
    assert onnx_session(model_path(), "auto", 1).get_providers() == [CPU]
    with pytest.raises(DeviceError, match="CUDAExecutionProvider"):
        onnx_session(model_path(), "cuda", 1)  # never a silent CPU run


def test_a_cuda_scorer_asks_ray_for_a_gpu():
    assert device_resources("cuda", 0.5).num_gpus == 0.5
    assert device_resources("auto").num_gpus == 0 and device_resources("cpu").num_gpus == 0
    nsfw = SCORERS.get("nsfw")
    assert nsfw(QualityConfig(scorers=("nsfw",))).unit_resources().num_gpus == 0
    on_gpu = QualityConfig(scorers=("frames", "nsfw"), scorer_params={"nsfw": {"device": "cuda"}})
    assert nsfw(on_gpu).unit_resources().num_gpus == 1.0
    assert scorer_resources(on_gpu).num_gpus == 1.0  # the video's task: the union of its scorers'
    assert scorer_resources(on_gpu).ray_args() == {"num_cpus": 1.0, "num_gpus": 1.0}
    aesthetic = QualityConfig(
        scorers=("aesthetic",), scorer_params={"aesthetic": {"model": "/models/x", "device": "cuda", "gpus": 0.25}}
    )
    assert SCORERS.get("aesthetic")(aesthetic).unit_resources().num_gpus == 0.25
    with pytest.raises(ParamError, match="device"):
        nsfw(QualityConfig(scorers=("nsfw",), scorer_params={"nsfw": {"device": "gpu"}}))
