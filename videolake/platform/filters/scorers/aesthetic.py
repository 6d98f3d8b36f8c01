"""The ``aesthetic`` quality scorer: an image-scoring ONNX model of the user's choice, mean over a clip's frames.

Why a model directory and not a bundled model: no aesthetic predictor ships in an installed wheel, and the usual
ones (a CLIP or SigLIP image encoder with a small MLP head trained on rated images, as LAION's aesthetic predictor)
are the user's to choose and to license. The scorer takes any graph that maps an image batch to one score an image,
exported as one ONNX file with a ``videolake-model.json`` beside it that says how to feed it (input size, mean and
std, layout, channel order) and what the score means (``model_dir``); ``model`` points at that directory, a
``file://`` URI, or an ``s3://bucket/prefix/`` every worker can read (copied once per node).

Per clip it reads ``frames`` frames spread over the clip (4 of at most 640x360 by default, the same request as
``text_overlay`` and ``nsfw``, so they share one decode), runs the graph once over the frames of all the video's
clips (``score_batch``) and records ``aesthetic_score``, the mean over the clip's frames (a clip is as pleasing as
its typical frame; one dull frame should not reject it). The rule ``low_aesthetic`` fires when that mean is below
``min_score``, unless ``score_only``. Choose ``min_score`` on the model's own scale (``output.range`` in its json).

Select it with ``extra_scorers: [aesthetic]`` and ``scorer_params: {aesthetic: {model: s3://.../models/aesthetic/,
min_score: ...}}``; docs/model-scorers.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from videolake.platform.filters.quality import SCORERS, ClipView, FrameRequest, QualityConfig, Scorer, gather_frames
from videolake.platform.filters.scorers.model_dir import ModelDir, ModelDirError, load_model_dir
from videolake.platform.filters.scorers.onnx_device import DEVICES, device_resources, onnx_session
from videolake.platform.params import ParamError, param
from videolake.platform.runtime.unit_resources import UnitResources


@dataclass(frozen=True)
class AestheticConfig:
    model: str = param(
        "",
        "the model directory (model.onnx + videolake-model.json): a path, file://... or s3://bucket/prefix/; required",
    )
    frames: int = param(4, "frames read per clip, spread evenly over it", min=1)
    max_pixels: int = param(
        640 * 360, "frames are decoded at most this large before the model's own resize (640x360: shared)", min=64 * 64
    )
    min_score: float = param(
        0.0, "the low_aesthetic rule fires when the clip's mean score is below this (on the model's scale)"
    )
    score_only: bool = param(False, "record aesthetic_score but never reject")
    device: str = param("auto", "where the graph runs: auto (CUDA when available), cpu or cuda", choices=DEVICES)
    gpus: float = param(1.0, "GPUs a video's scoring task asks Ray for when device is cuda", min=0.0)
    threads: int = param(1, "onnxruntime threads per worker process (the stage runs one process per CPU)", min=1)
    batch_frames: int = param(32, "frames per model call (bounds memory)", min=1)


def image_scores(model: ModelDir, session: Any, frames: Sequence[np.ndarray], batch_frames: int = 32) -> Any:
    """One score per uint8 RGB frame (each H x W x 3): the model directory's preprocessing, then its graph, in
    batches of ``batch_frames`` (one frame a call for a graph exported with a fixed batch of 1)."""
    spec = model.spec
    inputs = {i.name: i for i in session.get_inputs()}
    input_name = spec.input_name or session.get_inputs()[0].name
    output_name = spec.output_name or session.get_outputs()[0].name
    if input_name not in inputs:
        raise ModelDirError(f"model {model.location}: the graph has no input {input_name!r} (it has {list(inputs)})")
    outputs = [o.name for o in session.get_outputs()]
    if output_name not in outputs:
        raise ModelDirError(f"model {model.location}: the graph has no output {output_name!r} (it has {outputs})")
    fixed = inputs[input_name].shape[0]
    step = 1 if fixed == 1 else batch_frames  # a graph exported with a batch of 1 takes one frame a call
    out = []
    for start in range(0, len(frames), step):
        batch = spec.prepare(frames[start : start + step])
        (scores,) = session.run([output_name], {input_name: batch})
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]
        if scores.shape != (len(batch),):
            raise ModelDirError(
                f"model {model.location}: output {output_name!r} has shape {list(scores.shape)} for {len(batch)} "
                "images; an image-scoring graph gives one number an image, shape [n] or [n, 1]"
            )
        out.append(scores)
    return np.concatenate(out) if out else np.zeros(0)


@SCORERS.register("aesthetic")
class AestheticScorer(Scorer):
    """How pleasing a clip looks, by an image-scoring ONNX model from a model directory: the mean over its frames."""

    Config = AestheticConfig
    columns = ("aesthetic_score",)
    rules = ("low_aesthetic",)
    version = "1"
    resources: ClassVar[UnitResources] = UnitResources()

    def __init__(self, config: QualityConfig) -> None:
        super().__init__(config)
        if not self.params.model:
            raise ParamError(
                "quality scorer 'aesthetic': parameter 'model' is required: the model directory (a path, "
                "file://... or s3://bucket/prefix/ holding model.onnx and videolake-model.json; "
                "docs/model-scorers.md), e.g. scorer_params: {aesthetic: {model: s3://bucket/models/aesthetic/}}"
            )

    def frames_wanted(self) -> FrameRequest:
        return FrameRequest(self.params.frames, self.params.max_pixels)

    def unit_resources(self) -> UnitResources:
        return device_resources(self.params.device, self.params.gpus)

    def _model(self) -> tuple[ModelDir, Any]:
        model = load_model_dir(self.params.model)
        return model, onnx_session(model.model_path, self.params.device, self.params.threads)

    def setup(self) -> None:
        self._model()

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        return self.score_batch([clip])[0]

    def score_batch(self, clips: list[ClipView]) -> list[tuple[dict[str, Any], list[str]]]:
        p: AestheticConfig = self.params
        frames, owner = gather_frames(clips, p.frames, p.max_pixels)
        results: list[tuple[dict[str, Any], list[str]]] = [({"aesthetic_score": None}, []) for _ in clips]
        if not owner:
            return results
        model, session = self._model()
        scores = image_scores(model, session, frames, p.batch_frames)
        per_clip: dict[int, list[float]] = {}
        for i, s in zip(owner, scores.tolist()):
            per_clip.setdefault(i, []).append(s)
        for i, values in per_clip.items():
            mean = float(np.mean(values))
            fired = mean < p.min_score and not p.score_only
            results[i] = ({"aesthetic_score": mean}, ["low_aesthetic"] if fired else [])
        return results
