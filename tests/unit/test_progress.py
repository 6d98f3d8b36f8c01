"""Progress lines a person can read (videolake/platform/runtime/progress.py): k/N, rate over the computed units, ETA, a
heartbeat while no unit finishes; how run_units and the CPU assets use them. A fake clock drives every case: no
sleep, no Ray cluster."""

from __future__ import annotations

import types

import pytest

from videolake.platform.runtime.progress import ProgressLine, StageReporter, format_duration, parse_line


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _reporter(**kw):
    lines: list[str] = []
    clock = Clock()
    return StageReporter("split", lines.append, clock=clock, **kw), lines, clock


def test_lines_for_given_counts_are_exact_and_come_at_most_every_5s():
    r, lines, clock = _reporter()
    r.plan(9)
    clock.t += 2
    r.update(1)  # 2 s after the last line: not written
    clock.t += 4.17
    r.update(5)
    clock.t += 1
    r.update(6)  # 1 s after the last line
    clock.t += 3.83
    r.finish(9)
    assert lines == [
        "split: 0/9 units (0 reused, 0 computed), 0s elapsed",
        "split: 5/9 units (0 reused, 5 computed), 0.81 units/s, ETA 5s",
        "split: 9/9 units (0 reused, 9 computed), 0.82 units/s, done in 11s",
    ]


def test_rate_is_over_computed_units_and_eta_over_the_units_left():
    r, lines, clock = _reporter(min_interval_s=0)
    r.plan(100, reused=40)  # 40 reused before the loop: they cost nothing and must not speed the rate up
    clock.t += 20
    r.update(50, reused=40)
    line = r.line()
    assert (line.done, line.reused, line.computed, line.rate, line.eta_s) == (50, 40, 10, 0.5, 100.0)
    assert lines[-1] == "split: 50/100 units (40 reused, 10 computed), 0.50 units/s, ETA 1m40s"
    clock.t += 4980
    r.update(60, reused=40, computed=20)
    assert lines[-1] == "split: 60/100 units (40 reused, 20 computed), 0.0040 units/s, ETA 2h46m"
    assert r.line().eta_s == pytest.approx(40 / (20 / 5000))
    assert [format_duration(s) for s in (0, 4.4, 59.6, 61, 3599, 3600, 7500)] == [
        "0s",
        "4s",
        "1m00s",
        "1m01s",
        "59m59s",
        "1h00m",
        "2h05m",
    ]


def test_heartbeat_writes_the_line_when_nothing_was_written_for_30s():
    r, lines, clock = _reporter()
    r.plan(4)
    clock.t += 29
    assert r.tick() == pytest.approx(1.0)  # not due yet: the next heartbeat in 1 s
    assert len(lines) == 1
    clock.t += 1
    assert r.tick() == pytest.approx(30.0)
    assert lines[-1] == "split: 0/4 units (0 reused, 0 computed), 30s elapsed"
    clock.t += 10
    r.update(1)  # 10 s after the heartbeat line: written (>= 5 s)
    clock.t += 25
    assert r.tick() == pytest.approx(5.0)  # 25 s after the update's line
    clock.t += 5
    r.tick()
    assert lines[-2:] == [
        "split: 1/4 units (0 reused, 1 computed), 0.025 units/s, ETA 2m00s",
        "split: 1/4 units (0 reused, 1 computed), 0.014 units/s, ETA 3m30s",
    ]
    r2, lines2, clock2 = _reporter(heartbeat_s=120)
    r2.plan(4)
    clock2.t += 60
    r2.tick()
    assert len(lines2) == 1  # the interval is configurable


def test_no_line_before_n_is_known_nor_for_a_stage_without_units():
    r, lines, clock = _reporter()
    r.update(3)
    clock.t += 100
    assert r.tick() == 30.0
    r.finish(3)
    assert lines == [] and r.line() is None
    r0, lines0, _ = _reporter()
    r0.plan(0)
    r0.tick()
    r0.finish(0)
    assert lines0 == []


def test_heartbeat_thread_is_a_daemon_started_and_stopped_by_the_context_manager():
    r, lines, _ = _reporter()
    r.plan(2)
    with r:
        thread = r._thread
        assert thread is not None and thread.daemon and thread.is_alive()
    assert not thread.is_alive() and r._thread is None
    silent = StageReporter("split", None)
    with silent:
        assert silent._thread is None  # nothing to write: no thread


def test_parse_line_reads_back_every_kind_of_line_and_nothing_else():
    lines = [
        ProgressLine("split", 0, 9, "units", 0, 0, elapsed_s=35.0),
        ProgressLine("split", 5, 9, "units", 1, 4, rate=0.81, eta_s=5.0),
        ProgressLine("captioned", 120, 120, "clips", 30, 90, rate=12.5, elapsed_s=3720.0, final=True),
        ProgressLine("probed", 9, 9, "units", 9, 0, elapsed_s=1.0, final=True),
    ]
    for line in lines:
        assert parse_line(str(line)) == line, str(line)
    assert str(lines[2]) == "captioned: 120/120 clips (30 reused, 90 computed), 12.5 clips/s, done in 1h02m"
    for other in [
        "split: 9 units done (0 reused, 9 computed)",
        "120 clips to caption in 1 partition(s): 0 already captioned (0 checkpointed batches reused), "
        "120 to do in 8 units",
        "captioned 5/9 clips",
        "",
    ]:
        assert parse_line(other) is None


def test_the_cpu_assets_write_the_stage_lines_to_the_step_log():
    from videolake.assets.cpu_assets import stage_progress

    logged: list[str] = []
    context = types.SimpleNamespace(log=types.SimpleNamespace(info=logged.append))
    report = stage_progress(context, "scored")
    report.plan(3)
    report.finish(3, reused=3)
    assert [parse_line(s) is not None for s in logged] == [True, True]
    assert logged[0] == "scored: 0/3 units (0 reused, 0 computed), 0s elapsed"
    assert logged[1].startswith("scored: 3/3 units (3 reused, 0 computed), done in ")
