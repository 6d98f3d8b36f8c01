"""Reading a release's shards by the uri the manifest names: through the object store that wrote them, or, for a
uri outside it (a release copied elsewhere, a second bucket), through pyarrow's filesystem for that uri.

Why pyarrow's filesystem for s3:// uris: its files are random-access (a seek is a ranged GET), so the card's
contact sheet reads a few samples of a 1 GiB shard, and a verify streams a shard, without a local copy.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from typing import BinaryIO

from videolake.platform.objectstore.base import ObjectStore


class ShardMissingError(FileNotFoundError):
    """The shard object does not exist."""


@contextlib.contextmanager
def open_shard(store: ObjectStore, uri: str, storage_options: dict[str, str] | None = None) -> Iterator[BinaryIO]:
    """A seekable binary file object of the shard at ``uri`` (never read into memory as a whole).

    ``storage_options``: delta-rs style S3 options (endpoint, region, keys) for an s3:// uri; default: the store's
    own when it is an S3 store, else the environment's credentials."""
    try:
        key = store.key_from_uri(uri)
    except ValueError:
        key = None
    path = store.local_path(key) if key is not None else None
    if path is None and (uri.startswith("file://") or "://" not in uri):
        path = uri.removeprefix("file://")
    if path is not None:
        if not os.path.isfile(path):
            raise ShardMissingError(uri)
        with open(path, "rb") as fh:
            yield fh
        return
    if uri.startswith("s3://"):
        import pyarrow.fs as pafs

        from videolake.platform.lake.files import LakeFiles

        options = storage_options
        if options is None and key is not None and hasattr(store, "delta_storage_options"):
            options = store.delta_storage_options()
        rest = uri.removeprefix("s3://")
        fs = LakeFiles(f"s3://{rest.split('/', 1)[0]}", dict(options or {})).fs
        if fs.get_file_info(rest).type != pafs.FileType.File:
            raise ShardMissingError(uri)
        with fs.open_input_file(rest) as fh:
            yield fh
        return
    if key is None:
        raise ValueError(f"cannot read {uri}: neither in {store.uri('')} nor a file:// or s3:// uri")
    if not store.exists(key):
        raise ShardMissingError(uri)
    with store.open_local(key, suffix=".tar") as tmp, open(tmp, "rb") as fh:
        yield fh


def read_range(
    store: ObjectStore, uri: str, offset: int, length: int, storage_options: dict[str, str] | None = None
) -> bytes:
    """``length`` bytes of the shard from ``offset`` (one sample's tar members)."""
    with open_shard(store, uri, storage_options) as fh:
        fh.seek(offset)
        data = fh.read(length)
    if len(data) != length:
        raise io.UnsupportedOperation(f"{uri}: read {len(data)} of {length} bytes at offset {offset}")
    return data
