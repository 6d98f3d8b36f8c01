"""Local-filesystem object store: the embedded default, rooted at a directory (./data by default)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from videolake.platform.objectstore.base import OBJECT_STORES, ObjectInfo, ObjectStore


@OBJECT_STORES.register("local")
class LocalObjectStore(ObjectStore):
    def __init__(self, root: str) -> None:
        self.root = Path(root).resolve()

    def _path(self, key: str) -> Path:
        p = (self.root / key.lstrip("/")).resolve()
        if p != self.root and self.root not in p.parents:
            raise ValueError(f"key {key!r} escapes the store root {self.root}")
        return p

    def list(self, prefix: str) -> list[ObjectInfo]:
        prefix = prefix.lstrip("/")
        base = self._path(prefix.rsplit("/", 1)[0] if "/" in prefix else "")
        if not base.exists():
            return []
        out = []
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                full = Path(dirpath) / name
                key = full.relative_to(self.root).as_posix()
                if key.startswith(prefix) and not name.startswith(".tmp-"):
                    out.append(ObjectInfo(key=key, size=full.stat().st_size, uri=self.uri(key)))
        return sorted(out, key=lambda o: o.key)

    def get_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def _atomic_write(self, key: str, writer) -> str:
        dest = self._path(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
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

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def uri(self, key: str) -> str:
        return self._path(key).as_uri()

    def key_from_uri(self, uri: str) -> str:
        prefix = self.root.as_uri() + "/"
        if not uri.startswith(prefix):
            raise ValueError(f"{uri} is not inside {self.root.as_uri()}")
        return uri[len(prefix):]

    def local_path(self, key: str) -> str | None:
        return str(self._path(key))
