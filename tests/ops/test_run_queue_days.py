"""One attempt per partition day at a time, enforced by Dagster's own run queue (issue 40), multi-day runs included.

Real instances (sqlite, the repository's dagster.yaml; the production queue settings of k8s/dagster-postgres.yaml),
runs submitted through the instance's run coordinator, and Dagster's QueuedRunCoordinatorDaemon running its dequeue
pass, called once per step (no sleeps, no daemon thread). Only the final launch is replaced by a recorder: the
runs have no code server to start in. What the daemon dequeued is read back from run storage (a dequeued run is
STARTING)."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import dagster as dg
import pytest
import yaml
from cli_helpers import REPO
from dagster._core.events import DagsterEvent, DagsterEventType
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._core.run_coordinator import SubmitRunContext
from dagster._core.test_utils import create_run_for_test
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

from videolake.instance.day_queue import DAY_TAG_PREFIX, run_days

D = "2026-03-10"
# Where a queued run says it comes from (Dagster requires one of a queued run; nothing loads it here).
ORIGIN = RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("videolake"), "__repository__").get_job_origin(
    "videolake_daily"
)


def single(day: str) -> dict[str, str]:
    return {"dagster/partition": day}


def ranged(start: str, end: str) -> dict[str, str]:
    return {"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end}


class Queue:
    """An instance's run queue, driven a pass at a time."""

    def __init__(self, instance: dg.DagsterInstance, monkeypatch) -> None:
        self.instance = instance
        self.launched: list[str] = []
        monkeypatch.setattr(
            instance.run_launcher, "launch_run", lambda ctx: self.launched.append(ctx.dagster_run.run_id)
        )
        self.daemon = QueuedRunCoordinatorDaemon(interval_seconds=1)
        self.context = SimpleNamespace(instance=instance, create_request_context=lambda: None)

    def submit(self, tags: dict[str, str]) -> str:
        run = create_run_for_test(self.instance, job_name=ORIGIN.job_name, tags=tags, remote_job_origin=ORIGIN)
        queued = self.instance.run_coordinator.submit_run(SubmitRunContext(run, workspace=None))
        assert queued.status == dg.DagsterRunStatus.QUEUED
        return run.run_id

    def dequeue_pass(self) -> set[str]:
        """One pass of Dagster's queue daemon; the runs it took off the queue (QUEUED before, STARTING after)."""
        queued = self.run_ids(dg.DagsterRunStatus.QUEUED)
        before = len(self.launched)
        list(self.daemon.run_iteration(self.context))
        dequeued = queued & self.run_ids(dg.DagsterRunStatus.STARTING)
        assert dequeued == set(self.launched[before:])
        return dequeued

    def run_ids(self, status: dg.DagsterRunStatus) -> set[str]:
        return {r.run_id for r in self.instance.get_runs(dg.RunsFilter(statuses=[status]))}

    def finish(self, *run_ids: str) -> None:
        for run_id in run_ids:
            run = self.instance.get_run_by_id(run_id)
            event = DagsterEvent(DagsterEventType.RUN_SUCCESS.value, job_name=run.job_name)
            self.instance.report_dagster_event(event, run_id=run_id)

    def status(self, run_id: str) -> dg.DagsterRunStatus:
        return self.instance.get_run_by_id(run_id).status


@pytest.fixture()
def local_instance(tmp_path):
    shutil.copyfile(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        yield instance


def test_runs_cover_every_day_of_their_partition_or_range():
    assert run_days(single(D)) == [D]
    assert run_days(ranged("2026-02-27", "2026-03-02")) == ["2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02"]
    assert run_days({}) == []
    assert run_days(single("cam-7")) == []


def test_local_queue_runs_one_attempt_per_day_ranges_included(local_instance, monkeypatch):
    """dagster.yaml's queue (max 2 runs) with, in this order: a range ending on D, D, D again, a range starting on
    D, a run of D+2 and one of D+5. Without the day limits the first pass would launch the range and the first D."""
    assert type(local_instance.run_coordinator).__name__ == "DayQueueCoordinator"
    queue = Queue(local_instance, monkeypatch)
    range_to_d = queue.submit(ranged("2026-03-09", D))
    d_first, d_again = queue.submit(single(D)), queue.submit(single(D))
    range_from_d = queue.submit(ranged(D, "2026-03-11"))
    other, later = queue.submit(single("2026-03-12")), queue.submit(single("2026-03-15"))
    tags = local_instance.get_run_by_id(range_to_d).tags
    assert {k for k in tags if k.startswith(DAY_TAG_PREFIX)} == {f"{DAY_TAG_PREFIX}2026-03-09", f"{DAY_TAG_PREFIX}{D}"}

    # The two-day run holds D: neither D run nor the range from D starts; the run of another day does.
    assert queue.dequeue_pass() == {range_to_d, other}
    assert queue.dequeue_pass() == set()  # nothing finished: nothing more starts

    queue.finish(range_to_d, other)
    # D is free: exactly one of the runs touching it starts (the first queued), beside a run of another day.
    assert queue.dequeue_pass() == {d_first, later}
    assert queue.status(d_again) == queue.status(range_from_d) == dg.DagsterRunStatus.QUEUED

    queue.finish(d_first, later)
    assert queue.dequeue_pass() == {d_again}  # the range from D still waits for it
    queue.finish(d_again)
    assert queue.dequeue_pass() == {range_from_d}


def test_the_day_limits_are_in_the_queue_config_while_their_runs_are_in_flight(local_instance, monkeypatch):
    queue = Queue(local_instance, monkeypatch)
    run = queue.submit(ranged(D, "2026-03-11"))
    limits = local_instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
    assert {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in limits
    assert [lim["key"] for lim in limits if lim["key"].startswith(DAY_TAG_PREFIX)] == [
        f"{DAY_TAG_PREFIX}{D}",
        f"{DAY_TAG_PREFIX}2026-03-11",
    ]
    assert queue.dequeue_pass() == {run}
    queue.finish(run)
    limits = local_instance.get_concurrency_config().run_queue_config.tag_concurrency_limits
    assert not [lim for lim in limits if lim["key"].startswith(DAY_TAG_PREFIX)]


def test_settings_tag_limits_that_would_drop_the_day_limits_are_refused(tmp_path):
    settings = yaml.safe_load((REPO / "dagster.yaml").read_text())
    settings["concurrency"]["runs"]["tag_concurrency_limits"] = [{"key": "videolake/gpu", "value": "true", "limit": 1}]
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(settings))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        with pytest.raises(ValueError, match="run_coordinator.config.tag_concurrency_limits"):
            instance.get_concurrency_config()


def test_production_queue_runs_one_run_per_partition(tmp_path, monkeypatch):
    """The production queue (Dagster's QueuedRunCoordinator, the run limits of k8s/dagster-postgres.yaml, which the
    Helm values repeat) over sqlite: of two runs of D only one starts, a run of another day starts beside it."""
    prod = yaml.safe_load((REPO / "k8s" / "dagster-postgres.yaml").read_text())
    settings = {
        "run_coordinator": prod["run_coordinator"],
        "concurrency": prod["concurrency"],
        "run_launcher": {"module": "dagster._core.test_utils", "class": "MockedRunLauncher"},
    }
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(settings))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_coordinator) is dg.QueuedRunCoordinator
        queue = Queue(instance, monkeypatch)
        d_first, d_again = queue.submit(single(D)), queue.submit(single(D))
        other = queue.submit(single("2026-03-12"))
        assert queue.dequeue_pass() == {d_first, other}
        assert queue.status(d_again) == dg.DagsterRunStatus.QUEUED
        queue.finish(d_first)
        assert queue.dequeue_pass() == {d_again}
