"""`videolake run --start D [--end D] [--assets a,b]`: materialize the landing days of a date range on the Dagster
instance ($DAGSTER_HOME), one run per day, with each step's progress while it goes and a summary per day.

What a team runs on its own data: the demo's pipeline without its sample data. Each day is a run of the daily job
(the backfill policy's default, one run per day: a failing day fails alone), recorded on the instance like a UI
backfill's runs (tagged ``videolake/trigger=run`` and ``videolake/range=START..END``, with the day tag the run
queue uses), so the UI shows them, their events, checks and materializations.

Why in this process, one day after another, and not a daemon backfill: a backfill is executed by the Dagster daemon
(it submits each day's run to the run queue, which the daemon dequeues); outside `make ui` / `dagster dev` no
daemon runs, so a backfill submitted from here would wait without a word. Running the days here needs nothing
running, shows each step as it happens (the demo's ``StepProgress``, on the run's event log), and leaves the same
runs on the instance. Runs of this instance whose process is gone are cleaned up first (as the demo does). Days
with no landing folder are skipped (said so) when raw_videos is in the selection. The exit status is 0 only when
every day that ran succeeded, every blocking gate included.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
import uuid
from dataclasses import dataclass
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--start", required=True, help="first day YYYY-MM-DD")
    p.add_argument("--end", default=None, help="last day YYYY-MM-DD (inclusive; default: --start)")
    p.add_argument(
        "--assets",
        default=None,
        help="comma-separated tables to materialize, with their gates (default: every asset of the daily job); "
        "their upstream must be materialized already",
    )
    p.add_argument("--verbose", action="store_true", help="print Dagster's event log instead of writing it to a file")


@dataclass(frozen=True)
class DayResult:
    day: str
    status: str  # succeeded | FAILED | skipped
    run_id: str | None = None
    note: str = ""


def _days(start: str, end: str | None) -> list[str]:
    """The days [start, end], or ValueError with what is wrong."""
    try:
        first = dt.date.fromisoformat(start)
        last = dt.date.fromisoformat(end or start)
    except ValueError as exc:
        raise ValueError(f"dates are YYYY-MM-DD: {exc}") from None
    if last < first:
        raise ValueError(f"--end {last} is before --start {first}")
    return [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def _selection(job, assets: str | None) -> list | None:
    """The asset keys ``--assets`` names (None: the whole job), or ValueError naming the unknown ones."""
    if not assets:
        return None
    import dagster as dg

    known = sorted(k.to_user_string() for k in job.asset_layer.executable_asset_keys)
    names = [a.strip() for a in assets.split(",") if a.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"unknown asset(s) {', '.join(unknown) or repr(assets)}: choose from {', '.join(known)}")
    return [dg.AssetKey(n) for n in names]


def landing_days(object_store) -> set[str]:
    """The days that have landed objects (the landing sensor's rule: well-formed date folders, hidden entries
    and empty folders left out)."""
    import dagster as dg

    from videolake.assets.sensors import landing_fingerprints

    with dg.build_resources({"object_store": object_store}) as built:
        return set(landing_fingerprints(built.object_store.get_store(), object_store.landing))


def run(args: argparse.Namespace) -> int:
    from videolake.commands._env import prepare_local_instance

    home = prepare_local_instance()
    t0 = time.monotonic()
    import dagster as dg

    from videolake.assets.errors import first_line
    from videolake.commands.demo import report_stale_runs

    try:
        plan = _plan(args)
    except Exception as exc:  # noqa: BLE001 (wrong arguments or a broken environment: one line, no traceback)
        print(f"error: {exc if isinstance(exc, ValueError) else first_line(exc)}")
        return 2
    days, selection = plan.days, plan.selection
    instance = dg.DagsterInstance.get()
    report_stale_runs(instance)

    span = days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}"
    needs_landing = selection is None or dg.AssetKey("raw_videos") in selection
    what = "every asset" if selection is None else ", ".join(k.to_user_string() for k in selection)
    log_file = str(home / "logs" / f"run-{span}-{uuid.uuid4().hex[:8]}.log")
    log_path = None if args.verbose else log_file
    where = "" if args.verbose else f"; event log: {log_path}"
    print(f"materializing {what} for {span} ({len(days)} day(s)) on the Dagster instance at {home}{where}", flush=True)

    results: list[DayResult] = []
    for i, day in enumerate(days, 1):
        head = f"[{i}/{len(days)}] {day}"
        if needs_landing and day not in plan.landed:
            print(f"{head}: no landing data (skipped)", flush=True)
            results.append(DayResult(day, "skipped", note="no landing data"))
            continue
        print(f"{head}", flush=True)
        results.append(_run_day(plan, instance, day, span, log_path))
        print(f"  {day} {results[-1].status} (run {results[-1].run_id})", flush=True)
    return _report(results, span, t0, log_path)


@dataclass(frozen=True)
class _Plan:
    """What ``run`` materializes: the days, the job and its asset selection (None: all), the days with landed data."""

    days: list[str]
    defs: Any
    job: Any
    selection: list | None
    landed: set[str]


def _plan(args: argparse.Namespace) -> _Plan:
    """The run's plan from the arguments; ValueError (or the environment's error) when it cannot run."""
    days = _days(args.start, args.end)
    from videolake.definitions import build_definitions

    defs = build_definitions()
    job = defs.resolve_job_def("videolake_daily")
    selection = _selection(job, args.assets)
    _check_partitions(job, days)
    assert defs.resources is not None  # build_definitions always binds them
    landed = landing_days(defs.resources["object_store"])
    return _Plan(days, defs, job, selection, landed)


def _check_partitions(job, days: list[str]) -> None:
    """ValueError naming the first of ``days`` that is not a partition of the daily job."""
    valid = set(job.partitions_def.get_partition_keys()) if job.partitions_def else set(days)
    outside = [d for d in days if d not in valid]
    if outside:
        first = min(valid) if valid else "?"
        raise ValueError(
            f"{outside[0]} is not a partition of the daily job (days from {first}, "
            "VIDEOLAKE_PARTITIONS_START, to yesterday UTC)"
        )


def _run_day(plan: _Plan, instance, day: str, span: str, log_path: str | None) -> DayResult:
    """Run the daily job for ``day`` with progress, print its summary (and why it failed), and say how it went."""
    from videolake.commands.demo import run_with_progress
    from videolake.commands.summary import explain_failure, print_summary
    from videolake.instance.day_queue import day_tags
    from videolake.instance.health import HOST_TAG, this_host

    run_id = str(uuid.uuid4())
    # the day tag a queued run gets at submit (instance/day_queue.py): queued runs of this day wait for this one
    tags = {HOST_TAG: this_host(), "videolake/trigger": "run", "videolake/range": span, **day_tags([day])}
    t1 = time.monotonic()

    def execute(day=day, run_id=run_id, tags=tags):
        return plan.job.execute_in_process(
            partition_key=day,
            instance=instance,
            raise_on_error=False,
            run_id=run_id,
            tags=tags,
            asset_selection=plan.selection,
        )

    result = run_with_progress(instance, run_id, execute, log_path)
    print_summary(plan.defs, day, result, time.monotonic() - t1)
    if result.success:
        return DayResult(day, "succeeded", result.run_id)
    again = f"run the day again (`videolake run --start {day}`)"
    for line in explain_failure(result, day, log_path, again=again).lines(None):
        print(f"  {line}")
    return DayResult(day, "FAILED", result.run_id)


def _report(results: list[DayResult], span: str, t0: float, log_path: str | None) -> int:
    """Print the range's outcome; the exit status: 0 when every day that ran succeeded, 1 otherwise or none ran."""
    failed = [r.day for r in results if r.status == "FAILED"]
    ran = [r for r in results if r.status != "skipped"]
    skipped = len(results) - len(ran)
    print(
        f"\n{span}: {len(ran) - len(failed)} of {len(ran)} day(s) succeeded"
        + (f", FAILED: {', '.join(failed)}" if failed else "")
        + (f", {skipped} skipped (no landing data)" if skipped else "")
        + f" in {time.monotonic() - t0:.1f}s"
    )
    if not ran:
        print(f"nothing ran: no day of {span} has a landing folder with files")
        return 1
    if log_path:
        print(f"event log: {log_path}")
    return 1 if failed else 0
