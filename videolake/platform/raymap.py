"""Run one function over many items as Ray tasks, with per-item failure capture and progress.

Why tasks rather than an actor pool for the CPU stage: each video is one independent unit of decode work and
tasks need no warm state; on a 2-core machine an actor pool with whole CPUs per actor starves Ray Data's read
tasks (STACK-NOTES), while plain tasks at num_cpus=1 use every core without that risk.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskFailure:
    """An item whose function raised: the caller turns it into a recorded rejection, never a silent drop."""

    error: str
    traceback: str


def _guarded(fn: Callable[..., Any], item: Any, kwargs: dict[str, Any]) -> Any:
    try:
        return fn(item, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the failure is returned as data, with its reason
        return TaskFailure(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())


def ensure_ray(num_cpus: int | None = None) -> None:
    """Use the Ray cluster the caller connected to (Dagster's RayResource); start a local one otherwise."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)


def ray_map(
    fn: Callable[..., Any],
    items: Sequence[Any],
    *,
    num_cpus: float = 1.0,
    kwargs: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_retries: int = 2,
) -> list[Any]:
    """``[fn(item, **kwargs) for item in items]`` on Ray, results in input order; a raising item yields TaskFailure.

    ``max_retries`` re-runs tasks whose worker died (system failures such as a lost node); application errors are
    not retried here, they come back as TaskFailure.
    """
    if not items:
        return []
    import ray

    ensure_ray()
    remote = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(_guarded)
    fn_ref = ray.put(fn)
    kw_ref = ray.put(kwargs or {})
    refs = [remote.remote(fn_ref, item, kw_ref) for item in items]
    index = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(refs)
    pending = list(refs)
    done_count = 0
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            try:
                results[index[ref]] = ray.get(ref)
            except Exception as exc:  # worker crash after retries: still a recorded failure for this item
                results[index[ref]] = TaskFailure(error=f"{type(exc).__name__}: {exc}", traceback="")
            done_count += 1
            if progress:
                progress(done_count, len(refs))
    return results


def local_map(
    fn: Callable[..., Any],
    items: Sequence[Any],
    *,
    kwargs: dict[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    **_ray_options: Any,
) -> list[Any]:
    """The same contract as ray_map, in-process (benchmarks' baseline and debugging)."""
    out = []
    for i, item in enumerate(items, 1):
        out.append(_guarded(fn, item, kwargs or {}))
        if progress:
            progress(i, len(items))
    return out
