"""Progress a person can read: one line per report, ``k/N`` with the rate and the time left.

    split: 5/9 units (0 reused, 5 computed), 0.81 units/s, ETA 5s
    split: 0/9 units (0 reused, 0 computed), 35s elapsed          (nothing computed yet: no rate to tell)
    split: 9/9 units (0 reused, 9 computed), 0.82 units/s, done in 11s   (the stage's last line)

A stage makes one ``StageReporter`` (its name, the word for its units, a callable that writes a line: stdlib
logging, Dagster's ``context.log.info``), tells it N once its units are planned (``plan``), then the counts as units
finish (``update``: at most one line per ``min_interval_s``), then ``finish``. The rate is over the computed units
(reused ones cost nothing), from ``plan`` on; the ETA is the units left at that rate. While the reporter is entered
as a context manager, a daemon heartbeat thread writes the line again when none was written for ``heartbeat_s``,
so a unit that takes minutes still shows the step is alive. No line comes before N is known, and none for a stage
with nothing to do (N = 0).

The line format is defined here once, with ``parse_line`` beside it: ``videolake demo`` reads the lines back from the
run's event log and draws them as progress bars without a copy of the format.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

HEARTBEAT_S = 30.0
MIN_INTERVAL_S = 5.0


@dataclass(frozen=True)
class ProgressLine:
    """One progress line's fields. ``rate`` (units/s over computed units) and ``eta_s`` are None until a unit was
    computed; ``elapsed_s`` is set when there is no rate, and on the stage's last line (``final``: no ETA)."""

    stage: str
    done: int
    total: int
    unit: str
    reused: int
    computed: int
    rate: float | None = None
    eta_s: float | None = None
    elapsed_s: float | None = None
    final: bool = False

    def tail(self) -> str:
        """The part after the counts: rate and ETA; the time elapsed while there is no rate; on the last line the
        rate and the time the stage took."""
        rate = f"{format_rate(self.rate)} {self.unit}/s, " if self.rate is not None else ""
        if self.final:
            return f"{rate}done in {format_duration(self.elapsed_s or 0.0)}"
        if self.rate is not None:
            return f"{rate}ETA {format_duration(self.eta_s or 0.0)}"
        return f"{format_duration(self.elapsed_s or 0.0)} elapsed"

    def counts(self) -> str:
        return f"{self.reused} reused, {self.computed} computed"

    def __str__(self) -> str:
        return f"{self.stage}: {self.done}/{self.total} {self.unit} ({self.counts()}), {self.tail()}"


def format_rate(rate: float) -> str:
    """Three significant digits at most, two for a slow stage (0.81, 12.5, 0.0040), never an exponent."""
    if rate >= 100:
        return f"{rate:.0f}"
    if rate >= 10:
        return f"{rate:.1f}"
    digits = 2 if rate <= 0 else min(max(2, 1 - math.floor(math.log10(rate))), 6)
    return f"{rate:.{digits}f}"


def format_duration(seconds: float) -> str:
    """5s, 3m20s, 2h05m (rounded to the second; hours drop the seconds)."""
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


_DURATION = r"(?:\d+h\d{2}m|\d+m\d{2}s|\d+s)"
_LINE = re.compile(
    r"^(?P<stage>[^:\n]+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) "
    r"\((?P<reused>\d+) reused, (?P<computed>\d+) computed\), "
    r"(?:(?P<rate>\d+(?:\.\d+)?) (?P=unit)/s, )?"
    rf"(?:ETA (?P<eta>{_DURATION})|(?P<elapsed>{_DURATION}) elapsed|done in (?P<took>{_DURATION}))$"
)


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not m or not text:
        raise ValueError(f"not a duration: {text!r}")
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return float(h * 3600 + mi * 60 + s)


def parse_line(text: str) -> ProgressLine | None:
    """The fields of a line ``StageReporter`` wrote, or None for any other text."""
    m = _LINE.match(text.strip())
    if m is None:
        return None
    g = m.groupdict()
    took = g["took"]
    return ProgressLine(
        stage=g["stage"],
        done=int(g["done"]),
        total=int(g["total"]),
        unit=g["unit"],
        reused=int(g["reused"]),
        computed=int(g["computed"]),
        rate=float(g["rate"]) if g["rate"] else None,
        eta_s=parse_duration(g["eta"]) if g["eta"] else None,
        elapsed_s=parse_duration(took or g["elapsed"]) if (took or g["elapsed"]) else None,
        final=took is not None,
    )


class StageReporter:
    """Writes a stage's progress lines (see the module docstring). Thread-safe: the heartbeat thread and the
    stage's loop share it. ``emit=None`` writes nothing and starts no thread."""

    def __init__(
        self,
        stage: str,
        emit: Callable[[str], None] | None,
        *,
        unit: str = "units",
        heartbeat_s: float = HEARTBEAT_S,
        min_interval_s: float = MIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stage, self.emit, self.unit = stage, emit, unit
        self.heartbeat_s, self.min_interval_s, self.clock = heartbeat_s, min_interval_s, clock
        self.total: int | None = None
        self.done = self.reused = self.computed = 0
        self._started = 0.0
        self._last: float | None = None  # when the last line was written
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ what the stage calls

    def plan(self, total: int, *, reused: int = 0) -> None:
        """N is known (``reused`` of them already done before the stage's loop starts): the first line."""
        with self._lock:
            self.total, self._started = int(total), self.clock()
            self.done, self.reused, self.computed = int(reused), int(reused), 0
            self._write()

    def update(self, done: int, *, reused: int = 0, computed: int | None = None) -> None:
        """The counts so far; writes a line when none was written for ``min_interval_s``."""
        with self._lock:
            self._set(done, reused, computed)
            if self._last is None or self.clock() - self._last >= self.min_interval_s:
                self._write()

    def finish(self, done: int | None = None, *, reused: int | None = None, computed: int | None = None) -> None:
        """The stage's last line (``done in``), whatever the interval."""
        with self._lock:
            if done is not None:
                self._set(done, self.reused if reused is None else reused, computed)
            self._write(final=True)

    def tick(self) -> float:
        """The heartbeat: write the line when none was written for ``heartbeat_s``. Returns the seconds until the
        next heartbeat is due."""
        with self._lock:
            if self.total is None:
                return self.heartbeat_s
            now = self.clock()
            if self._last is None or now - self._last >= self.heartbeat_s:
                self._write()
            last = now if self._last is None else self._last
            return max(self.heartbeat_s - (now - last), 0.0)

    def line(self, *, final: bool = False) -> ProgressLine | None:
        """The current line (None before N is known)."""
        if self.total is None:
            return None
        elapsed = max(self.clock() - self._started, 0.0)
        rate = eta = None
        if self.computed > 0 and elapsed > 0:
            rate = self.computed / elapsed
            eta = None if final else max(self.total - self.done, 0) / rate
        return ProgressLine(
            stage=self.stage,
            done=self.done,
            total=self.total,
            unit=self.unit,
            reused=self.reused,
            computed=self.computed,
            rate=rate,
            eta_s=eta,
            elapsed_s=elapsed if (rate is None or final) else None,
            final=final,
        )

    # ------------------------------------------------------------------ heartbeat thread

    def __enter__(self) -> StageReporter:
        if self.emit is not None and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._beat, daemon=True, name=f"progress-{self.stage}")
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _beat(self) -> None:
        wait = self.heartbeat_s
        while not self._stop.wait(wait):
            try:
                wait = self.tick()
            except Exception:  # noqa: BLE001 - a failing log handler must not end the heartbeat's stage
                wait = self.heartbeat_s
            wait = max(wait, 0.05)

    # ------------------------------------------------------------------ internals (under the lock)

    def _set(self, done: int, reused: int, computed: int | None) -> None:
        self.done, self.reused = int(done), int(reused)
        self.computed = int(done) - int(reused) if computed is None else int(computed)

    def _write(self, *, final: bool = False) -> None:
        line = self.line(final=final)
        if self.emit is None or line is None or line.total == 0:
            return
        self._last = self.clock()
        self.emit(str(line))
