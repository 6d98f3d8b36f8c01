"""Which step failures are worth a retry: transient ones are, deterministic ones fail at once with a clear message.

A retry of a deterministic failure (bad configuration, a listing error, a schema mismatch, a missing landing
folder, a failed gate) fails the same way again, costs minutes of Ray and GPU time and buries the cause under three
identical failures. A transient failure (a lost Ray worker, actor or node; storage throttling or an outage; a Delta
commit conflict) is what the assets' RetryPolicy (with backoff) exists for.

``classify`` walks the exception and its causes (``raise ... from``, implicit context, Ray's ``RayTaskError.cause``)
and answers TRANSIENT only for errors known to be transient; anything else is DETERMINISTIC: a bug or a bad input
does not heal by waiting. ``handle_step_error`` (applied to every asset by ``@step_guard``, see
videolake.assets.guard) turns a deterministic error into a ``dg.Failure(allow_retries=False)``, which Dagster 1.13 raises past the op's RetryPolicy
(dagster/_core/execution/plan/utils.py), so the step fails after exactly one attempt; a transient error is re-raised
unchanged for the RetryPolicy.
"""

from __future__ import annotations

import enum
import re
import sys
from collections.abc import Callable, Iterator

import dagster as dg

TRANSIENT_TAG = "transient"
DETERMINISTIC_TAG = "deterministic"


class ErrorKind(enum.Enum):
    TRANSIENT = TRANSIENT_TAG
    DETERMINISTIC = DETERMINISTIC_TAG


class DeterministicError(Exception):
    """Raised by videolake code for a failure that a retry cannot fix; ``hint`` says what to do instead."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


# Ray: a worker, actor, node or object lost with its process: the work can run again elsewhere.
_RAY_TRANSIENT = (
    "WorkerCrashedError", "RayActorError", "ActorDiedError", "ActorUnavailableError", "NodeDiedError",
    "ObjectLostError", "OwnerDiedError", "ObjectFetchTimedOutError", "ObjectReconstructionFailedError",
    "LocalRayletDiedError", "RaySystemError", "OutOfMemoryError", "ObjectStoreFullError", "GetTimeoutError",
)
# botocore: the request never got a usable answer.
_BOTO_TRANSIENT = (
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
    "ProxyConnectionError", "IncompleteReadError", "ResponseStreamingError",
)
# delta-rs reports object-store failures as a plain OSError; these messages mean the store did not answer.
_DELTA_STORAGE_TRANSIENT = re.compile(
    r"(?i)(error after \d+ retries|connection (refused|reset|closed|error)|timed? ?out|dns error|"
    r"service unavailable|slow ?down|too many requests|\b50[234]\b|\b429\b)"
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes, outermost first (each once)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        cause = getattr(e, "cause", None)  # ray.exceptions.RayTaskError carries the remote exception here
        if isinstance(cause, BaseException):
            todo.append(cause)
        if e.__cause__ is not None:
            todo.append(e.__cause__)
        elif e.__context__ is not None and not e.__suppress_context__:
            todo.append(e.__context__)


def _classes(module: str, names: tuple[str, ...]) -> tuple[type, ...]:
    """Exception classes of an already-imported library (an error of a library never imported cannot occur)."""
    mod = sys.modules.get(module)
    return tuple(c for c in (getattr(mod, n, None) for n in names) if isinstance(c, type)) if mod else ()


def _is_transient(e: BaseException) -> bool:
    if isinstance(e, _classes("ray.exceptions", _RAY_TRANSIENT) + _classes("botocore.exceptions", _BOTO_TRANSIENT)):
        return True
    if isinstance(e, _classes("botocore.exceptions", ("ClientError",))):
        from videolake.platform.objectstore.s3 import is_transient

        return is_transient(e)  # throttling codes and 5xx answers
    if isinstance(e, _classes("deltalake.exceptions", ("CommitFailedError",))):
        return True  # a concurrent writer won the commit race: the next attempt commits on top of it
    if type(e) is OSError and _DELTA_STORAGE_TRANSIENT.search(str(e)):
        return True
    if isinstance(e, (ConnectionError, TimeoutError)):
        return True  # includes ConnectionResetError / RefusedError / AbortedError, socket timeouts
    if isinstance(e, _classes("videolake.platform.units", ("LostUnitsError",))):
        return True  # many Ray workers died at once (a lost node): a retry reuses every finished unit
    return False


def classify(exc: BaseException) -> ErrorKind:
    """TRANSIENT when the error, or one of its causes, is a known transient one (and nothing outside it marked it
    deterministic); DETERMINISTIC otherwise."""
    for e in _chain(exc):
        if isinstance(e, DeterministicError):
            return ErrorKind.DETERMINISTIC
        if _is_transient(e):
            return ErrorKind.TRANSIENT
    return ErrorKind.DETERMINISTIC


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def deterministic_failure(exc: BaseException) -> dg.Failure:
    """The dg.Failure that fails a step at once: the error's first line, what it is, and a hint when known."""
    hint = next((e.hint for e in _chain(exc) if isinstance(e, DeterministicError) and e.hint), "")
    description = f"{first_line(exc)} (deterministic: not retried)"
    metadata = {"error_kind": DETERMINISTIC_TAG, "error_type": type(exc).__name__}
    if hint:
        description += f"\nWhat to do: {hint}"
        metadata["hint"] = hint
    return dg.Failure(description=description, metadata=metadata, allow_retries=False)


def handle_step_error(exc: Exception, log: Callable[[str], None] | None = None) -> None:
    """Re-raise ``exc`` as the step should fail: transient unchanged (the RetryPolicy retries it), deterministic as
    a ``dg.Failure(allow_retries=False)``. Dagster's own control flow (Failure, RetryRequested) passes through."""
    if isinstance(exc, (dg.Failure, dg.RetryRequested)):
        raise exc
    if classify(exc) is ErrorKind.TRANSIENT:
        if log:
            log(f"transient error, retried by the asset's retry policy: {first_line(exc)}")
        raise exc
    raise deterministic_failure(exc) from exc
