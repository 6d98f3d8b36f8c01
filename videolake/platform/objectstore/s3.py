"""S3 object store (boto3): AWS S3 or any S3-compatible server (SeaweedFS, MinIO, Ceph RGW, R2 ...).

Failure handling, in two layers:
1. botocore's own retries (``retry_mode`` standard/adaptive, ``max_attempts``) absorb single dropped requests and
   throttling within a few seconds.
2. Around each whole operation, a retry window (``retry_window_s``): connection errors (refused, closed, timeouts)
   and throttling / 5xx answers are retried with exponential backoff and jitter until the window is spent. A server
   that is restarted, or a load balancer that drains, within the window is survived. Every write here is an
   idempotent whole-object PUT (or a multipart upload completed in one piece), so a retry never duplicates data:
   the same key is written again with the same bytes.
Anything else (bad credentials, missing bucket, access denied) fails at once with an ObjectStoreError that says what
to fix, and never contains the secret.

Credentials are passed in by the caller (the Dagster resource reads them with dg.EnvVar); None leaves them to boto3's
default chain (env vars, IRSA web identity, instance profile). They are not logged, not in repr, not pickled in
clear text beyond what the object holds (the boto3 client itself is not pickled; it is rebuilt lazily).
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from videolake.platform.lake.storage import ADDRESSING_STYLES, storage_options_for_s3
from videolake.platform.objectstore.base import (
    INVALID_NAME,
    NOT_A_REGULAR_FILE,
    OBJECT_STORES,
    ObjectArchivedError,
    ObjectInfo,
    ObjectStore,
    ObjectStoreError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

MiB = 1 << 20

# Error codes S3 and compatible servers use for "slow down, try again".
THROTTLING_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequests",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "BandwidthLimitExceeded",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
    }
)
TRANSIENT_HTTP_STATUS = frozenset({429, 500, 502, 503, 504})
CREDENTIAL_CODES = frozenset(
    {
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "InvalidSecurity",
        "AuthorizationHeaderMalformed",
    }
)
ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AllAccessDisabled", "403", "Forbidden"})
NO_BUCKET_CODES = frozenset({"NoSuchBucket"})
NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
ARCHIVED_CODES = frozenset({"InvalidObjectState"})  # GET of a GLACIER / DEEP_ARCHIVE object that is not restored


def key_problem(key: str, size: int) -> tuple[str | None, str | None]:
    """(problem, detail) of a listed key, without reading it (see ObjectInfo).

    A key ending in '/' is a folder marker: with 0 bytes it is a plain folder entry (no problem; the landing rules
    decide), with data it is not a file anyone can address as one. Keys with an empty, '.' or '..' segment
    ('a//b.mp4', 'a/./b.mp4') are valid in S3 but ambiguous as paths (tools and local copies normalise them):
    ``invalid_name``, never read.
    """
    if key.endswith("/") and size > 0:
        return NOT_A_REGULAR_FILE, f"a folder marker object (its key ends in '/') holding {size} bytes"
    if any(part in ("", ".", "..") for part in key.rstrip("/").split("/")):
        return INVALID_NAME, "the key has an empty, '.' or '..' path segment"
    return None, None


def _client_error_code(exc: BaseException) -> tuple[str, int | None]:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code, status


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: lost connections, timeouts, throttling and 5xx answers."""
    from botocore.exceptions import (
        ClientError,
        HTTPClientError,
        IncompleteReadError,
    )
    from botocore.exceptions import (
        ConnectionError as BotoConnectionError,
    )

    # upload_file wraps a ClientError into S3UploadFailedError (implicitly chained); judge the original.
    if type(exc).__name__ == "S3UploadFailedError" and exc.__context__ is not None:
        return is_transient(exc.__context__)
    if type(exc).__name__ == "RetriesExceededError":  # s3transfer: a download stream kept failing
        return True
    if isinstance(exc, (BotoConnectionError, HTTPClientError, IncompleteReadError, ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, ClientError):
        code, status = _client_error_code(exc)
        return code in THROTTLING_CODES or status in TRANSIENT_HTTP_STATUS
    return False


class _Secret:
    """Holds a credential without ever showing it (repr, str, logs)."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value

    def get(self) -> str | None:
        return self._value

    def __repr__(self) -> str:
        return "<secret>" if self._value else "<unset>"

    __str__ = __repr__

    def __getstate__(self):
        return (self._value,)  # a tuple: pickle skips __setstate__ for a falsy state such as None

    def __setstate__(self, state) -> None:
        (self._value,) = state


@OBJECT_STORES.register("s3")
class S3ObjectStore(ObjectStore):
    """Objects under ``s3://bucket/prefix/``; keys are relative to the prefix, like the local store's paths."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,  # None = AWS; http(s)://host:port for S3-compatible servers
        region: str = "us-east-1",
        access_key_id: str | None = None,  # None = boto3's default credential chain (env, IRSA, instance profile)
        secret_access_key: str | None = None,
        session_token: str | None = None,
        addressing_style: str = "auto",  # "path" (bucket in the URL path), "virtual" (bucket.host) or "auto"
        retry_mode: str = "standard",  # botocore retry mode: "standard" or "adaptive" (client-side rate limiting)
        max_attempts: int = 5,  # botocore attempts per request, before our retry window takes over
        retry_window_s: float = 120.0,  # total seconds one operation keeps retrying transient failures
        backoff_base_s: float = 0.25,  # first backoff; doubles per retry, with jitter
        backoff_max_s: float = 8.0,  # cap of one backoff sleep
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
        multipart_threshold: int = 64 * MiB,  # files at least this big go up in parts
        multipart_chunksize: int = 16 * MiB,  # part size (S3 minimum is 5 MiB, except the last part)
        max_concurrency: int = 4,  # parallel part uploads/downloads per transfer
        list_page_size: int = 1000,  # keys per ListObjectsV2 page (1000 is the S3 maximum)
    ) -> None:
        if not bucket or "/" in bucket:
            raise ValueError(f"bucket must be a bare bucket name, got {bucket!r}")
        if addressing_style not in ADDRESSING_STYLES:
            raise ValueError(f"addressing_style must be one of {ADDRESSING_STYLES}, got {addressing_style!r}")
        if retry_mode not in ("standard", "adaptive", "legacy"):
            raise ValueError(f"retry_mode must be standard, adaptive or legacy, got {retry_mode!r}")
        if (access_key_id is None) != (secret_access_key is None):
            raise ValueError("give both access_key_id and secret_access_key, or neither")
        if multipart_chunksize < 5 * MiB:
            raise ValueError("multipart_chunksize must be at least 5 MiB (the S3 minimum part size)")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url.rstrip("/") if endpoint_url else None
        self.region = region
        self.addressing_style = addressing_style
        self.retry_mode = retry_mode
        self.max_attempts = max_attempts
        self.retry_window_s = retry_window_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.multipart_threshold = multipart_threshold
        self.multipart_chunksize = multipart_chunksize
        self.max_concurrency = max_concurrency
        self.list_page_size = list_page_size
        self._access_key_id = access_key_id
        self._secret_access_key = _Secret(secret_access_key)
        self._session_token = _Secret(session_token)
        self._client_obj = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ plumbing
    def __repr__(self) -> str:
        where = self.endpoint_url or "aws"
        return f"S3ObjectStore(bucket={self.bucket!r}, prefix={self.prefix!r}, endpoint={where!r})"

    def __getstate__(self) -> dict[str, Any]:
        # boto3 clients and locks do not pickle (Ray tasks receive the store by value): rebuild them lazily.
        state = self.__dict__.copy()
        state["_client_obj"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def _endpoint_name(self) -> str:
        return self.endpoint_url or f"AWS S3 ({self.region})"

    @property
    def _where(self) -> str:
        return f"bucket {self.bucket!r} at endpoint {self._endpoint_name}"

    def _client(self):
        if self._client_obj is None:
            with self._lock:
                if self._client_obj is None:
                    import boto3
                    from botocore.config import Config

                    style = self.addressing_style
                    if style == "auto":
                        style = "path" if self.endpoint_url else "virtual"
                    extra: dict[str, Any] = {}
                    if self.endpoint_url:
                        # Third-party servers vary in their support of the CRC checksums newer botocore sends on
                        # every upload; send them only where the API requires them.
                        extra = {
                            "request_checksum_calculation": "when_required",
                            "response_checksum_validation": "when_required",
                        }
                    config = Config(
                        region_name=self.region,
                        signature_version="s3v4",
                        retries={"mode": self.retry_mode, "max_attempts": self.max_attempts},
                        connect_timeout=self.connect_timeout_s,
                        read_timeout=self.read_timeout_s,
                        s3={"addressing_style": style},
                        **extra,
                    )
                    session = boto3.session.Session()
                    self._client_obj = session.client(
                        "s3",
                        endpoint_url=self.endpoint_url,
                        aws_access_key_id=self._access_key_id,
                        aws_secret_access_key=self._secret_access_key.get(),
                        aws_session_token=self._session_token.get(),
                        config=config,
                    )
        return self._client_obj

    def _transfer_config(self):
        from boto3.s3.transfer import TransferConfig

        return TransferConfig(
            multipart_threshold=self.multipart_threshold,
            multipart_chunksize=self.multipart_chunksize,
            max_concurrency=self.max_concurrency,
            use_threads=self.max_concurrency > 1,
        )

    def _full_key(self, key: str) -> str:
        key = key.lstrip("/")
        if not key or any(part in ("", ".", "..") for part in key.split("/")):
            raise ValueError(f"invalid object key {key!r}")
        return f"{self.prefix}/{key}" if self.prefix else key

    def _relative(self, full_key: str) -> str:
        return full_key[len(self.prefix) + 1 :] if self.prefix else full_key

    def _translate(self, exc: BaseException, what: str, key: str | None = None) -> BaseException:
        """A clear, secret-free error for a non-transient failure (or the original one if unknown)."""
        from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

        inner = exc.__context__ if type(exc).__name__ == "S3UploadFailedError" and exc.__context__ else exc
        if isinstance(inner, (NoCredentialsError, PartialCredentialsError)):
            return ObjectStoreError(
                f"no S3 credentials found for {self._where} ({type(inner).__name__}): set the "
                "access key id and secret (or a role) in the environment"
            )
        if not isinstance(inner, ClientError):
            return exc
        code, status = _client_error_code(inner)
        shown = code or str(status)
        if code in CREDENTIAL_CODES:
            return ObjectStoreError(
                f"S3 rejected the credentials for {self._where} ({shown}) while trying to "
                f"{what}: check the access key id and secret"
            )
        if code in NO_BUCKET_CODES:
            return ObjectStoreError(
                f"S3 bucket {self.bucket!r} does not exist at endpoint {self._endpoint_name} "
                f"({shown}) while trying to {what}"
            )
        if key is not None and (code in NOT_FOUND_CODES or status == 404):
            return FileNotFoundError(f"no object {self.uri(key)}")
        if key is not None and code in ARCHIVED_CODES:
            return ObjectArchivedError(
                f"{self.uri(key)} is in an archive storage class ({shown}): restore it to read it"
            )
        if code in ACCESS_DENIED_CODES or status == 403:
            return ObjectStoreError(
                f"S3 denied access to {self._where} ({shown}) while trying to {what}: the "
                "credentials are wrong or lack permission"
            )
        return ObjectStoreError(f"S3 error {shown} for {self._where} while trying to {what}")

    def _call(self, what: str, fn: Callable[[], T], key: str | None = None) -> T:
        """Run ``fn``; retry transient failures with backoff until ``retry_window_s`` is spent."""
        deadline = time.monotonic() + self.retry_window_s
        attempt = 0
        while True:
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 (classified below)
                if not is_transient(exc):
                    translated = self._translate(exc, what, key)
                    if translated is exc:
                        raise
                    raise translated from None
                attempt += 1
                delay = min(self.backoff_max_s, self.backoff_base_s * (2 ** (attempt - 1)))
                delay *= random.uniform(0.5, 1.0)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ObjectStoreError(
                        f"S3 {self._where} still failing after {attempt} tries over {self.retry_window_s:.0f}s "
                        f"while trying to {what}: {type(exc).__name__}: {exc}"
                    ) from exc
                log.warning("S3 %s failed (%s), retry %d in %.1fs", what, type(exc).__name__, attempt, delay)
                time.sleep(min(delay, max(remaining, 0.05)))

    # ------------------------------------------------------------------ ObjectStore
    def check(self) -> None:
        """Fail fast with a clear message when the bucket is missing or the credentials are wrong (doctor, startup).

        ListObjectsV2 rather than HeadBucket: a HEAD answer has no body, so a wrong secret and a missing permission
        would both read "403" without the reason.
        """
        self._call("list the bucket", lambda: self._client().list_objects_v2(Bucket=self.bucket, MaxKeys=1))

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object under the prefix (ListObjectsV2), flagged by ``key_problem``; see ObjectStore.list."""
        full_prefix = f"{self.prefix}/{prefix.lstrip('/')}" if self.prefix else prefix.lstrip("/")

        def run() -> list[ObjectInfo]:
            out: list[ObjectInfo] = []
            paginator = self._client().get_paginator("list_objects_v2")
            pages = paginator.paginate(
                Bucket=self.bucket, Prefix=full_prefix, PaginationConfig={"PageSize": self.list_page_size}
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    key = self._relative(obj["Key"])
                    size = int(obj["Size"])
                    problem, detail = key_problem(key, size)
                    modified = obj.get("LastModified")
                    out.append(
                        ObjectInfo(
                            key=key,
                            size=size,
                            uri=self.uri(key),
                            problem=problem,
                            detail=detail,
                            modified_s=modified.timestamp() if modified is not None else None,
                        )
                    )
            return out

        # The whole listing is retried: a page lost mid-way restarts from the first page, so no duplicates.
        return sorted(self._call(f"list {self.uri(prefix) if prefix else self.uri('')}", run), key=lambda o: o.key)

    def get_bytes(self, key: str) -> bytes:
        full = self._full_key(key)

        def run() -> bytes:
            response = self._client().get_object(Bucket=self.bucket, Key=full)
            return response["Body"].read()

        return self._call(f"read {self.uri(key)}", run, key=key)

    def put_bytes(self, key: str, data: bytes) -> str:
        full = self._full_key(key)
        self._call(f"write {self.uri(key)}", lambda: self._client().put_object(Bucket=self.bucket, Key=full, Body=data))
        return self.uri(key)

    def put_file(self, key: str, path: str) -> str:
        """Upload a file; multipart above ``multipart_threshold``. A failed multipart upload is aborted by s3transfer
        (when the server is reachable) and restarted whole on retry: the object appears once, complete, or not at all.
        """
        full = self._full_key(key)
        if not os.path.isfile(path):
            raise FileNotFoundError(path)
        config = self._transfer_config()
        self._call(
            f"upload {path} to {self.uri(key)}",
            lambda: self._client().upload_file(path, self.bucket, full, Config=config),
        )
        return self.uri(key)

    def download(self, key: str, path: str) -> None:
        full = self._full_key(key)
        dest = Path(path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        config = self._transfer_config()

        def run() -> None:
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.tmp-")
            os.close(fd)
            try:
                self._client().download_file(self.bucket, full, tmp, Config=config)
                os.replace(tmp, dest)
            except BaseException:
                if os.path.exists(tmp):
                    os.remove(tmp)
                raise

        self._call(f"download {self.uri(key)}", run, key=key)

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        full = self._full_key(key)

        def run() -> bool:
            try:
                self._client().head_object(Bucket=self.bucket, Key=full)
                return True
            except ClientError as exc:
                code, status = _client_error_code(exc)
                if status == 404 or code in NOT_FOUND_CODES:
                    return False
                raise

        return self._call(f"check {self.uri(key)}", run)

    def delete(self, key: str) -> None:
        """Remove one object (missing is fine)."""
        full = self._full_key(key)
        self._call(f"delete {self.uri(key)}", lambda: self._client().delete_object(Bucket=self.bucket, Key=full))

    def uri(self, key: str) -> str:
        key = key.lstrip("/")
        base = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"{base}/{key}" if key else base + "/"

    def key_from_uri(self, uri: str) -> str:
        base = self.uri("")
        if not uri.startswith(base) or uri == base:
            raise ValueError(f"{uri} is not inside {base}")
        return uri[len(base) :]

    # ------------------------------------------------------------------ Delta Lake
    def delta_storage_options(self) -> dict[str, str]:
        """delta-rs storage options for tables under this store (``self.uri('tables/x')`` as the table URI)."""
        return storage_options_for_s3(
            region=self.region,
            endpoint_url=self.endpoint_url,
            access_key_id=self._access_key_id,
            secret_access_key=self._secret_access_key.get(),
            session_token=self._session_token.get(),
            addressing_style=self.addressing_style,
        )
