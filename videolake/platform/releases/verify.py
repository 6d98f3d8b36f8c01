"""``verify_release``: read every shard of a release back, and every table version it pins, and compare them with
its manifest.

Each shard is streamed once (never held in memory): its sha256 and size over all its bytes, and, from the same
bytes, its tar members grouped into samples the way WebDataset groups them (by the name before the first dot).
Every difference is reported, for every shard (a verify does not stop at the first): missing, sha256, bytes,
samples, a sample whose members are not ``json, mp4, txt``, or a tar that does not read.

Why the tables too: a release promises that its rows can be read again at the versions it pins (the lineage from a
sample back to its video) and that its shard list is what ``training_shards`` held. So every pinned version's data
files of the released days (from the Delta log at that version, or the release's ``files.json`` once the log no
longer has it) are read in full: a missing or unreadable file is a ``table_file`` problem naming the table, the
version and the file. And the shard list is rebuilt from the ``training_shards`` rows read there (ok rows of the
released days, in the release's buckets, as ``create_release`` builds it): a shard the manifest names that the
table does not, one the table names that the manifest does not, or an entry that differs is a ``shard_list``
problem.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tarfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import unquote

from videolake.platform.lake.schemas import PARTITION_COLUMN
from videolake.platform.objectstore.base import ObjectStore
from videolake.platform.releases.manifest import FILES, ReleaseError, read_manifest, release_key

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

SAMPLE_MEMBERS = ("json", "mp4", "txt")  # the members of every sample, in this order (the shard contract)


# Problems of the tables a release pins; every other kind is a shard's (or the manifest's totals).
TABLE_PROBLEMS = ("table", "table_file")


@dataclass(frozen=True)
class ShardProblem:
    """One difference between the release and its manifest: of a shard (missing | sha256 | bytes | samples |
    members | unreadable), of the manifest (totals), of the shard list against ``training_shards`` (shard_list), or
    of a pinned table version (table: the version does not read; table_file: one of its data files)."""

    uri: str  # the shard, the data file (table_file), the table (table), or manifest.json (totals)
    problem: str
    expected: Any = None
    actual: Any = None
    detail: str = ""
    table: str = ""  # the table, for table, table_file and shard_list problems

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
    tables: int = 0  # table versions the manifest pins
    tables_checked: int = 0  # pinned versions whose data files of the released days all read
    files_read: int = 0  # data files read in full

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def bad_shards(self) -> list[str]:
        """The shard uris with at least one problem (shard_list problems included), sorted."""
        return sorted({p.uri for p in self.problems if p.problem not in TABLE_PROBLEMS and p.problem != "totals"})

    @property
    def bad_tables(self) -> list[str]:
        """The tables whose pinned version has a problem, sorted."""
        return sorted({p.table for p in self.problems if p.problem in TABLE_PROBLEMS})


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
    """Check every shard of release ``name`` against its manifest (sha256, bytes, samples, members), every pinned
    table version's data files of the released days (read in full), and the shard list against the
    ``training_shards`` rows at its pinned version.

    ``storage_options``: S3 options (delta-rs style) for shard uris outside ``store`` (see ``shardio.open_shard``)
    and for the tables; default for an s3:// uri: the store's own when it is an S3 store, else the environment's."""
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
    tables = _TableCheck(store, manifest, storage_options)
    problems += tables.run()
    problems += _shard_list_problems(manifest, tables)
    for p in problems:
        log.warning("release %s: %s", name, p)
    return VerifyResult(
        name=name,
        shards=len(shards),
        checked=checked,
        problems=tuple(problems),
        tables=len(manifest.get("tables", {})),
        tables_checked=tables.checked,
        files_read=tables.files_read,
    )


def _options(store: ObjectStore, uri: str, given: dict[str, str] | None) -> dict[str, str]:
    """The storage options for a table at ``uri`` (the same rule as ``shardio.open_shard``)."""
    if given is not None:
        return dict(given)
    if uri.startswith("s3://") and hasattr(store, "delta_storage_options"):
        return dict(store.delta_storage_options())
    return {}


class _TableCheck:
    """Every pinned table version's data files of the released days, read in full; keeps the training_shards rows
    it read for the shard-list check."""

    def __init__(self, store: ObjectStore, manifest: dict[str, Any], storage_options: dict[str, str] | None) -> None:
        self.store, self.manifest, self.storage_options = store, manifest, storage_options
        self.days = sorted(str(d) for d in manifest.get("partitions", []))
        self.checked = 0
        self.files_read = 0
        self.training_shards: pa.Table | None = None  # None: not read (not pinned, or a file failed)
        self._files_json: dict[str, Any] | None = None

    def run(self) -> list[ShardProblem]:
        problems: list[ShardProblem] = []
        for table, ref in sorted(self.manifest.get("tables", {}).items()):
            found = self._table(table, str(ref.get("uri", "")), ref.get("version"))
            problems += found
            if not found:
                self.checked += 1
        return problems

    def _files_listed(self, table: str) -> list[tuple[str, str]] | None:
        """(file, day) of ``table`` from the release's files.json, None when it has none for the table."""
        if self._files_json is None:
            key = release_key(self.manifest["name"], FILES)
            self._files_json = json.loads(self.store.get_bytes(key).decode("utf-8")) if self.store.exists(key) else {}
        entry = self._files_json.get(table)
        if not entry or entry.get("files") is None:
            return None
        out = []
        for f in entry["files"]:
            rel = unquote(f)
            first = rel.split("/", 1)[0]
            out.append((rel, first.split("=", 1)[1] if first.startswith(f"{PARTITION_COLUMN}=") else ""))
        return out

    def _table(self, table: str, uri: str, version: Any) -> list[ShardProblem]:
        import pyarrow as pa
        from deltalake import DeltaTable

        from videolake.platform.lake.files import LakeFiles

        if version is None:
            return [ShardProblem(uri, "table", detail=f"{table}: the manifest pins no version", table=table)]
        version = int(version)
        options = _options(self.store, uri, self.storage_options)
        try:
            dtbl = DeltaTable(uri, version=version, storage_options=options or None)
            actions = pa.table(dtbl.get_add_actions(flatten=True))
            col = f"partition.{PARTITION_COLUMN}"
            days = actions.column(col).to_pylist() if col in actions.column_names else [None] * actions.num_rows
            files = [
                (unquote(p), str(d)) for p, d in zip(actions.column("path").to_pylist(), days) if str(d) in self.days
            ]
        except Exception as exc:  # noqa: BLE001 (the log lost the version, or the table is gone: try files.json)
            listed = self._files_listed(table)
            if listed is None:
                return [
                    ShardProblem(
                        uri,
                        "table",
                        detail=f"{table} version {version} does not read ({type(exc).__name__}: {exc}) and the "
                        f"release's {FILES} does not list its files",
                        table=table,
                    )
                ]
            log.info(
                "%s version %d is not in the Delta log (%s): reading the files %s lists", table, version, exc, FILES
            )
            files = [(f, d) for f, d in listed if d in self.days]
        lake_files = LakeFiles(uri.removeprefix("file://"), options)
        problems: list[ShardProblem] = []
        parts: list[pa.Table] = []
        for rel, day in sorted(files):
            path = lake_files.path(rel)
            try:
                data = _read_parquet(lake_files, path)
            except FileNotFoundError:
                problems.append(
                    ShardProblem(
                        lake_files.uri(path),
                        "table_file",
                        detail=f"{table} version {version}: data file {rel} does not exist",
                        table=table,
                    )
                )
                continue
            except Exception as exc:  # noqa: BLE001 (any read failure names the file)
                problems.append(
                    ShardProblem(
                        lake_files.uri(path),
                        "table_file",
                        detail=f"{table} version {version}: data file {rel} does not read: {type(exc).__name__}: {exc}",
                        table=table,
                    )
                )
                continue
            self.files_read += 1
            if table == "training_shards":
                parts.append(_shard_columns(data, day))
        if table == "training_shards" and not problems:
            self.training_shards = pa.concat_tables(parts) if parts else None
        return problems


def _read_parquet(files: Any, path: str) -> pa.Table:
    """Every column and row group of the file (decoded: a damaged page fails here, not in a training run)."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    if files.fs.get_file_info(path).type != pafs.FileType.File:
        raise FileNotFoundError(path)
    return pq.read_table(path, filesystem=files.fs)


SHARD_COLUMNS = ("status", "bucket", "shard_uri", "shard_sha256", "shard_samples", "shard_bytes")


def _shard_columns(data: pa.Table, day: str) -> pa.Table:
    """The columns ``create.shard_list`` reads, with the file's day (a Delta data file does not hold it)."""
    import pyarrow as pa

    out = {c: data.column(c) if c in data.column_names else pa.nulls(data.num_rows) for c in SHARD_COLUMNS}
    out[PARTITION_COLUMN] = pa.array([day] * data.num_rows, pa.string())
    return pa.table(out)


def _shard_list_problems(manifest: dict[str, Any], tables: _TableCheck) -> list[ShardProblem]:
    """The manifest's shard list against the one the training_shards rows at the pinned version give."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from videolake.platform.releases.create import shard_list

    rows = tables.training_shards
    if rows is None:  # its files did not read (reported) or it is not pinned (reported)
        return []
    ok = rows.filter(pc.equal(rows.column("status"), "ok"))
    if manifest.get("buckets") is not None:
        ok = ok.filter(pc.is_in(ok.column("bucket"), pa.array(list(manifest["buckets"]), pa.string())))
    version = manifest["tables"]["training_shards"]["version"]
    where = f"training_shards version {version}"
    try:
        table_list = {s["uri"]: s for s in shard_list(ok)}
    except ReleaseError as exc:
        return [ShardProblem("training_shards", "shard_list", detail=f"{where}: {exc}", table="training_shards")]
    named = {s["uri"]: s for s in manifest["shards"]}
    problems = []
    for uri in sorted(named.keys() | table_list.keys()):
        if uri not in table_list:
            detail = f"named by the manifest, not by an ok row of {where} in the released days"
            problems.append(ShardProblem(uri, "shard_list", detail=detail, table="training_shards"))
        elif uri not in named:
            detail = f"named by {where} in the released days, not by the manifest"
            problems.append(ShardProblem(uri, "shard_list", detail=detail, table="training_shards"))
        elif named[uri] != table_list[uri]:
            diff = sorted(
                k for k in named[uri].keys() | table_list[uri].keys() if named[uri].get(k) != table_list[uri].get(k)
            )
            problems.append(
                ShardProblem(
                    uri,
                    "shard_list",
                    {k: named[uri].get(k) for k in diff},
                    {k: table_list[uri].get(k) for k in diff},
                    f"the manifest's entry differs from {where}",
                    table="training_shards",
                )
            )
    return problems
