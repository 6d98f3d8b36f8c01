"""The instance settings that keep a dead run from wedging a pool, as Dagster itself reads them: the local
dagster.yaml (LocalRunLauncher, run monitoring with slot freeing, run retries, the day-aware run queue, the locked
sqlite storage) and the production pair (Helm values and k8s/dagster-postgres.yaml) agreeing on them."""

from __future__ import annotations

import shutil

import dagster as dg
import yaml
from cli_helpers import REPO


def test_local_instance_monitors_runs_frees_slots_and_retries(tmp_path):
    shutil.copyfile(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_launcher).__name__ == "LocalRunLauncher"
        assert instance.run_launcher.supports_check_run_worker_health
        assert instance.run_monitoring_enabled and instance.run_monitoring_max_resume_run_attempts == 0
        assert instance.run_monitoring_poll_interval_seconds == 10
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 5
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
        assert instance.run_retries_retry_on_asset_or_op_failure is False
        assert instance.event_log_storage.get_concurrency_info("gpu").limit == 1
        # the run queue: Dagster's daemon dequeues, one run per partition day (tests/ops/test_run_queue_days.py)
        assert type(instance.run_coordinator).__name__ == "DayQueueCoordinator"
        assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 2
        # sqlite storage created under a lock (tests/ops/test_instance_storage_init.py), where Dagster puts it
        assert type(instance._ref.storage).__name__ == "LockedSqliteStorage"
        assert (tmp_path / "history" / "runs.db").exists() and (tmp_path / "storage.lock").exists()
        from dagster._daemon.auto_run_reexecution.event_log_consumer import EventLogConsumerDaemon
        from dagster._daemon.daemon import MonitoringDaemon

        required = set(instance.get_required_daemon_types())
        assert {MonitoringDaemon.daemon_type(), EventLogConsumerDaemon.daemon_type()} <= required


def test_production_frees_slots_of_dead_runs_and_retries_instead_of_resuming():
    values = yaml.safe_load((REPO / "k8s" / "values.yaml").read_text())["dagsterDaemon"]
    instance = yaml.safe_load((REPO / "k8s" / "dagster-postgres.yaml").read_text())
    helm, inst = values["runMonitoring"], instance["run_monitoring"]
    assert helm["freeSlotsAfterRunEndSeconds"] == inst["free_slots_after_run_end_seconds"] == 60
    assert helm["maxResumeRunAttempts"] == inst["max_resume_run_attempts"] == 0
    assert values["runRetries"]["enabled"] and instance["run_retries"]["enabled"]
    assert instance["run_launcher"]["class"] == "K8sRunLauncher"  # its health check reads the run Job's status


def test_production_queue_runs_one_run_per_partition_day():
    """Dagster's own queue in production (its daemon has no videolake): one run per dagster/partition value, in the
    Helm values and in k8s/dagster-postgres.yaml (tests/ops/test_run_queue_days.py runs the latter's queue)."""
    one_per_day = {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    values = yaml.safe_load((REPO / "k8s" / "values.yaml").read_text())
    instance = yaml.safe_load((REPO / "k8s" / "dagster-postgres.yaml").read_text())
    assert one_per_day in values["concurrency"]["runs"]["tagConcurrencyLimits"]
    assert one_per_day in instance["concurrency"]["runs"]["tag_concurrency_limits"]
    assert instance["run_coordinator"]["class"] == values["dagsterDaemon"]["runCoordinator"]["type"]


def test_a_failed_run_is_failed_with_its_retry_decided_before_its_failure_event_is_seen(tmp_path, monkeypatch):
    """The local instance (VideolakeInstance) marks a run FAILED and decides its retry before the RUN_FAILURE event
    is stored: the run-retry daemon's own filter, applied by a second instance over the same storage at the moment
    the event is stored (the earliest moment the daemon can read it), keeps the run for a retry. Dagster's instance
    stores the event first: that look found the run STARTED, the filter dropped it, and the daemon's cursor moved on."""
    from dagster._core.events import DagsterEvent, DagsterEventType
    from dagster._daemon.auto_run_reexecution.auto_run_reexecution import filter_runs_to_should_retry

    @dg.op
    def noop() -> None:
        pass

    @dg.job
    def one_op():
        noop()

    shutil.copyfile(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    with (
        dg.DagsterInstance.from_config(str(tmp_path)) as instance,
        dg.DagsterInstance.from_config(str(tmp_path)) as daemon_view,
    ):
        assert type(instance).__name__ == "VideolakeInstance"
        run = instance.create_run_for_job(one_op)
        instance.report_dagster_event(
            DagsterEvent(DagsterEventType.PIPELINE_START.value, job_name=run.job_name), run_id=run.run_id
        )
        seen = []
        storage = instance.event_log_storage
        store = storage.store_event

        def store_then_look(event) -> None:
            store(event)
            if event.dagster_event is not None and event.dagster_event.is_run_failure:
                (record,) = daemon_view.get_run_records(dg.RunsFilter(run_ids=[run.run_id]))
                kept = filter_runs_to_should_retry([record.dagster_run], daemon_view)
                seen.append((record.dagster_run.status, [r.run_id for r in kept]))

        monkeypatch.setattr(storage, "store_event", store_then_look)
        instance.report_run_failed(run)
        assert seen == [(dg.DagsterRunStatus.FAILURE, [run.run_id])]
        final = instance.get_run_by_id(run.run_id)
        assert final.status == dg.DagsterRunStatus.FAILURE and final.tags["dagster/will_retry"] == "true"
        assert [e.dagster_event.event_type_value for e in instance.all_logs(run.run_id)][-1] == "PIPELINE_FAILURE"
