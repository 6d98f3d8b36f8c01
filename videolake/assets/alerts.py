"""Alerts: a failed run and a failed gate post a message to a chat webhook (Slack-compatible: ``{"text": ...}``).

Open-source Dagster has no alert policies; sensors do it. Two sensors, both running by default:

- ``videolake_run_failure_alert`` (a run-failure sensor): every failed run of the code location, with its job, its
  partitions, the step that failed and the error's first line;
- ``videolake_gate_failure_alert``: every gate (asset check) evaluation that did not pass since the sensor's cursor,
  blocking or warning, with its asset, partition and description. A blocking gate also fails its run (and so raises
  the run alert); a warning does not, and is seen only here.

The webhook URL is a secret: it comes from the environment (VIDEOLAKE_ALERT_WEBHOOK_URL through dg.EnvVar, resolved
at run time), never from code, logs or metadata. Without it the sensors log the message and post nothing.
"""

from __future__ import annotations

import dagster as dg

from videolake.resources.alerts import AlertWebhookResource

MAX_EVENTS_PER_TICK = 200  # check evaluations read per sensor tick (the cursor carries the rest to the next tick)


def _first_line(text: str | None, n: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= n else line[: n - 1] + "…"


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
    return (
        f":red_circle: videolake run {run.run_id} of {run.job_name} failed (partitions {partitions}; "
        f"failed steps: {steps}): {_first_line(message)}"
    )


@dg.run_failure_sensor(
    name="videolake_run_failure_alert",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Posts every failed run of the code location to the alert webhook.",
)
def run_failure_alert(context: dg.RunFailureSensorContext, alert_webhook: AlertWebhookResource):
    steps = context.get_step_failure_events()
    failed_steps = sorted({e.step_key for e in steps if e.step_key})
    message = context.failure_event.message
    for event in steps:  # the first step's own error says more than "Execution of run ... failed"
        error = getattr(event.event_specific_data, "error", None)
        cause = error.cause if error is not None and error.cause is not None else error
        if cause is not None:
            message = cause.message  # Dagster's message starts with the exception's class name
            break
    alert_webhook.post(run_failure_text(context.dagster_run, message, failed_steps), context.log)


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
    from dagster._core.event_api import EventRecordsFilter
    from dagster._core.events import DagsterEventType

    after = int(context.cursor) if context.cursor else None
    if after is None:  # first tick: start from now, do not replay the history
        latest = context.instance.get_event_records(
            EventRecordsFilter(event_type=DagsterEventType.ASSET_CHECK_EVALUATION), limit=1, ascending=False
        )
        context.update_cursor(str(latest[0].storage_id if latest else 0))
        return dg.SkipReason("first tick: alerting on gate evaluations from now on")
    records = context.instance.get_event_records(
        EventRecordsFilter(event_type=DagsterEventType.ASSET_CHECK_EVALUATION, after_cursor=after),
        limit=MAX_EVENTS_PER_TICK,
        ascending=True,
    )
    posted = 0
    for record in records:
        evaluation = record.event_log_entry.asset_check_evaluation  # None only for another kind of event
        if evaluation is not None and not evaluation.passed:
            name = f"{evaluation.asset_key.to_user_string()}.{evaluation.check_name}"
            partition = evaluation.partition
            if partition is None:  # a check without partitions of its own, in a run of one partition
                run = context.instance.get_run_by_id(record.event_log_entry.run_id)
                partition = run.tags.get("dagster/partition") if run else None
            alert_webhook.post(
                gate_failure_text(name, partition, evaluation.severity.value, evaluation.description), context.log
            )
            posted += 1
        after = record.storage_id
    context.update_cursor(str(after))
    return dg.SkipReason(f"{posted} failed gate evaluation(s) alerted of {len(records)} read")
