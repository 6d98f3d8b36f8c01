"""Wipes out of (or into) fast motion, for the ``luma`` detector: is a gradual change a boundary sweeping across the
picture?

The motion on the moving side hides such a wipe from luma's two-sided test, so luma keeps a gradual candidate that
beats only its quiet side and asks ``sweep_cut`` whether its change sweeps across the picture: each block switches
once, from what it showed to the quiet side's content, and stays; the switch times lie on a plane over the block
grid (a boundary crossing the frame at constant speed) and spread over several frames; and the moving content does
not travel along with that boundary (a pan that uncovers a flat area of the scene also makes a sweeping edge, but
the edge is part of the moving picture). It reads only the per-frame block grid luma already keeps: no decoding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from videolake.platform.scenes.luma_config import LumaConfig
    from videolake.platform.scenes.signals import CutSignals

# A wipe out of fast motion (on the Y/U/V block grid): the share of blocks that must change (a wipe
# replaces the whole picture; an object entering the frame covers part of it), the share of those whose switch time
# fits a boundary crossing the frame at constant speed, the frames that crossing takes at least (5th to 95th
# percentile; a camera that stops or a hard cut switches every block at once), and how much of its difference from
# the new content a block still shows just before the boundary reaches it (a wipe replaces it at once, a slowing
# pan brings it there gradually).
SWEEP_SHARE, SWEEP_INLIERS, SWEEP_FRAMES, SWEEP_STEP = 0.6, 0.85, 5.0, 0.45
# The moving content travels along with the boundary (its speed across the boundary within SWEEP_FOLLOW of the
# boundary's, and one shift explaining its change at least 1 / SWEEP_COHERENT times better than none): the boundary
# is the edge of a textured area moving with the picture (a pan onto a flat part of the scene), not a wipe.
SWEEP_FOLLOW, SWEEP_COHERENT = 0.4, 0.6
# Shifts (rows, columns of blocks per frame) tried when measuring how the moving content travels.
_SHIFTS = np.array([(dr, dc) for dr in np.arange(-1.5, 1.51, 0.25) for dc in np.arange(-1.5, 1.51, 0.25)])


def sweep_cut(
    sig: CutSignals, a: int, e: int, quiet_after: bool, g: int, cfg: LumaConfig, known: list[int]
) -> int | None:
    """The cut frame of a wipe between frames a and e that has fast motion on one side, or None when the change does
    not sweep across the picture (see the module docstring). ``quiet_after``: the side after e is the quiet one;
    ``known``: the cuts found so far (a sweep that reaches near one is the same transition)."""
    if sig.cells is None or len(sig.cells) < 16:
        return None
    # The quiet side's reference frame: right after the span, or a span further (when the span ends inside the
    # wipe, the frames right after it still move).
    for ext in (0, e - a):
        c = _sweep_from(sig, a, e, quiet_after, g, cfg, known, ext)
        if c is not None:
            return c
    return None


def _sweep_from(
    sig: CutSignals, a: int, e: int, quiet_after: bool, g: int, cfg: LumaConfig, known: list[int], ext: int
) -> int | None:
    """``sweep_cut`` with the quiet side's reference frame ``ext`` frames beyond the span.

    The frames are read in time order towards the quiet side (backwards when it is before the span): from up to
    ``max_transition / 2`` frames into the moving side to the reference frame. A block "arrives" at the first frame
    after which it stays at the reference frame's content (within the quiet side's own change, which may grow with
    the distance in time: slow motion there).
    """
    cells = sig.cells
    assert cells is not None  # sweep_cut returns before without them
    n = sig.num_frames
    nb = len(cells)
    back = max(1, cfg.max_transition // 2)
    if quiet_after:
        lim = min((c for c in known if c > e), default=n) - 1
        r = max(e, min(e + ext, lim - g))
        lo, hi = max(0, a - back), r
        f = sig.grid[lo : hi + 1]
        q = sig.grid[r : min(lim, r + g) + 1]
    else:
        lim = max((c for c in known if c <= a), default=0)
        r = min(a, max(a - ext, lim + g))
        lo, hi = r, min(n - 1, e + back)
        f = sig.grid[lo : hi + 1][::-1]
        q = sig.grid[max(lim, r - g) : r + 1][::-1]
    steps = f.shape[0]
    ref = f[-1]
    d = np.abs(f - ref).reshape(steps, 3, nb).sum(axis=1)  # per block: Y + U/2 + V/2 distance to the reference
    noise = np.abs(q - ref).reshape(q.shape[0], 3, nb).sum(axis=1).max(axis=0)
    changed = d[0] >= np.maximum(cfg.threshold, 3.0 * (1.5 * noise + 3.0))
    share = float(changed.mean())
    if share < SWEEP_SHARE:
        return None
    age = np.maximum(1.0, (steps - 1 - np.arange(steps)) / max(1, q.shape[0] - 1))[:, None]
    blocks = np.flatnonzero(changed)
    away = d[:, blocks] > np.maximum(1.5 * noise[blocks] * age + 3.0, 0.25 * d[0, blocks])
    moved = away.any(axis=0)  # (a block within the quiet side's slow change all along did not switch)
    blocks, away = blocks[moved], away[:, moved]
    if len(blocks) < 8:
        return None
    dc = d[:, blocks]
    last_away = steps - 1 - np.argmax(away[::-1], axis=0)
    tau = (last_away + 1).astype(np.float64)  # arrival: index of the first frame at the new content for good
    # The arrivals on a plane over the grid: a straight boundary at constant speed (a robust fit: once more
    # without the blocks far off the first fit).
    X = np.column_stack([np.ones(len(tau)), cells[blocks].astype(np.float64)])
    coef = _plane(X, tau)
    res = np.abs(tau - X @ coef)
    keep = res <= max(1.5, 2.0 * float(res.mean()))
    if keep.sum() >= 3:
        coef = _plane(X[keep], tau[keep])
    fit = X @ coef
    if _percentile(np.sort(fit), 95) - _percentile(np.sort(fit), 5) < SWEEP_FRAMES:
        return None
    per_block = abs(coef[1]) + abs(coef[2])  # frames the boundary takes to cross one block
    if float((np.abs(tau - fit) <= max(1.0, 0.75 * per_block)).mean()) < SWEEP_INLIERS:
        return None
    # How much of its difference a block still shows just before the boundary reaches it.
    before = np.maximum(last_away - int(np.clip(np.ceil(per_block), 1, 4)), 0)
    cols = np.arange(dc.shape[1])
    largest = np.maximum.accumulate(dc, axis=0)[before, cols]
    if float(np.median(dc[before, cols] / np.maximum(largest, 1e-6))) < SWEEP_STEP:
        return None
    tau_sorted = np.sort(tau)
    p5, p95 = _percentile(tau_sorted, 5), _percentile(tau_sorted, 95)
    first, last = (lo + p5, lo + p95) if quiet_after else (hi - p95 + 1, hi - p5 + 1)
    if any(first - cfg.min_scene_len <= c <= last + cfg.min_scene_len for c in known):
        return None  # the same transition as a cut already found
    speed, boundary, coherence = _content_speed(f[:, :nb], cells, blocks, tau, coef, int(p5), int(np.ceil(p95)))
    if coherence < SWEEP_COHERENT and abs(speed - boundary) <= SWEEP_FOLLOW * boundary:
        return None  # the moving picture carries the boundary: the edge of a textured area, not a wipe
    mid = float(tau_sorted[len(tau) // 2])  # half the blocks have switched
    return int(lo + mid) if quiet_after else int(hi - mid + 1)


def _plane(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares coefficients of y ~ X (3 columns): the normal equations, a 3x3 solve."""
    try:
        return np.linalg.solve(X.T @ X, X.T @ y)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(X, y, rcond=None)[0]


def _percentile(sorted_values: np.ndarray, q: float) -> float:
    """``np.percentile`` (linear interpolation) of an already sorted array, without its overhead."""
    pos = (len(sorted_values) - 1) * q / 100.0
    i = int(pos)
    j = min(i + 1, len(sorted_values) - 1)
    return float(sorted_values[i] + (sorted_values[j] - sorted_values[i]) * (pos - i))


def _content_speed(
    y: np.ndarray, cells: np.ndarray, blocks: np.ndarray, tau: np.ndarray, coef: np.ndarray, t0: int, t1: int
) -> tuple[float, float, float]:
    """How the content not yet reached by the boundary moves while the boundary crosses: frames t0..t1 of ``y``
    (the Y blocks at ``cells``, in the time order of ``_sweep_from``), ``blocks`` switching at ``tau`` (fitted by
    ``coef``). Returns its speed along the boundary's direction and the boundary's speed, both in blocks per frame,
    and the error of the best shift / the error of no shift.

    Only blocks at least two blocks' crossing time ahead of the boundary count, so the boundary itself does not.
    """
    grad = float(np.hypot(coef[1], coef[2]))  # frames per block along the boundary's direction
    if grad <= 0:
        return 0.0, 0.0, 1.0
    direction = np.asarray(coef[1:], dtype=np.float64) / grad
    boundary = 1.0 / grad
    rows, cols = int(cells[:, 0].max()) + 1, int(cells[:, 1].max()) + 1
    steps = y.shape[0]
    Y = np.full((steps, rows + 4, cols + 4), np.nan)  # two blocks of padding: shifts reach 1.5 blocks
    Y[:, cells[:, 0] + 2, cells[:, 1] + 2] = y
    T = np.full((rows, cols), -1.0)
    T[cells[blocks, 0], cells[blocks, 1]] = tau
    ts, ps = [], []
    for t in range(max(0, t0), min(steps - 1, t1)):
        rr, cc = np.nonzero(T > t + 1 + 2.0 * grad)
        ts.append(np.full(len(rr), t))
        ps.append(np.stack([rr, cc], axis=1))
    tt = np.concatenate(ts) if ts else np.zeros(0, int)
    if len(tt) < 8:
        return 0.0, boundary, 1.0
    pp = np.concatenate(ps).astype(np.float64)
    target = Y[tt + 1, pp[:, 0].astype(int) + 2, pp[:, 1].astype(int) + 2]
    errs = np.full(len(_SHIFTS), np.nan)
    for i, (dr, dc) in enumerate(_SHIFTS):
        sr, sc = pp[:, 0] - dr + 2, pp[:, 1] - dc + 2
        r0, c0 = np.floor(sr).astype(int), np.floor(sc).astype(int)
        fr, fc = sr - r0, sc - c0
        v = (
            (1 - fr) * (1 - fc) * Y[tt, r0, c0]
            + (1 - fr) * fc * Y[tt, r0, c0 + 1]
            + fr * (1 - fc) * Y[tt, r0 + 1, c0]
            + fr * fc * Y[tt, r0 + 1, c0 + 1]
        )
        err = np.abs(target - v)
        err = err[~np.isnan(err)]
        if len(err) >= max(8, len(tt) // 2):
            errs[i] = float(err.mean())
    zero = int(np.argmin(np.abs(_SHIFTS).sum(axis=1)))
    if np.isnan(errs[zero]) or errs[zero] <= 0:
        return 0.0, boundary, 1.0
    best = int(np.nanargmin(errs))
    return float(_SHIFTS[best] @ direction), boundary, float(errs[best] / errs[zero])
