"""Per-frame statistics computed in the single decode pass shared by scene detection and quality scoring.

Why one pass: decoding dominates the CPU stage. The detector that decodes every frame also records these cheap
statistics, so quality scores need no second decode (see ``videolake bench cpu``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FrameStats:
    """Statistics of every decoded frame of one video, index = frame number (decode order).

    All arrays have length ``num_frames``. Luma values are on the 0..255 scale, measured on the downscaled luma plane.
    """

    pts_s: np.ndarray  # float64, presentation time of each frame in seconds
    luma_mean: np.ndarray  # float32, mean luma
    luma_diff: np.ndarray  # float32, mean abs luma difference to the previous frame (frame 0: 0)
    sharpness: np.ndarray  # float32, variance of the Laplacian of luma
    edge_density: np.ndarray  # float32, share of pixels on strong short edges (a text-area proxy), 0..1
    dhash: np.ndarray  # uint64, 64-bit difference hash of the frame
    width: int  # decoded (full) frame size
    height: int

    @property
    def num_frames(self) -> int:
        return int(self.luma_mean.shape[0])

    def slice(self, start: int, end: int) -> "FrameStats":
        """The statistics of frames [start, end)."""
        return FrameStats(
            pts_s=self.pts_s[start:end],
            luma_mean=self.luma_mean[start:end],
            luma_diff=self.luma_diff[start:end],
            sharpness=self.sharpness[start:end],
            edge_density=self.edge_density[start:end],
            dhash=self.dhash[start:end],
            width=self.width,
            height=self.height,
        )

    def to_npz_bytes(self) -> bytes:
        import io

        buf = io.BytesIO()
        np.savez_compressed(
            buf,
            pts_s=self.pts_s,
            luma_mean=self.luma_mean,
            luma_diff=self.luma_diff,
            sharpness=self.sharpness,
            edge_density=self.edge_density,
            dhash=self.dhash,
            size=np.array([self.width, self.height], dtype=np.int64),
        )
        return buf.getvalue()

    @classmethod
    def from_npz_bytes(cls, data: bytes) -> "FrameStats":
        import io

        z = np.load(io.BytesIO(data))
        w, h = (int(v) for v in z["size"])
        return cls(
            pts_s=z["pts_s"],
            luma_mean=z["luma_mean"],
            luma_diff=z["luma_diff"],
            sharpness=z["sharpness"],
            edge_density=z["edge_density"],
            dhash=z["dhash"],
            width=w,
            height=h,
        )
