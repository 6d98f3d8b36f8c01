"""Files under the lake root, written and read by Ray workers: Parquet data files, unit checkpoints, ledgers.

Why a filesystem layer beside delta-rs: at scale no row passes through the step process (DESIGN "Execution"), so
workers write Parquet files themselves and the step only commits their paths. pyarrow's filesystems reach both a
local directory and S3 with the same calls; the S3 one is built from the same delta-rs ``storage_options`` the
``Lake`` already carries, so one set of settings (and credentials, from the environment) serves both.

Writes are atomic: a local file is written to a hidden temporary name and renamed; an S3 object becomes visible
only when its (multipart) upload completes. So a file that exists is a whole file, which is what makes a unit
checkpoint's existence mean "this unit is done".
"""

from __future__ import annotations

import builtins
import io
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from videolake.platform.lake.storage import (
    AWS_ACCESS_KEY_ID,
    AWS_ALLOW_HTTP,
    AWS_ENDPOINT_URL,
    AWS_REGION,
    AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN,
    is_s3_uri,
)

log = logging.getLogger(__name__)

TMP_PREFIX = ".tmp-"

# A file an attempt wrote (a data file it has not committed yet, a unit checkpoint, a shard sample) is judged
# unreferenced only once it is older than this: another attempt of the same day may still be running and commit or
# read it, and nothing tells a finished attempt from a slow one but time. Delta's own default retention
# (delta.deletedFileRetentionDuration, 7 days), which `videolake vacuum` uses too.
RETENTION_HOURS = 168


def past_retention(modified_s: float | None, retention_hours: float, now_s: float | None = None) -> bool:
    """Whether a file last modified at ``modified_s`` is older than the retention (unknown age: never)."""
    import time

    if modified_s is None:
        return False
    return (time.time() if now_s is None else now_s) - modified_s > retention_hours * 3600


@dataclass(frozen=True)
class FileEntry:
    path: str  # full path as given to the filesystem (no scheme)
    size: int
    mtime_s: float


@dataclass(frozen=True)
class LakeFiles:
    """The lake root as a filesystem. Picklable (rebuilt lazily in each worker); never logs its options."""

    root: str  # local directory or s3://bucket/prefix
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)

    # -- paths -----------------------------------------------------------------------------------------------

    def _base(self) -> str:
        if is_s3_uri(self.root):
            return self.root.split("://", 1)[1].rstrip("/")
        return os.path.abspath(self.root).rstrip("/")

    def path(self, *parts: str) -> str:
        """Filesystem path (no scheme) of ``root/parts...``."""
        return "/".join([self._base(), *[p.strip("/") for p in parts if p]])

    def uri(self, path: str) -> str:
        return f"s3://{path}" if is_s3_uri(self.root) else path

    @property
    def fs(self):
        import pyarrow.fs as pafs

        if not is_s3_uri(self.root):
            return pafs.LocalFileSystem()
        o = {k.upper(): v for k, v in self.storage_options.items()}
        endpoint = o.get(AWS_ENDPOINT_URL)
        kwargs = {"region": o.get(AWS_REGION, "us-east-1")}
        if endpoint:
            scheme, _, host = endpoint.partition("://")
            kwargs.update(endpoint_override=host, scheme=scheme or "https")
        if o.get(AWS_ACCESS_KEY_ID):
            kwargs.update(
                access_key=o[AWS_ACCESS_KEY_ID],
                secret_key=o.get(AWS_SECRET_ACCESS_KEY),
                session_token=o.get(AWS_SESSION_TOKEN),
            )
        if o.get(AWS_ALLOW_HTTP) == "true" and "scheme" not in kwargs:
            kwargs["scheme"] = "http"
        # Path-style requests: what S3-compatible servers expect; AWS accepts them too.
        kwargs["force_virtual_addressing"] = o.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST") == "true"
        return pafs.S3FileSystem(**kwargs)

    # -- io --------------------------------------------------------------------------------------------------

    def write_parquet(self, path: str, table: pa.Table, metadata: dict[str, str] | None = None) -> int:
        """Write ``table`` to ``path`` atomically; returns the file's size in bytes."""
        if metadata:
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        data = buf.getvalue()
        fs = self.fs
        parent = path.rsplit("/", 1)[0]
        if is_s3_uri(self.root):
            with fs.open_output_stream(path) as out:  # visible only once the upload completes
                out.write(data)
            return len(data)
        fs.create_dir(parent, recursive=True)
        tmp = f"{parent}/{TMP_PREFIX}{uuid.uuid4().hex}"
        with fs.open_output_stream(tmp) as out:
            out.write(data)
        os.replace(tmp, path)
        return len(data)

    def read_parquet(self, path: str, columns: list[str] | None = None) -> pa.Table:
        return pq.read_table(path, filesystem=self.fs, columns=columns)

    def read_metadata(self, path: str) -> dict[str, str]:
        meta = pq.read_schema(path, filesystem=self.fs).metadata or {}
        return {k.decode(): v.decode() for k, v in meta.items()}

    def exists(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return self.fs.get_file_info(path).type == pafs.FileType.File

    def list(self, prefix_path: str, recursive: bool = True) -> Iterator[FileEntry]:
        """Files below a directory path (none if it does not exist); temporary files skipped."""
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(prefix_path, recursive=recursive, allow_not_found=True)
        for info in self.fs.get_file_info(sel):
            if info.type == pafs.FileType.File and not info.base_name.startswith(TMP_PREFIX):
                mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
                yield FileEntry(path=info.path, size=int(info.size or 0), mtime_s=mtime)

    def list_dirs(self, prefix_path: str) -> builtins.list[str]:  # `list` is a method here
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(prefix_path, recursive=False, allow_not_found=True)
        return sorted(i.path for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.Directory)

    def delete(self, path: str) -> None:
        import pyarrow.fs as pafs

        try:
            self.fs.delete_file(path)
        except (FileNotFoundError, OSError) as exc:
            if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
                raise exc

    def delete_dir(self, path: str) -> None:
        import pyarrow.fs as pafs

        if self.fs.get_file_info(path).type == pafs.FileType.Directory:
            self.fs.delete_dir(path)
