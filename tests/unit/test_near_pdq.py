"""dedup.near hashes the views of small frames with its own numpy PDQ: it must give pdqhash's hashes and qualities."""

from __future__ import annotations

import numpy as np
import pytest

from videolake.platform.dedup import near


def _frames() -> list[np.ndarray]:
    """Real-looking test content at the fingerprint's sizes: smooth gradients with edges and noise, and pure noise."""
    rng = np.random.default_rng(7)
    out = []
    for h, w in [(72, 128), (83, 110), (128, 72), (96, 96), (36, 64), (60, 128)]:
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) % 37) * 6], axis=-1).astype(np.float64)
        base[h // 3 : h // 2, w // 4 : w // 2] = [250, 30, 30]  # a block with hard edges
        out.append(np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8))
        out.append(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    return out


@pytest.mark.parametrize("k", range(12))
def test_numpy_pdq_is_pdqhash(k):
    pdqhash = pytest.importorskip("pdqhash")
    frame = _frames()[k]
    h, w = frame.shape[:2]
    regions = [(0, h, 0, w), (h // 10, h, 0, w - w // 10), (0, h // 2, 0, w), (0, h, w // 2, w), (3, h - 2, 5, w)]
    hashes, quality = near._pdq_small(near._pdq_luma(frame), regions)
    for (a, b, c, d), got, q in zip(regions, hashes, quality):
        bits, want_q = pdqhash.compute(np.ascontiguousarray(frame[a:b, c:d]))
        assert int(q) == want_q
        assert np.array_equal(got, np.packbits(np.asarray(bits, dtype=np.uint8))), (k, (a, b, c, d))


def test_frame_hashes_mix_numpy_and_pdqhash_views():
    """A frame over 128 px hashes its large views with pdqhash and its small ones (halves) in numpy: the fingerprint
    equals the all-pdqhash one."""
    pdqhash = pytest.importorskip("pdqhash")
    frame = np.concatenate([_frames()[0]] * 2, axis=1)  # 72x256: whole and crops > 128 px, halves 128 px wide
    config = near.NearDupConfig()
    got = near.frame_hashes(frame, config)
    assert got is not None
    views, _ = near._views(config.crop_window, config.half_views)
    box = near.content_box(frame, config.bar_tolerance)
    content = frame[box[0] : box[1], box[2] : box[3]]
    ch, cw = content.shape[:2]
    for i, (y0, y1, x0, x1) in enumerate(views):
        region = content[round(y0 * ch) : round(y1 * ch), round(x0 * cw) : round(x1 * cw)]
        bits, quality = pdqhash.compute(np.ascontiguousarray(region))
        want = (
            np.packbits(np.asarray(bits, dtype=np.uint8)) if quality >= config.min_quality else np.zeros(32, np.uint8)
        )
        assert np.array_equal(got[i], want), i
