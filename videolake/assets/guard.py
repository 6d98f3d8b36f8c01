"""``@step_guard``: what every videolake asset step does around its body, in one decorator.

1. Its process dies with the run worker (videolake.assets.lifetime), so a killed run leaves no orphan step behind.
2. Its errors are classified (videolake.assets.errors): deterministic ones fail the step at once with a clear message,
   transient ones go to the asset's RetryPolicy.

Put it directly under ``@dg.asset(...)``; the wrapped function keeps its signature, so Dagster still sees the
context, config and resource parameters.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from videolake.assets.errors import handle_step_error
from videolake.assets.lifetime import bind_to_run_worker


def _warn(args, kwargs):
    ctx = kwargs.get("context", args[0] if args else None)
    return getattr(getattr(ctx, "log", None), "warning", None)


def step_guard(fn: Callable) -> Callable:
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            bind_to_run_worker()
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 (classified)
                handle_step_error(exc, _warn(args, kwargs))

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bind_to_run_worker()
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 (classified)
            handle_step_error(exc, _warn(args, kwargs))

    return wrapper
