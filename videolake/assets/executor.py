"""The executor of launched runs: Dagster's multiprocess executor (one process per step), its step processes
forked from a fork server that has imported the code location and Great Expectations once per run, and, in the
local profile, one local Ray per run that the run's Ray steps join.

Why not Dagster's default start method (``spawn``): every step process would start a fresh interpreter and import
Dagster and the code location again (about 2 s on a 2-core machine), and every gate step Great Expectations too
(another 3-5 s). A pipeline run has eleven steps, five of them gates; measured on one partition of the browser test's
sample data (2 cores, idle): gate steps took 2.5-3.0 s with ``spawn`` and 0.4-0.7 s with the fork server, the whole
run 90 s and 77 s. The fork server also imports what every step process of a run imported again after the fork
(step_preload.py: Dagster's step machinery, its SQL storage, the asset and resource modules): ~0.6 CPU-s less in
each step process. Each step is still its own process (its own resources, killed with the run worker:
assets/lifetime.py), as with ``spawn``. The fork server imports no Ray, torch or vLLM. Set
VIDEOLAKE_STEP_START_METHOD=spawn to go back to Dagster's default (e.g. for a plugin that is not fork-safe).

Why one Ray per run (local profile): a step that starts its own local Ray pays ``ray.init`` and ``ray.shutdown``
(5-6 s of a 2-core machine's CPU), and a run has five steps on Ray (raw_videos, scene_clips, filtered_clips,
clip_captions, training_shards). The run worker starts one local Ray before the first step when the run has a step
that uses ``ray_cluster`` or ``caption_ray``, and stops it when the steps are done; its address reaches the steps
through VIDEOLAKE_RUN_RAY_ADDRESS, and the local profile's Ray resources join it (resources/local.py). Measured on the
same partition: 77 s with a Ray per step, 67 s with the run's Ray (CPU asset steps ~8 s -> ~4 s). Ray's head
processes share the run worker's fate: a killed run worker takes its Ray, and the actors of its steps, with it. A
step still joins only when its stage has work (resources/ray_on_demand.py); the run's Ray itself starts even for a
day without work (~5 s). The prod profile is unchanged: each step gets its own KubeRay cluster.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import dagster as dg

START_METHOD_ENV = "VIDEOLAKE_STEP_START_METHOD"
RUN_RAY_RESOURCES = ("ray_cluster", "caption_ray")  # the local profile's Ray resources: their steps join the run's Ray
# Imported once in the fork server of a run, inherited by every step process it forks (step_preload: what each step
# process imported again after the fork, ~0.6 CPU-s of each). step_preload imports videolake.definitions too; it stays
# named here because the fork server skips a module that fails to import, and the code location must still be preloaded
# then.
FORKSERVER_PRELOAD = (
    "videolake.definitions",
    "great_expectations",
    "great_expectations.expectations",
    "videolake.assets.step_preload",
)


def start_method() -> str:
    method = os.environ.get(START_METHOD_ENV, "forkserver")
    if method not in ("forkserver", "spawn"):
        raise ValueError(f"{START_METHOD_ENV}={method!r}: use 'forkserver' (default) or 'spawn'")
    return method


def _multiprocess_config() -> dict:
    method = start_method()
    start = {"forkserver": {"preload_modules": list(FORKSERVER_PRELOAD)}} if method == "forkserver" else {"spawn": {}}
    return {"start_method": start}


def step_executor(run_ray: bool = False) -> dg.ExecutorDefinition:
    """The multiprocess executor with the start method of VIDEOLAKE_STEP_START_METHOD (default: the fork server);
    with ``run_ray`` (the local profile), one local Ray per run for the steps that use a Ray resource."""
    if not run_ray:
        return dg.multiprocess_executor.configured(_multiprocess_config(), name="videolake_step_executor")

    @dg.executor(
        name="videolake_run_ray_executor",
        config_schema=dg.multiprocess_executor.config_schema.as_field(),
        requirements=dg.multiple_process_executor_requirements(),
    )
    def run_ray_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
        return RunRayExecutor(dg.multiprocess_executor.executor_creation_fn(init_context))  # type: ignore[misc]

    return run_ray_executor.configured(_multiprocess_config(), name="videolake_step_executor")


class RunRayExecutor(dg.Executor):
    """A multiprocess executor whose run starts one local Ray for its steps that use ``RUN_RAY_RESOURCES`` (see the
    module doc)."""

    def __init__(self, inner: dg.Executor) -> None:
        self._inner = inner

    @property
    def retries(self):
        return self._inner.retries

    @property
    def step_dependency_config(self):
        return self._inner.step_dependency_config

    def execute(self, plan_context, execution_plan) -> Iterator[dg.DagsterEvent]:
        if not _uses_resource(plan_context.job.get_definition(), execution_plan, RUN_RAY_RESOURCES):
            yield from self._inner.execute(plan_context, execution_plan)
            return
        with run_local_ray(plan_context.log):
            yield from self._inner.execute(plan_context, execution_plan)


def _uses_resource(job_def: dg.JobDefinition, execution_plan, keys: tuple[str, ...]) -> bool:
    for step in execution_plan.get_steps_to_execute_in_topo_order():
        op = job_def.get_node(step.node_handle).definition
        if set(keys) & set(getattr(op, "required_resource_keys", ())):
            return True
    return False


@contextlib.contextmanager
def run_local_ray(log) -> Iterator[str]:
    """Start a local Ray in this process (the run worker) and publish its address to the step processes it starts
    afterwards (VIDEOLAKE_RUN_RAY_ADDRESS); stop it at the end."""
    import ray

    from videolake.platform.runtime.units import ensure_ray
    from videolake.resources.local import RUN_RAY_ENV, local_ray_cpus

    cpus = local_ray_cpus()
    ensure_ray(num_cpus=cpus)  # the engine's own local start: a new Ray, never one $RAY_ADDRESS or `ray start` names
    address = ray.get_runtime_context().gcs_address
    log.info(f"started this run's local Ray at {address} ({cpus} CPUs): its Ray steps join it")
    os.environ[RUN_RAY_ENV] = address
    try:
        yield address
    finally:
        os.environ.pop(RUN_RAY_ENV, None)
        ray.shutdown()
