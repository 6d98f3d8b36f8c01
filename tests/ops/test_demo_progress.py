"""What `videolake demo` prints while a run goes, from the run's event-log entries (no demo run: the entries are
made here, or recorded from a one-asset run on an ephemeral instance): plain lines when stdout is not a terminal,
progress bars when it is."""

from __future__ import annotations

import io
import logging

import pytest

from videolake.commands.demo import StepBars, StepLines, StepProgress, step_view
from videolake.platform.runtime.progress import StageReporter


def _log(step, text, ts):
    from dagster._core.events.log import EventLogEntry

    return EventLogEntry(None, logging.INFO, text, "run-1", ts, step_key=step, job_name="videolake_daily")


def _step(step, kind, ts):
    from dagster._core.events import DagsterEvent, StepRetryData
    from dagster._core.events.log import EventLogEntry
    from dagster._core.execution.plan.objects import StepSuccessData
    from dagster._utils.error import SerializableErrorInfo

    error = SerializableErrorInfo("OSError: lost", [], "OSError")
    data = {"STEP_SUCCESS": StepSuccessData(duration_ms=1.0), "STEP_UP_FOR_RETRY": StepRetryData(error=error)}
    event = DagsterEvent(kind, "videolake_daily", step_key=step, event_specific_data=data.get(kind))
    return EventLogEntry(
        None, logging.DEBUG, "", "run-1", ts, step_key=step, job_name="videolake_daily", dagster_event=event
    )


ENTRIES = [
    _step("raw_videos", "STEP_START", 100.0),
    _log("raw_videos", "probed: 0/2 units (0 reused, 0 computed), 0s elapsed", 131.0),  # Ray took 30 s to start
    _log("raw_videos", "probed: 2/2 units (0 reused, 2 computed), 0.67 units/s, done in 3s", 134.0),
    _step("raw_videos", "STEP_SUCCESS", 134.5),
    _step("scene_clips", "STEP_START", 145.0),
    _log("scene_clips", "no Ray cluster connected: starting a local one", 145.5),
    _log("scene_clips", "split: 0/9 units (0 reused, 0 computed), 0s elapsed", 146.0),
    _log("scene_clips", "split: 2/9 units (0 reused, 2 computed), 0.40 units/s, ETA 18s", 151.0),
    _log("scene_clips", "split: 4/9 units (0 reused, 4 computed), 0.16 units/s, ETA 31s", 176.0),  # 30 s after the plan
    _log("scene_clips", "split: 5/9 units (0 reused, 5 computed), 0.17 units/s, ETA 24s", 180.0),
    _log("scene_clips", "split: 8/9 units (0 reused, 8 computed), 0.14 units/s, ETA 7s", 206.0),  # 30 s later
    _log(None, "split: 8/9 units (0 reused, 8 computed), 0.14 units/s, ETA 7s", 207.0),  # not a step's line
    _log("scene_clips", "split: 9/9 units (0 reused, 9 computed), 0.14 units/s, done in 1m06s", 212.0),
    _step("scene_clips", "STEP_SUCCESS", 213.0),
    _step("filtered_clips", "STEP_START", 214.0),
    _step("filtered_clips", "STEP_UP_FOR_RETRY", 215.0),
]


def test_plain_lines_show_a_long_stage_every_30s_and_a_short_one_not_at_all():
    lines: list[str] = []
    view = StepLines(lines.append)
    for entry in ENTRIES:
        view.handle(entry)
    assert lines == [
        "      raw_videos ...",
        "      raw_videos done (34.5s)",  # its stage took less than 30 s: no progress line
        "      scene_clips ...",
        "      scene_clips: split: 4/9 units (0 reused, 4 computed), 0.16 units/s, ETA 31s",
        "      scene_clips: split: 8/9 units (0 reused, 8 computed), 0.14 units/s, ETA 7s",
        "      scene_clips: split: 9/9 units (0 reused, 9 computed), 0.14 units/s, done in 1m06s",
        "      scene_clips done (68.0s)",
        "      filtered_clips ...",
        "      filtered_clips failed, retrying",
    ]


def test_a_pipe_gets_plain_lines_and_a_terminal_gets_bars():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    pipe = io.StringIO()
    view = step_view(pipe)
    assert type(view) is StepLines
    view.handle(ENTRIES[0])
    assert pipe.getvalue() == "      raw_videos ...\n"

    term = Terminal()
    bars = step_view(term)
    assert isinstance(bars, StepBars)
    for entry in ENTRIES[4:10]:
        bars.handle(entry)
    live = term.getvalue()
    assert "scene_clips: split 5/9 units |" in live
    assert "| (0 reused, 5 computed), 0.17 units/s, ETA 24s" in live
    for entry in ENTRIES[10:14]:
        bars.handle(entry)
    assert bars.bars == {}  # the step ended: its bar is closed, and stays as its last line
    out = term.getvalue()
    assert "9/9 units" in out and "done in 1m06s" in out
    assert out.rstrip().endswith("scene_clips done (68.0s)")


@pytest.mark.timeout(120)
def test_the_stage_lines_of_a_run_reach_the_demo_through_the_event_log(tmp_path):
    """The engine's lines, logged by a step with context.log.info, read back the way the demo polls (every record
    after the cursor, one query) from a real run on an ephemeral instance."""
    import dagster as dg

    class Clock:
        t = 0.0

        def __call__(self):
            return self.t

    @dg.asset
    def scene_clips(context) -> None:
        clock = Clock()
        report = StageReporter("split", context.log.info, clock=clock, min_interval_s=0)
        report.plan(2)
        clock.t = 4.0
        report.update(1)
        clock.t = 8.0
        report.finish(2)

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([scene_clips], instance=instance)
        lines: list[str] = []
        poller = StepProgress(instance, result.run_id, StepLines(lines.append, interval_s=0))
        poller.stop.set()
        poller.run()  # here, not as a thread: one poll, then it returns
    assert [line for line in lines if " done (" not in line] == [
        "      scene_clips ...",
        "      scene_clips: split: 0/2 units (0 reused, 0 computed), 0s elapsed",
        "      scene_clips: split: 1/2 units (0 reused, 1 computed), 0.25 units/s, ETA 4s",
        "      scene_clips: split: 2/2 units (0 reused, 2 computed), 0.25 units/s, done in 8s",
    ]
    assert lines[-1].startswith("      scene_clips done (")
