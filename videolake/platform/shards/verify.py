"""Shards read back by their URI: the bytes, the samples, each mp4's decoded frame count.

The gates and the release verifier read shards the way a training job does, by URI (``file://`` or ``s3://``),
with the lake's storage options for S3 (one set of credentials, from the environment).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes


def read_uri(uri: str, storage_options: dict[str, str] | None = None) -> bytes:
    """The bytes of the object at ``uri``: ``file://``, a plain path, or ``s3://bucket/key``."""
    if uri.startswith("s3://"):
        from videolake.platform.lake.files import LakeFiles

        fs = LakeFiles(root="s3://" + uri[5:].split("/", 1)[0], storage_options=dict(storage_options or {})).fs
        with fs.open_input_stream(uri[5:]) as f:
            return f.read()
    path = os.fsdecode(unquote_to_bytes(uri[len("file://") :])) if uri.startswith("file://") else uri
    with open(path, "rb") as f:
        return f.read()


@dataclass(frozen=True)
class ShardCheck:
    uri: str
    exists: bool
    sha256: str | None
    keys: tuple[str, ...]  # the sample keys in tar order
    error: str | None = None


def check_shard(
    uri: str, storage_options: dict[str, str] | None = None, decode: bool = False
) -> tuple[ShardCheck, dict[str, int]]:
    """The shard's sha256 and sample keys; with ``decode``, every sample's mp4 frame count by key."""
    from videolake.platform.shards.tarfile_det import read_samples

    try:
        data = read_uri(uri, storage_options)
    except (FileNotFoundError, OSError) as exc:
        return ShardCheck(uri, False, None, (), f"{type(exc).__name__}: {exc}"), {}
    digest = hashlib.sha256(data).hexdigest()
    try:
        samples = read_samples(data)
    except Exception as exc:  # noqa: BLE001 - a corrupt tar is a finding, not a crash
        return ShardCheck(uri, True, digest, (), f"not a readable tar: {exc}"), {}
    frames: dict[str, int] = {}
    if decode:
        for key, files in samples:
            frames[key] = mp4_frames(files.get("mp4", b""))
    return ShardCheck(uri, True, digest, tuple(k for k, _ in samples)), frames


def mp4_frames(data: bytes) -> int:
    """Frames an mp4 (bytes) decodes to; -1 when it does not decode."""
    from videolake.platform.shards.encode import count_frames

    fd, tmp = tempfile.mkstemp(suffix=".mp4", prefix="videolake-verify-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return count_frames(tmp)
    except Exception:  # noqa: BLE001 - an undecodable sample is a count that does not match
        return -1
    finally:
        os.remove(tmp)
