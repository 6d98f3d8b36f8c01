"""Where Delta tables live and how delta-rs reaches them: storage options for S3 and S3-compatible servers.

delta-rs (deltalake 1.x) does not use boto3: it takes a flat dict of string options. Misspelled keys are silently
ignored, so the keys live here, once, and a test writes real tables through them. Safe concurrent commits on S3 rely
on conditional writes (a commit file ``_delta_log/N.json`` is created with If-None-Match; the loser of a race retries
with N+1); delta-rs 1.x dropped the DynamoDB locking provider, so the object store must support conditional puts
(AWS S3 since 2024, SeaweedFS, MinIO, R2 ...).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlparse

log = logging.getLogger(__name__)

T = TypeVar("T")

# Option keys understood by delta-rs / object_store (case-insensitive there; upper-case by convention).
AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
AWS_REGION = "AWS_REGION"
AWS_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
AWS_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
AWS_SESSION_TOKEN = "AWS_SESSION_TOKEN"
AWS_ALLOW_HTTP = "AWS_ALLOW_HTTP"
AWS_VIRTUAL_HOSTED_STYLE_REQUEST = "AWS_VIRTUAL_HOSTED_STYLE_REQUEST"
# object_store's conditional-put mode: "etag" makes create-if-absent and update-if-match use If-None-Match/If-Match.
AWS_CONDITIONAL_PUT = "AWS_CONDITIONAL_PUT"

ADDRESSING_STYLES = ("auto", "path", "virtual")


def storage_options_for_s3(
    *,
    region: str = "us-east-1",
    endpoint_url: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    addressing_style: str = "auto",
    conditional_put: str | None = "etag",
) -> dict[str, str]:
    """delta-rs ``storage_options`` for a table under ``s3://``.

    - ``endpoint_url``: None for AWS S3; the server URL for S3-compatible storage. An ``http://`` endpoint also sets
      AWS_ALLOW_HTTP (object_store refuses plain HTTP otherwise).
    - credentials: None leaves them to delta-rs' own chain (env vars, web identity / IRSA, instance metadata).
    - ``addressing_style``: "path" for most self-hosted servers (bucket in the path), "virtual" for
      bucket.host; "auto" = path style when an endpoint is given, virtual for AWS.
    - ``conditional_put``: "etag" (default) or None to leave object_store's default.
    """
    if addressing_style not in ADDRESSING_STYLES:
        raise ValueError(f"addressing_style must be one of {ADDRESSING_STYLES}, got {addressing_style!r}")
    if (access_key_id is None) != (secret_access_key is None):
        raise ValueError("give both access_key_id and secret_access_key, or neither")
    options: dict[str, str] = {AWS_REGION: region}
    if endpoint_url:
        parsed = urlparse(endpoint_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"endpoint_url must be an http(s) URL, got {endpoint_url!r}")
        options[AWS_ENDPOINT_URL] = endpoint_url.rstrip("/")
        if parsed.scheme == "http":
            options[AWS_ALLOW_HTTP] = "true"
    if addressing_style == "auto":
        addressing_style = "path" if endpoint_url else "virtual"
    options[AWS_VIRTUAL_HOSTED_STYLE_REQUEST] = "true" if addressing_style == "virtual" else "false"
    if access_key_id is not None:
        options[AWS_ACCESS_KEY_ID] = access_key_id
        options[AWS_SECRET_ACCESS_KEY] = secret_access_key  # type: ignore[assignment]
    if session_token:
        options[AWS_SESSION_TOKEN] = session_token
    if conditional_put:
        options[AWS_CONDITIONAL_PUT] = conditional_put
    return options


def is_s3_uri(uri: str) -> bool:
    return uri.startswith(("s3://", "s3a://"))


def retry_on_commit_conflict(
    write: Callable[[], T],
    *,
    what: str = "delta write",
    attempts: int = 10,
    base_delay_s: float = 0.2,
    max_delay_s: float = 5.0,
) -> T:
    """Run one delta-rs write; if its commit loses a race with another writer, run the whole write again.

    Why: delta-rs retries plain version races itself, but two overwrites of *different* partitions of one table
    still fail now and then with CommitFailedError "a concurrent transaction deleted data this operation read"
    (its conflict check does not prune the read set to the predicate's partitions), and two writers creating a new
    table both aim at version 0 ("Metadata changed since last commit"). A failed commit writes nothing the table
    references, and the writes here are overwrites whose predicate covers exactly the run's partitions, so running
    the write again is safe and gives the same rows. ``write`` must rebuild everything it commits (no half state).
    """
    from deltalake.exceptions import CommitFailedError

    for attempt in range(1, attempts + 1):
        try:
            return write()
        except CommitFailedError as exc:
            if attempt == attempts:
                raise
            delay = min(max_delay_s, base_delay_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
            log.warning("%s: commit conflict (%s); retry %d/%d in %.2fs", what, exc, attempt, attempts - 1, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")
