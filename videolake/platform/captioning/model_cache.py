"""Model weights on node-local disk: a local directory is used in place; an object-store prefix is copied once.

Why: a GPU node should read weights from its own disk, once per node, not once per actor or per run. A copy goes
to a temporary directory beside the cache entry; only after every file is downloaded is a manifest (relative path
-> size, sha256) written and the directory renamed into place, so a partial copy is never used. Each use verifies
the entry against its manifest (sizes, and sha256 unless ``verify="size"``) and against the remote listing (same
files, same sizes); a mismatch (corruption, a changed model) deletes the entry and copies again. A file lock
serialises actors of the same node, so two actors on one node copy once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from videolake.platform.objectstore.base import ObjectStore, sha256_file
from videolake.platform.runtime.built_once import lock_path, locked

log = logging.getLogger(__name__)

MANIFEST = ".videolake-model-manifest.json"
ENV_CACHE_DIR = "VIDEOLAKE_MODEL_CACHE"

StoreFactory = Callable[[str], ObjectStore]


@dataclass(frozen=True)
class LocalModel:
    path: str  # the directory vLLM loads
    seconds: float  # time spent resolving (verify + copy when needed)
    copied: bool  # True when this call copied the weights from the object store


def default_cache_dir() -> str:
    return os.environ.get(ENV_CACHE_DIR) or os.path.join(os.path.expanduser("~"), ".cache", "videolake", "models")


def default_store_factory(uri: str) -> ObjectStore:
    """file:// URIs map to a LocalObjectStore rooted at the model directory's parent; other schemes need an
    injected factory (S3 in production comes from the object-store resource)."""
    from videolake.platform.objectstore import LocalObjectStore

    if urlparse(uri).scheme == "file":
        return LocalObjectStore(os.path.dirname(unquote(urlparse(uri).path).rstrip("/")) or "/")
    raise ValueError(f"no object store for {uri}: pass store_factory= to resolve_model")


def resolve_model(
    model: str, *, cache_dir: str | None = None, store_factory: StoreFactory | None = None, verify: str = "sha256"
) -> LocalModel:
    """A local directory for ``model``: a plain path is used in place; a URI (file://, s3://...) is copied once
    into ``cache_dir`` and loaded from there."""
    t0 = time.perf_counter()
    if "://" not in model:
        if not os.path.isdir(model):
            raise FileNotFoundError(f"model directory {model} does not exist")
        return LocalModel(path=os.path.abspath(model), seconds=time.perf_counter() - t0, copied=False)
    store = (store_factory or default_store_factory)(model)
    prefix = store.key_from_uri(model.rstrip("/"))
    return ensure_cached(store, prefix, cache_dir or default_cache_dir(), verify=verify, uri=model)


def cache_entry(cache_dir: str, uri: str) -> Path:
    """The cache directory of one model: readable name + a digest of the full URI (no collisions)."""
    name = Path(urlparse(uri).path.rstrip("/")).name or "model"
    digest = hashlib.sha256(uri.rstrip("/").encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{name}-{digest}"


def ensure_cached(
    store: ObjectStore, prefix: str, cache_dir: str, *, verify: str = "sha256", uri: str | None = None
) -> LocalModel:
    """Copy the objects under ``prefix`` to the node cache unless a verified complete copy is already there."""
    t0 = time.perf_counter()
    uri = uri or store.uri(prefix)
    entry = cache_entry(cache_dir, uri)
    entry.parent.mkdir(parents=True, exist_ok=True)
    remote = _remote_files(store, prefix)
    if not remote:
        raise FileNotFoundError(f"no model files under {uri}")
    with locked(lock_path(entry)):
        problem = verify_entry(entry, remote, verify=verify)
        if problem is None:
            return LocalModel(path=str(entry), seconds=time.perf_counter() - t0, copied=False)
        if entry.exists():
            log.warning("model cache %s is not usable (%s): copying again", entry, problem)
            shutil.rmtree(entry)
        _copy(store, prefix, remote, entry)
    seconds = time.perf_counter() - t0
    log.info(
        "copied model %s (%d files, %.1f MB) to %s in %.1fs",
        uri,
        len(remote),
        sum(remote.values()) / 1e6,
        entry,
        seconds,
    )
    return LocalModel(path=str(entry), seconds=seconds, copied=True)


def _remote_files(store: ObjectStore, prefix: str) -> dict[str, int]:
    """Relative path -> size of every object under the prefix (the prefix is a directory)."""
    base = prefix.strip("/") + "/"
    return {
        o.key[len(base) :]: int(o.size)
        for o in store.readable_objects(base)
        if o.key.startswith(base) and o.key != base
    }


def verify_entry(entry: Path, remote: dict[str, int], *, verify: str = "sha256") -> str | None:
    """None when the cache entry is complete and intact, else what is wrong with it."""
    manifest_path = entry / MANIFEST
    if not manifest_path.is_file():
        return "no manifest (never copied, or an interrupted copy)"
    try:
        manifest = json.loads(manifest_path.read_text())["files"]
    except (ValueError, KeyError) as exc:
        return f"unreadable manifest: {exc}"
    if {k: v["size"] for k, v in manifest.items()} != remote:
        return "the remote model differs from the cached copy (files or sizes)"
    for rel, meta in manifest.items():
        path = entry / rel
        if not path.is_file():
            return f"missing {rel}"
        if path.stat().st_size != meta["size"]:
            return f"size of {rel} is {path.stat().st_size}, expected {meta['size']}"
        if verify == "sha256" and sha256_file(str(path)) != meta["sha256"]:
            return f"sha256 of {rel} does not match the manifest"
    return None


def _copy(store: ObjectStore, prefix: str, remote: dict[str, int], entry: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.copy-", dir=entry.parent))
    try:
        files = {}
        base = prefix.strip("/")
        for rel, size in sorted(remote.items()):
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            store.download(f"{base}/{rel}", str(dest))
            got = dest.stat().st_size
            if got != size:
                raise OSError(f"downloaded {rel}: {got} bytes, expected {size}")
            files[rel] = {"size": size, "sha256": sha256_file(str(dest))}
        # The manifest is written last: its presence means "complete".
        (tmp / MANIFEST).write_text(json.dumps({"files": files}, indent=1, sort_keys=True))
        os.chmod(tmp, 0o755)
        os.replace(tmp, entry)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
