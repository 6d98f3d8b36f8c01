"""VideolakeInstance: Dagster's instance, with a run's failure written in an order that run retries can rely on.

Dagster records a failed run in three writes: the RUN_FAILURE event, then the run's status (FAILURE), then the
run's ``dagster/will_retry`` tag. The run-retry daemon (EventLogConsumerDaemon, every 5 s) reads the RUN_FAILURE
events after its cursor, reads the runs they name, keeps those that are FAILED with ``will_retry``, and moves its
cursor past the events whatever it kept. A pass that falls between the first write and the others finds the run
still STARTED, skips it and never reads that event again: the run is never retried. It happened here on a busy
2-core machine (the three SQLite writes ~200 ms apart): a run whose worker had been killed stayed FAILED with
``will_retry: true`` and no retry run.

This instance sets the status and the retry decision first, with the same calls Dagster makes, and then lets
Dagster handle the event as always (its own two writes repeat the same values). By the time the event is visible,
the run is FAILED and carries its retry decision. Named by ``instance_class`` in dagster.yaml (the local instance;
the K8s deployment's daemon runs Dagster's own image and instance, docs/kubernetes.md). Its default storage is
Dagster's sqlite storage created under a file lock (``config_defaults``, videolake/instance/sqlite_init.py).
"""

from __future__ import annotations

from dagster import DagsterInstance


class VideolakeInstance(DagsterInstance):
    # A custom instance class declares its own settings (none here) and its defaults (Dagster's, but for the
    # storage), as Dagster's InstanceRef asks of one.
    @classmethod
    def config_schema(cls) -> dict:
        return {}

    @staticmethod
    def config_defaults(base_dir: str):
        from dagster._core.instance.ref import InstanceRef

        from videolake.instance.sqlite_init import storage_data

        # Dagster's defaults, with the sqlite storage created under a lock (videolake/instance/sqlite_init.py):
        # two processes opening a fresh DAGSTER_HOME at once otherwise corrupt its alembic versions.
        return {**InstanceRef.config_defaults(base_dir), "storage": storage_data(base_dir)}

    def handle_new_event(self, event, *, batch_metadata=None) -> None:
        dagster_event = event.dagster_event
        if (
            dagster_event is not None
            and dagster_event.is_run_failure
            and not self.event_log_storage.handles_run_events_in_store_event
        ):
            _fail_run_first(self, event)
        super().handle_new_event(event, batch_metadata=batch_metadata)


def _fail_run_first(instance: DagsterInstance, event) -> None:
    """The run-storage half of Dagster's handling of a RUN_FAILURE event (EventMethods.handle_new_event)."""
    from dagster._core.events import RunFailureReason
    from dagster._core.storage.tags import RUN_FAILURE_REASON_TAG, WILL_RETRY_TAG
    from dagster._time import datetime_from_timestamp

    instance.run_storage.handle_run_event(event.run_id, event.dagster_event, datetime_from_timestamp(event.timestamp))
    if not instance.run_retries_enabled:
        return
    run = instance.get_run_by_id(event.run_id)
    if run is None:
        return
    reason = run.tags.get(RUN_FAILURE_REASON_TAG)
    will_retry = instance._should_retry_run(run, RunFailureReason(reason) if reason else None)
    instance.add_run_tags(event.run_id, {WILL_RETRY_TAG: str(will_retry).lower()})
