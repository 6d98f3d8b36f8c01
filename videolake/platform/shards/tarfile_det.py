"""Deterministic tar members: a sample is a byte fragment of whole tar members, a shard is fragments + end blocks.

Why not write each shard with ``tarfile`` directly: a worker encodes a sample long before the day's shards are
known (their boundaries depend on every sample of the day), so each sample is written once as its own fragment
(the members ``<key>.json``, ``<key>.mp4``, ``<key>.txt``: a 512-byte header each, data padded to 512 bytes) and a
shard is the concatenation of its samples' fragments and the two zero blocks that end a tar. The headers carry no
time, owner or host, so the same samples give the same bytes on every machine: the same shard name, the same sha256.
The members of a sample are in extension order, the samples in key order: WebDataset groups consecutive members by
the key before the first dot of their name, and the keys (clip ids) have no dot.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Mapping
from typing import BinaryIO

BLOCK = 512
END_OF_ARCHIVE = b"\0" * (2 * BLOCK)


def member(name: str, data: bytes) -> bytes:
    """One tar member (header + data padded to a whole block): ustar, mode 0644, mtime 0, no owner."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    header = info.tobuf(format=tarfile.USTAR_FORMAT, encoding="utf-8", errors="strict")
    pad = (-len(data)) % BLOCK
    return header + data + b"\0" * pad


def sample_fragment(key: str, files: Mapping[str, bytes]) -> bytes:
    """The members of one sample: ``<key>.<ext>`` for each ext of ``files``, in extension order."""
    if "." in key or "/" in key or not key:
        raise ValueError(f"a sample key has no '.' or '/': {key!r}")
    return b"".join(member(f"{key}.{ext}", files[ext]) for ext in sorted(files))


def write_shard(fragments: Iterable[bytes], out: BinaryIO) -> int:
    """Write a tar of ``fragments`` (in the given order) to ``out``; returns the bytes written."""
    n = 0
    for frag in fragments:
        out.write(frag)
        n += len(frag)
    out.write(END_OF_ARCHIVE)
    return n + len(END_OF_ARCHIVE)


def read_samples(data: bytes | BinaryIO) -> list[tuple[str, dict[str, bytes]]]:
    """The samples of a tar, in order: (key, {ext: bytes}) with members grouped by the key before the first dot
    (what WebDataset does). Raises ``tarfile.TarError`` for a truncated or corrupt tar."""
    fh = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    samples: list[tuple[str, dict[str, bytes]]] = []
    with tarfile.open(fileobj=fh, mode="r:") as tar:
        for info in tar:
            if not info.isfile():
                continue
            base = info.name.rsplit("/", 1)[-1]
            key, _, ext = base.partition(".")
            f = tar.extractfile(info)
            payload = f.read() if f is not None else b""
            if samples and samples[-1][0] == key:
                samples[-1][1][ext] = payload
            else:
                samples.append((key, {ext: payload}))
    return samples
