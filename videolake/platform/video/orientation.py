"""Display orientation of a video: how the coded picture is turned (and mirrored) to be shown upright.

Phones store portrait footage as landscape pictures plus a display matrix (MP4 ``tkhd`` matrix, FFmpeg's
DISPLAYMATRIX side data). Players apply it; a decoder does not. PyAV (18.x) has no stream-level getter for it, but
FFmpeg attaches the stream's display matrix to every decoded frame, so it is read from ``frame.side_data``.

FFmpeg's convention (libavutil/display.h): the nine int32 values ``[a b u; c d v; x y w]`` (a..d in 16.16 fixed
point) map a source pixel (p, q) (column, row; rows grow downwards) to the displayed pixel
``p' = a*p + c*q + x``, ``q' = b*p + d*q + y``. Only the eight axis-aligned orientations occur in practice (0/90/
180/270 degrees, optionally mirrored); any other angle is rounded to the nearest of them (logged).
"""

from __future__ import annotations

import logging
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Orientation:
    """How to turn a coded picture (rows x cols) into the displayed one."""

    transpose: bool = False  # swap rows and columns first (90 or 270 degrees)
    flip_rows: bool = False  # then reverse the row order (upside down)
    flip_cols: bool = False  # then reverse the column order (left-right)

    @property
    def is_identity(self) -> bool:
        return not (self.transpose or self.flip_rows or self.flip_cols)

    @property
    def mirrored(self) -> bool:
        """True when the display is a mirror image of the coded picture (a flip no rotation can undo)."""
        return self.transpose ^ self.flip_rows ^ self.flip_cols

    @property
    def rotation(self) -> int:
        """Clockwise degrees (0, 90, 180, 270) a player turns the coded picture to show it upright; for a mirrored
        orientation, the turn that follows a left-right mirror."""
        return _ROTATION[(self.transpose, self.flip_rows, self.flip_cols)]

    def display_size(self, width: int, height: int) -> tuple[int, int]:
        return (height, width) if self.transpose else (width, height)

    def apply(self, picture: np.ndarray) -> np.ndarray:
        """The displayed picture of a coded one (H x W or H x W x C array); a contiguous copy when it changes."""
        if self.is_identity:
            return picture
        out = picture.swapaxes(0, 1) if self.transpose else picture
        if self.flip_rows:
            out = out[::-1]
        if self.flip_cols:
            out = out[:, ::-1]
        return np.ascontiguousarray(out)

    @classmethod
    def from_matrix(cls, matrix: tuple[int, ...] | list[int]) -> Orientation:
        """From FFmpeg's nine display-matrix values (see the module docstring)."""
        a, b, _u, c, d, _v = (float(v) for v in matrix[:6])
        if abs(a) >= abs(b):  # the picture's x axis stays horizontal
            if b or c:
                _warn_angle(a, b)
            return cls(transpose=False, flip_rows=d < 0, flip_cols=a < 0)
        if a or d:
            _warn_angle(a, b)
        # p' = c*q, q' = b*p: the displayed rows come from the coded columns (sign b), columns from rows (sign c)
        return cls(transpose=True, flip_rows=b < 0, flip_cols=c < 0)

    @classmethod
    def from_frame(cls, frame: Any) -> Orientation:
        """The orientation a decoded PyAV frame carries (identity without DISPLAYMATRIX side data)."""
        matrix = display_matrix(frame)
        return IDENTITY if matrix is None else cls.from_matrix(matrix)


IDENTITY = Orientation()

# (transpose, flip_rows, flip_cols) -> clockwise rotation; the mirrored four read as "mirror left-right, then turn".
_ROTATION = {
    (False, False, False): 0,
    (True, False, True): 90,
    (False, True, True): 180,
    (True, True, False): 270,
    (False, False, True): 0,
    (True, True, True): 90,
    (False, True, False): 180,
    (True, False, False): 270,
}


def _warn_angle(a: float, b: float) -> None:
    log.warning(
        "display matrix rotates by %.1f degrees: rounded to the nearest multiple of 90", math.degrees(math.atan2(b, a))
    )


def display_matrix(frame: Any) -> tuple[int, ...] | None:
    """The nine int32 display-matrix values of a decoded PyAV frame, or None when it has none."""
    try:
        data = frame.side_data.get("DISPLAYMATRIX")
    except Exception:  # noqa: BLE001 - a frame type or PyAV build without side data: treat as upright
        return None
    if data is None:
        return None
    raw = bytes(data)
    if len(raw) < 36:
        return None
    values = struct.unpack("=9i", raw[:36])
    if values[0] == values[1] == values[3] == values[4] == 0:
        return None  # a degenerate (all-zero) matrix means nothing: show as coded
    return values
