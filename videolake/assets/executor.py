"""The executor of launched runs: Dagster's multiprocess executor (one process per step), its step processes
forked from a fork server that has imported the code location and Great Expectations once per run.

Why not Dagster's default start method (``spawn``): every step process would start a fresh interpreter and import
Dagster and the code location again (about 2 s on a 2-core machine), and every gate step Great Expectations too
(another 3-5 s). A pipeline run has eleven steps, five of them gates; measured on one partition of the browser test's
sample data (2 cores, idle): gate steps took 2.5-3.0 s with ``spawn`` and 0.4-0.7 s with the fork server, the whole
run 90 s and 77 s. Each step is still its own process (its own resources, its own local Ray, killed with the run
worker: assets/lifetime.py), as with ``spawn``.

The fork server imports no Ray, torch or vLLM: those start threads, which a fork would copy half-way. Set
VIDEOLAKE_STEP_START_METHOD=spawn to go back to Dagster's default (e.g. for a plugin that is not fork-safe).
"""

from __future__ import annotations

import os

import dagster as dg

START_METHOD_ENV = "VIDEOLAKE_STEP_START_METHOD"
# Imported once in the fork server of a run, inherited by every step process it forks.
FORKSERVER_PRELOAD = ("videolake.definitions", "great_expectations", "great_expectations.expectations")


def start_method() -> str:
    method = os.environ.get(START_METHOD_ENV, "forkserver")
    if method not in ("forkserver", "spawn"):
        raise ValueError(f"{START_METHOD_ENV}={method!r}: use 'forkserver' (default) or 'spawn'")
    return method


def step_executor() -> dg.ExecutorDefinition:
    """The multiprocess executor with the start method of VIDEOLAKE_STEP_START_METHOD (default: the fork server)."""
    method = start_method()
    start = {"forkserver": {"preload_modules": list(FORKSERVER_PRELOAD)}} if method == "forkserver" else {"spawn": {}}
    return dg.multiprocess_executor.configured({"start_method": start}, name="videolake_step_executor")
