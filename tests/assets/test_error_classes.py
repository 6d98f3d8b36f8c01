"""Error classification (videolake.assets.errors): which failures a retry can fix. Real exception objects of the
libraries that raise them (Ray, botocore, delta-rs, the S3 store), no mocks."""

from __future__ import annotations

import dagster as dg
import pytest

from videolake.assets.errors import DeterministicError, ErrorKind, classify, deterministic_failure
from videolake.assets.landing import NoLandingDataError


def _raised(outer_factory, inner: BaseException, suppress: bool = False) -> BaseException:
    """``outer`` raised while handling ``inner`` (``raise outer from inner``, or ``from None`` when suppress)."""
    try:
        try:
            raise inner
        except BaseException as e:  # noqa: BLE001
            if suppress:
                raise outer_factory(e) from None
            raise outer_factory(e) from e
    except BaseException as outer:  # noqa: BLE001
        return outer


def _client_error(code: str, status: int):
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "ListObjectsV2"
    )


def _transient_cases():
    import ray.exceptions as rex
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
    from deltalake.exceptions import CommitFailedError

    from videolake.platform.objectstore.base import ObjectStoreError

    return {
        "ray worker crashed": rex.WorkerCrashedError(),
        "ray actor died": rex.ActorDiedError(),
        "ray node died": rex.NodeDiedError("node 1 died"),
        "ray object lost": rex.ObjectLostError("ffff", "owner", "call site"),
        "ray task error caused by a lost actor": rex.RayTaskError("fn", "tb", rex.ActorDiedError()),
        "s3 endpoint unreachable": EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
        "s3 read timeout": ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
        "s3 throttled": _client_error("SlowDown", 503),
        "s3 5xx": _client_error("InternalError", 500),
        "object store retries exhausted": _raised(
            lambda e: ObjectStoreError(f"S3 bucket 'b' still failing after 9 tries over 120s: {e}"),
            EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
        ),
        "delta commit conflict": CommitFailedError("Transaction failed: version already exists"),
        "delta storage outage": OSError("Generic S3 error: Error after 10 retries in 12.3s, max_retries:10"),
        "connection reset": ConnectionResetError(104, "Connection reset by peer"),
        "wrapped in a RuntimeError": _raised(lambda e: RuntimeError("step failed"), ConnectionRefusedError()),
    }


def _deterministic_cases():
    import ray.exceptions as rex
    from deltalake.exceptions import SchemaMismatchError

    from videolake.platform.objectstore.base import ObjectStoreError

    return {
        "bad credentials (cause suppressed)": _raised(
            lambda e: ObjectStoreError("S3 rejected the credentials (SignatureDoesNotMatch)"),
            _client_error("SignatureDoesNotMatch", 403),
            suppress=True,
        ),
        "access denied": _client_error("AccessDenied", 403),
        "missing bucket": _client_error("NoSuchBucket", 404),
        "schema mismatch": SchemaMismatchError("Cannot cast schema, number of fields does not match"),
        "listing error": ValueError("key 'landing/x' escapes the store root /data/store"),
        "bad configuration": KeyError("no scene detector named 'nope'"),
        "a bug in user code inside a ray task": rex.RayTaskError("fn", "tb", TypeError("unsupported operand")),
        "no landing folder": NoLandingDataError("no landing data for 2026-03-05"),
        "deterministic wrapper of a transient cause": _raised(
            lambda e: DeterministicError("the model path does not exist"), ConnectionResetError()
        ),
        "plain OSError (disk full)": OSError(28, "No space left on device"),
    }


@pytest.mark.parametrize("name", list(_transient_cases()))
def test_transient_errors(name):
    assert classify(_transient_cases()[name]) is ErrorKind.TRANSIENT


@pytest.mark.parametrize("name", list(_deterministic_cases()))
def test_deterministic_errors(name):
    assert classify(_deterministic_cases()[name]) is ErrorKind.DETERMINISTIC


def test_deterministic_failure_bypasses_retries_with_the_first_line_and_the_hint():
    failure = deterministic_failure(
        NoLandingDataError("no landing data for 2026-03-05: gone\nsecond line", hint="land the videos first")
    )
    assert isinstance(failure, dg.Failure) and failure.allow_retries is False
    assert failure.description == (
        "NoLandingDataError: no landing data for 2026-03-05: gone (deterministic: not "
        "retried)\nWhat to do: land the videos first"
    )
