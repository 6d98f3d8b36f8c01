"""Faces blurred out of a clip's frames before the shard encoder writes them (``ShardConfig.blur_faces``).

Why: a dataset that keeps clips with people in them may still have to keep their faces out of the training
samples. The detector is the ``faces`` scorer's (MTCNN, facenet-pytorch: ``scorers.faces.face_detector``), run on a
copy of the frame downscaled to at most ``blur_detect_pixels`` (its boxes scaled back), on every
``blur_detect_every``-th frame of the clip and on its last frame. Each frame is blurred inside the boxes of the
nearest detection at or before it AND of the nearest at or after it (the union: a face moving between two
detections stays inside one of its two boxes unless it moves more than its margin), each box enlarged by
``blur_margin`` of its size on every side and widened outwards to a grid of ``GRID`` pixels (so a box that moves by
a fraction of a pixel, from one CPU's float rounding to another's, gives the same pixels). Inside a box the
picture is averaged down to about ``CELLS`` cells across its shorter side and smoothed back up: no facial feature
survives (tests/unit/test_face_blur.py: the detector finds no face there afterwards).

What it does not do: a face the detector misses on both neighbouring detections is not blurred (measured miss rates
in docs/privacy.md); faces smaller than ~20 px at the detection size (MTCNN's smallest) are not found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

# Boxes are widened outwards to multiples of this many pixels.
GRID = 8
# A blurred box keeps about this many cells across its shorter side.
CELLS = 4
# MTCNN's own smallest face, in pixels of the image it runs on.
MIN_FACE_PX = 20

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in the frame's pixels, x1/y1 exclusive


@dataclass(frozen=True)
class BlurSettings:
    """The blur's settings (ShardConfig's blur_* fields)."""

    min_confidence: float = 0.9
    detect_every: int = 5
    detect_pixels: int = 640 * 360
    margin: float = 0.25


def face_boxes(rgb: np.ndarray, settings: BlurSettings) -> list[Box]:
    """The faces of one upright uint8 RGB frame, as enlarged integer boxes of that frame (detected on a copy
    downscaled to at most ``detect_pixels``)."""
    import cv2

    from videolake.platform.filters.scorers.faces import detect_faces, face_detector

    h, w = int(rgb.shape[0]), int(rgb.shape[1])
    scale = min(1.0, (settings.detect_pixels / float(w * h)) ** 0.5)
    small = rgb
    if scale < 1.0:
        small = cv2.resize(rgb, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    (faces,) = detect_faces(face_detector("cpu", 1), [small])
    sx, sy = w / small.shape[1], h / small.shape[0]
    boxes = []
    for f in faces:
        if f.prob < settings.min_confidence:
            continue
        x0, y0, x1, y1 = f.box[0] * sx, f.box[1] * sy, f.box[2] * sx, f.box[3] * sy
        mx, my = settings.margin * (x1 - x0), settings.margin * (y1 - y0)
        box = _grid_box(x0 - mx, y0 - my, x1 + mx, y1 + my, w, h)
        if box[2] > box[0] and box[3] > box[1]:
            boxes.append(box)
    return boxes


def _grid_box(x0: float, y0: float, x1: float, y1: float, w: int, h: int) -> Box:
    """The box widened outwards to multiples of GRID, clipped to the frame."""
    gx0, gy0 = int(np.floor(x0 / GRID)) * GRID, int(np.floor(y0 / GRID)) * GRID
    gx1, gy1 = int(np.ceil(x1 / GRID)) * GRID, int(np.ceil(y1 / GRID)) * GRID
    return max(0, gx0), max(0, gy0), min(w, gx1), min(h, gy1)


def blur_boxes(rgb: np.ndarray, boxes: Iterable[Box]) -> np.ndarray:
    """A copy of ``rgb`` with each box replaced by its content averaged down to ~CELLS cells across its shorter
    side and smoothed back to size (no detail of a face left, the colours kept)."""
    import cv2

    out = rgb.copy()
    for x0, y0, x1, y1 in boxes:
        region = out[y0:y1, x0:x1]
        bh, bw = region.shape[:2]
        if bh < 2 or bw < 2:
            continue
        cell = max(1.0, min(bh, bw) / CELLS)
        small = cv2.resize(region, (max(1, round(bw / cell)), max(1, round(bh / cell))), interpolation=cv2.INTER_AREA)
        smooth = cv2.resize(small, (bw, bh), interpolation=cv2.INTER_LINEAR)
        out[y0:y1, x0:x1] = cv2.GaussianBlur(smooth, (0, 0), sigmaX=cell / 2)
    return out


class FaceBlurrer:
    """Blurs the faces of one clip's frames, fed in order: ``push(frame)`` returns the frames that are ready (a
    frame waits for the next detection, at most ``detect_every - 1`` frames later), ``flush()`` the rest at the
    clip's end (its last frame is detected too). Frames are upright uint8 RGB of one size."""

    def __init__(self, settings: BlurSettings) -> None:
        if settings.detect_every < 1:
            raise ValueError(f"detect_every must be >= 1, got {settings.detect_every}")
        self.settings = settings
        self.index = 0
        self.before: list[Box] = []  # boxes of the last detection
        self.pending: list[np.ndarray] = []  # frames since the last detection, waiting for the next
        self.detections = 0
        self.blurred_frames = 0  # frames with at least one box blurred

    def push(self, rgb: np.ndarray) -> list[np.ndarray]:
        i, self.index = self.index, self.index + 1
        if i % self.settings.detect_every:
            self.pending.append(rgb)
            return []
        return self._detected(rgb)

    def flush(self) -> list[np.ndarray]:
        if not self.pending:
            return []
        *between, last = self.pending
        self.pending = between
        return self._detected(last)

    def _detected(self, rgb: np.ndarray) -> list[np.ndarray]:
        boxes = face_boxes(rgb, self.settings)
        self.detections += 1
        both = sorted(set(self.before) | set(boxes))
        out = [self._blur(f, both) for f in self.pending]
        out.append(self._blur(rgb, boxes))
        self.before, self.pending = boxes, []
        return out

    def _blur(self, rgb: np.ndarray, boxes: list[Box]) -> np.ndarray:
        if not boxes:
            return rgb
        self.blurred_frames += 1
        return blur_boxes(rgb, boxes)


def blur_clip(frames: Iterable[np.ndarray], settings: BlurSettings) -> list[np.ndarray]:
    """Every frame of a clip with its faces blurred (``FaceBlurrer`` over the whole clip)."""
    blurrer = FaceBlurrer(settings)
    out = []
    for f in frames:
        out.extend(blurrer.push(f))
    out.extend(blurrer.flush())
    return out
