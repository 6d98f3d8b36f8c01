"""The ``faces`` quality scorer: people's faces in a clip, found by a real face detector (MTCNN).

Why: a training set of public footage holds faces of people who never agreed to be in it; some datasets must leave
such clips out (``reject_any``), or only close-ups that identify someone (``reject_large``), and every release
should at least say how many clips show faces. The scores are recorded whatever the policy.

The detector is MTCNN (Zhang et al. 2016: three cascaded networks, P-, R- and O-Net) as packaged by
``facenet-pytorch`` (MIT licence), whose wheel ships the trained weights (``facenet_pytorch/data/*.pt``): nothing
is downloaded. It runs on torch's CPU (or ``device: cuda``).

Per clip it reads ``frames`` frames spread over the clip at most ``max_pixels`` each (by default the same request as
``text_overlay``, so the score stage decodes them once for both), detects faces on all the frames of a video's
clips in one batch per frame size, and keeps the faces found with at least ``min_confidence`` whose box's shorter
side is at least ``min_face_px`` pixels of the video's own frame:

- ``face_count``: the upper median of the per-frame counts (the largest count that at least half of the sampled
  frames reach), so a face seen in one frame of four does not count and a face in two of four does;
- ``face_area``: the largest kept face's share of the frame (box area / frame area), the largest over the frames.

``policy``: ``keep`` (default) only scores; ``reject_any`` fires the rule ``faces`` when ``face_count >= 1``;
``reject_large`` fires ``large_face`` when ``face_area > max_face_area``. Measured costs, accuracy and limits are
in docs/privacy.md.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from videolake.platform.filters.quality import SCORERS, ClipView, FrameRequest, Scorer
from videolake.platform.params import param
from videolake.platform.runtime.unit_resources import UnitResources

POLICIES = ("keep", "reject_any", "reject_large")


@dataclass(frozen=True)
class FacesConfig:
    frames: int = param(
        4, "frames read per clip, spread evenly over it (detection costs ~0.04-0.15 CPU-s a 640x360 frame)", min=1
    )
    max_pixels: int = param(
        640 * 360,
        "each frame is downscaled to at most this many pixels before detection (aspect kept; the default is "
        "text_overlay's, so both read the same decoded frames); MTCNN finds faces down to ~20 px at this size",
        min=64 * 64,
    )
    min_confidence: float = param(
        0.95, "a detection counts as a face when MTCNN's probability is at least this (0..1)", min=0.0, max=1.0
    )
    min_face_px: int = param(
        20,
        "a face counts when its box's shorter side is at least this many pixels of the video's own frame (smaller "
        "faces identify no one, and most of MTCNN's false positives are that small)",
        min=0,
    )
    policy: str = param(
        "keep",
        "keep: score only, never reject; reject_any: reject a clip with face_count >= 1 (rule faces); reject_large: "
        "reject a clip whose largest face covers more than max_face_area of the frame (rule large_face)",
        choices=POLICIES,
    )
    max_face_area: float = param(
        0.05,
        "the reject_large policy's bound: the largest face's share of the frame (box area / frame area) above which "
        "the clip is rejected large_face",
        min=0.0,
        max=1.0,
    )
    device: str = param(
        "cpu",
        "where MTCNN runs: cpu, or cuda (the score stage then asks Ray for a GPU per unit)",
        choices=("cpu", "cuda"),
    )
    threads: int = param(1, "torch CPU threads per worker process (the stage runs one process per CPU)", min=1)


@dataclass(frozen=True)
class Face:
    """One detection: its box (x0, y0, x1, y1) in the pixels of the frame it was found on, and its probability."""

    box: tuple[float, float, float, float]
    prob: float

    @property
    def short_side(self) -> float:
        return min(self.box[2] - self.box[0], self.box[3] - self.box[1])


# Frames per MTCNN call: the image pyramid and P-Net activations of every frame of a call are held at once.
BATCH_FRAMES = 32

# One MTCNN per process, device and thread count: built once, reused for every clip (and by shards.face_blur).
_DETECTORS: dict[tuple[str, int], Any] = {}
_LOCK = threading.Lock()


def face_detector(device: str = "cpu", threads: int = 1) -> Any:
    """MTCNN (weights from the facenet-pytorch wheel; heavy imports here, not at module level)."""
    key = (device, threads)
    with _LOCK:
        if key not in _DETECTORS:
            import torch
            from facenet_pytorch import MTCNN  # type: ignore[import-untyped]

            if device == "cpu":
                torch.set_num_threads(threads)
            _DETECTORS[key] = MTCNN(keep_all=True, device=device)
        return _DETECTORS[key]


def detect_faces(detector: Any, frames: np.ndarray | list[np.ndarray]) -> list[list[Face]]:
    """Every face MTCNN finds (at its own thresholds) in each uint8 RGB frame; frames of one size run in batches."""
    import torch

    frames = list(frames)
    if not frames:
        return []
    out: list[list[Face]] = [[] for _ in frames]
    by_size: dict[tuple[int, ...], list[int]] = {}
    for i, f in enumerate(frames):
        by_size.setdefault(tuple(f.shape), []).append(i)
    chunks = [idx[k : k + BATCH_FRAMES] for idx in by_size.values() for k in range(0, len(idx), BATCH_FRAMES)]
    for chunk in chunks:
        with torch.inference_mode():
            boxes, probs = detector.detect([np.ascontiguousarray(frames[i]) for i in chunk])
        for i, b, p in zip(chunk, boxes, probs):
            if b is None:
                continue
            # facenet-pytorch returns object arrays under numpy 2: made numeric here.
            b, p = np.asarray(b, dtype=np.float64).reshape(-1, 4), np.asarray(p, dtype=np.float64).reshape(-1)
            out[i] = [Face((float(x0), float(y0), float(x1), float(y1)), float(q)) for (x0, y0, x1, y1), q in zip(b, p)]
    return out


def kept_faces(faces: list[Face], min_confidence: float, min_side: float) -> list[Face]:
    """The faces with at least ``min_confidence`` whose box's shorter side is at least ``min_side`` pixels."""
    return [f for f in faces if f.prob >= min_confidence and f.short_side >= min_side]


def face_scores(
    per_frame: list[list[Face]], height: int, width: int, min_confidence: float, min_side: float
) -> tuple[int, float]:
    """(face_count, face_area) of one clip's sampled frames (module docstring); frames are ``height`` x ``width``."""
    if not per_frame or height <= 0 or width <= 0:
        return 0, 0.0
    counts, area = [], 0.0
    for faces in per_frame:
        kept = kept_faces(faces, min_confidence, min_side)
        counts.append(len(kept))
        for f in kept:
            x0, y0 = max(0.0, f.box[0]), max(0.0, f.box[1])
            x1, y1 = min(float(width), f.box[2]), min(float(height), f.box[3])
            area = max(area, max(0.0, x1 - x0) * max(0.0, y1 - y0) / (width * height))
    return int(sorted(counts)[len(counts) // 2]), float(area)


@SCORERS.register("faces")
class FacesScorer(Scorer):
    """Faces by MTCNN (facenet-pytorch): how many a clip shows and how large; rejects by ``policy``."""

    Config = FacesConfig
    columns = ("face_count", "face_area")
    rules = ("faces", "large_face")
    version = "1"
    resources: ClassVar[UnitResources] = UnitResources()

    def frames_wanted(self) -> FrameRequest:
        return FrameRequest(self.params.frames, self.params.max_pixels)

    def unit_resources(self) -> UnitResources:
        return UnitResources(num_gpus=1.0) if self.params.device == "cuda" else self.resources

    def setup(self) -> None:
        face_detector(self.params.device, self.params.threads)

    def score(self, clip: ClipView) -> tuple[dict[str, Any], list[str]]:
        return self.score_batch([clip])[0]

    def score_batch(self, clips: list[ClipView]) -> list[tuple[dict[str, Any], list[str]]]:
        p: FacesConfig = self.params
        frames: list[np.ndarray | None] = []
        for clip in clips:
            readable = clip.pixels is not None and clip.stats.num_frames > 0
            frames.append(clip.frames(p.frames, p.max_pixels) if readable else None)
        flat = [f for fs in frames if fs is not None for f in fs]
        found = detect_faces(face_detector(p.device, p.threads), flat)
        out: list[tuple[dict[str, Any], list[str]]] = []
        pos = 0
        for clip, fs in zip(clips, frames):
            if fs is None or len(fs) == 0:
                out.append(({"face_count": None, "face_area": None}, []))
                continue
            per_frame, pos = found[pos : pos + len(fs)], pos + len(fs)
            h, w = int(fs.shape[1]), int(fs.shape[2])
            # min_face_px is in the video's own pixels; the frames may be downscaled (by area: orientation-free).
            scale = (h * w / (clip.width * clip.height)) ** 0.5 if clip.width and clip.height else 1.0
            count, area = face_scores(per_frame, h, w, p.min_confidence, p.min_face_px * min(1.0, scale))
            out.append(({"face_count": count, "face_area": area}, self._rules(count, area)))
        return out

    def _rules(self, count: int, area: float) -> list[str]:
        p: FacesConfig = self.params
        if p.policy == "reject_any" and count >= 1:
            return ["faces"]
        if p.policy == "reject_large" and area > p.max_face_area:
            return ["large_face"]
        return []
