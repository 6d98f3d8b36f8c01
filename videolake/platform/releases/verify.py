"""``verify_release``: read every shard of a release back and compare it with its manifest.

Each shard is streamed once (never held in memory): its sha256 and size over all its bytes, and, from the same
bytes, its tar members grouped into samples the way WebDataset groups them (by the name before the first dot).
Every difference is reported, for every shard (a verify does not stop at the first): missing, sha256, bytes,
samples, a sample whose members are not ``json, mp4, txt``, or a tar that does not read.
"""

from __future__ import annotations

import hashlib
import logging
import tarfile
from dataclasses import dataclass
from typing import Any, BinaryIO

from videolake.platform.objectstore.base import ObjectStore
from videolake.platform.releases.manifest import read_manifest

log = logging.getLogger(__name__)

SAMPLE_MEMBERS = ("json", "mp4", "txt")  # the members of every sample, in this order (the shard contract)


@dataclass(frozen=True)
class ShardProblem:
    uri: str  # the shard (or the manifest, for a totals mismatch)
    problem: str  # missing | sha256 | bytes | samples | members | unreadable | totals
    expected: Any = None
    actual: Any = None
    detail: str = ""

    def __str__(self) -> str:
        what = f"expected {self.expected}, found {self.actual}" if self.expected is not None else ""
        return (
            f"{self.uri}: {self.problem}" + (f" ({what})" if what else "") + (f": {self.detail}" if self.detail else "")
        )


@dataclass(frozen=True)
class VerifyResult:
    name: str
    shards: int  # shards the manifest lists
    checked: int  # shards found and read
    problems: tuple[ShardProblem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def bad_shards(self) -> list[str]:
        """The uris with at least one problem, sorted."""
        return sorted({p.uri for p in self.problems})


class _Hashing:
    """A read-only stream that hashes and counts what is read through it."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh, self.sha, self.size = fh, hashlib.sha256(), 0

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.sha.update(data)
        self.size += len(data)
        return data

    def drain(self, chunk: int = 8 << 20) -> None:
        while self.read(chunk):
            pass


@dataclass(frozen=True)
class ShardReading:
    sha256: str
    size: int
    samples: int
    bad_members: tuple[str, ...]  # keys of samples whose members are not SAMPLE_MEMBERS in order
    error: str | None  # why the tar did not read to its end


def read_shard(fh: BinaryIO) -> ShardReading:
    """sha256, size and samples of a shard streamed once from ``fh``."""
    stream = _Hashing(fh)
    groups: list[tuple[str, list[str]]] = []
    error = None
    try:
        # A stream ("r|") is only read from; typeshed's tarfile.open wants a whole file object (seek, tell, ...)
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
            for info in tar:
                if not info.isfile():
                    continue
                key, _, ext = info.name.rsplit("/", 1)[-1].partition(".")
                if groups and groups[-1][0] == key:
                    groups[-1][1].append(ext)
                else:
                    groups.append((key, [ext]))
    except (tarfile.TarError, EOFError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    stream.drain()
    bad = tuple(k for k, exts in groups if tuple(exts) != SAMPLE_MEMBERS)
    return ShardReading(stream.sha.hexdigest(), stream.size, len(groups), bad, error)


def verify_release(store: ObjectStore, name: str, *, storage_options: dict[str, str] | None = None) -> VerifyResult:
    """Check every shard of release ``name`` against its manifest (sha256, bytes, samples, members).

    ``storage_options``: S3 options for shard uris outside ``store`` (see ``shardio.open_shard``)."""
    from videolake.platform.releases.shardio import ShardMissingError, open_shard

    manifest = read_manifest(store, name)
    shards = manifest["shards"]
    problems: list[ShardProblem] = []
    checked = 0
    for s in shards:
        uri = s["uri"]
        try:
            with open_shard(store, uri, storage_options) as fh:
                got = read_shard(fh)
        except ShardMissingError:
            problems.append(ShardProblem(uri, "missing", detail="the shard object does not exist"))
            continue
        checked += 1
        if got.sha256 != s["sha256"]:
            problems.append(ShardProblem(uri, "sha256", s["sha256"], got.sha256))
        if got.size != s["bytes"]:
            problems.append(ShardProblem(uri, "bytes", s["bytes"], got.size))
        if got.samples != s["samples"]:
            problems.append(ShardProblem(uri, "samples", s["samples"], got.samples))
        if got.bad_members:
            problems.append(
                ShardProblem(
                    uri,
                    "members",
                    list(SAMPLE_MEMBERS),
                    None,
                    f"{len(got.bad_members)} sample(s), e.g. {got.bad_members[0]}",
                )
            )
        if got.error:
            problems.append(ShardProblem(uri, "unreadable", detail=got.error))
    totals = manifest.get("totals", {})
    for field, value in (
        ("samples", sum(s["samples"] for s in shards)),
        ("shards", len(shards)),
        ("bytes", sum(s["bytes"] for s in shards)),
    ):
        if totals.get(field) != value:
            problems.append(
                ShardProblem(
                    "manifest.json", "totals", totals.get(field), value, f"totals.{field} against the shard list"
                )
            )
    for p in problems:
        log.warning("release %s: %s", name, p)
    return VerifyResult(name=name, shards=len(shards), checked=checked, problems=tuple(problems))
