"""A launched-style run for tests/assets/test_run_ray.py: ``python run_ray_job.py <job>`` executes ``<job>`` with
videolake's step executor (the local profile's: fork server, one local Ray per run) in a temporary Dagster instance
and prints one JSON object: the run's success and the messages its steps and executor logged."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import dagster as dg
from dagster_ray import Lifecycle

from videolake.assets.executor import step_executor
from videolake.assets.guard import step_guard
from videolake.resources.local import StepLocalRay


def _join(context) -> str:
    """Join Ray through the step's ``ray_cluster`` (what resources/ray_on_demand.py does when a stage has work);
    returns the GCS address joined."""
    context.resources.ray_cluster._connect(context)  # noqa: SLF001
    import ray

    return ray.get_runtime_context().gcs_address


@dg.op(required_resource_keys={"ray_cluster"})
def on_ray(context) -> int:
    context.log.info(f"joined {_join(context)} from pid {os.getpid()}")
    return 1


@dg.op(required_resource_keys={"ray_cluster"})
@step_guard  # as every asset step: the step process dies with its run worker
def on_ray_then_wait(context) -> int:
    """Joins the run's Ray, writes "<gcs address> <step pid>" to $RUN_RAY_TEST_REPORT, then waits to be killed."""
    address, report = _join(context), os.environ["RUN_RAY_TEST_REPORT"]
    with open(report + ".tmp", "w") as f:
        f.write(f"{address} {os.getpid()}")
    os.replace(report + ".tmp", report)
    time.sleep(600)
    return 1


@dg.op
def without_ray() -> int:
    return 1


def _resources():
    options = {"num_cpus": 1, "include_dashboard": False, "ignore_reinit_error": True}
    return {
        "ray_cluster": StepLocalRay(ray_init_options=options, lifecycle=Lifecycle(connect=False), join_run_ray=True)
    }


@dg.job(executor_def=step_executor(run_ray=True), resource_defs=_resources())
def two_ray_steps():
    on_ray.alias("first")()
    on_ray.alias("second")()
    without_ray()


@dg.job(executor_def=step_executor(run_ray=True), resource_defs=_resources())
def no_ray_step():
    without_ray()


@dg.job(executor_def=step_executor(run_ray=True), resource_defs=_resources())
def ray_step_that_waits():
    on_ray_then_wait()


JOBS = {"two_ray_steps": two_ray_steps, "no_ray_step": no_ray_step, "ray_step_that_waits": ray_step_that_waits}


def main(name: str) -> None:
    with tempfile.TemporaryDirectory() as home, dg.DagsterInstance.local_temp(home) as instance:
        job = dg.reconstructable(JOBS[name])
        with dg.execute_job(job, instance) as result:
            messages = [e.message for e in instance.all_logs(result.run_id) if e.message]
            print(json.dumps({"success": result.success, "messages": messages}))


if __name__ == "__main__":
    main(sys.argv[1])
