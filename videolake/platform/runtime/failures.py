"""Failure classes: whether trying the same work again can succeed.

Every failure row of the lake (a rejected raw_videos row, a scene_clips row with ``detect_error``, a filtered_clips
row rejected as ``score_error``, a ``failed`` clip_captions row) records ``failure_class``:

- ``transient``: a retry can succeed: a timeout, a connection error or a 5xx/429 answer from an endpoint or the
  object store, a lost Ray worker, actor or node, out of memory. A re-run of the same stage version computes the
  unit (or, in clip_captions, the clip) again; the materialization counts them (``units_retried``,
  ``clips_retried``).
- ``permanent``: the same input fails the same way: an undecodable or truncated file, an empty or invalid model
  output, a bad parameter. A re-run reuses the row, so a bad file costs its decode once, not once per run.

``failure_class(exc)`` decides from the exception and its causes (``raise ... from``, the implicit context, Ray's
``RayTaskError.cause``). Only errors known to be transient are; anything else is permanent: a bug or a bad input
does not heal by waiting, and counting an unknown error as transient would recompute it on every run forever.
The step-level retry policy (``videolake.assets.errors``) asks the same question through ``is_transient_chain``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

TRANSIENT = "transient"
PERMANENT = "permanent"

# Ray: a worker, actor, node or object lost with its process: the work can run again elsewhere.
_RAY_TRANSIENT = (
    "WorkerCrashedError",
    "RayActorError",
    "ActorDiedError",
    "ActorUnavailableError",
    "NodeDiedError",
    "ObjectLostError",
    "OwnerDiedError",
    "ObjectFetchTimedOutError",
    "ObjectReconstructionFailedError",
    "LocalRayletDiedError",
    "RaySystemError",
    "OutOfMemoryError",
    "ObjectStoreFullError",
    "GetTimeoutError",
)
# botocore: the request never got a usable answer.
_BOTO_TRANSIENT = (
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ConnectionClosedError",
    "ProxyConnectionError",
    "IncompleteReadError",
    "ResponseStreamingError",
)
# httpx (the openai backend's client): connect errors, timeouts, dropped connections.
_HTTPX_TRANSIENT = ("TransportError",)
# torch: a GPU out of memory (torch.cuda.OutOfMemoryError, torch.OutOfMemoryError).
_TORCH_TRANSIENT = ("OutOfMemoryError",)
# delta-rs reports object-store failures as a plain OSError; these messages mean the store did not answer.
_DELTA_STORAGE_TRANSIENT = re.compile(
    r"(?i)(error after \d+ retries|connection (refused|reset|closed|error)|timed? ?out|dns error|"
    r"service unavailable|slow ?down|too many requests|\b50[234]\b|\b429\b)"
)


def chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes, outermost first (each once)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
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


def is_transient(e: BaseException) -> bool:
    """Whether this one exception (not its causes) is known to be transient."""
    marked = getattr(e, "transient", None)
    if isinstance(marked, bool):
        return marked  # videolake's own errors say so (e.g. EndpointError after its retries)
    known = (
        _classes("ray.exceptions", _RAY_TRANSIENT)
        + _classes("botocore.exceptions", _BOTO_TRANSIENT)
        + _classes("httpx", _HTTPX_TRANSIENT)
        + _classes("torch", _TORCH_TRANSIENT)
        + _classes("torch.cuda", _TORCH_TRANSIENT)
    )
    if isinstance(e, known):
        return True
    if isinstance(e, _classes("botocore.exceptions", ("ClientError",))):
        from videolake.platform.objectstore.s3 import is_transient as s3_transient

        return s3_transient(e)  # throttling codes and 5xx answers
    if isinstance(e, _classes("deltalake.exceptions", ("CommitFailedError",))):
        return True  # a concurrent writer won the commit race: the next attempt commits on top of it
    if type(e) is OSError and _DELTA_STORAGE_TRANSIENT.search(str(e)):
        return True
    if isinstance(e, (ConnectionError, TimeoutError, MemoryError)):
        return True  # includes ConnectionResetError / RefusedError / AbortedError, socket timeouts
    if isinstance(e, _classes("videolake.platform.runtime.units", ("LostUnitsError",))):
        return True  # many Ray workers died at once (a lost node): a retry reuses every finished unit
    return False


def is_permanent_marked(e: BaseException) -> bool:
    return getattr(e, "transient", None) is False


def failure_class(exc: BaseException) -> str:
    """``transient`` when the error or one of its causes is known to be transient (and nothing outside it said it
    is not), else ``permanent``."""
    for e in chain(exc):
        if is_permanent_marked(e):
            return PERMANENT
        if is_transient(e):
            return TRANSIENT
    return PERMANENT
