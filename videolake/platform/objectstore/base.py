"""The object-store contract. Keys are '/'-separated relative paths; ``uri(key)`` gives the absolute URI users see."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Iterator

from videolake.platform.registry import Registry


class ObjectStoreError(RuntimeError):
    """A clear, user-facing storage failure (bad credentials, missing bucket, exhausted retries)."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    uri: str


class ObjectStore(ABC):
    """Minimal blob store used for landing listings, clip files, frame-stat caches and model weights."""

    @abstractmethod
    def list(self, prefix: str) -> list[ObjectInfo]:
        """All objects whose key starts with ``prefix``, sorted by key."""

    @abstractmethod
    def get_bytes(self, key: str) -> bytes: ...

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> str:
        """Write ``data`` at ``key`` (overwrites); returns the object's URI."""

    @abstractmethod
    def put_file(self, key: str, path: str) -> str:
        """Upload a local file (multipart for large files where the backend has it); returns the URI."""

    @abstractmethod
    def download(self, key: str, path: str) -> None:
        """Copy the object to a local file path (created or replaced atomically)."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def uri(self, key: str) -> str: ...

    @abstractmethod
    def key_from_uri(self, uri: str) -> str:
        """Inverse of ``uri``; raises ValueError for a URI outside this store."""

    def local_path(self, key: str) -> str | None:
        """A local filesystem path for the object when the store is local, else None (callers then download)."""
        return None

    @contextlib.contextmanager
    def open_local(self, key: str, suffix: str = "") -> Iterator[str]:
        """A local path to read the object from: the file itself for a local store, a temporary copy otherwise."""
        path = self.local_path(key)
        if path is not None:
            yield path
            return
        fd, tmp = tempfile.mkstemp(suffix=suffix or os.path.splitext(key)[1], prefix="videolake-")
        os.close(fd)
        try:
            self.download(key, tmp)
            yield tmp
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)

    def put_if_absent(self, key: str, path: str) -> str:
        """Content-addressed upload: a key that exists already is not written again (retries never duplicate)."""
        if self.exists(key):
            return self.uri(key)
        return self.put_file(key, path)


OBJECT_STORES: Registry[ObjectStore] = Registry("object store")


def content_key(prefix: str, digest: str, suffix: str = "") -> str:
    """A content-addressed key: ``prefix/ab/abcdef...suffix`` (fan-out on the first two hex chars)."""
    prefix = prefix.strip("/")
    return f"{prefix}/{digest[:2]}/{digest}{suffix}" if prefix else f"{digest[:2]}/{digest}{suffix}"


def sha256_file(path: str, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
