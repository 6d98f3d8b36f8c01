"""Planted near-duplicate fingerprints: random view hashes (seeded) with a chosen number of bits flipped, so a test
decides exactly which clips match (dedup.near) without decoding a video."""

from __future__ import annotations

import numpy as np

from videolake.platform.dedup.near import NearDupConfig, hashes_per_frame

CONFIG = NearDupConfig()


def fingerprint(seed: int, flip_bits: int = 0, frames: int = 6) -> bytes:
    """``frames`` frames of random view hashes (seeded), ``flip_bits`` bits of every hash flipped."""
    hashes = np.random.default_rng(seed).integers(0, 256, (frames * hashes_per_frame(CONFIG), 32), dtype=np.uint8)
    bits = np.unpackbits(hashes, axis=1)
    bits[:, np.random.default_rng(seed + 7 * flip_bits + 1).permutation(256)[:flip_bits]] ^= 1
    return np.packbits(bits, axis=1).tobytes()
