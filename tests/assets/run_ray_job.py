"""A launched-style run for tests/assets/test_run_ray.py: ``python run_ray_job.py <job>`` executes ``<job>`` with
videolake's step executor (the local profile's: fork server, one local Ray per run) in a temporary Dagster instance
and prints one JSON object: the run's success and the messages its steps and executor logged."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import dagster as dg
from dagster_ray import Lifecycle

from videolake.assets.executor import step_executor
from videolake.resources.local import StepLocalRay


@dg.op(required_resource_keys={"ray_cluster"})
def on_ray(context) -> int:
    context.resources.ray_cluster._connect(context)  # noqa: SLF001 - what resources/ray_on_demand.py does on demand
    import ray

    context.log.info(f"joined {ray.get_runtime_context().gcs_address} from pid {os.getpid()}")
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


def main(name: str) -> None:
    with tempfile.TemporaryDirectory() as home, dg.DagsterInstance.local_temp(home) as instance:
        job = dg.reconstructable(two_ray_steps if name == "two_ray_steps" else no_ray_step)
        with dg.execute_job(job, instance) as result:
            messages = [e.message for e in instance.all_logs(result.run_id) if e.message]
            print(json.dumps({"success": result.success, "messages": messages}))


if __name__ == "__main__":
    main(sys.argv[1])
