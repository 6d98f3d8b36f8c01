"""The per-frame features the ``luma`` detector decides on (``CutSignals``) and the accumulator that builds them from
decoded chunks.

A module of their own so that the decision (``luma``) and the wipe test (``sweep``) both read them without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from videolake.platform.video.frames import SampledChunk, grid_sums, luma_grid

HIST_BINS_Y, HIST_BINS_C = 17, 9  # (y + 8) >> 4 and (c + 16) >> 5


@dataclass(frozen=True)
class CutSignals:
    """Per-frame features the decision works on (index = frame number)."""

    grid: np.ndarray  # (n, 3 * rows * cols) float32: Y grid, 0.5 * U grid, 0.5 * V grid (0..255 scale)
    hist: np.ndarray  # (n, 32) float32: weighted cumulative Y, U, V histograms (L1 distance = colour EMD)
    luma_mean: np.ndarray  # (n,) float32
    contrast: np.ndarray  # (n,) float32: std of the Y grid (0 for a flat frame: black, white, solid colour)
    # (blocks, 2) int: (row, column) of each Y block of ``grid`` (the U and V blocks follow in the same order);
    # None when unknown (then wipes out of fast motion are not looked for)
    cells: np.ndarray | None = None

    @property
    def num_frames(self) -> int:
        return int(self.luma_mean.shape[0])


class CutSignalsAccumulator:
    def __init__(self) -> None:
        self._grid: list[np.ndarray] = []
        self._hist: list[np.ndarray] = []
        self._shape: tuple[int, int] | None = None  # (rows, columns) of the block grid
        # Luma EMD counts fully, each chroma EMD half; the sum over 8 (a hard cut between unrelated shots: ~0.4-1).
        self._weights = np.concatenate(
            [np.full(HIST_BINS_Y - 1, 1 / 8), np.full(2 * (HIST_BINS_C - 1), 0.5 / 8)]
        ).astype(np.float32)

    def add(self, chunk: SampledChunk, grid: np.ndarray | None = None) -> None:
        """Add a chunk; ``grid`` is its ``frames.luma_grid`` when the caller has computed it already."""
        y, uv = chunk.y, chunk.uv
        n = y.shape[0]
        gy = luma_grid(y) if grid is None else grid
        self._shape = (int(gy.shape[1]), int(gy.shape[2]))
        gy = gy.reshape(n, -1)
        guv = grid_sums(uv, 2).reshape(n, -1).astype(np.float32) * np.float32(0.5 / 4)  # chroma at half weight
        self._grid.append(np.concatenate([gy, guv], axis=1))
        # Histograms of every frame of the chunk with one bincount each: bin index offset by frame. Every other
        # row of samples is plenty for 16 bins.
        hy = _histograms(y[:, ::2].reshape(n, -1), 4, 8, HIST_BINS_Y)
        hu = _histograms(uv[:, 0].reshape(n, -1), 5, 16, HIST_BINS_C)
        hv = _histograms(uv[:, 1].reshape(n, -1), 5, 16, HIST_BINS_C)
        # Cumulative histograms: the L1 distance between them is the earth mover's distance (in bins), which a
        # small brightness drift moving flat areas across a bin edge barely changes (plain bin-wise L1 jumps).
        cdf = np.concatenate([np.cumsum(h, axis=1)[:, :-1] for h in (hy, hu, hv)], axis=1)
        cdf *= self._weights
        self._hist.append(cdf)

    def result(self) -> CutSignals:
        grid = np.concatenate(self._grid) if self._grid else np.zeros((0, 3), np.float32)
        hist = (
            np.concatenate(self._hist) if self._hist else np.zeros((0, HIST_BINS_Y + 2 * HIST_BINS_C - 3), np.float32)
        )
        gy = grid[:, : grid.shape[1] // 3]
        cells = None
        if self._shape is not None and self._shape[0] * self._shape[1] == gy.shape[1]:
            cells = np.stack(np.divmod(np.arange(gy.shape[1]), self._shape[1]), axis=1)
        return CutSignals(grid=grid, hist=hist, luma_mean=gy.mean(axis=1), contrast=gy.std(axis=1), cells=cells)


def _histograms(values: np.ndarray, shift: int, offset: int, bins: int) -> np.ndarray:
    """Per-row histograms of ``(values + offset) >> shift``.

    The offset centres a bin on the values flat content sits at (video black 16, white 235, neutral chroma 128):
    on a bin edge, noise would move a black frame's whole mass between two bins.
    """
    n, m = values.shape
    idx: np.ndarray = values.astype(np.uint16 if n * bins < 65536 else np.uint32)
    idx += offset
    idx >>= shift
    idx += (np.arange(n, dtype=idx.dtype) * bins)[:, None]
    return np.bincount(idx.ravel(), minlength=n * bins).reshape(n, bins).astype(np.float32) * np.float32(1 / m)
