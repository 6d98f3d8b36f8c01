"""Is a run's worker process alive? Stale runs, and the concurrency-pool slots they hold.

Why this exists: a run whose process dies without reporting (SIGKILL, OOM killer, a closed laptop) stays STARTED in
Dagster's run storage and keeps the pool slots its steps claimed. With pool ``gpu`` limited to 1, one such run blocks
every later caption step ("blocked by limit for pool gpu") until a person frees the slot. On Kubernetes the
K8sRunLauncher answers run monitoring's health check from the run Job's status. On one machine (DefaultRunLauncher,
and the in-process runs of ``videolake demo`` and of scripts) nothing answers it, so this module does, from what
Dagster itself records: the engine event that names the pid of the process executing the run
("Started process for run (pid: N)" for a launched run, "Executing steps in process (pid: N)" for an in-process
one). The process is alive when that pid exists, is not a zombie, and is the process that the event named, not a
later process given the same number:

- the first time a check sees the worker alive, its creation time (from the system clock) must not be more than a
  minute after the event's timestamp, and the check records when the process started in a clock that never jumps
  (``worker_start``: clock ticks since boot on Linux) in the run's tag ``videolake/worker_start``;
- every later check compares the process's start with that tag, and never with the system clock again.

Why not the system clock every time: Linux derives a process's creation time from its start in ticks since boot plus
the boot time, and the boot time moves whenever the system clock is set (NTP stepping it, a virtual machine resumed
from a pause). In one CI run the machine paused for ~24 s (two steps' own timers counted 15-16 s between events 40 s
apart), and two live run workers then read as created after their pid events, beyond the 2 s allowed then: run
monitoring failed both runs, run retries started a second attempt of each day beside the first, and the two attempts
of a caption step deleted each other's files (FileNotFoundError in ``finalize_day``).

A pid means something only on the machine that ran it. A run is judged here only when it carries the tag
``videolake/host`` with this machine's name (set by LocalRunLauncher and by ``videolake demo``), or, without that
tag, when the instance stores its runs in sqlite (a local instance: every run of it ran on this machine).
Everything else is UNKNOWN and left alone.
"""

from __future__ import annotations

import enum
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster._core.events import DagsterEventType
from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter

HOST_TAG = "videolake/host"
# "<pid> <start> <event timestamp>": the worker the checks saw alive, and when it started (``worker_start``).
WORKER_START_TAG = "videolake/worker_start"
# Engine-event messages (Dagster 1.13) that carry the pid of the process executing the run (metadata "pid").
_WORKER_EVENT_PREFIXES = (
    "Started process for run",  # a launched run: the run worker the code server spawned
    "Executing steps in process",  # in-process executor (execute_in_process, materialize, in_process_executor)
    "Executing steps using multiprocess executor: parent process",  # the run worker of a multiprocess run
)
# How much later than its pid event the worker may seem to have started, at the first check: clock rounding, and the
# system clock set forward between the worker's start and that check (later checks use the recorded start). A later
# process given the same pid within this minute would need every pid of the machine used in between (32,768 by
# default on Linux).
_START_SLACK_S = 60.0


class WorkerState(enum.Enum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"  # no pid recorded yet (still starting), or the run ran on another machine


@dataclass(frozen=True)
class WorkerCheck:
    state: WorkerState
    pid: int | None
    reason: str  # one sentence for logs and the doctor


@dataclass(frozen=True)
class StaleRun:
    run_id: str
    job_name: str
    status: str
    pid: int | None
    reason: str
    slots: tuple[str, ...]  # "pool:step_key" claimed by the run


def this_host() -> str:
    return socket.gethostname()


def _is_local_storage(instance: dg.DagsterInstance) -> bool:
    return "sqlite" in type(instance.run_storage).__module__.lower()


def judged_here(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """True when this machine can judge the run's pid (see the module docstring)."""
    host = run.tags.get(HOST_TAG)
    if host is not None:
        return host == this_host()
    return _is_local_storage(instance)


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """(pid, event timestamp) of the newest engine event naming the run's executing process, or None."""
    found = None
    for record in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        if event is None or not (event.message or "").startswith(_WORKER_EVENT_PREFIXES):
            continue
        pid_value = event.engine_event_data.metadata.get("pid") if event.engine_event_data else None
        if pid_value is None:
            continue
        pid = pid_value.value
        if not isinstance(pid, (int, float, str)):
            continue
        try:
            found = (int(pid), float(record.timestamp))
        except (TypeError, ValueError):
            continue
    return found


def worker_start(pid: int) -> str:
    """When process ``pid`` started, in a clock that setting the system clock does not move: on Linux the start in
    clock ticks since boot (/proc/PID/stat, field 22), elsewhere the creation time the kernel stored when the process
    was created. Raises psutil.NoSuchProcess when there is no such process."""
    import psutil

    if sys.platform.startswith("linux"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError as e:
            raise psutil.NoSuchProcess(pid) from e
        return stat.rsplit(")", 1)[1].split()[19]  # after "pid (comm)", field 3 is index 0
    return repr(psutil.Process(pid).create_time())


def process_alive(pid: int, started_by: float, known_start: str | None = None) -> bool:
    """The pid is a live, non-zombie process that existed at ``started_by`` (not a later reuse of the number).

    ``known_start``: ``worker_start(pid)`` of the process once seen alive; when given, the process must have that
    start, and the system clock (``started_by``) is not consulted."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if known_start is not None:
            return worker_start(pid) == known_start
        return proc.create_time() <= started_by + _START_SLACK_S
    except psutil.Error:
        return False


def _known_start(run: dg.DagsterRun, pid: int, at: float) -> str | None:
    """The start recorded for this worker (same pid and pid event), else None."""
    fields = run.tags.get(WORKER_START_TAG, "").split()
    if len(fields) == 3 and fields[0] == str(pid) and fields[2] == repr(at):
        return fields[1]
    return None


def check_worker(instance: dg.DagsterInstance, run: dg.DagsterRun) -> WorkerCheck:
    if not judged_here(instance, run):
        return WorkerCheck(WorkerState.UNKNOWN, None, f"run {run.run_id} ran on {run.tags.get(HOST_TAG)!r}")
    found = worker_pid(instance, run.run_id)
    if found is None:
        return WorkerCheck(WorkerState.UNKNOWN, None, f"run {run.run_id} has not recorded its process yet")
    pid, at = found
    known = _known_start(run, pid, at)
    if process_alive(pid, at, known):
        if known is None:
            _remember_start(instance, run.run_id, pid, at)
        return WorkerCheck(WorkerState.ALIVE, pid, f"run worker pid {pid} is alive")
    return WorkerCheck(WorkerState.DEAD, pid, f"run worker pid {pid} is gone (killed or crashed without reporting)")


def _remember_start(instance: dg.DagsterInstance, run_id: str, pid: int, at: float) -> None:
    import psutil

    try:
        start = worker_start(pid)
    except psutil.Error:  # it ended since: the next check finds it gone
        return
    instance.add_run_tags(run_id, {WORKER_START_TAG: f"{pid} {start} {at!r}"})


def slots_by_run(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    """{run_id: ["pool:step_key", ...]} for every claimed concurrency-pool slot."""
    storage = instance.event_log_storage
    out: dict[str, list[str]] = {}
    if not storage.supports_global_concurrency_limits:
        return out
    for pool in sorted(storage.get_concurrency_keys()):
        for slot in storage.get_concurrency_info(pool).claimed_slots:
            out.setdefault(slot.run_id, []).append(f"{pool}:{slot.step_key}")
    return out


def find_stale_runs(instance: dg.DagsterInstance) -> list[StaleRun]:
    """STARTED runs whose worker is dead, and finished runs that still hold pool slots."""
    slots = slots_by_run(instance)
    stale: list[StaleRun] = []
    for run in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
        check = check_worker(instance, run)
        if check.state is WorkerState.DEAD:
            stale.append(
                StaleRun(
                    run.run_id,
                    run.job_name,
                    run.status.value,
                    check.pid,
                    check.reason,
                    tuple(slots.get(run.run_id, ())),
                )
            )
    for run_id, held in slots.items():
        holder = instance.get_run_by_id(run_id)
        if holder is None or holder.is_finished:
            status = holder.status.value if holder else "DELETED"
            stale.append(
                StaleRun(
                    run_id,
                    holder.job_name if holder else "?",
                    status,
                    None,
                    f"run is {status} but still holds pool slots",
                    tuple(held),
                )
            )
    return stale


def clean_stale_runs(instance: dg.DagsterInstance) -> list[StaleRun]:
    """Mark each stale STARTED run failed (its reason in the event log) and free the slots of every stale run."""
    stale = find_stale_runs(instance)
    for s in stale:
        run = instance.get_run_by_id(s.run_id)
        if run is not None and run.status == DagsterRunStatus.STARTED:
            instance.report_run_failed(run, f"Marked failed by videolake: {s.reason}.")
        instance.event_log_storage.free_concurrency_slots_for_run(s.run_id)
    return stale
