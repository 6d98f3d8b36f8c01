"""Alerts: a failed run and a failed gate post a message to a chat webhook (Slack-compatible: ``{"text": ...}``).

Open-source Dagster has no alert policies; sensors do it. Three sensors, all running by default:

- ``videolake_run_failure_alert`` (a run-failure sensor): every failed run of the code location that Dagster will not
  retry, with its job, its partitions, the step that failed and the error's first line. A run that the run-retry
  daemon will re-execute (dagster.yaml ``run_retries``: a dead worker, up to ``max_retries`` times) is not alerted:
  its retry may well succeed, and a retry that fails again is a failed run of its own, alerted when it is the last
  (``will_be_retried``);
- ``videolake_gate_failure_alert``: every gate (asset check) evaluation that did not pass, blocking or warning, with
  its asset, partition and description, posted when its run ends. A blocking gate also fails its run (and so raises
  the run alert); a warning does not, and is seen only here;
- ``videolake_freshness_alert``: every daily table that became overdue (its freshness policy, see
  videolake.assets.freshness, went to FAIL or WARN as the daemon's freshness evaluation recorded it) and every one
  that is fresh again. Nothing else tells anyone that the schedule did not run at all.

The two event sensors share one cursor rule: the first tick starts from the newest event (history is not replayed),
later ticks read what came after their cursor, at most MAX_EVENTS_PER_TICK at a time. Both read only events that
every Dagster storage keeps in its global index: freshness changes, and for the gates the runs' end events (the
gates' own evaluations are then read run by run). The default local instance (sqlite) keeps check evaluations in
per-run databases whose storage ids restart in each run, and refuses a cursor over them.

The webhook URL is a secret: it comes from the environment (VIDEOLAKE_ALERT_WEBHOOK_URL through dg.EnvVar, resolved
at run time), never from code, logs or metadata. Without it the sensors log the message and post nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from videolake.resources.alerts import AlertWebhookResource

if TYPE_CHECKING:
    from dagster._core.event_api import RunStatusChangeEventType

MAX_EVENTS_PER_TICK = 200  # events (ended runs, freshness changes) read per sensor tick; the cursor carries the rest
# The run-end events after which the gate alert reads a run's check evaluations.
RUN_END_EVENTS: tuple[RunStatusChangeEventType, ...] = (
    dg.DagsterEventType.RUN_SUCCESS,
    dg.DagsterEventType.RUN_FAILURE,
    dg.DagsterEventType.RUN_CANCELED,
)


def _first_line(text: str | None, n: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= n else line[: n - 1] + "…"


def will_be_retried(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """Whether the run-retry daemon will re-execute this failed run: Dagster's own decision, never ours.

    Why Dagster's: it alone knows the count (``max_retries`` of the instance's ``run_retries`` or the run's
    ``dagster/max_retries`` tag, against the runs already in the run's retry group) and the kinds of failure it
    retries (``retry_on_asset_or_op_failure``). It records the decision on the failed run as the tag
    ``dagster/will_retry`` when it stores the run's failure (videolake's instance before the failure event is
    visible, Dagster's own just after); the daemon retries exactly the runs tagged true. Without the tag (a sensor
    tick between Dagster's two writes) the decision is computed by the same function Dagster tags it with."""
    from dagster._core.events import RunFailureReason
    from dagster._core.execution.retries import auto_reexecution_should_retry_run
    from dagster._core.storage.tags import RUN_FAILURE_REASON_TAG, WILL_RETRY_TAG
    from dagster._utils.tags import get_boolean_tag_value

    if not instance.run_retries_enabled:  # no daemon retries anything
        return False
    tag = run.tags.get(WILL_RETRY_TAG)
    if tag is not None:
        return get_boolean_tag_value(tag, default_value=False)
    reason = run.tags.get(RUN_FAILURE_REASON_TAG)
    return auto_reexecution_should_retry_run(instance, run, RunFailureReason(reason) if reason else None)


def run_failure_text(run: dg.DagsterRun, message: str | None, failed_steps: list[str]) -> str:
    partitions = (
        run.tags.get("videolake/partitions")
        or run.tags.get("dagster/partition")
        or (
            f"{run.tags.get('dagster/asset_partition_range_start')}...{run.tags.get('dagster/asset_partition_range_end')}"
            if run.tags.get("dagster/asset_partition_range_start")
            else "-"
        )
    )
    steps = ", ".join(failed_steps) or "-"
    retries = run.tags.get("dagster/retry_number")  # on a run the daemon started as the retry of a failed one
    attempts = f" on automatic retry {retries}" if retries else ""
    return (
        f":red_circle: videolake run {run.run_id} of {run.job_name} failed{attempts} (partitions {partitions}; "
        f"failed steps: {steps}): {_first_line(message)}"
    )


@dg.run_failure_sensor(
    name="videolake_run_failure_alert",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Posts every failed run of the code location that Dagster will not retry to the alert webhook.",
)
def run_failure_alert(context: dg.RunFailureSensorContext, alert_webhook: AlertWebhookResource):
    run = context.dagster_run
    if will_be_retried(context.instance, run):
        # Logged, not a SkipReason: a tick that handles several ended runs fails as a whole in Dagster when one
        # run's evaluation returns a SkipReason and another's a reaction (seen with a retried and an alerted run).
        context.log.info(
            f"run {run.run_id} failed and will be retried by Dagster: its last failure, if any, is alerted"
        )
        return None
    steps = context.get_step_failure_events()
    failed_steps = sorted({e.step_key for e in steps if e.step_key})
    message = context.failure_event.message
    for event in steps:  # the first step's own error says more than "Execution of run ... failed"
        error = getattr(event.event_specific_data, "error", None)
        cause = error.cause if error is not None and error.cause is not None else error
        if cause is not None:
            message = cause.message  # Dagster's message starts with the exception's class name
            break
    alert_webhook.post(run_failure_text(run, message, failed_steps), context.log)
    return None


def gate_failure_text(check: str, partition: str | None, severity: str, description: str | None) -> str:
    return (
        f":warning: videolake gate {check} {'failed' if severity == 'ERROR' else 'warned'} for partition "
        f"{partition or '-'} ({'blocking' if severity == 'ERROR' else 'warning'}): {_first_line(description)}"
    )


@dg.sensor(
    name="videolake_gate_failure_alert",
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Posts every gate (asset check) evaluation that did not pass to the alert webhook.",
)
def gate_failure_alert(context: dg.SensorEvaluationContext, alert_webhook: AlertWebhookResource):
    import json

    # One cursor per run-end event type: the storage id of the last one handled, in the index every storage keeps.
    # A cursor of the earlier form (one storage id over the check evaluations) starts afresh, like a first tick.
    loaded = json.loads(context.cursor) if context.cursor else None
    cursors: dict[str, int] = loaded if isinstance(loaded, dict) else {}
    if not cursors:
        for event_type in RUN_END_EVENTS:
            latest = context.instance.fetch_run_status_changes(event_type, limit=1).records
            cursors[event_type.value] = latest[0].storage_id if latest else 0
        context.update_cursor(json.dumps(cursors))
        return dg.SkipReason("first tick: alerting on gate evaluations from now on")
    ended = [
        (event_type.value, record)
        for event_type in RUN_END_EVENTS
        for record in context.instance.fetch_run_status_changes(
            dg.RunStatusChangeRecordsFilter(event_type, after_storage_id=cursors.get(event_type.value, 0)),
            limit=MAX_EVENTS_PER_TICK,
            ascending=True,
        ).records
    ]
    posted = 0
    for event_name, record in sorted(ended, key=lambda e: e[1].storage_id):
        run_id = record.event_log_entry.run_id
        for entry in context.instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            evaluation = entry.asset_check_evaluation
            if evaluation is None or evaluation.passed:
                continue
            partition = evaluation.partition
            if partition is None:  # a check without partitions of its own, in a run of one partition
                run = context.instance.get_run_by_id(run_id)
                partition = run.tags.get("dagster/partition") if run else None
            gate = f"{evaluation.asset_key.to_user_string()}.{evaluation.check_name}"
            alert_webhook.post(
                gate_failure_text(gate, partition, evaluation.severity.value, evaluation.description), context.log
            )
            posted += 1
        cursors[event_name] = max(cursors.get(event_name, 0), record.storage_id)
        context.update_cursor(json.dumps(cursors))
    return dg.SkipReason(f"{posted} failed gate evaluation(s) alerted from {len(ended)} ended run(s)")


def _records_since_cursor(context: dg.SensorEvaluationContext, event_type) -> list | None:
    """The event records of ``event_type`` after the sensor's cursor, oldest first; None on the first tick, which
    only sets the cursor to the newest such event (alerts start from now: history is not replayed). The caller
    advances the cursor per record it handled."""
    from dagster._core.event_api import EventRecordsFilter

    if not context.cursor:
        latest = context.instance.get_event_records(EventRecordsFilter(event_type=event_type), limit=1, ascending=False)
        context.update_cursor(str(latest[0].storage_id if latest else 0))
        return None
    return list(
        context.instance.get_event_records(
            EventRecordsFilter(event_type=event_type, after_cursor=int(context.cursor)),
            limit=MAX_EVENTS_PER_TICK,
            ascending=True,
        )
    )


def freshness_text(asset: str, new_state: str, previous_state: str) -> str:
    if new_state in ("FAIL", "WARN"):
        return (
            f":hourglass: videolake table {asset} is overdue: no materialization by its due hour "
            f"(freshness {new_state}, was {previous_state})"
        )
    return f":white_check_mark: videolake table {asset} is fresh again (freshness {new_state}, was {previous_state})"


@dg.sensor(
    name="videolake_freshness_alert",
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Posts every table that became overdue (freshness FAIL or WARN), and when it is fresh again.",
)
def freshness_alert(context: dg.SensorEvaluationContext, alert_webhook: AlertWebhookResource):
    from dagster._core.events import DagsterEventType

    records = _records_since_cursor(context, DagsterEventType.FRESHNESS_STATE_CHANGE)
    if records is None:
        return dg.SkipReason("first tick: alerting on freshness changes from now on")
    overdue = ("FAIL", "WARN")
    posted = 0
    for record in records:
        change = record.event_log_entry.dagster_event.asset_freshness_state_change_data
        new, previous = change.new_state.value, change.previous_state.value
        if new in overdue or (new == "PASS" and previous in overdue):
            alert_webhook.post(freshness_text(change.key.to_user_string(), new, previous), context.log)
            posted += 1
        context.update_cursor(str(record.storage_id))
    return dg.SkipReason(f"{posted} freshness change(s) alerted of {len(records)} read")
