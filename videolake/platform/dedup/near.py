"""Near-duplicate clips: the same footage re-encoded, resized, cropped, barred, recoloured, overlaid, sped up or
trimmed, judged over the whole clip. Engine layer: plain numpy, ``pdqhash`` imported where it is used.

Design, and why
---------------
* **PDQ per frame** (Meta's perceptual image hash, 256 bits, from the ``pdqhash`` library): robust to re-encoding,
  resizing and colour changes, and very discriminative: between frames of different footage the nearest whole-frame
  distance was never below 88 of 256 bits (median 120) while a re-encode stays within 28.
* **vPDQ matching** (Meta's video PDQ): a clip is ``frames_per_clip`` frames evenly spread over it; a frame matches
  when some frame of the other clip is within a Hamming distance; two clips are near-duplicates when a large enough
  share of each clip's frames match (``match_share``, both ways: content that enters one clip keeps it apart).
  Judged over the clip, not one frame, so one look-alike frame (a title card, a shared establishing shot) does not
  make a duplicate, and sampling times need not line up (speed changes, trims).
* **Bars removed first**: border rows and columns of near-constant colour are cut (``content_box``), so a
  letterboxed or pillarboxed copy hashes the same picture as its original.
* **Flat frames dropped**: a frame with no content box (black, one colour, a gradient along one axis), with too
  little content left, with a low PDQ quality or with too little fine ``detail`` gives no hash. A clip with no
  informative frame has an empty fingerprint and never matches.
* **Views for crops and overlays** (measured necessary): PDQ is a global DCT hash and is very sensitive to
  geometry. Shifting a 90 % window by 1 % of the frame moves a hash by 30 bits (median), by 3 % 74 bits, by 5 %
  122 bits (as far as unrelated images), so a 10 % crop is 78..130 bits away from its original, as far as
  different footage: plain vPDQ (the whole-frame hash only) found 0 of 39 cropped copies. A filled logo box of 10 %
  of the frame moves the whole-frame hash by 50 bits (median, up to 82). So each informative frame is hashed in
  ``hashes_per_frame`` views of its content box: the whole; the 15 other combinations, per axis, of the whole axis
  and a ``crop_window`` (90 %) window at its start, centre and end (a copy cropped by 10 %, centred, at a side or in
  a corner, is then an exact crop view of its original); and its four halves. Two frames match when the whole of
  one is within ``max_distance`` of a crop view of the other (either way round; whole-to-whole included), or when
  one same half of both is within ``max_half_distance`` (an overlay spoils the others). The fingerprint is
  ``(k * 20, 32)`` uint8: the 20 view hashes of each informative frame in that fixed order, a view too flat to hash
  (a half showing only sky) left all zeros and skipped.
* **Motion views for still clips** (issue 41): a fixed camera filmed at two times is one picture to PDQ (four
  clips of OpenCV's vtest.avi, different pedestrians, matched pairwise at share 1.0). When a clip's picture is
  still (``still_max_moving``), each frame also hashes what moves in it (``motion_hashes``: |luma - the clip's
  per-pixel median|, in the crop views), and two still clips' frames match only when their motion agrees too.
* **Index**: band keys of every appearance view hash; clips sharing a key are candidates, verified with
  ``is_near_duplicate``; groups follow ``dedup.grouping`` (every member matches its group's kept clip: never
  connected components, which chain two shots through a longer clip that spans both). Across days the stored index files fewer keys per clip
  (``history_keys``: the views of a few evenly spread frames) and is probed with every frame's keys
  (``history_probe_keys``), so its size, which the day's lookup reads, stays ~600 keys a clip.

Measured (``python -m videolake.evaluation.near_copies``): 13 one-shot originals cut from 10 real videos of the
corpus (``videolake.evaluation.corpus``; two shots each of Megamind, bikes and the cockatoo as hard negatives),
each with 14 FFmpeg copies (re-encode at CRF 38; half size; 10 % crops centred, at the top-left corner and
off-grid at x=10 %, y=2 %; letterbox and pillarbox bars; ``eq=brightness=0.1:contrast=1.2``; a filled box of 10 %
of the frame; burnt-in text; ``setpts`` 0.9 and 1.1; 20 % trimmed at the start or the end): 195 clips, 16 frames
of at most 256 px each.

* recall 182/182 (original, copy) pairs = 1.0, every kind 13/13 (whole-frame PDQ alone: 0.76, crops 0/39, logo
  10/13; without the halves: 0.98, logo 10/13). Smallest share of a copy matched: trims 0.69, speed 0.75.
* precision 1.0: 1307 pairs judged near-duplicates, none of different footage; the largest share of frames
  matched between clips of different footage is 0.0 (no frame of different footage matched at all).
* candidate recall through the index: 1.0 of (original, copy) pairs, 0.997 of all 1307 verified pairs (misses:
  a cropped copy and a logo copy of one original, which both match their original); 0.35 % of the pairs of
  different footage are candidates. With PDQ's 16 disjoint 16-bit bands, 98.7 % of them were: 16 frames x 20
  views fill a 16-bit band with ~200 of its 65536 values, so any two clips share one.
* nearest-frame distances (median / p95 / max), copy -> original, under the crop rule: re-encode 8/18/28,
  half size 12/28/46, crop centred 10/26/34, crop corner 12/30/36, crop off-grid 36/50/58, bars 12..14/22..24/36,
  brightness-contrast 6/30/34, speed 2..4/17..49/76..86, trims 6/47..60/88 (trims and speed: the frames with no
  counterpart), logo box 50/78/82 and text 28/52/58 (these match by a half: logo 2/16/16, text 4/8/14). Different
  footage, with an original in the pair: crop rule min 84 (p1 94, median 106), half rule min 78 (p1 98, median
  112), whole frames min 88.
* cost: 16 frames of 256x144 fingerprint in 0.16 s on one core (256x192: 0.20 s; 128x72: 0.09 s; the whole-frame
  hash alone: 0.04 s); at 128 px the evaluation gives the same recall and precision (candidate recall 0.993). The
  stage fingerprints 128x72 frames (quality.NearDupScorer), whose views PDQ needs no blur for: ``_pdq_small``
  hashes them in numpy, 2.2 ms a frame for its 20 views instead of 4.7 ms through ``pdqhash``.

Limits: a crop far from the views' grid (a 10 % crop offset 3 % / 7 %: 9 of 13 found; 2 % off, as in the set's
off-grid crop, distances 36..58, just inside ``max_distance``); crops over 10 %; flips and rotations (``pdqhash``
has dihedral hashes if they are needed); picture-in-picture. Measured outside the set and found 13/13: centred
crops of 5 % and 8 %, the bottom 10 % cut, half size + 10 % crop + eq together. Two still clips of one camera of
which one shows nobody moving have no motion to compare: they match on appearance. 20 views cost 4x the plain
whole-frame hash. Figures after issue 41 (still clips, the grouping rule): docs/performance.md.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

HASH_BYTES = 32  # a PDQ hash: 256 bits, packed


@dataclass(frozen=True)
class NearDupConfig:
    """How clips are fingerprinted and compared. Figures: the evaluation set of the module docstring."""

    # Frames sampled per clip, evenly spread (read by the caller). vPDQ needs several frames to judge a clip; 16
    # gives trims and speed changes a counterpart within ~0.1 s for 2-3 s clips, at 0.16 s a clip to fingerprint.
    frames_per_clip: int = 16
    # Smallest PDQ quality (0..100) of a hashed view. PDQ's own advice is that below 50 a hash is unreliable; real
    # frames scored 100 in every whole and crop view (3120 frames), their halves p1 65, p5 94; linear gradients
    # score 8..44, radial ones and vignettes up to 100 (hence ``min_detail``). 70 drops the unreliable halves (a
    # plain table top) and keeps every real frame.
    min_quality: int = 70
    # Smallest fine ``detail`` of the content (mean |luma - 3x3 blur| at 64x64). PDQ rates smooth images highly (a
    # vignette 100, a blob 77, a radial gradient 81) although nothing in them is recognisable; they score 0.15..0.44,
    # real frames 2.64 at least (p1 3.14, median 5.57). 1.0 sits between with a margin of 2x both ways.
    min_detail: float = 1.0
    # Bar detection: a border row/column is a bar when its mean |pixel - its mean colour| is at most this (0..255).
    # Bars decode flat: the lines cut from the letterbox and pillarbox copies deviate 0.12 (median), <= 1.0 (the
    # blurred edge line). The picture's border lines deviate 1.7 or more but for genuinely flat ones (the screen
    # recording's plain margins, a wall clipped to white by eq), which are cut in the copies alike. At 6, the dark
    # borders of Megamind's night scene were cut in some copies and not others, which moves the hash.
    bar_tolerance: float = 1.0
    # Smallest share of the frame area left once bars are cut: below it the frame is a small insert on a flat
    # background (a logo on black), not footage. Window-boxing a 4:3 picture in 16:9 then 4:3 still leaves ~56 %.
    min_content_fraction: float = 0.2
    # Crop views: per axis, windows of this share of the content at the start, centre and end (1.0: none). 0.9
    # puts a 10 % crop (the promise) on a view when it is centred or flush with a side, on either axis. Measured
    # beyond the evaluation set: centred crops of 5 % and 8 %, the bottom 10 % cut, and half size + 10 % crop +
    # eq all 13/13; a 10 % crop at x=3 %, y=7 % (2-3 % from every view on both axes) 9/13.
    crop_window: float = 0.9
    # Hash the four halves too, matched half to half: survives an overlay (logo, text) that covers part of the
    # frame. Logo-box recall 10/13 without them, 13/13 with; their distances to different footage stay >= 78.
    half_views: bool = True
    # Largest Hamming distance (of 256 bits) between the whole of a frame and a crop view of another for the frames
    # to match. Same footage: <= 36 for every kind but the off-grid crop (<= 58) and frames with no counterpart;
    # different footage: >= 84 (p1 94). 56 takes the off-grid crop and keeps 28 bits from the nearest different
    # frame (PDQ's image-matching default, 31, is for one image at web scale; here half a clip must agree).
    max_distance: int = 56
    # Largest distance between the same halves of two frames. Overlaid copies: <= 16; different footage: >= 78
    # (p1 98). Tighter than ``max_distance``: half a frame carries less, so it must agree more.
    max_half_distance: int = 40
    # Smallest share of each clip's informative frames matched in the other (``match_share``: both ways, since
    # issue 41's tree.avi) for a near-duplicate. Copies: >= 0.69 (a trim of 20 %: the cut-off frames have no
    # counterpart) but the off-grid crop of a still camera (0.5); different footage: <= 0.31.
    min_share: float = 0.5
    # A share counts only with at least this many of the clip's frames matched: one frame in common (a title card)
    # is not footage in common.
    min_matched_frames: int = 2
    # The index (``index_keys``): ``index_bands`` bands of ``index_bits`` bits, starting every 256/bands bits. 16
    # bands of 16 bits (disjoint) made 98.7 % of different-footage pairs candidates; 8 of 32 bits 0.03 % but lost
    # 1.2 % of verified pairs; 16 overlapping bands of 30 bits: 0.35 % candidates, 0.3 % lost (none with an
    # original in the pair); 28 bits: 1.1 % and 0.15 %.
    index_bands: int = 16
    index_bits: int = 30
    # The index of earlier days (``history_keys``, table near_dup_index) files fewer keys per clip than a day's own
    # grouping uses, because the day's lookup reads the index's key column and that grows with history: the view
    # hashes of ``history_frames`` frames evenly spread over the clip, ``history_bands`` bands of
    # ``history_bits`` bits each, looked up with the keys of every frame of the new clip (``history_probe_keys``).
    # A copy is found when at least one of its frames is close to a filed frame of the earlier clip; its frames
    # are spread over the same footage, so trims and speed changes keep counterparts. On the evaluation set (195
    # clips, 160 px; probe -> filed, both directions of every pair): 8 bands of 28 bits from 4 frames file ~600
    # keys a clip (16 x 30 of all frames: ~4,100); every (original, copy) pair shares >= 3 of them (5th percentile 5), as do
    # 95.5 % of all verified pairs (copies of copies group through their original), and 0.003 % of the pairs of
    # different footage (16 x 30 of all frames: 0.017 %). 8 x 26: 0.014 %; 8 x 30: some pairs share only 2; 6
    # frames: ~870 keys; 16 x 30 from 2 frames: 4 of 182 (original, copy) pairs lost.
    history_frames: int = 4
    history_bands: int = 8
    history_bits: int = 28
    # Motion views (``motion_hashes``): a fixed camera filmed at two times is the same picture to PDQ (OpenCV's
    # vtest.avi, four 15 s clips of one surveillance camera with different pedestrians: every pair matched, crop
    # distances 26..48, halves 2..18). So a clip whose picture is still, and whose frames only differ where
    # something moves, also hashes what moves: each frame's |luma - the clip's per-pixel median| (the moving
    # people, not the lawn), in the crop views. Off (False): the appearance rule alone, as before.
    motion_views: bool = True
    # A pixel moves when its luma is this far (0..255) from the clip's median at that pixel. At 16, the compression
    # noise of tree.avi's bright foliage (handheld, nearly still: 0.1-1.6 % of pixels) made motion hashes of noise
    # and lost 4 of its 16 copies; 24 and 32 lose none, and vtest's pedestrians (dark on grey) stay moving.
    motion_delta: float = 24.0
    # A clip is still (a fixed camera) when the median share of moving pixels over its frames is at most this.
    # vtest's clips 0.024..0.040 (the copies alike), a still phone shot 0.005; handheld and edited footage of the
    # corpus 0.087 (a phone filming a dog) .. 0.56; carphone and cup 0.19..0.20.
    still_max_moving: float = 0.06
    # A frame of a still clip has a motion hash when at least this share of its pixels moves (vtest: 1-4 %); a
    # frame where nothing moves has none, and a pair of frames of which either has none is judged on appearance
    # (a share near the threshold flickers between a clip and its copy).
    motion_min_moving: float = 0.005
    # Largest distance between the motion hashes of two frames (whole vs crop views, as ``max_distance``) of two
    # still clips for the frames to match. vtest, (original, copy): median 4..16 (eq, slow-down, crop), a 20 %
    # trim or 1-frame offset 33..39 (the sampled moments differ); different pedestrians: median 74..84, min 54.
    max_motion_distance: int = 56

    def __post_init__(self) -> None:
        if not 0.5 <= self.crop_window <= 1.0:
            raise ValueError(f"crop_window must be in [0.5, 1], got {self.crop_window}")


# ---------------------------------------------------------------------------------------------- views of a frame


@lru_cache(maxsize=32)
def _views(crop_window: float, half_views: bool) -> tuple[tuple[tuple[float, float, float, float], ...], int]:
    """The regions hashed per frame, as (top, bottom, left, right) fractions of the content box, and how many of them
    (from the first) are crop views. View 0 is the whole content; then every combination, per axis, of the whole
    axis and a ``crop_window`` window at the start, centre and end of it; then the four halves."""
    margin = round(1.0 - crop_window, 6)
    axis = [(0.0, 1.0)]
    if margin > 0:
        axis += [(margin / 2, 1.0 - margin / 2), (0.0, 1.0 - margin), (margin, 1.0)]
    crops = [(y0, y1, x0, x1) for (y0, y1) in axis for (x0, x1) in axis]
    halves = (
        [(0.0, 0.5, 0.0, 1.0), (0.5, 1.0, 0.0, 1.0), (0.0, 1.0, 0.0, 0.5), (0.0, 1.0, 0.5, 1.0)] if half_views else []
    )
    return tuple(crops + halves), len(crops)


def hashes_per_frame(config: NearDupConfig) -> int:
    """Appearance view hashes per informative frame (the rows per frame of a fingerprint without motion views)."""
    return len(_views(config.crop_window, config.half_views)[0])


def motion_views_per_frame(config: NearDupConfig) -> int:
    """Motion view hashes per frame of a fingerprint with motion views: the crop views (whole included)."""
    return _views(config.crop_window, config.half_views)[1]


# A fingerprint with motion views starts with this row: 256 set bits, which no PDQ hash has (PDQ thresholds at the
# median: 128 set bits). Fingerprints without it (the layout before motion views, still stored in older days and
# written by tests' planted prints) are appearance views only, and read as frames without motion.
MOTION_MARKER = np.full((1, HASH_BYTES), 255, dtype=np.uint8)


# --------------------------------------------------------------------------------------------- frame preparation


def _flat_lines(frame: np.ndarray, axis: int, tolerance: float) -> np.ndarray:
    """Per row (axis=1) or column (axis=0): is it of near-constant colour (mean |pixel - mean colour| <= tolerance)?"""
    f = frame.astype(np.float32)
    return np.abs(f - f.mean(axis=axis, keepdims=True)).mean(axis=(axis, 2)) <= tolerance


def content_box(frame: np.ndarray, tolerance: float = 1.0) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) of ``frame`` once the border rows and columns of near-constant colour (letterbox,
    pillarbox, window-box bars of any colour) are cut; None when every row or every column is flat."""
    rows = _flat_lines(frame, 1, tolerance)
    cols = _flat_lines(frame, 0, tolerance)
    if rows.all() or cols.all():
        return None
    top, bottom = int(np.argmin(rows)), len(rows) - int(np.argmin(rows[::-1]))
    left, right = int(np.argmin(cols)), len(cols) - int(np.argmin(cols[::-1]))
    return top, bottom, left, right


def detail(image: np.ndarray) -> float:
    """Fine detail of an RGB image: mean |luma - its 3x3 box blur| on a 64x64 area-averaged luma (PDQ's own scale).

    Smooth images (gradients, vignettes, out-of-focus blobs) score < 0.5, though PDQ rates some of them up to 100
    in quality; every real frame measured scores > 2.5."""
    g = image[..., 0] * 0.299 + image[..., 1] * 0.587 + image[..., 2] * 0.114
    h, w = g.shape
    yi = np.linspace(0, h, min(64, h) + 1).astype(int)
    xi = np.linspace(0, w, min(64, w) + 1).astype(int)
    s = np.add.reduceat(np.add.reduceat(g, yi[:-1], axis=0), xi[:-1], axis=1)
    luma = s / np.outer(np.diff(yi), np.diff(xi))
    p = np.pad(luma, 1, mode="edge")
    n, m = luma.shape
    blur = sum(p[1 + dy : n + 1 + dy, 1 + dx : m + 1 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)) / 9.0
    return float(np.abs(luma - blur).mean())


# PDQ of small images, in numpy (``_pdq_small``). PDQ blurs with a Jarosz filter whose window along an axis is
# ``(size + 127) // 128`` pixels, then takes 64x64 point samples, a 16x16 DCT of them (without the DC row and column)
# and thresholds it at its median. For a region of at most 128 px along both axes the window is 1 pixel (no blur), so
# PDQ is a gather and two small matrix products: done here for all views of a frame at once, bit for bit the hash of
# ``pdqhash.compute`` (tests/unit/test_near_pdq.py compares them) at a tenth of its cost (``pdqhash``'s binding
# spends most of its time unpacking each hash in Python). Larger regions go through ``pdqhash`` itself.
_PDQ_SMALL = 128


@lru_cache(maxsize=1)
def _pdq_dct() -> np.ndarray:
    """PDQ's 16x64 DCT matrix (rows 1..16 of the DCT-II basis, as its reference implementation builds it)."""
    i = np.arange(1, 17, dtype=np.float64)[:, None]
    j = np.arange(64, dtype=np.float64)[None, :]
    return (np.sqrt(2.0 / 64.0) * np.cos(np.pi / 2 / 64.0 * i * (2 * j + 1))).astype(np.float32).astype(np.float64)


def _pdq_luma(rgb: np.ndarray) -> np.ndarray:
    """Luma as ``pdqhash.compute`` computes it (float64 products, then float32)."""
    return (rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114).astype(np.float32)


def _pdq_small(luma: np.ndarray, regions: list[tuple[int, int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """PDQ hashes (packed, (n, 32) uint8) and qualities ((n,) int) of ``regions`` (top, bottom, left, right) of
    ``luma``, each at most ``_PDQ_SMALL`` px along both axes and at least 1."""
    samples = (np.arange(64, dtype=np.float64) + 0.5) / 64.0
    rows = np.stack([top + (samples * (bottom - top)).astype(np.intp) for top, bottom, _, _ in regions])
    cols = np.stack([left + (samples * (right - left)).astype(np.intp) for _, _, left, right in regions])
    x = np.take(luma.ravel(), rows[:, :, None] * luma.shape[1] + cols[:, None, :])  # (n, 64, 64): PDQ's 64x64
    # quality: the sum of |int((u - v) * 100 / 255)| (float32 arithmetic, truncated as C does) over vertical and
    # horizontal neighbours, / 90, at most 100
    dv = np.trunc((x[:, :-1, :] - x[:, 1:, :]) * np.float32(100) / np.float32(255))
    dh = np.trunc((x[:, :, :-1] - x[:, :, 1:]) * np.float32(100) / np.float32(255))
    gradient = np.abs(dv).reshape(len(x), -1).sum(axis=1) + np.abs(dh).reshape(len(x), -1).sum(axis=1)
    quality = np.minimum(gradient.astype(np.int64) // 90, 100)
    d = _pdq_dct()
    coeffs = (d @ x.astype(np.float64) @ d.T).reshape(len(x), 256)
    median = np.partition(coeffs, 127, axis=1)[:, 127:128]  # torben's median of 256 values: the 128th smallest
    return np.packbits((coeffs > median)[:, ::-1], axis=1), quality


def frame_hashes(frame: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray | None:
    """The view hashes of one RGB frame, (hashes_per_frame, 32) uint8; None when the frame is not informative.

    A view whose own PDQ quality is low (a half showing only sky) is all zeros: matching and band keys skip it
    (PDQ thresholds at the median, so a real hash is never all zeros)."""
    box = content_box(frame, config.bar_tolerance)
    if box is None:
        return None
    top, bottom, left, right = box
    h, w = frame.shape[:2]
    if (bottom - top) * (right - left) < config.min_content_fraction * h * w:
        return None
    content = frame[top:bottom, left:right]
    if detail(content) < config.min_detail:
        return None
    ch, cw = content.shape[:2]
    views, _ = _views(config.crop_window, config.half_views)
    out = np.zeros((len(views), HASH_BYTES), dtype=np.uint8)
    quality = np.full(len(views), 100, dtype=np.int64)  # a view too small to hash stays all zeros
    small: list[tuple[int, int, int, int]] = []
    small_at: list[int] = []
    for i, (y0, y1, x0, x1) in enumerate(views):
        region = (round(y0 * ch), round(y1 * ch), round(x0 * cw), round(x1 * cw))
        if min(region[1] - region[0], region[3] - region[2]) < 2:
            continue
        if max(region[1] - region[0], region[3] - region[2]) <= _PDQ_SMALL:
            small.append(region)
            small_at.append(i)
            continue
        import pdqhash

        a, b, c, d = region
        bits, quality[i] = pdqhash.compute(np.ascontiguousarray(content[a:b, c:d]))
        out[i] = np.packbits(np.asarray(bits, dtype=np.uint8))
    if small:
        out[small_at], quality[small_at] = _pdq_small(_pdq_luma(content), small)
    if quality[0] < config.min_quality:
        return None
    out[quality < config.min_quality] = 0  # a view too flat to hash (a half showing only sky)
    return out


def clip_fingerprint(frames: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray:
    """The fingerprint of one clip from its frames ((N, H, W, 3) uint8 RGB, evenly spread over the clip), k of them
    informative (k may be 0: an empty fingerprint). With ``config.motion_views``: ``MOTION_MARKER``, then per
    informative frame its ``hashes_per_frame`` appearance views and ``motion_views_per_frame`` motion views (all
    zeros unless the clip is still and the frame has moving content, ``motion_hashes``); without: the appearance
    views of each frame in frame order."""
    per_frame = [frame_hashes(f, config) for f in frames]
    kept = [i for i, h in enumerate(per_frame) if h is not None]
    if not kept:
        return np.zeros((0, HASH_BYTES), dtype=np.uint8)
    appearance = [h for h in per_frame if h is not None]
    if not config.motion_views:
        return np.concatenate(appearance)
    motion = motion_hashes(np.asarray(frames), config)
    rows = [np.concatenate([a, motion[i]]) for a, i in zip(appearance, kept)]
    return np.concatenate([MOTION_MARKER, *rows])


def motion_hashes(frames: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray:
    """Per frame, the PDQ hashes of what moves in it, (N, motion_views_per_frame, 32) uint8, all zeros for a frame
    without moving content or of a clip that is not still.

    What moves is |luma - the clip's per-pixel median luma| over the frame's content box (bars cut as for its
    appearance views), hashed in the same crop views, so a cropped copy's motion is a crop view of its original's.
    Why only still clips: the median of a moving camera's frames is a blur that a trim or speed change alters, and
    its appearance hashes already tell its moments apart; a still camera's median is its background, the same in
    every copy, and what differs from it is what a person watches."""
    views, n_crops = _views(config.crop_window, config.half_views)
    out = np.zeros((len(frames), n_crops, HASH_BYTES), dtype=np.uint8)
    if len(frames) < 3:
        return out
    luma = np.stack([_pdq_luma(f) for f in frames])
    residual = np.abs(luma - np.median(luma, axis=0))
    moving = (residual > config.motion_delta).mean(axis=(1, 2))
    if float(np.median(moving)) > config.still_max_moving:
        return out
    for i, frame in enumerate(frames):
        box = content_box(frame, config.bar_tolerance)
        if box is None or moving[i] < config.motion_min_moving:
            continue
        top, bottom, left, right = box
        content = np.ascontiguousarray(residual[i, top:bottom, left:right])
        ch, cw = content.shape
        regions = [(round(y0 * ch), round(y1 * ch), round(x0 * cw), round(x1 * cw)) for y0, y1, x0, x1 in views]
        regions = regions[:n_crops]
        if min(min(b - a, d - c) for a, b, c, d in regions) < 2:
            continue
        if max(max(b - a, d - c) for a, b, c, d in regions) <= _PDQ_SMALL:
            out[i] = _pdq_small(content, regions)[0]
        else:
            import pdqhash

            rgb = np.repeat(np.clip(content, 0, 255).astype(np.uint8)[..., None], 3, axis=-1)
            for j, (a, b, c, d) in enumerate(regions):
                bits, _ = pdqhash.compute(np.ascontiguousarray(rgb[a:b, c:d]))
                out[i, j] = np.packbits(np.asarray(bits, dtype=np.uint8))
    return out


# ---------------------------------------------------------------------------------------------------- matching


def hamming_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamming distances between the packed hashes of ``a`` (n, 32) and ``b`` (m, 32): (n, m) int."""
    return np.bitwise_count(a[:, None, :] ^ b[None, :, :]).sum(axis=-1, dtype=np.int64)


_MISSING = 1 << 10  # distance given to a missing (all-zero) view: farther than any threshold


def _layout(fingerprint: np.ndarray, config: NearDupConfig) -> tuple[np.ndarray, np.ndarray | None]:
    """(appearance views (k, hashes_per_frame, 32), motion views (k, motion_views_per_frame, 32) or None for a
    fingerprint without motion views) of either layout (``clip_fingerprint``)."""
    v = hashes_per_frame(config)
    if fingerprint.ndim != 2 or fingerprint.shape[1] != HASH_BYTES:
        raise ValueError(f"fingerprint of shape {fingerprint.shape} is not (rows, {HASH_BYTES})")
    if len(fingerprint) and bool((fingerprint[0] == 255).all()):
        per = v + motion_views_per_frame(config)
        body = fingerprint[1:]
        if len(body) % per:
            raise ValueError(f"fingerprint of {len(body)} rows after its marker is not k * {per}")
        frames = body.reshape(-1, per, HASH_BYTES)
        return frames[:, :v], frames[:, v:]
    if len(fingerprint) % v:
        raise ValueError(f"fingerprint of shape {fingerprint.shape} is not (k * {v}, {HASH_BYTES})")
    return fingerprint.reshape(-1, v, HASH_BYTES), None


def _frames(fingerprint: np.ndarray, config: NearDupConfig) -> np.ndarray:
    """The appearance views of each frame, (k, hashes_per_frame, 32)."""
    return _layout(fingerprint, config)[0]


def appearance_rows(fingerprint: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray:
    """The appearance view hashes of a fingerprint of either layout, (k * hashes_per_frame, 32): what its band
    keys are made of."""
    return _frames(fingerprint, config).reshape(-1, HASH_BYTES)


def frame_count(fingerprint: np.ndarray, config: NearDupConfig = NearDupConfig()) -> int:
    """The informative frames of a fingerprint of either layout."""
    return len(_frames(fingerprint, config))


def _view_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(k, m, ...) distances of views a[:, ...] and b[:, ...] (same trailing shape), missing views far."""
    d = np.bitwise_count(a[:, None] ^ b[None, :]).sum(axis=-1, dtype=np.int64)
    missing = ~np.asarray(a.any(axis=-1))[:, None] | ~np.asarray(b.any(axis=-1))[None, :]
    return np.where(missing, _MISSING, d)


def frame_distances(
    a: np.ndarray, b: np.ndarray, config: NearDupConfig = NearDupConfig()
) -> tuple[np.ndarray, np.ndarray]:
    """Distances between the frames of fingerprints ``a`` (k frames) and ``b`` (m frames): two (k, m) int arrays.

    * crop: the smallest distance between the whole of one frame and a crop view of the other (the whole
      included), either way round: a copy cropped by up to 1 - crop_window, centred or at a side or corner, is
      within PDQ's reach of one of the original's crop views;
    * half: the smallest distance between the same half of both frames (an overlay spoils the other halves);
      missing when the config has no half views."""
    fa, fb = _frames(a, config), _frames(b, config)
    _, n_crops = _views(config.crop_window, config.half_views)
    whole_a = np.repeat(fa[:, :1], n_crops, axis=1)
    whole_b = np.repeat(fb[:, :1], n_crops, axis=1)
    crop = np.minimum(
        _view_distances(whole_a, fb[:, :n_crops]).min(axis=-1), _view_distances(fa[:, :n_crops], whole_b).min(axis=-1)
    )
    if fa.shape[1] > n_crops:
        half = _view_distances(fa[:, n_crops:], fb[:, n_crops:]).min(axis=-1)
    else:
        half = np.full_like(crop, _MISSING)
    return crop, half


def frame_match_matrix(a: np.ndarray, b: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray:
    """(k, m) bool: does frame i of ``a`` show what frame j of ``b`` shows (see ``frame_distances``)?"""
    crop, half = frame_distances(a, b, config)
    match = (crop <= config.max_distance) | (half <= config.max_half_distance)
    motion = motion_distances(a, b, config)
    if motion is not None:
        match &= motion <= config.max_motion_distance
    return match


def motion_distances(a: np.ndarray, b: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray | None:
    """(k, m) distances between the motion hashes of the frames of ``a`` and ``b`` (whole vs crop views, either way
    round), or None when either clip has no motion hash (not still, or nothing moves, or an older fingerprint):
    then appearance alone decides. A pair of frames of which neither has a motion hash is 0 (appearance decides); a
    pair of which only one has one is far (``_MISSING``): something moves in one frame and nothing in the other,
    as when a hand enters a still shot (tree.avi, issue 41: the frames with the hand matched the earlier clip's
    motionless frames on appearance). Measured on the evaluation set: no (original, copy) pair lost (a copy's
    frames move where its original's do), one copy-to-copy pair of 2,893."""
    _, ma = _layout(a, config)
    _, mb = _layout(b, config)
    if ma is None or mb is None or not ma.any() or not mb.any():
        return None
    has_a, has_b = np.asarray(ma.any(axis=(1, 2))), np.asarray(mb.any(axis=(1, 2)))
    whole_a = np.repeat(ma[:, :1], ma.shape[1], axis=1)
    whole_b = np.repeat(mb[:, :1], mb.shape[1], axis=1)
    d = np.minimum(_view_distances(whole_a, mb).min(axis=-1), _view_distances(ma, whole_b).min(axis=-1))
    both, neither = has_a[:, None] & has_b[None, :], ~has_a[:, None] & ~has_b[None, :]
    return np.where(both, d, np.where(neither, 0, _MISSING))


def _directional_shares(a: np.ndarray, b: np.ndarray, config: NearDupConfig) -> tuple[float, float]:
    """(share of a's frames matched in b, share of b's frames matched in a); a direction with fewer than
    ``min_matched_frames`` matched frames counts 0."""
    if len(a) == 0 or len(b) == 0:
        return 0.0, 0.0
    m = frame_match_matrix(a, b, config)
    out = []
    for hit in (m.any(axis=1), m.any(axis=0)):
        n = int(hit.sum())
        out.append(n / hit.size if n >= config.min_matched_frames else 0.0)
    return out[0], out[1]


def match_share(a: np.ndarray, b: np.ndarray, config: NearDupConfig = NearDupConfig()) -> float:
    """The smaller of the two vPDQ shares: the share of each clip's informative frames that have a match in the
    other must reach ``min_share``.

    The smaller, not the larger (issue 41, tree.avi): with the larger, a clip matched whenever the other was
    contained in it, so a still shot and a later stretch of it into which a hand enters were one clip, the later
    rejected (every frame of the first had a look-alike in the second). Both ways, a clip of which more than half
    is not in the other keeps them apart (tree's second clip: 2 of its 16 frames match, its frames where something
    moves find no motionless frame in the first, ``motion_distances``); a copy trimmed by 20 % still has every
    frame in its original and about 70-80 % of the original's in it. Measured on the evaluation set (306 clips,
    128 px): every (original, copy) pair still matches (smallest share 0.5, the off-grid crop, as before; trims
    0.69); what is lost are copy-to-copy pairs of a shot and a clip spanning it and another shot (the span is half
    other footage): 2,585 pairs judged, was 2,893. 0 when either clip has no fingerprint."""
    return min(_directional_shares(a, b, config))


def is_near_duplicate(a: np.ndarray, b: np.ndarray, config: NearDupConfig = NearDupConfig()) -> bool:
    """Do the clips of fingerprints ``a`` and ``b`` show the same footage (``match_share >= min_share``: at least
    that share of each clip's frames is in the other)?"""
    return match_share(a, b, config) >= config.min_share


# ------------------------------------------------------------------------------------------- index and grouping


def band_keys(fingerprint: np.ndarray, bands: int = 16, bits: int | None = None) -> np.ndarray:
    """Locality-sensitive keys of a fingerprint: for each hash (missing views skipped), ``bands`` keys
    ``band << bits | value``, where band ``b``'s value is the ``bits`` bits from bit ``b * 256 // bands`` on
    (circularly). ``bits`` defaults to ``256 // bands``: disjoint bands, and two hashes within Hamming distance
    ``< bands`` always share a key (pigeonhole). Wider bands overlap their neighbours: fewer chance collisions
    between different footage, each band still ``bits`` wide. Sorted, unique, int64."""
    stride = 256 // bands if bands > 0 else 0
    bits = stride if bits is None else bits
    if not (1 <= bands <= 256 and 1 <= bits <= 32 and 256 % bands == 0):
        raise ValueError(f"bands must divide 256 and bits be 1..32, got bands={bands} bits={bits}")
    rows = fingerprint[fingerprint.any(axis=1)] if len(fingerprint) else fingerprint
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    # Each hash as 4 big-endian 64-bit words, the first repeated after the last (circular: the last bands wrap);
    # a band's bits are read from the two words its window spans with shifts (4x cheaper than unpacking 256 bits).
    words = np.ascontiguousarray(rows).view(">u8").astype(np.uint64)
    words = np.concatenate([words, words[:, :2]], axis=1)
    starts = np.arange(bands) * stride
    w, o = starts // 64, (starts % 64).astype(np.uint64)
    hi, lo = words[:, w], words[:, w + 1]
    with np.errstate(over="ignore"):
        spliced = (hi << o) | np.where(o == 0, np.uint64(0), lo >> ((np.uint64(64) - o) % np.uint64(64)))
    values = (spliced >> np.uint64(64 - bits)).astype(np.int64)  # (rows, bands): the band's top ``bits`` bits
    return sorted_unique(((np.arange(bands, dtype=np.int64) << bits) | values).ravel())


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-d array by a sort and a neighbour comparison: numpy 2's hash-based ``np.unique`` of
    integers is 5x slower for a clip's ~2,500 keys and 10x for a day's 10^6 (measured here)."""
    out = np.sort(values)
    keep = np.empty(len(out), dtype=bool)
    keep[:1] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def index_keys(fingerprint: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray:
    """The band keys the index files a clip under (``config.index_bands`` bands of ``config.index_bits`` bits)."""
    return band_keys(appearance_rows(fingerprint, config), config.index_bands, config.index_bits)


def _spread_frames(fingerprint: np.ndarray, frames: int, config: NearDupConfig) -> np.ndarray:
    """The view hashes of ``frames`` informative frames evenly spread over the fingerprint (all of them when it
    has no more), in the fingerprint's layout."""
    per_frame = _frames(fingerprint, config)
    if len(per_frame) <= frames:
        return per_frame.reshape(-1, HASH_BYTES)
    pick = np.unique(np.round(np.linspace(0, len(per_frame) - 1, frames)).astype(np.int64))
    return per_frame[pick].reshape(-1, HASH_BYTES)


def history_keys(fingerprint: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray:
    """The keys the index of earlier days (near_dup_index) files a clip under: ``config.history_bands`` bands of
    ``config.history_bits`` bits of the views of ``config.history_frames`` frames evenly spread over the clip."""
    if len(fingerprint) == 0:
        return np.zeros(0, dtype=np.int64)
    filed = _spread_frames(fingerprint, config.history_frames, config)
    return band_keys(filed, config.history_bands, config.history_bits)


def history_probe_keys(fingerprint: np.ndarray, config: NearDupConfig = NearDupConfig()) -> np.ndarray:
    """The keys a clip is looked up with in the index of earlier days: the same bands of every frame's views (a
    clip's frames and an earlier copy's filed frames need not be sampled at the same times)."""
    return band_keys(appearance_rows(fingerprint, config), config.history_bands, config.history_bits)


def candidate_pairs(fingerprints: list[np.ndarray], config: NearDupConfig = NearDupConfig()) -> list[tuple[int, int]]:
    """The pairs (i < j) of fingerprints that share an index key, sorted: an inverted index, never all pairs
    (but a key shared by many clips, as a static camera's, costs the square of their number)."""
    index: dict[int, list[int]] = defaultdict(list)
    for i, fp in enumerate(fingerprints):
        for key in index_keys(fp, config).tolist():
            index[key].append(i)
    pairs: set[tuple[int, int]] = set()
    for members in index.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                pairs.add((members[x], members[y]))
    return sorted(pairs)
