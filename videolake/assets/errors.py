"""Which step failures are worth a retry: transient ones are, deterministic ones fail at once with a clear message.

A retry of a deterministic failure (bad configuration, a listing error, a schema mismatch, a missing landing
folder, a failed gate) fails the same way again, costs minutes of Ray and GPU time and buries the cause under three
identical failures. A transient failure (a lost Ray worker, actor or node; storage throttling or an outage; a Delta
commit conflict) is what the assets' RetryPolicy (with backoff) exists for.

``classify`` asks ``videolake.platform.runtime.failures`` (the rule that also classes failure rows): it walks the exception
and its causes (``raise ... from``, implicit context, Ray's ``RayTaskError.cause``) and answers TRANSIENT only for errors known to be transient; anything else is DETERMINISTIC: a bug or a bad input
does not heal by waiting. ``handle_step_error`` (applied to every asset by ``@step_guard``, see
videolake.assets.guard) turns a deterministic error into a ``dg.Failure(allow_retries=False)``, which Dagster 1.13 raises past the op's RetryPolicy
(dagster/_core/execution/plan/utils.py), so the step fails after exactly one attempt; a transient error is re-raised
unchanged for the RetryPolicy.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import dagster as dg

from videolake.platform.runtime.failures import chain, is_permanent_marked, is_transient

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


def classify(exc: BaseException) -> ErrorKind:
    """TRANSIENT when the error, or one of its causes, is a known transient one (and nothing outside it marked it
    deterministic); DETERMINISTIC otherwise."""
    for e in chain(exc):
        if isinstance(e, DeterministicError) or is_permanent_marked(e):
            return ErrorKind.DETERMINISTIC
        if is_transient(e):
            return ErrorKind.TRANSIENT
    return ErrorKind.DETERMINISTIC


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def deterministic_failure(exc: BaseException) -> dg.Failure:
    """The dg.Failure that fails a step at once: the error's first line, what it is, and a hint when known."""
    hint = next((e.hint for e in chain(exc) if isinstance(e, DeterministicError) and e.hint), "")
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
