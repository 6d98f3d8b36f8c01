"""Test-only: the backfill daemon of the browser test's `dg dev` looks for work every few seconds (10), not every 30.

Dagster 1.13's backfill daemon sleeps ``DEFAULT_DAEMON_INTERVAL_SECONDS`` (30 s, a module constant of
dagster._daemon.controller, not an instance setting) between iterations, so a backfill launched from the UI waits up to
30 s for its runs to be submitted and up to 30 s more after its last run for its status. The browser test launches two
backfills: four such waits. Python imports this module at start-up in every process whose PYTHONPATH holds this folder
(tests/browser/conftest.py puts it there for `dg dev` only, with VIDEOLAKE_TEST_DAEMON_INTERVAL_S set); it sets the
constant right after Dagster's module has run, and does nothing else. What a backfill does in an iteration is unchanged.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_TARGET = "dagster._daemon.controller"
_SECONDS = os.environ.get("VIDEOLAKE_TEST_DAEMON_INTERVAL_S")


class _SetInterval(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)  # find the real module with the other finders, once
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            module.DEFAULT_DAEMON_INTERVAL_SECONDS = float(_SECONDS)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if _SECONDS:
    sys.meta_path.insert(0, _SetInterval())
