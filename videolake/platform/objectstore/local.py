"""Local-filesystem object store: the embedded default, rooted at a directory (./data by default).

Keys are '/'-separated paths below the root. Listing walks the tree with ``lstat`` only: a symbolic link is reported
as an entry (``not_a_regular_file``), never followed, and its target is never opened or stat'ed, whether it points
inside the store, outside it, or nowhere. FIFOs, sockets and devices are reported the same way (opening a FIFO would
block). A file that is not readable, or a folder that cannot be listed, is ``permission_denied``; a name that is not
valid UTF-8 is ``invalid_name`` (Python keeps its bytes as surrogate escapes in the key, and the URI percent-encodes
the raw bytes, so it round-trips). Folders are descended; an empty folder is one folder entry, ``<key>/`` (like an
S3 folder marker).

URIs are ``Path.as_uri()`` (RFC 8089: percent-encoded, so spaces, '%', '#' and non-ASCII names are safe) and
``key_from_uri`` decodes them back to the exact key.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from urllib.parse import unquote_to_bytes

from videolake.platform.objectstore.base import (
    INVALID_NAME,
    NOT_A_REGULAR_FILE,
    OBJECT_STORES,
    PERMISSION_DENIED,
    ObjectInfo,
    ObjectStore,
)

TMP_PREFIX = ".tmp-"  # the store's own in-flight atomic writes; never listed

_KINDS = (
    (stat.S_ISLNK, "a symbolic link (links are never followed)"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str | None:
    """Why an lstat mode is not a regular file or folder (None when it is one of those)."""
    for test, text in _KINDS:
        if test(mode):
            return text
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return f"a special file (mode {oct(stat.S_IFMT(mode))})"


def _not_utf8(key: str) -> bool:
    try:
        key.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


@OBJECT_STORES.register("local")
class LocalObjectStore(ObjectStore):
    def __init__(self, root: str) -> None:
        self.root = Path(root).resolve()

    def _lexical(self, key: str) -> Path:
        """The path of ``key`` without touching the filesystem (links are not resolved)."""
        parts = [p for p in key.strip("/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"key {key!r} escapes the store root {self.root}")
        return self.root.joinpath(*parts)

    def _path(self, key: str) -> Path:
        """The real path of ``key`` for reading/writing; refuses keys (or links) that lead outside the root."""
        p = self._lexical(key).resolve()
        if p != self.root and self.root not in p.parents:
            raise ValueError(f"key {key!r} escapes the store root {self.root}")
        return p

    # ------------------------------------------------------------------ listing
    def _entry(
        self,
        key: str,
        problem: str | None = None,
        detail: str | None = None,
        size: int = 0,
        modified_s: float | None = None,
    ) -> ObjectInfo:
        if problem is None and _not_utf8(key):
            problem, detail = INVALID_NAME, "the name is not valid UTF-8 (rename it)"
        return ObjectInfo(key=key, size=size, uri=self.uri(key), problem=problem, detail=detail, modified_s=modified_s)

    def list(self, prefix: str) -> list[ObjectInfo]:
        prefix = prefix.lstrip("/")
        base_key = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        found = self._walk_to(prefix, base_key)
        if isinstance(found, list):
            return found
        cur, key = found
        out: list[ObjectInfo] = []
        stack = [(cur, key)]
        while stack:
            folder, folder_key = stack.pop()
            entries = self._folder_entries(folder, folder_key, out)
            if entries is None:
                continue
            if not entries and folder_key != key:
                out.append(self._entry(folder_key))  # an empty folder: a folder entry, like an S3 folder marker
            for e in entries:
                self._list_entry(e, folder_key + e.name, prefix, stack, out)
        return sorted(
            (o for o in out if o.key.startswith(prefix) or o.is_folder and prefix.startswith(o.key)),
            key=lambda o: o.key,
        )

    def _walk_to(self, prefix: str, base_key: str) -> tuple[Path, str] | builtins.list[ObjectInfo]:
        """The folder ``base_key`` of the listing (path, key), or the listing itself when it cannot be reached (a
        missing folder: nothing; a folder that cannot be looked up or is a link: one problem entry)."""
        # Walk from the root to the listing's folder with lstat: a link on the way is reported, not followed.
        cur, key = self.root, ""
        for part in [p for p in base_key.split("/") if p]:
            if part in (".", ".."):
                raise ValueError(f"prefix {prefix!r} has a '.' or '..' segment")
            cur, key = cur / part, key + part + "/"
            try:
                st = cur.lstat()
            except FileNotFoundError:
                return []
            except PermissionError as exc:
                return [self._entry(key, PERMISSION_DENIED, f"cannot look up the folder: {exc.strerror}")]
            if stat.S_ISLNK(st.st_mode):
                return [
                    self._entry(key, NOT_A_REGULAR_FILE, "the folder is a symbolic link (links are never followed)")
                ]
            if not stat.S_ISDIR(st.st_mode):
                return []
        return cur, key

    def _folder_entries(
        self, folder: Path, folder_key: str, out: builtins.list[ObjectInfo]
    ) -> builtins.list[os.DirEntry] | None:
        """The entries of ``folder``, or None when it cannot be listed (a folder it may not list goes to ``out``)."""
        try:
            with os.scandir(folder) as it:
                return list(it)
        except FileNotFoundError:
            return None  # removed while listing: it is gone, nothing to report
        except PermissionError as exc:
            out.append(self._entry(folder_key, PERMISSION_DENIED, f"cannot list the folder: {exc.strerror}"))
            return None
        except NotADirectoryError:
            return None  # replaced by a file while listing; the next listing sees the file

    def _list_entry(
        self,
        e: os.DirEntry,
        ekey: str,
        prefix: str,
        stack: builtins.list[tuple[Path, str]],
        out: builtins.list[ObjectInfo],
    ) -> None:
        """List one folder entry under ``prefix``: a folder goes on ``stack`` to descend, anything else to ``out``."""
        if e.name.startswith(TMP_PREFIX):
            return
        if not (ekey.startswith(prefix) or (ekey + "/").startswith(prefix) or prefix.startswith(ekey + "/")):
            return
        try:
            st = e.stat(follow_symlinks=False)
        except FileNotFoundError:
            return  # vanished while listing
        except OSError as exc:
            problem = PERMISSION_DENIED if isinstance(exc, PermissionError) else NOT_A_REGULAR_FILE
            out.append(self._entry(ekey, problem, f"cannot stat: {exc.strerror}"))
            return
        if stat.S_ISDIR(st.st_mode):
            stack.append((Path(e.path), ekey + "/"))
            return
        if ekey.startswith(prefix):
            out.append(self._file_entry(e, ekey, st))

    def _file_entry(self, e: os.DirEntry, ekey: str, st: os.stat_result) -> ObjectInfo:
        """The entry of a non-folder: a problem for a special file or one this process cannot read."""
        kind = _kind(st.st_mode)
        if kind is not None:
            return self._entry(ekey, NOT_A_REGULAR_FILE, kind)
        if _not_utf8(ekey):
            return self._entry(ekey, size=st.st_size)
        if not os.access(e.path, os.R_OK, follow_symlinks=False):
            return self._entry(ekey, PERMISSION_DENIED, "the file is not readable by this process", size=st.st_size)
        return self._entry(ekey, size=st.st_size, modified_s=st.st_mtime)

    # ------------------------------------------------------------------ objects
    def get_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def _atomic_write(self, key: str, writer) -> str:
        dest = self._path(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=TMP_PREFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                writer(f)
            os.replace(tmp, dest)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        return self.uri(key)

    def put_bytes(self, key: str, data: bytes) -> str:
        return self._atomic_write(key, lambda f: f.write(data))

    def put_file(self, key: str, path: str) -> str:
        def copy(f):
            with open(path, "rb") as src:
                shutil.copyfileobj(src, f, 8 << 20)

        return self._atomic_write(key, copy)

    def download(self, key: str, path: str) -> None:
        src = self._path(key)
        if not src.exists():
            raise FileNotFoundError(f"no object {self.uri(key)}")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        shutil.copyfile(src, tmp)
        os.replace(tmp, path)

    def delete(self, key: str) -> None:
        """Remove one file (missing is fine); never a folder, never outside the root."""
        path = self._path(key)
        if path.is_dir():
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def uri(self, key: str) -> str:
        """``file://`` URI of the key itself (a link's own path, never its target); folder keys keep their '/'."""
        uri = self._lexical(key).as_uri()
        return uri + "/" if key.endswith("/") and not uri.endswith("/") else uri

    def key_from_uri(self, uri: str) -> str:
        """Inverse of ``uri``: percent-decoded to bytes, then to a str as the filesystem does (surrogate escapes)."""
        if not uri.startswith("file://"):
            raise ValueError(f"{uri} is not inside {self.root.as_uri()}")
        path = os.fsdecode(unquote_to_bytes(uri[len("file://") :]))
        root = str(self.root).rstrip("/") + "/"
        if not path.startswith(root) or path == root:
            raise ValueError(f"{uri} is not inside {self.root.as_uri()}")
        return path[len(root) :]

    def local_path(self, key: str) -> str | None:
        """The key's own path (a link is not resolved here, so callers can lstat it); ValueError when the path,
        links resolved, would lead outside the root."""
        self._path(key)
        return str(self._lexical(key))
