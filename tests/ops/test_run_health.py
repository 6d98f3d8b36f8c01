"""A run whose process was killed is found, failed and its pool slot freed (issue 9, item 2, the single-machine
side): by run monitoring's health check (LocalRunLauncher), by `videolake doctor` and by `videolake demo`.

A real run in a real local instance (sqlite, the repository's dagster.yaml, with run monitoring polling every POLL_S
instead of every 10 s: the daemon test waits for its passes, and its bounds follow the file it reads): a small job
whose only asset is in pool `gpu` (limit 1, like clip_captions) runs in its own process and is SIGKILLed while it
holds the slot. Nothing is faked: the pid comes from Dagster's own event log, the slot from its concurrency tables."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml
from cli_helpers import REPO, cli_env, videolake
from dagster._core.launcher import WorkerStatus
from dagster_home import write_instance_yaml

from videolake.instance.health import (
    WORKER_START_TAG,
    WorkerState,
    check_worker,
    find_stale_runs,
    process_alive,
    worker_pid,
    worker_start,
)

POLL_S = 2

TOY = """
import os, sys, time
import dagster as dg

@dg.asset(pool="gpu")
def holds_gpu():
    time.sleep(600)

dg.materialize([holds_gpu], instance=dg.DagsterInstance.get(), tags={"test": sys.argv[1]})
"""


@pytest.fixture()
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    write_instance_yaml(home, poll_interval_seconds=POLL_S)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    (tmp_path / "toy.py").write_text(TOY)
    with dg.DagsterInstance.get() as instance:  # create the sqlite storage once, before processes share it
        instance.get_runs(limit=1)
    return home


def _start_holder(tmp_path, name: str) -> tuple[subprocess.Popen, str]:
    """Start a run that takes the `gpu` slot; returns (process, run_id) once the slot is claimed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / f"holder-{name}.log"
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            [sys.executable, str(tmp_path / "toy.py"), name], env=env, cwd=tmp_path, stdout=f, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 180
    with dg.DagsterInstance.get() as instance:
        while time.monotonic() < deadline:
            runs = instance.get_runs(dg.RunsFilter(tags={"test": name}))
            held = instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
            if runs and [s.run_id for s in held] == [runs[0].run_id]:
                return proc, runs[0].run_id
            assert proc.poll() is None, f"the holder run exited:\n{out.read_text()[-3000:]}"
            time.sleep(0.5)
    proc.kill()
    raise AssertionError("the holder run never claimed the gpu slot")


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def test_process_alive_rejects_a_reused_pid():
    import psutil

    me = psutil.Process()
    assert process_alive(me.pid, time.time())
    assert not process_alive(me.pid, me.create_time() - 600)  # "our" pid belonged to an earlier process
    assert not process_alive(2**22 + 12345, time.time())  # no such process


def test_a_worker_once_seen_alive_is_judged_by_its_recorded_start_not_by_the_system_clock():
    import psutil

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        start = worker_start(proc.pid)
        assert int(start) > 0 and worker_start(proc.pid) == start  # ticks since boot: the same on every read
        moved = psutil.Process(proc.pid).create_time() - 600  # the pid event, as the clock reads after a step
        assert not process_alive(proc.pid, moved)  # the system clock alone calls it a reused pid
        assert process_alive(proc.pid, moved, known_start=start)
        assert not process_alive(proc.pid, time.time(), known_start=str(int(start) + 1))  # another process, same pid
    finally:
        _kill(proc)
    assert not process_alive(proc.pid, time.time(), known_start=start)


def test_killed_run_is_detected_failed_and_its_slot_freed_by_the_doctor(home, tmp_path, monkeypatch):
    import psutil._pslinux

    proc, run_id = _start_holder(tmp_path, "doctor")
    with dg.DagsterInstance.get() as instance:
        launcher = instance.run_launcher
        assert type(launcher).__name__ == "LocalRunLauncher" and launcher.supports_check_run_worker_health
        run = instance.get_run_by_id(run_id)
        assert check_worker(instance, run).state is WorkerState.ALIVE
        # the first check that saw the worker alive recorded which process it is
        _pid, at = worker_pid(instance, run_id)
        run = instance.get_run_by_id(run_id)
        assert run.tags[WORKER_START_TAG] == f"{proc.pid} {worker_start(proc.pid)} {at!r}"
        # The system clock is set 10 min forward (NTP, a paused VM resumed): Linux's boot time moves with it, and so
        # does every process's creation time. The worker is still the one that was seen: still alive (in CI this
        # once failed two live runs, and their retries ran beside them).
        boot = psutil._pslinux.boot_time()
        monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: boot + 600)
        assert psutil.Process(proc.pid).create_time() > at + 300
        assert check_worker(instance, run).state is WorkerState.ALIVE
        assert launcher.check_run_worker_health(run).status is WorkerStatus.RUNNING
        assert find_stale_runs(instance) == []

        _kill(proc)
        health = launcher.check_run_worker_health(run)
        assert health.status is WorkerStatus.FAILED  # what run monitoring acts on: it fails the run
        assert health.msg == f"run worker pid {proc.pid} is gone (killed or crashed without reporting)"
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED  # nobody has acted yet

    env = cli_env(tmp_path, DAGSTER_HOME=str(home))
    out = videolake(["doctor", "--only", "runs"], env, tmp_path)
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        f"FAIL  runs          1 stale run(s): run {run_id} (STARTED, run worker pid {proc.pid} is gone (killed or "
        "crashed without reporting), holds gpu:holds_gpu). `videolake doctor --fix` fails them and frees the slots",
        "0 of 1 checks ok; failed: runs",
    ]
    fixed = videolake(["doctor", "--only", "runs", "--fix"], env, tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.splitlines() == [
        "ok    runs          fixed 1 stale run(s); pool slots held: none",
        "1 of 1 checks ok",
    ]
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("gpu").claimed_slots == []
        messages = [
            e.message
            for e in instance.all_logs(run_id)
            if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_FAILURE"
        ]
        assert messages == [
            f"Marked failed by videolake: run worker pid {proc.pid} is gone (killed or crashed without reporting)."
        ]


def test_demo_cleans_up_a_killed_run_before_its_own(home, tmp_path):
    from videolake.commands.demo import report_stale_runs

    proc, run_id = _start_holder(tmp_path, "demo")
    _kill(proc)
    lines: list[str] = []
    with dg.DagsterInstance.get() as instance:
        report_stale_runs(instance, write=lines.append)
        assert lines == [
            f"cleaned up stale run {run_id} (__ephemeral_asset_job__): run worker pid {proc.pid} is gone "
            "(killed or crashed without reporting): marked FAILED, freed pool slots gpu:holds_gpu"
        ]
        assert instance.event_log_storage.get_concurrency_info("gpu").claimed_slots == []
        # the next run takes the slot at once
        lines.clear()
        report_stale_runs(instance, write=lines.append)
        assert lines == []
    proc2, run2 = _start_holder(tmp_path, "after")
    _kill(proc2)
    assert run2 != run_id


def _wait(predicate, timeout_s: float, what: str, poll_s: float = 0.25):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@pytest.mark.slow
def test_the_daemon_fails_a_killed_run_and_frees_its_slot(home, tmp_path):
    """A real `dagster-daemon` on the repository's dagster.yaml (polling every POLL_S): run monitoring asks LocalRunLauncher about every
    STARTED run; a live one is left alone, a killed one is failed, and the concurrency iteration frees its slot."""
    settings = yaml.safe_load((home / "dagster.yaml").read_text())["run_monitoring"]
    poll, free_after = settings["poll_interval_seconds"], settings["free_slots_after_run_end_seconds"]
    log = open(tmp_path / "daemon.log", "wb")
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "--empty-workspace"],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        proc, run_id = _start_holder(tmp_path, "daemon")
        daemon_log = lambda: (tmp_path / "daemon.log").read_text(errors="replace")  # noqa: E731
        _wait(lambda: daemon_log().count(f"Checking run {run_id}") >= 2, 180, "two monitoring passes over the run")
        with dg.DagsterInstance.get() as instance:
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED  # alive: left alone

            killed_at = time.monotonic()
            _kill(proc)
            _wait(lambda: instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE, 120, "the failure")
            failed_after = time.monotonic() - killed_at
            _wait(lambda: not instance.event_log_storage.get_concurrency_info("gpu").claimed_slots, 120, "the slot")
            freed_after = time.monotonic() - killed_at
            (message,) = [
                e.message
                for e in instance.all_logs(run_id)
                if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_FAILURE"
            ]
        assert message == (
            f"Detected run worker status FAILED: 'run worker pid {proc.pid} is gone (killed or crashed "
            f"without reporting)'. Marking run {run_id} as failed."
        )
        # bounded by the configuration: one monitoring poll to fail it, then free_slots_after_run_end_seconds and
        # the next poll to free the slot (plus slack for a loaded machine)
        assert failed_after <= poll + 15, failed_after
        assert freed_after <= 2 * poll + free_after + 15, freed_after
        print(
            f"\nkilled run failed after {failed_after:.1f}s, its gpu slot freed after {freed_after:.1f}s "
            f"(poll {poll}s, free_slots_after_run_end_seconds {free_after}s)"
        )
    finally:
        from procs_stop import stop_group

        stop_group(daemon)
        log.close()
