"""``luma``: our own scene detector, the default of the pipeline and of ``videolake scenes``.

Why our own: PySceneDetect converts every frame to HSV at a downscaled size (an RGB conversion plus a resize per
frame, several times the cost of decoding a 360p frame) and scores only consecutive frames, so it misses dissolves,
cuts twice on fades and fires on flashes and fast pans. This detector makes one decode pass
(``frames.SampledDecoder``: Y/U/V samples read straight from the decoder's planes, no conversion), keeps a few
hundred numbers per frame and decides on whole-video signals afterwards, all vectorised.

Per frame: a block-mean grid of Y, U and V (16x9 blocks for 16:9 video; chroma at half weight) and cumulative Y/U/V
histograms (their L1 distance is the earth mover's distance of the colours, which ignores the small brightness
drifts that move flat areas across a bin edge). The content distance ``D(i, j)`` = mean abs grid difference (0..255)
+ ``hist_weight`` x histogram EMD.

1. Scales k = 1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32 frames. Boundary b (first frame of a new scene) is a candidate
   at scale k when the change across it, ``N = D(b - k, b + k - 1)``, beats the motion inside the shots around it:
   ``S`` = the largest change over ``motion_gap`` frames found just before b - k and just after b + k - 1, scaled
   to the span (an upper bound of what motion alone would do over it). A hard cut wins at k = 1 (where S is the
   neighbouring frame differences, as in an adaptive threshold); a dissolve/wipe/fade of L frames at k ~ L/2, where
   both ends of the pair lie in the shots. Fast motion changes the content inside the shots at least as much, so
   its ratio stays low. Gradual candidates must also move the colour histograms (a pan mostly keeps them).
   Before all this, letterbox/pillarbox bars (blocks dark and still for the whole video) are dropped, so a cut
   inside a boxed picture scores like the same cut full-frame. A hard cut between similar shots may be smaller
   than ``threshold`` (down to ``weak_share`` of it) when it beats the motion on both sides by ``strong_ratio``
   and stays that large once a uniform luma offset between the two frames is taken out (an auto-exposure step in
   one take is mostly that offset). Before everything, isolated one-frame glitches (a corrupted frame of a damaged
   file, a one-frame flash: far from both neighbours, which match each other) are replaced by the frame before
   them (``repair_glitches``): left in, their two large changes count as motion beside a real cut a few frames away.
2. Verification of gradual candidates (real footage: motion blur, whip pans, crash zooms made false cuts): the
   frames inside the span must lie *between* its two ends, as in a dissolve or a wipe (triangle excess
   ``(D(a, m) + D(m, e)) / D(a, e) <= max_excess``); spans through a flat frame (fades) are exempt.
   Flashes: a candidate whose content returns to what it was before within ``flash_frames`` is dropped (frames
   after the flash compared with frames before it).
3. Scales go from fine to coarse; a coarse candidate whose span already holds a cut is dropped: one cut per
   transition. Its frame: the first frame past the midpoint of the change (projection onto the pre->post feature
   direction), which for a hard cut is exactly the first frame of the new shot.
   Wipes out of (or into) fast motion: the moving side hides them from the test above, so a gradual candidate that
   beats only the quiet side (by ``sweep_ratio``) is kept when its change sweeps across the picture (``sweep.sweep_cut``):
   each block switches once, from what it showed to the quiet side's content, and stays; the switch times lie on a
   plane over the block grid (a boundary crossing the frame at constant speed) and spread over several frames; and
   the moving content does not travel along with that boundary (a pan that uncovers a flat area of the scene also
   makes a sweeping edge, but the edge is part of the moving picture). These are checked after all scales, only
   where no cut was found, so they add cuts and never move one.
4. Fades through black (one transition, one cut): a run of dark flat frames between two brighter shots replaces
   whatever was found inside the fade by ONE cut in the middle of the black when the black lasts at most
   ``black_hold_s`` (a fade out and the fade in that follows are often found as two changes); a longer black
   stretch becomes a clip of its own (cuts at its first frame and at the first frame after it) that the quality
   stage rejects as black, so no content clip carries seconds of black. A fade in at the start or out at the end
   of the video is no cut, nor is a short dip back to the same shot.
5. Cuts closer than ``min_scene_len`` frames keep the stronger; none within ``min_scene_len`` of either end.

Accuracy and speed are measured by ``videolake.evaluation.scenes`` and ``videolake.benchmarks.scenes``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from videolake.platform.scenes.base import DETECTORS, SceneDetector, SceneResult
from videolake.platform.scenes.luma_config import LumaConfig
from videolake.platform.scenes.signals import HIST_BINS_Y, CutSignals, CutSignalsAccumulator
from videolake.platform.scenes.sweep import sweep_cut
from videolake.platform.video.frames import (
    DecodeOptions,
    FrameStatsAccumulator,
    SampledDecoder,
    luma_grid,
)

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------------------------
# The decision.
# ---------------------------------------------------------------------------------------------------------------------

SCALES = (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32)
# A flat frame (std of the luma grid below FLAT_CONTRAST) darker than DARK_LUMA is black: the middle of a fade
# through black, or a black shot when there are many (limited-range black decodes as luma 16).
FLAT_CONTRAST, DARK_LUMA = 4.0, 30.0
# Per-frame rise of mean luma that still counts as fading (the fade's extent ends where it stops), with plateaus of
# up to FADE_PLATEAU frames allowed (low-quality encodes fade in steps).
FADE_STEP, FADE_PLATEAU = 0.3, 3
# Frames within this much mean luma of the darkest one form the bottom of a dip: a black shot if long.
FADE_BOTTOM = 2.0
# A fade's bottom is at least this much darker than the shots on both sides (mean luma); dark content that
# flickers (e.g. a strobing pattern on black) does not reach it, or dips again too soon.
FADE_DEPTH = 24.0


def active_area(sig: CutSignals) -> CutSignals:
    """``sig`` restricted to the picture: Y/U/V blocks that stay dark (mean luma < 35) and still (temporal std < 2)
    over the whole video are letterbox/pillarbox bars and are dropped; histogram distances are scaled by the share
    of the frame the picture covers, so a cut inside a boxed picture scores like the same cut full-frame."""
    n = sig.num_frames
    nb = sig.grid.shape[1] // 3
    if n < 8 or nb < 4:
        return sig
    y = sig.grid[:, :nb]
    bars = (y.mean(axis=0) < 35.0) & (y.std(axis=0) < 2.0)
    share = 1.0 - float(bars.mean())
    if not 0.4 <= share <= 0.95:
        return sig  # no bars (or a mostly dark still video: nothing to gain)
    keep = np.tile(~bars, 3)
    grid = np.ascontiguousarray(sig.grid[:, keep])
    gy = grid[:, : int((~bars).sum())]
    return CutSignals(
        grid=grid,
        hist=sig.hist * np.float32(1.0 / share),
        luma_mean=gy.mean(axis=1),
        contrast=gy.std(axis=1),
        cells=None if sig.cells is None else sig.cells[~bars],
    )


def glitch_frames(sig: CutSignals, cfg: LumaConfig) -> np.ndarray:
    """Indices of isolated one-frame glitches: a frame that differs from both neighbours by at least the smallest
    cut (``weak_share`` x ``threshold``) while the neighbours match each other (within ``flash_return`` of that
    change), as a corrupted frame of a damaged file (a block of garbage, a coloured bar) or a one-frame flash.

    Two glitches side by side are not isolated (alternating content, e.g. a strobe) and are left alone."""
    n = sig.num_frames
    if n < 3:
        return np.zeros(0, np.int64)
    hw = np.float32(cfg.hist_weight)
    d1 = _l1(sig.grid[1:], sig.grid[:-1]) + hw * np.abs(sig.hist[1:] - sig.hist[:-1]).sum(axis=1)  # D(t, t + 1)
    d2 = _l1(sig.grid[2:], sig.grid[:-2]) + hw * np.abs(sig.hist[2:] - sig.hist[:-2]).sum(axis=1)  # D(t, t + 2)
    step = np.minimum(d1[:-1], d1[1:])  # for t in [1, n - 1): min(D(t - 1, t), D(t, t + 1))
    spike = (step >= cfg.weak_share * cfg.threshold) & (d2 <= cfg.flash_return * step)
    isolated = spike.copy()
    isolated[1:] &= ~spike[:-1]
    isolated[:-1] &= ~spike[1:]
    return np.flatnonzero(isolated) + 1


def repair_glitches(sig: CutSignals, cfg: LumaConfig) -> CutSignals:
    """``sig`` with every isolated one-frame glitch (``glitch_frames``) replaced by the frame before it, as a decoder
    conceals a damaged frame. Left in, a glitch is no cut (the content returns: a flash) but its two large
    frame-to-frame changes count as motion inside the shot around a real cut a few frames away, which then fails the
    adaptive ratio (the change across a cut must beat the motion next to it)."""
    bad = glitch_frames(sig, cfg)
    if not len(bad):
        return sig
    grid, hist = sig.grid.copy(), sig.hist.copy()
    grid[bad], hist[bad] = grid[bad - 1], hist[bad - 1]
    luma_mean, contrast = sig.luma_mean.copy(), sig.contrast.copy()
    luma_mean[bad], contrast[bad] = luma_mean[bad - 1], contrast[bad - 1]
    return CutSignals(grid=grid, hist=hist, luma_mean=luma_mean, contrast=contrast, cells=sig.cells)


def _l1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a - b).mean(axis=1)


def _gap_distance(sig: CutSignals, m: int, hist_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """D(t - m, t) and the histogram part alone, for t in [m, n) (index t - m)."""
    dg = _l1(sig.grid[m:], sig.grid[:-m])
    dh = np.abs(sig.hist[m:] - sig.hist[:-m]).sum(axis=1)
    return dg + np.float32(hist_weight) * dh, dh


def _offset_free_step(sig: CutSignals, hist_weight: float) -> np.ndarray:
    """D(t - 1, t) for t in [1, n) (index t - 1) with the uniform luma offset between the two frames taken out: the
    Y blocks are compared after subtracting their mean difference, and the luma histogram EMD loses the part that
    offset alone makes (|offset| in bins of 16 levels; an EMD is at least the difference of the means)."""
    nb = sig.grid.shape[1] // 3
    dg = sig.grid[1:] - sig.grid[:-1]
    off = dg[:, :nb].mean(axis=1, keepdims=True)
    dg[:, :nb] -= off
    hy = HIST_BINS_Y - 1  # the luma part of the cumulative histograms, bins weighted 1/8
    dh = np.abs(sig.hist[1:] - sig.hist[:-1])
    dhy = np.maximum(dh[:, :hy].sum(axis=1) - np.abs(off[:, 0]) * np.float32(1 / (16 * 8)), 0.0)
    return np.abs(dg).mean(axis=1) + np.float32(hist_weight) * (dhy + dh[:, hy:].sum(axis=1))


def distance(sig: CutSignals, i: int, j: int, hist_weight: float) -> float:
    dg = float(np.abs(sig.grid[i] - sig.grid[j]).mean())
    dh = float(np.abs(sig.hist[i] - sig.hist[j]).sum())
    return dg + hist_weight * dh


def find_cuts(
    sig: CutSignals, cfg: LumaConfig = LumaConfig(), debug: list | None = None, fps: float = 25.0
) -> list[int]:
    """Cut frames (first frame of each new scene) from the per-frame signals (``fps`` converts black_hold_s)."""
    n = sig.num_frames
    if n < 2:
        return []
    sig = repair_glitches(sig, cfg)
    if cfg.letterbox:
        sig = active_area(sig)
    cuts: list[tuple[int, float]] = []  # (frame, strength)
    scales = [k for k in SCALES if 2 * k - 1 <= max(1, cfg.max_transition)]
    short: dict[int, np.ndarray] = {}  # g -> Dend[t] = D(t - g, t) (nan for t < g)
    one_sided: list[tuple] = []  # per scale: gradual candidates that beat the motion on their quiet side only
    for k in scales:
        m = 2 * k - 1
        if m + 1 > n:
            break
        g = min(m, cfg.motion_gap)
        _fill_short(sig, short, g, n, cfg.hist_weight)
        b, N, Hc, S, ok, one = _scale_candidates(sig, cfg, short, k, g, n)
        if one is not None:
            one_sided.append(one)
        if ok.any():
            _keep_scale_cuts(sig, cfg, k, b, N, Hc, S, ok, cuts, debug)
    # Wipes out of fast motion, where no cut was found: verified by their sweep across the picture.
    for candidates in one_sided:
        _keep_sweep_cuts(sig, cfg, candidates, cuts, debug)
    hold = max(cfg.min_scene_len, int(round(cfg.black_hold_s * (fps if fps and fps > 0 else 25.0))))
    return _spaced(_apply_fades(sig, sorted(cuts), cfg, hold), cfg.min_scene_len, n)


def _fill_short(sig: CutSignals, short: dict[int, np.ndarray], g: int, n: int, hist_weight: float) -> None:
    """Add to ``short`` the distances over 1..g frames it lacks (each scale reuses the finer scales' ones)."""
    for gg in range(1, g + 1):
        if gg not in short:
            Dg = np.full(n, np.nan, np.float32)
            Dg[gg:] = _gap_distance(sig, gg, hist_weight)[0]
            short[gg] = Dg


def _scale_candidates(
    sig: CutSignals, cfg: LumaConfig, short: dict[int, np.ndarray], k: int, g: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple | None]:
    """Scale ``k``'s boundaries b, their change N, histogram change Hc, shot motion S, which are candidates (ok),
    and the one-sided gradual candidates (None when there are none)."""
    m = 2 * k - 1
    G, H = _gap_distance(sig, m, cfg.hist_weight)  # G[t - m] = D(t - m, t)
    # Boundary b in [k, n - k]: the pair (b - k, b + k - 1) = G at t = b + k - 1.
    b = np.arange(k, n - k + 1)
    N = G[b - k]
    Hc = H[b - k]
    S_pre, S_post = _shot_motion(short, b, k, g, m, n, _motion_window(k, m, cfg))
    S = np.fmax(S_pre, S_post)  # one side may be missing at the ends of the video
    S = np.where(np.isnan(S), 0.0, S)
    floor = np.maximum(S, cfg.noise_floor)
    if k == 1:
        return b, N, Hc, S, _hard_candidates(sig, cfg, b, N, Hc, S_pre, S_post, floor), None
    # A gradual change needs a stretch of shot on both sides (no fade-in at the start is a cut).
    ok = (b - k >= g) & (b + k - 1 + g <= n - 1)
    ok &= (N >= cfg.threshold + S) & (N >= cfg.gradual_ratio * floor) & (Hc >= cfg.min_hist_change)
    one = None if sig.cells is None else _one_sided(cfg, k, g, n, b, N, Hc, S_pre, S_post, ok)
    return b, N, Hc, S, ok, one


def _motion_window(k: int, m: int, cfg: LumaConfig) -> int:
    """How many frames before and after the span the motion inside the shots is looked for (``w``)."""
    if k == 1:
        return 2
    return max(m, cfg.motion_window) if m <= cfg.motion_window else cfg.motion_window


def _shot_motion(
    short: dict[int, np.ndarray], b: np.ndarray, k: int, g: int, m: int, n: int, w: int
) -> tuple[np.ndarray, np.ndarray]:
    """The motion inside the shots before and after each boundary's span (nan where the video has none)."""
    # Motion inside the shots on either side: the largest change over g frames among the pairs within ``w``
    # frames before b - k and after b + k - 1, scaled to the span m (the triangle inequality makes this an
    # upper bound of the change over m frames; it saturates for fast motion, so it over-estimates: safe side).
    S_pre = np.full(len(b), np.nan, np.float32)
    S_post = np.full(len(b), np.nan, np.float32)
    for o in range(max(1, w - g + 1)):
        t = b - k - o  # pairs (t - g, t) ending before the span
        S_pre = np.fmax(S_pre, _scaled_motion(short, t, g, m, n, before=True))
        t = b + k - 1 + o  # pairs (t, t + g) starting after it
        S_post = np.fmax(S_post, _scaled_motion(short, t, g, m, n, before=False))
    return S_pre, S_post


def _hard_candidates(
    sig: CutSignals,
    cfg: LumaConfig,
    b: np.ndarray,
    N: np.ndarray,
    Hc: np.ndarray,
    S_pre: np.ndarray,
    S_post: np.ndarray,
    floor: np.ndarray,
) -> np.ndarray:
    """Which boundaries are hard-cut candidates (scale 1)."""
    ok = (N >= cfg.threshold) & (N >= cfg.ratio * floor)
    # A cut between similar shots: a smaller change, but far above the motion on both sides.
    # A brightness step (auto exposure, a light switched) is no such cut: the change must stay above
    # that size once a uniform luma offset between the two frames is taken out.
    ok |= (
        (N >= cfg.weak_share * cfg.threshold)
        & (N >= cfg.strong_ratio * floor)
        & ~np.isnan(S_pre)
        & ~np.isnan(S_post)
        & (_offset_free_step(sig, cfg.hist_weight)[b - 1] >= cfg.weak_share * cfg.threshold)
    )
    # A cut into (or out of) fast motion: quiet on one side only. The mean of the two sides must be
    # exceeded instead, by twice the threshold, and the colours must change too (a camera jolt keeps them).
    S_mean = np.where(np.isnan(S_pre), S_post, np.where(np.isnan(S_post), S_pre, (S_pre + S_post) * 0.5))
    S_mean = np.where(np.isnan(S_mean), 0.0, S_mean)
    ok |= (
        (N >= 2 * cfg.threshold) & (N >= cfg.ratio * np.maximum(S_mean, cfg.noise_floor)) & (Hc >= cfg.min_hist_change)
    )
    return ok


def _one_sided(
    cfg: LumaConfig,
    k: int,
    g: int,
    n: int,
    b: np.ndarray,
    N: np.ndarray,
    Hc: np.ndarray,
    S_pre: np.ndarray,
    S_post: np.ndarray,
    ok: np.ndarray,
) -> tuple | None:
    """The gradual candidates of scale ``k`` that beat only the quiet side's motion, as ``_keep_sweep_cuts`` takes
    them, or None when there are none."""
    # Fast motion on one side only: a wipe out of (or into) it is measured against the quiet side.
    quiet_after = np.nan_to_num(S_post, nan=np.inf) <= np.nan_to_num(S_pre, nan=np.inf)
    S_q = np.where(quiet_after, S_post, S_pre)
    S_q = np.where(np.isnan(S_q), 0.0, S_q)
    f_q = np.maximum(S_q, cfg.noise_floor)
    one = (b - k >= g) & (b + k - 1 + g <= n - 1) & ~ok
    one &= (N >= cfg.threshold + S_q) & (N >= cfg.sweep_ratio * f_q) & (Hc >= cfg.min_hist_change)
    if not one.any():
        return None
    return (k, g, b, N, Hc, one, N / f_q, quiet_after)


def _keep_scale_cuts(
    sig: CutSignals,
    cfg: LumaConfig,
    k: int,
    b: np.ndarray,
    N: np.ndarray,
    Hc: np.ndarray,
    S: np.ndarray,
    ok: np.ndarray,
    cuts: list[tuple[int, float]],
    debug: list | None,
) -> None:
    """Add to ``cuts`` the verified cut of each run of scale ``k``'s candidates that no finer scale explains."""
    # Local maxima of N / S among candidates (one per run of consecutive candidate boundaries).
    score = N / np.maximum(S, cfg.noise_floor)
    idx = np.flatnonzero(ok)
    runs = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
    for run in runs:
        best = run[np.argmax(score[run])]
        bb = int(b[best])
        a, e = bb - k, bb + k - 1
        if any(a < c <= e for c, _ in cuts):
            continue  # this span already holds a cut found at a finer scale
        if _is_flash(sig, a, e, float(N[best]), cfg):
            if debug is not None:
                debug.append(("flash", k, bb, float(N[best]), float(score[best])))
            continue
        if k > 1 and not _between(sig, a, e, cfg):
            if debug is not None:
                debug.append(("not-between", k, bb, float(N[best]), float(score[best])))
            continue
        c = _locate(sig, a, e, cfg)
        if debug is not None:
            debug.append(("cut", k, bb, c, float(N[best]), float(score[best]), float(Hc[best])))
        cuts.append((c, float(N[best])))


def _keep_sweep_cuts(
    sig: CutSignals, cfg: LumaConfig, candidates: tuple, cuts: list[tuple[int, float]], debug: list | None
) -> None:
    """Add to ``cuts`` the one-sided candidates (``_one_sided``) of one scale that sweep across the picture."""
    k, g, b, N, Hc, one, score, quiet_after = candidates
    idx = np.flatnonzero(one)
    for run in np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1):
        best = run[np.argmax(score[run])]
        bb = int(b[best])
        a, e = bb - k, bb + k - 1
        if any(a < c <= e for c, _ in cuts):
            continue
        if not _between(sig, a, e, cfg):
            continue
        wipe = sweep_cut(sig, a, e, bool(quiet_after[best]), g, cfg, [c for c, _ in cuts])
        if wipe is None or _is_flash(sig, a, e, float(N[best]), cfg):
            continue
        if debug is not None:
            debug.append(("sweep", k, bb, wipe, float(N[best]), float(score[best]), float(Hc[best])))
        cuts.append((wipe, float(N[best])))


def _spaced(cuts: list[tuple[int, float]], min_scene_len: int, n: int) -> list[int]:
    """The cut frames of ``cuts`` (sorted) at least ``min_scene_len`` apart (the stronger of two closer ones) and
    from either end of the video."""
    out: list[tuple[int, float]] = []
    for c, s in cuts:
        if out and c - out[-1][0] < min_scene_len:
            if s > out[-1][1]:
                out[-1] = (c, s)
            continue
        out.append((c, s))
    return [c for c, _ in out if min_scene_len <= c <= n - min_scene_len]


def _scaled_motion(short: dict[int, np.ndarray], t: np.ndarray, g: int, m: int, n: int, before: bool) -> np.ndarray:
    """(m / g') x D over g' frames ending at t (before) or starting at t (after), g' = g or what the video holds."""
    avail = t if before else (n - 1 - t)
    gg = np.minimum(g, avail)
    out = np.full(t.shape, np.nan, np.float32)
    for x in range(1, g + 1):
        sel = gg == x
        if sel.any():
            end = t[sel] if before else t[sel] + x
            out[sel] = short[x][end] * np.float32(m / x)
    return out


def _is_flash(sig: CutSignals, a: int, e: int, change: float, cfg: LumaConfig) -> bool:
    """True when the content after the change returns to the content before it within ``flash_frames``."""
    n = sig.num_frames
    lim = cfg.flash_return * change
    f = cfg.flash_frames
    for i in range(max(0, a - f), a + 1):
        for j in range(e, min(n, e + f + 1)):
            if j - i <= 2 * f + 1 and distance(sig, i, j, cfg.hist_weight) <= lim:
                return True
    return False


def _between(sig: CutSignals, a: int, e: int, cfg: LumaConfig) -> bool:
    """True when the frames inside (a, e) lie between frame a and frame e, as in a dissolve or a wipe.

    Triangle excess: (D(a, m) + D(m, e)) / D(a, e) is 1 for a blend or a block-wise switch of the two pictures and
    grows when the middle frames are something else (motion blur, a whip pan, a camera jolt). A span through a flat
    frame (a fade through black or white) is let through: the fade logic places its cut.
    """
    if e - a <= 1:
        return True
    inner = np.arange(a + 1, e)
    ref = min(float(sig.contrast[a]), float(sig.contrast[e]))
    if ref > 4.0 and float(sig.contrast[inner].min()) < 0.3 * ref:
        return True
    hw = np.float32(cfg.hist_weight)
    dae = float(np.abs(sig.grid[a] - sig.grid[e]).mean() + hw * np.abs(sig.hist[a] - sig.hist[e]).sum())
    if dae <= 0:
        return False
    dam = np.abs(sig.grid[inner] - sig.grid[a]).mean(axis=1) + hw * np.abs(sig.hist[inner] - sig.hist[a]).sum(axis=1)
    dme = np.abs(sig.grid[inner] - sig.grid[e]).mean(axis=1) + hw * np.abs(sig.hist[inner] - sig.hist[e]).sum(axis=1)
    return float(((dam + dme) / dae).max()) <= cfg.max_excess


def _black_frames(sig: CutSignals) -> np.ndarray:
    """Frames that are near-black and flat."""
    return (sig.contrast < FLAT_CONTRAST) & (sig.luma_mean < DARK_LUMA)


def _fades(sig: CutSignals, cfg: LumaConfig, hold: int) -> list[tuple[int, int, list[int]]]:
    """Fades through black: (first frame, last frame, cut frames) of each, found from runs of black frames.

    A run of at most ``hold`` black frames is the middle of one transition: one cut, in the middle of the black.
    A longer run is a black clip of its own: cuts at its first frame and at the first frame after it. Either way
    the fade extends outwards as long as the mean luma keeps rising, up to ``max_transition`` frames.
    """
    flat = _black_frames(sig)
    n = sig.num_frames
    if not flat.any():
        return []
    idx = np.flatnonzero(flat)
    runs = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
    lm = sig.luma_mean
    starts = np.array([int(r[0]) for r in runs])
    ends = np.array([int(r[-1]) for r in runs])
    out = []
    for i, run in enumerate(runs):
        # Dips that recur within two minimum scene lengths are flicker (strobing content), not fades.
        gap_before = starts[i] - ends[i - 1] if i > 0 else n
        gap_after = starts[i + 1] - ends[i] if i + 1 < len(runs) else n
        if min(gap_before, gap_after) <= 2 * cfg.min_scene_len:
            continue
        lo, hi = int(run[0]), int(run[-1])
        mid = lo + int(np.argmin(lm[lo : hi + 1]))  # the darkest frame
        away = lm - lm[mid]
        bottom = np.flatnonzero(away[lo : hi + 1] <= FADE_BOTTOM)
        lo, hi = lo + int(bottom[0]), lo + int(bottom[-1])
        cut_frames = [(lo + hi + 1) // 2] if hi - lo + 1 <= hold else [lo, hi + 1]
        a, e = _fade_edge(away, lo, -1, cfg.max_transition), _fade_edge(away, hi, 1, cfg.max_transition)
        if (a > 0 and away[a] < FADE_DEPTH) or (e < n - 1 and away[e] < FADE_DEPTH):
            continue  # not much darker than the content around it: dark content, not a fade
        out.append((a, e, cut_frames))
    return out


def _fade_edge(away: np.ndarray, start: int, step: int, limit: int) -> int:
    """Walk from ``start`` (by ``step``) while the luma keeps rising above the fade's bottom, plateaus of up to
    FADE_PLATEAU frames allowed; the last frame still rising."""
    n = len(away)
    pos = start
    while abs(pos - start) < limit:
        nxt = None
        for j in range(1, FADE_PLATEAU + 2):
            q = pos + step * j
            if not 0 <= q < n:
                break
            if away[q] > away[pos] + FADE_STEP:
                nxt = q
                break
        if nxt is None:
            break
        pos = nxt
    return pos


def _apply_fades(sig: CutSignals, cuts: list[tuple[int, float]], cfg: LumaConfig, hold: int) -> list[tuple[int, float]]:
    """One cut per fade through black, at its darkest frames; none for a fade in at the start or out at the end.

    The fade out and the fade in are often found as two changes (the fade out is usually much quicker); a fade
    that returns to the same shot (a blink) is no cut.
    """
    fades = _fades(sig, cfg, hold)
    if not fades:
        return cuts
    n = sig.num_frames
    out = list(cuts)
    for a, e, cut_frames in fades:
        inside = [s for c, s in out if a - 1 <= c <= e + 1]
        out = [(c, s) for c, s in out if not a - 1 <= c <= e + 1]
        change = distance(sig, max(0, a - 1), min(n - 1, e + 1), cfg.hist_weight)
        strength = max(inside, default=max(change, cfg.threshold))
        if len(cut_frames) > 1:  # a black clip: cut out even between equal shots; at an end only its inner edge
            out.extend((c, strength) for c in cut_frames if cfg.min_scene_len <= c <= n - cfg.min_scene_len)
        elif a > cfg.min_scene_len and e < n - 1 - cfg.min_scene_len and change >= cfg.threshold:
            out.append((cut_frames[0], strength))  # (a fade in at the start or out at the end is no cut)
    return sorted(out)


def _locate(sig: CutSignals, a: int, e: int, cfg: LumaConfig) -> int:
    """The cut frame inside the change from frame a (before) to frame e (after)."""
    if e - a <= 1:
        return e
    span = np.arange(a + 1, e)
    # A transition through a flat frame (fade through black or white, found at a fine scale): its flattest frame.
    flat = sig.contrast[span]
    ref = min(float(sig.contrast[a]), float(sig.contrast[e]))
    if ref > 4.0 and float(flat.min()) < 0.3 * ref:
        low = span[flat <= float(flat.min()) + 0.1 * ref]
        return int(low[len(low) // 2])
    P = sig.grid[a]
    Q = sig.grid[e]
    d = Q - P
    denom = float(d @ d)
    if denom <= 0:
        return int(span[len(span) // 2])
    alpha = (sig.grid[a + 1 : e + 1] - P) @ d / denom
    past = np.flatnonzero(alpha >= 0.5)
    return int(a + 1 + past[0]) if len(past) else e


@DETECTORS.register("luma")
class LumaDetector(SceneDetector):
    """One sampled decode pass, cuts from multi-scale content change; returns FrameStats too."""

    Config = LumaConfig

    def detect(self, path: str, tap: Any = None) -> SceneResult:
        """``tap``: called with every decoded frame (``SampledDecoder.chunks``), e.g. a ``clip_pixels.FrameKeeper``
        that keeps the frames the score stage's fingerprint samples, so nothing decodes the video again."""
        cfg: LumaConfig = self.config
        opts = DecodeOptions(sample_width=cfg.sample_width, fast_decode=cfg.fast_decode, threads=cfg.threads)
        stats = FrameStatsAccumulator()
        signals = CutSignalsAccumulator()
        with SampledDecoder(path, opts) as dec:
            for chunk in dec.chunks(tap=tap):
                grid = luma_grid(chunk.y)
                stats.add(chunk, grid)
                signals.add(chunk, grid)
            info, n = dec.info, dec.num_frames
        cuts = find_cuts(signals.result(), cfg, fps=info.fps)
        return SceneResult(cuts=cuts, fps=info.fps, num_frames=n, stats=stats.result(info.width, info.height))
