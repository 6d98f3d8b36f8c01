"""The object-store contract. Keys are '/'-separated relative paths; ``uri(key)`` gives the absolute URI users see."""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

from videolake.platform.registry import Registry


class ObjectStoreError(RuntimeError):
    """A clear, user-facing storage failure (bad credentials, missing bucket, exhausted retries)."""


class ObjectArchivedError(ObjectStoreError):
    """This one object cannot be read until it is restored (S3 GLACIER / DEEP_ARCHIVE storage classes)."""


# Why a listed entry cannot be read as an object (``ObjectInfo.problem``). Listing never raises for one odd entry:
# it reports the entry with its problem, and ingest turns it into a rejected raw_videos row with that reason.
NOT_A_REGULAR_FILE = "not_a_regular_file"  # a symbolic link (never followed), FIFO, socket, device, empty folder
PERMISSION_DENIED = "permission_denied"  # a file that cannot be read, or a folder that cannot be listed
INVALID_NAME = "invalid_name"  # a name that is not UTF-8, or an S3 key with an empty, '.' or '..' path segment
ARCHIVED = "archived"  # an S3 object in an archive storage class (GLACIER, DEEP_ARCHIVE): restore it first
LISTING_PROBLEMS: tuple[str, ...] = (NOT_A_REGULAR_FILE, PERMISSION_DENIED, INVALID_NAME, ARCHIVED)
VANISHED = "vanished"  # listed, then gone (deleted or moved) before it was read: a reject reason, not a listing flag


@dataclass(frozen=True)
class ObjectInfo:
    """One listed entry. ``problem`` is None for an object that can be read; otherwise the entry is reported, not
    hidden, and must not be opened (a link is never followed, a FIFO would block a reader).

    A key ending in '/' is a folder entry: an empty local folder, an unlistable local folder, or an S3 folder
    marker object (what consoles create for "new folder"); see ``is_folder``.
    """

    key: str  # relative to the store; may hold surrogate escapes for a local name that is not UTF-8
    size: int  # bytes; 0 for entries that are not regular files
    uri: str  # always representable (ASCII-safe for local stores): key_from_uri(uri) == key
    problem: str | None = None  # one of LISTING_PROBLEMS, or None
    detail: str | None = None  # human-readable explanation of the problem
    modified_s: float | None = None  # last modification (Unix seconds), where the listing gives it

    @property
    def is_folder(self) -> bool:
        return self.key.endswith("/")


class ObjectStore(ABC):
    """Minimal blob store used for landing listings, clip files, frame-stat caches and model weights."""

    @abstractmethod
    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every entry whose key starts with ``prefix``, sorted by key; never raises for one odd entry.

        Readable objects have ``problem`` None. Entries that are not readable objects are returned flagged (see
        ObjectInfo), never dropped and never opened. Folders are not entries themselves (their contents are), except
        an empty one, an unlistable one, or an S3 folder marker object (keys ending in '/'). A store-wide failure
        (bad credentials, outage) still raises.
        """

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

    def delete(self, key: str) -> None:
        """Remove one object (a missing one is fine): cleanup of objects the lake no longer names."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete objects")

    def local_path(self, key: str) -> str | None:
        """A local filesystem path for the object when the store is local, else None (callers then download)."""
        return None

    def readable_objects(self, prefix: str) -> builtins.list[ObjectInfo]:  # `list` is a method here
        """``list(prefix)`` for callers that copy whole trees (model weights): folder entries are skipped, and any
        flagged entry is an error naming it (a tree with a link or an unreadable file is not copied half)."""
        out = []
        for o in self.list(prefix):
            if o.problem is not None:
                raise ObjectStoreError(f"cannot read {o.uri}: {o.problem} ({o.detail})")
            if not o.is_folder:
                out.append(o)
        return out

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
