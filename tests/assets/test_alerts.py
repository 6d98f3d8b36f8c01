"""Alerts (issue: operating it as a Dagster team would, item 5): a failed run and a failed gate post to a
Slack-compatible webhook whose URL comes from the environment, tested against a real local HTTP receiver with a
real Dagster instance."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
from webhook_receiver import webhook_receiver

from videolake.assets.alerts import freshness_alert, gate_failure_alert, run_failure_alert
from videolake.assets.freshness import freshness_policy
from videolake.resources.alerts import WEBHOOK_ENV, AlertWebhookResource, alert_webhook_from_env


@pytest.fixture
def receiver():
    """A local webhook: records every POSTed JSON body, answers 200."""
    with webhook_receiver() as got:
        yield got


@dg.asset(partitions_def=dg.DailyPartitionsDefinition(start_date="2026-01-01"))
def breaks() -> None:
    raise RuntimeError("the landing bucket is gone")


@dg.asset(partitions_def=dg.DailyPartitionsDefinition(start_date="2026-01-01"))
def counted() -> None:
    return None


@dg.asset_check(asset=counted, blocking=False)
def reject_rate() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False, severity=dg.AssetCheckSeverity.WARN, description="reject rate 0.8 > max 0.5"
    )


def test_the_url_is_read_from_the_environment_at_run_time(monkeypatch):
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)
    assert alert_webhook_from_env().url == ""
    monkeypatch.setenv(WEBHOOK_ENV, "http://example.invalid/secret")
    resource = alert_webhook_from_env()
    # an EnvVar, not the value: Dagster resolves it when a run or sensor starts
    assert "secret" not in repr(resource)
    with dg.build_resources({"w": resource}) as built:
        assert built.w.url == "http://example.invalid/secret"


def test_a_failed_run_posts_its_job_partition_step_and_error(receiver):
    url, got = receiver
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([breaks], partition_key="2026-03-04", instance=instance, raise_on_error=False)
    assert not result.success
    run = instance.get_run_by_id(result.run_id)
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
    context = dg.build_run_status_sensor_context(
        sensor_name="videolake_run_failure_alert",
        dagster_instance=instance,
        dagster_run=run,
        dagster_event=failure,
        resources={"alert_webhook": AlertWebhookResource(url=url)},
    )
    run_failure_alert(context.for_run_failure())
    assert len(got) == 1
    text = got[0]["text"]
    assert text == (
        f":red_circle: videolake run {result.run_id} of __ephemeral_asset_job__ failed (partitions "
        "2026-03-04; failed steps: breaks): RuntimeError: the landing bucket is gone"
    ), text


def _run_retries() -> dict:
    """The run_retries settings of the instance `make ui` runs (dagster.yaml): max_retries 2, no retry of an asset
    failure."""
    import pathlib

    import yaml

    return yaml.safe_load((pathlib.Path(__file__).parents[2] / "dagster.yaml").read_text())["run_retries"]


def _alert_on(instance: dg.DagsterInstance, run_id: str, url: str) -> None:
    """One evaluation of the run-failure sensor on the run's failure, as the daemon's tick makes it."""
    run = instance.get_run_by_id(run_id)
    (failure,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    context = dg.build_run_status_sensor_context(
        sensor_name="videolake_run_failure_alert",
        dagster_instance=instance,
        dagster_run=run,
        dagster_event=failure.dagster_event,
        resources={"alert_webhook": AlertWebhookResource(url=url)},
    )
    run_failure_alert(context.for_run_failure())


def test_a_run_that_dagster_will_retry_does_not_post_its_last_retry_does(receiver):
    """Dagster's own retry decision, on an instance with the run_retries of dagster.yaml: a run whose worker died
    (failed from outside its steps) is retried twice, so it and its first retry do not post and the second retry,
    the last, does; an asset failure is never retried, so it posts at once."""
    from dagster._core.storage.tags import PARENT_RUN_ID_TAG, RETRY_NUMBER_TAG, ROOT_RUN_ID_TAG, WILL_RETRY_TAG
    from dagster._core.test_utils import create_run_for_test

    url, got = receiver
    settings = _run_retries()
    assert settings == {"enabled": True, "max_retries": 2, "retry_on_asset_or_op_failure": False}
    with dg.instance_for_test(overrides={"run_retries": settings}) as instance:
        # the original run and the daemon's two retries (with the tags of its re-executions: Dagster counts a
        # run's retries by its root run tag), each failed as run monitoring fails a run whose worker is gone
        root = create_run_for_test(instance, job_name="videolake_job", tags={"dagster/partition": "2026-03-04"})
        parent = root
        for number in range(3):
            run = parent
            if number:
                run = create_run_for_test(
                    instance,
                    job_name="videolake_job",
                    tags={
                        "dagster/partition": "2026-03-04",
                        RETRY_NUMBER_TAG: str(number),
                        ROOT_RUN_ID_TAG: root.run_id,
                        PARENT_RUN_ID_TAG: parent.run_id,
                    },
                    root_run_id=root.run_id,
                    parent_run_id=parent.run_id,
                )
            instance.report_run_failed(run, message="Run worker process 4242 is no longer alive")
            will_retry = number < 2
            assert instance.get_run_by_id(run.run_id).tags[WILL_RETRY_TAG] == str(will_retry).lower()
            _alert_on(instance, run.run_id, url)
            assert len(got) == (0 if will_retry else 1), number
            parent = run
        assert got[0]["text"] == (
            f":red_circle: videolake run {parent.run_id} of videolake_job failed on automatic retry 2 (partitions "
            "2026-03-04; failed steps: -): Run worker process 4242 is no longer alive"
        ), got[0]["text"]
        # an asset failure: not retried (retry_on_asset_or_op_failure false), alerted at once
        failed = dg.materialize([breaks], partition_key="2026-03-05", instance=instance, raise_on_error=False)
        assert instance.get_run_by_id(failed.run_id).tags[WILL_RETRY_TAG] == "false"
        _alert_on(instance, failed.run_id, url)
        assert len(got) == 2 and "RuntimeError: the landing bucket is gone" in got[1]["text"]


@dg.asset(partitions_def=dg.DailyPartitionsDefinition(start_date="2026-01-01"))
def gated() -> None:
    return None


@dg.asset_check(asset=gated, blocking=True)
def too_few_rows() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, description="0 rows < min 1")


@dg.asset(deps=[gated], partitions_def=dg.DailyPartitionsDefinition(start_date="2026-01-01"))
def downstream_of_gated() -> None:
    return None


def test_a_failed_gate_posts_once_and_only_after_the_first_tick(receiver):
    """On the instance `make ui` uses (sqlite, one event database per run, whose storage ids restart in every run),
    a warning and a blocking gate that failed are each posted once, from the next tick after their run ended."""
    url, got = receiver
    resources = {"alert_webhook": AlertWebhookResource(url=url)}
    with dg.instance_for_test() as instance:
        # a gate that failed before the sensor ever ran is history: not replayed
        assert dg.materialize([counted, reject_rate], partition_key="2026-03-03", instance=instance).success
        first = dg.build_sensor_context(instance=instance, resources=resources)
        gate_failure_alert(first)
        assert got == []
        assert dg.materialize([counted, reject_rate], partition_key="2026-03-04", instance=instance).success
        blocked = dg.materialize(
            [gated, too_few_rows, downstream_of_gated],
            partition_key="2026-03-05",
            instance=instance,
            raise_on_error=False,
        )
        assert not blocked.success  # the blocking gate failed its run
        second = dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor)
        gate_failure_alert(second)
        assert [m["text"] for m in got] == [
            ":warning: videolake gate counted.reject_rate warned for partition 2026-03-04 "
            "(warning): reject rate 0.8 > max 0.5",
            ":warning: videolake gate gated.too_few_rows failed for partition 2026-03-05 (blocking): 0 rows < min 1",
        ]
        third = dg.build_sensor_context(instance=instance, resources=resources, cursor=second.cursor)
        gate_failure_alert(third)  # nothing new: nothing posted again
        assert len(got) == 2
        assert dg.materialize([counted, reject_rate], partition_key="2026-03-06", instance=instance).success
        fourth = dg.build_sensor_context(instance=instance, resources=resources, cursor=third.cursor)
        gate_failure_alert(fourth)
        assert [m["text"] for m in got[2:]] == [
            ":warning: videolake gate counted.reject_rate warned for partition 2026-03-06 "
            "(warning): reject rate 0.8 > max 0.5"
        ]


def test_without_a_webhook_nothing_is_posted_and_nothing_fails():
    assert AlertWebhookResource(url="").post("x") is False
    assert AlertWebhookResource(url="http://127.0.0.1:9/unreachable", timeout_s=2).post("x") is False


def test_every_daily_asset_is_due_by_the_configured_hour(monkeypatch):
    from videolake.definitions import build_definitions

    for hour, cron in (("", "0 6 * * *"), ("9", "0 9 * * *")):
        monkeypatch.setenv("VIDEOLAKE_DUE_HOUR", hour)
        graph = build_definitions("local").resolve_asset_graph()
        daily = [
            k
            for k in graph.get_all_asset_keys()
            if isinstance(graph.get(k).partitions_def, dg.TimeWindowPartitionsDefinition)
        ]
        assert {k.to_user_string() for k in daily} >= {
            "raw_videos",
            "scene_clips",
            "filtered_clips",
            "clip_captions",
            "training_shards",
        }
        for key in daily:
            policy = graph.get(key).freshness_policy
            assert (policy.deadline_cron, policy.timezone) == (cron, "UTC"), key
            assert policy.lower_bound_delta.total_seconds() == int(cron.split()[1]) * 3600, key
    monkeypatch.setenv("VIDEOLAKE_DUE_HOUR", "25")
    with pytest.raises(ValueError, match="VIDEOLAKE_DUE_HOUR must be an hour from 1 to 23"):
        build_definitions("local")


# A daily table with the pipeline's own freshness policy (due by 06:00 UTC), for the freshness daemon to evaluate.
@dg.asset(freshness_policy=freshness_policy(6))
def due_daily() -> None:
    return None


freshness_defs = dg.Definitions(assets=[due_daily])


def _daemon_evaluates_freshness(instance: dg.DagsterInstance) -> None:
    """One iteration of Dagster's own freshness daemon (as `dg dev` runs it) over this module's code location."""
    import asyncio
    import concurrent.futures

    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster._daemon.freshness import FreshnessDaemon

    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(python_file=__file__, attribute="freshness_defs"), location_name="alerts_test"
    )
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget([origin])) as workspace:
        # in a thread of its own: a test before this one in the same worker (Playwright's sync API) may have left
        # an event loop running in this thread, where asyncio.run refuses to start
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, FreshnessDaemon()._evaluate_assets(workspace_process_context=workspace)).result()


def test_an_overdue_table_posts_once_and_again_when_fresh(receiver):
    """The daemon's real freshness evaluation (frozen clock): a table last materialized on 3 March is overdue at
    07:00 on 5 March (due by 06:00), which posts; it posts again when a new materialization makes it fresh."""
    from dagster._core.test_utils import freeze_time

    url, got = receiver
    resources = {"alert_webhook": AlertWebhookResource(url=url)}
    with dg.instance_for_test() as instance:
        with freeze_time(dt.datetime(2026, 3, 3, 5, 0, tzinfo=dt.UTC)):
            assert dg.materialize([due_daily], instance=instance).success
            _daemon_evaluates_freshness(instance)  # materialized inside 3 March's window: PASS, not an alert
            first = dg.build_sensor_context(instance=instance, resources=resources)
            freshness_alert(first)
        with freeze_time(dt.datetime(2026, 3, 5, 7, 0, tzinfo=dt.UTC)):
            _daemon_evaluates_freshness(instance)  # nothing since 4 March: FAIL
            second = dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor)
            freshness_alert(second)
            assert [m["text"] for m in got] == [
                ":hourglass: videolake table due_daily is overdue: no materialization by its due hour "
                "(freshness FAIL, was PASS)"
            ]
            assert dg.materialize([due_daily], instance=instance).success
            _daemon_evaluates_freshness(instance)
            third = dg.build_sensor_context(instance=instance, resources=resources, cursor=second.cursor)
            freshness_alert(third)
        assert [m["text"] for m in got][1:] == [
            ":white_check_mark: videolake table due_daily is fresh again (freshness PASS, was FAIL)"
        ]
