"""`videolake demo`: synthesize landing videos for one date, run the whole pipeline for that partition through
Dagster on the local instance, and print what happened.

What it prints is for a person: one line per step while the run goes, the counts per table, the gates, and when the
run fails, the failing step (or gate), the first line of its error and what to do. Dagster's event log (and the
output of Ray and vLLM) goes to a file whose path is printed, unless --verbose. Before the run it cleans up runs of
this instance whose process is gone (an earlier demo killed mid-run), so their pool slots cannot block this one.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from videolake.commands._env import quiet_dagster_warnings
from videolake.platform.runtime.progress import ProgressLine, parse_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    yesterday = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()
    p.add_argument("--date", default=yesterday, help="partition date YYYY-MM-DD (default: yesterday, UTC)")
    p.add_argument("--count", type=int, default=8, help="synthetic videos to land (plus the reject cases)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-specials", action="store_true", help="omit the files the pipeline must reject/filter")
    p.add_argument(
        "--no-synth",
        action="store_true",
        help="land nothing: run on what is already in the date's landing folder (e.g. your own videos)",
    )
    p.add_argument("--verbose", action="store_true", help="print Dagster's event log instead of writing it to a file")


def land_sample_data(
    store_root: str, landing: str, date: str, count: int, seed: int, specials: bool
) -> tuple[int, bool]:
    """Synthesize videos straight into <store>/<landing>/<date>/, unless that folder already has files.
    Returns (files in the folder, whether they were reused)."""
    from pathlib import Path

    from videolake.synth import generate

    out = Path(store_root) / landing / date
    existing = [p for p in out.glob("*") if p.suffix != ".json"] if out.exists() else []
    if existing:
        return len(existing), True
    # Ground-truth JSONs go beside the landing folder, not into it: they are not videos.
    truth_dir = Path(store_root).parent / "synth-truth" / date
    tmp = truth_dir / "videos"
    paths = generate(
        tmp,
        count=count,
        seed=seed,
        include_specials=specials,
        max_duration_s=20.0,
        progress=lambda msg: print(f"  synth: {msg}", flush=True),
    )
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in paths:
        p = Path(p)
        p.replace(out / p.name)
        n += 1
    return n, False


@contextlib.contextmanager
def output_to_file(path: str):
    """Send everything written to stdout/stderr, by this process and the processes it starts (Ray workers, vLLM),
    to ``path``; yields a writer for the terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(saved_out), "w", buffering=1)
    with open(path, "ab", buffering=0) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield terminal
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            terminal.close()


STEP_KINDS = ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE", "STEP_UP_FOR_RETRY", "STEP_SKIPPED")
PLAIN_INTERVAL_S = 30.0
INDENT = "      "


class StepLines:
    """What the demo prints from the run's event-log entries, as plain lines (stdout is not a terminal: CI, a pipe).

    One line per step start/end/retry; and the stage's progress lines (``videolake/platform/runtime/progress.py``, logged by
    the step): one when ``interval_s`` passed since the stage's first line (its plan, once Ray is up) or since the
    last one printed, and the stage's last line once one was printed. A stage shorter than ``interval_s`` prints
    no progress line: its step shows only its start and end."""

    def __init__(self, write: Callable[[str], None], *, interval_s: float = PLAIN_INTERVAL_S) -> None:
        self.write, self.interval_s = write, interval_s
        self.started: dict[str, float] = {}
        self.printed: dict[str, float] = {}  # step -> timestamp of the last progress line printed, or of the first seen
        self.shown: set[str] = set()  # steps with a progress line printed

    def handle(self, entry) -> None:
        """One event-log entry (``EventLogEntry``): a step event, a progress line, or anything else (ignored)."""
        event = entry.dagster_event
        if event is None:
            line = parse_line(entry.user_message or "") if entry.step_key else None
            if line is not None:
                self.progress(entry.step_key, line, entry.timestamp)
        elif event.event_type_value in STEP_KINDS:
            self.step_event(event.step_key, event.event_type_value, entry.timestamp)

    def step_event(self, step: str, kind: str, timestamp: float) -> None:
        if kind == "STEP_START":
            self.started[step] = timestamp
            self.printed.pop(step, None)
            self.shown.discard(step)
            self.write(f"{INDENT}{step} ...")
            return
        self.end_progress(step)
        if kind == "STEP_SUCCESS":
            self.write(f"{INDENT}{step} done ({timestamp - self.started.get(step, timestamp):.1f}s)")
        elif kind == "STEP_UP_FOR_RETRY":
            self.write(f"{INDENT}{step} failed, retrying")
        elif kind == "STEP_FAILURE":
            self.write(f"{INDENT}{step} FAILED")
        elif kind == "STEP_SKIPPED":
            self.write(f"{INDENT}{step} skipped")

    def progress(self, step: str, line: ProgressLine, timestamp: float) -> None:
        since = self.printed.setdefault(step, timestamp)
        if (line.final and step in self.shown) or timestamp - since >= self.interval_s:
            self.printed[step] = timestamp
            self.shown.add(step)
            self.write(f"{INDENT}{step}: {line}")

    def end_progress(self, step: str) -> None:
        """The step ended (or is retried): its progress is over."""

    def close(self) -> None:
        """The run ended."""


class StepBars(StepLines):
    """On a terminal: the same step lines, and a live progress bar per step while its stage reports (tqdm), with
    the stage's own counts, rate and ETA; the bar stays as the step's last progress line when the step ends."""

    def __init__(self, file) -> None:
        from tqdm import tqdm

        self.tqdm, self.file = tqdm, file
        super().__init__(lambda text: tqdm.write(text, file=file))
        self.bars: dict[str, Any] = {}

    def progress(self, step: str, line: ProgressLine, timestamp: float) -> None:
        # the stage's own counts, rate and ETA, not tqdm's (which would time this poller, not the stage)
        look = f"{{desc}} {{n_fmt}}/{{total_fmt}} {line.unit} |{{bar:24}}| ({line.counts()}), {line.tail()}"
        bar = self.bars.get(step)
        if bar is None:
            self.bars[step] = self.tqdm(
                total=line.total,
                initial=line.done,
                desc=f"{INDENT}{step}: {line.stage}",
                bar_format=look,
                file=self.file,
                position=len(self.bars),
                leave=True,
                dynamic_ncols=True,
            )
            return
        bar.total, bar.n, bar.bar_format = line.total, line.done, look
        bar.refresh()

    def end_progress(self, step: str) -> None:
        bar = self.bars.pop(step, None)
        if bar is not None:
            bar.close()

    def close(self) -> None:
        for step in list(self.bars):
            self.end_progress(step)


def step_view(file) -> StepLines:
    """Bars on a terminal, plain lines elsewhere (CI, a pipe, a file)."""
    if getattr(file, "isatty", lambda: False)():
        return StepBars(file)
    return StepLines(lambda line: print(line, file=file, flush=True))


class StepProgress(threading.Thread):
    """Shows the run's steps and their progress while it executes: polls the run's event log (one query per second
    for every record after the cursor: step events and the steps' log lines, which carry the stages' progress) and
    hands each entry to ``view``."""

    def __init__(self, instance, run_id: str, view: StepLines) -> None:
        super().__init__(daemon=True, name="demo-progress")
        self.instance, self.run_id, self.view = instance, run_id, view
        self.stop = threading.Event()

    def run(self) -> None:
        cursor = None
        try:
            while True:
                stopping = self.stop.wait(1.0)
                try:
                    conn = self.instance.get_records_for_run(self.run_id, cursor=cursor)
                except Exception:  # noqa: BLE001 (the run has not created its records yet, or sqlite is busy)
                    conn = None
                if conn is not None:
                    cursor = conn.cursor
                    for record in conn.records:
                        self.view.handle(record.event_log_entry)
                if stopping:
                    return
        finally:
            self.view.close()


def run_with_progress(instance, run_id: str, execute, log_file: str | None):
    """``execute()``'s result. With ``log_file``, Dagster's output goes to that file and the terminal shows one
    line per step of run ``run_id`` (StepProgress); with None (--verbose), the event log prints as it comes."""
    if log_file is None:
        return execute()
    os.makedirs(os.path.dirname(log_file), exist_ok=True)
    with output_to_file(log_file) as terminal:
        progress = StepProgress(instance, run_id, step_view(terminal))
        progress.start()
        try:
            return execute()
        finally:
            progress.stop.set()
            progress.join(timeout=10)


def report_stale_runs(instance, write=print) -> None:
    """Fail runs of this instance whose process is gone and free their pool slots; say what was done."""
    from videolake.instance.health import clean_stale_runs

    for s in clean_stale_runs(instance):
        what = "marked FAILED" if s.status == "STARTED" else f"already {s.status}"
        freed = f", freed pool slots {', '.join(s.slots)}" if s.slots else ""
        write(f"cleaned up stale run {s.run_id} ({s.job_name}): {s.reason}: {what}{freed}")


def run(args: argparse.Namespace) -> int:
    from videolake.commands._env import prepare_local_instance

    home = prepare_local_instance()
    t0 = time.monotonic()
    quiet_dagster_warnings()
    import dagster as dg

    try:
        from videolake.definitions import build_definitions

        defs = build_definitions()
        job = defs.resolve_job_def("videolake_daily")
    except Exception as exc:  # noqa: BLE001 (a broken environment or configuration: explain it, briefly)
        from videolake.assets.errors import first_line

        print(f"FAILED to load the pipeline definitions: {first_line(exc)}")
        print(
            "what to do: fix the setting named above (the VIDEOLAKE_* environment variables), then run the demo "
            "again; `videolake doctor` checks the set-up"
        )
        return 1
    # Safe beside another process opening the same fresh DAGSTER_HOME: the local instance creates its sqlite
    # storage under a file lock (videolake/instance/sqlite_init.py).
    instance = dg.DagsterInstance.get()
    report_stale_runs(instance)

    data_dir = os.environ["VIDEOLAKE_DATA_DIR"]
    store_root = os.path.join(data_dir, "store")
    folder = os.path.join(store_root, "landing", args.date)
    if args.no_synth:
        n = len(os.listdir(folder)) if os.path.isdir(folder) else None
        state = f"{n} files" if n is not None else "no landing folder"
        print(f"[1/3] using the landing folder {folder}/ as it is ({state})", flush=True)
    else:
        print(f"[1/3] landing sample videos for {args.date} under {folder}/", flush=True)
        n, reused = land_sample_data(store_root, "landing", args.date, args.count, args.seed, not args.no_specials)
        if reused:
            print(f"      reusing the {n} files already there (delete the folder for new ones)", flush=True)
        else:
            print(f"      {n} files landed ({time.monotonic() - t0:.1f}s)", flush=True)

    run_id = str(uuid.uuid4())
    log_file = str(home / "logs" / f"demo-{args.date}-{run_id[:8]}.log")
    log_path = None if args.verbose else log_file
    where = "" if args.verbose else f"; event log: {log_path}"
    print(f"[2/3] materializing partition {args.date} on the Dagster instance at {home}{where}", flush=True)
    from videolake.instance.day_queue import day_tags
    from videolake.instance.health import HOST_TAG, this_host

    # The day tag a queued run gets at submit (videolake/instance/day_queue.py): this run starts in-process, past
    # the queue, and the tag keeps queued runs of this day (ranged ones too) from starting beside it.
    tags = {HOST_TAG: this_host(), "videolake/trigger": "demo", **day_tags([args.date])}
    t1 = time.monotonic()

    def execute():
        return job.execute_in_process(
            partition_key=args.date, instance=instance, raise_on_error=False, run_id=run_id, tags=tags
        )

    result = run_with_progress(instance, run_id, execute, log_path)
    elapsed = time.monotonic() - t1

    print("[3/3] summary", flush=True)
    from videolake.commands.summary import explain_failure, print_summary

    print_summary(defs, args.date, result, elapsed)
    if not result.success:
        print()
        for line in explain_failure(result, args.date, log_path).lines(log_path):
            print(line)
    print(f"\nrun {result.run_id} {'succeeded' if result.success else 'FAILED'} in {time.monotonic() - t0:.1f}s total")
    print("Browse the assets, checks and lineage in the Dagster UI:  make ui   (then open http://127.0.0.1:3000)")
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace()))
