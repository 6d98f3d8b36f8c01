"""LocalRunLauncher: Dagster's DefaultRunLauncher plus the run-worker health check that run monitoring needs.

Dagster's run monitoring (dagster.yaml ``run_monitoring``) fails a STARTED run whose worker died only when the run
launcher can check worker health; the DefaultRunLauncher cannot (``supports_check_run_worker_health`` is False),
so on one machine a killed run stayed STARTED and kept its ``gpu`` pool slot for good. This launcher launches runs
exactly like the DefaultRunLauncher (through the code server) and answers the health check from the run's recorded
worker pid (videolake.instance.health). The monitoring daemon then marks a dead run FAILED, the concurrency
iteration frees its slots after ``free_slots_after_run_end_seconds``, and run retries relaunch it from the failed
step. It also judges in-process runs (``videolake demo``) in the same instance, which nothing else would.

For one machine only (the local dagster.yaml): a pid is meaningless on another host, so runs tagged with another
host are reported RUNNING and left alone. Production uses the K8sRunLauncher (k8s/), which checks the Job.
"""

from __future__ import annotations

from dagster import DefaultRunLauncher
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, WorkerStatus

from videolake.instance.health import HOST_TAG, WorkerState, check_worker, this_host


class LocalRunLauncher(DefaultRunLauncher):
    def launch_run(self, context: LaunchRunContext) -> None:
        # The code servers of a local deployment run on this machine: record it, so the pid check applies.
        self._instance.add_run_tags(context.dagster_run.run_id, {HOST_TAG: this_host()})
        super().launch_run(context)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run) -> CheckRunHealthResult:
        check = check_worker(self._instance, run)
        if check.state is WorkerState.DEAD:
            return CheckRunHealthResult(WorkerStatus.FAILED, check.reason)
        # Run monitoring fails every status other than RUNNING/SUCCESS: a run this machine cannot judge (another
        # host, pid not recorded yet) must read RUNNING, never UNKNOWN.
        return CheckRunHealthResult(WorkerStatus.RUNNING, check.reason)
