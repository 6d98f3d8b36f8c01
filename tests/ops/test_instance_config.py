"""The instance settings that keep a dead run from wedging a pool, as Dagster itself reads them: the local
dagster.yaml (LocalRunLauncher, run monitoring with slot freeing, run retries) and the production pair (Helm values
and k8s/dagster-postgres.yaml) agreeing on them."""

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
