"""Fixtures of the browser test: sample landing data, a Dagster UI (webserver + daemon) over a throw-away instance,
and a headless Chromium driven by Playwright.

Why `dg dev` (what `make ui` runs; `dagster dev` under Dagster's project CLI): it starts the webserver, the daemon (which runs backfills) and ONE shared code server, so the
code location is imported once instead of twice on this small box. Everything it starts lives in its own process
group; teardown kills that group and every descendant found by walking the process tree (Ray starts its own
sessions), SIGKILL after a grace period, because background processes here may ignore SIGTERM.

Nothing is committed: videos, lake, Dagster storage and the tiny model are written into session tmp dirs;
screenshots go to test-artifacts/browser/ (gitignored).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from free_port import free_port

from videolake.instance.health import worker_start

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Sample dates: three and two days ago (UTC). Recent on purpose: the asset page plots metadata by partition for the
# newest partitions of the definition only, so old sample dates would leave the plots empty.
_TODAY = dt.datetime.now(dt.UTC).date()
DAY1, DAY2 = (_TODAY - dt.timedelta(days=3)).isoformat(), (_TODAY - dt.timedelta(days=2)).isoformat()
# The gate backfill's days: on GATE_PASS 2 of 5 landed files are not videos (reject rate 0.4, passes the 0.5 gate),
# on GATE_FAIL 4 of 5 (0.8: raw_videos' blocking reject_rate gate fails).
GATE_PASS, GATE_FAIL = (_TODAY - dt.timedelta(days=5)).isoformat(), (_TODAY - dt.timedelta(days=4)).isoformat()
PARTITIONS_START = (_TODAY - dt.timedelta(days=30)).isoformat()
SERVER_START_TIMEOUT_S = 240
DAEMON_CLOCK = Path(__file__).parent / "daemon_clock"  # its sitecustomize.py shortens the backfill daemon's sleep
DAEMON_INTERVAL_S = 10


@dataclass(frozen=True)
class SampleData:
    """Landing data written for the test, with what the pipeline must find in it."""

    data_dir: Path  # VIDEOLAKE_DATA_DIR: store/ (landing/<day>/), lake/, models/
    days: tuple[str, str]  # the two partition keys with landed data (DAY1, DAY2)
    files: dict[str, list[str]]  # day -> landed file names
    expected_clips: dict[str, int]  # day -> scene_clips rows (cuts + 1 per ok video)
    expected_videos: dict[str, int]  # day -> raw_videos rows
    gate_days: tuple[str, str] = (GATE_PASS, GATE_FAIL)  # the second backfill: one day passes, one fails a gate
    gate_rejected: dict[str, tuple[int, int]] = field(default_factory=dict)  # gate day -> (rejected, rows)


def _sample_specs():
    from videolake.synth import Segment, Transition, VideoSpec

    def two_shots(name: str, a: str, b: str, frames: int, fps: str) -> VideoSpec:
        return VideoSpec(
            name=name,
            width=320,
            height=240,
            fps=fps,
            codec="h264",
            segments=(Segment(a, frames), Segment(b, frames)),
            transitions=(Transition("cut"),),
        )

    # Two short 240p videos per day with one hard cut each (shots of 1.5-1.6 s, above the 1 s minimum clip), and one
    # special per day: a text file named .mp4 (rejected at ingest) and an all-black video (filtered as black). The
    # second day's moving shot (pan) is footage the first day does not have: lavfi's mandelbrot and sierpinski are
    # the same pictures on every render, so they would be near-duplicates of the first day's clips.
    return {
        DAY1: (
            [
                two_shots("d1_testsrc_mandel", "testsrc2", "mandelbrot", 45, "30"),
                two_shots("d1_sierp_testsrc", "sierpinski", "testsrc2", 40, "25"),
            ],
            "not_video",
        ),
        DAY2: (
            [
                two_shots("d2_gradients_white", "gradients", "color:white", 40, "25"),
                two_shots("d2_pan_gradients", "pan", "gradients", 45, "30"),
            ],
            "black",
        ),
    }


def make_sample_data(data_dir: Path, work: Path) -> SampleData:
    """Render the sample videos into ``work`` and land them under ``data_dir``/store/landing/<day>/."""
    from videolake.synth import render, render_special

    files: dict[str, list[str]] = {}
    clips: dict[str, int] = {}
    videos: dict[str, int] = {}
    for day, (specs, special) in _sample_specs().items():
        folder = data_dir / "store" / "landing" / day
        folder.mkdir(parents=True)
        n_clips = 0
        for spec in specs:
            path, truth = render(spec, work)  # truth JSON stays in work/: only videos land
            shutil.copy(path, folder / path.name)
            n_clips += len(truth["cuts"]) + 1
        path, truth = render_special(special, work, name=f"{day}_{special}")
        shutil.copy(path, folder / path.name)
        if truth["num_frames"]:  # a decodable special (black) is one scene
            n_clips += 1
        files[day] = sorted(p.name for p in folder.iterdir())
        clips[day] = n_clips
        videos[day] = len(files[day])
    # The gate days reuse the rendered videos turned upside down (re-encoded): the gate days come first in the
    # calendar, and the same bytes, or the same pictures, landed on an earlier day would make the sample days' videos
    # exact copies and their clips near-duplicates, re-judged (and their gates no longer current) by the gate
    # backfill. PDQ does not match a picture with its 180-degree rotation. The two gate days share no video either:
    # they run at once, and when GATE_FAIL's copy committed first, GATE_PASS's commit re-judged it a cross-day exact
    # copy and materialized GATE_FAIL's raw_videos again, after its gate had failed: Dagster then (rightly) no longer
    # showed that gate's result as current for the day. Plus text files named .mp4, each with different bytes.
    rendered = sorted((data_dir / "store" / "landing" / DAY1).glob("d1_*.mp4")) + sorted(
        (data_dir / "store" / "landing" / DAY2).glob("d2_*.mp4")
    )
    assert len(rendered) == 4, rendered
    gate_rejected = {}
    for day, ok_videos, n_junk in ((GATE_PASS, rendered[:3], 2), (GATE_FAIL, rendered[3:], 4)):
        n_ok = len(ok_videos)
        folder = data_dir / "store" / "landing" / day
        folder.mkdir(parents=True)
        for path in ok_videos:
            subprocess.run(
                [
                    "ffmpeg",
                    "-v",
                    "error",
                    "-i",
                    str(path),
                    "-vf",
                    "hflip,vflip",
                    "-c:v",
                    "libx264",
                    "-crf",
                    "20",
                    "-pix_fmt",
                    "yuv420p",
                    "-threads",
                    "1",
                    "-fflags",
                    "+bitexact",
                    "-flags:v",
                    "+bitexact",
                    str(folder / path.name),
                ],
                check=True,
            )
        for i in range(n_junk):
            (folder / f"not_a_video_{i}.mp4").write_text(f"not a video, file {i} of {day}\n")
        gate_rejected[day] = (n_junk, n_ok + n_junk)
    return SampleData(
        data_dir=Path(data_dir),
        days=(DAY1, DAY2),
        files=files,
        expected_clips=clips,
        expected_videos=videos,
        gate_rejected=gate_rejected,
    )


@pytest.fixture(scope="module")
def sample_data(tmp_path_factory) -> SampleData:
    if shutil.which("ffmpeg") is None:
        pytest.fail("ffmpeg is not installed: run `make test` (it installs system packages)")
    return make_sample_data(tmp_path_factory.mktemp("videolake-data"), tmp_path_factory.mktemp("synth"))


# A process is identified by (pid, its start in a clock that setting the system clock does not move): a pid seen
# earlier is only signalled if it is still that process, never a later process that reused the number.
Proc = tuple[int, str]


def _descendants(pid: int) -> set[Proc]:
    import psutil

    try:
        return {(p.pid, worker_start(p.pid)) for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


def _same(proc: Proc):
    """The live psutil.Process for ``proc``, or None when it exited (or its pid now names another process)."""
    import psutil

    try:
        p = psutil.Process(proc[0])
        if worker_start(p.pid) != proc[1] or p.status() == psutil.STATUS_ZOMBIE:
            return None
        return p
    except psutil.Error:
        return None


def stop_process_tree(proc: subprocess.Popen, extra: set[Proc] = frozenset(), grace_s: float = 5.0) -> None:
    """SIGTERM the process group of ``proc`` and every process of its tree (plus ``extra``: descendants seen
    earlier, e.g. Ray daemons that outlived their parent), then SIGKILL whatever is left after ``grace_s``."""
    import psutil

    try:
        me: set[Proc] = {(proc.pid, worker_start(proc.pid))}
    except psutil.Error:
        me = set()
    procs = me | _descendants(proc.pid) | set(extra)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        procs |= {d for p in list(procs) if _same(p) for d in _descendants(p[0])}
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        for p in procs:
            live = _same(p)
            if live is not None:
                try:
                    live.send_signal(sig)
                except psutil.Error:
                    pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 10.0)
        while time.monotonic() < deadline and any(_same(p) for p in procs):
            proc.poll()
            time.sleep(0.2)
        if not any(_same(p) for p in procs):
            break
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class DagsterUI:
    """A running `dagster dev` over a temporary instance."""

    url: str  # http://127.0.0.1:<port>
    home: Path  # DAGSTER_HOME
    data_dir: Path  # VIDEOLAKE_DATA_DIR
    log_path: Path  # stdout + stderr of dagster dev
    proc: subprocess.Popen
    seen: set[Proc] = field(default_factory=set)  # descendants seen while running (for teardown)

    def remember_children(self) -> None:
        """Record the current process tree (run workers, Ray daemons), so teardown finds orphans too."""
        self.seen |= _descendants(self.proc.pid)

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def server_env(home: Path, data_dir: Path, alert_url: str = "") -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DAGSTER_HOME": str(home),
            # the alert sensors post here (a receiver in the test process); empty: they only log
            "VIDEOLAKE_ALERT_WEBHOOK_URL": alert_url,
            "VIDEOLAKE_DATA_DIR": str(data_dir),
            "VIDEOLAKE_PROFILE": "local",
            "VIDEOLAKE_PARTITIONS_START": PARTITIONS_START,
            "VIDEOLAKE_RAY_CPUS": "2",
            "GX_ANALYTICS_ENABLED": "false",
            "RAY_USAGE_STATS_ENABLED": "0",
            "DAGSTER_DISABLE_TELEMETRY": "true",
            "TOKENIZERS_PARALLELISM": "false",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "HF_HUB_OFFLINE": "1",
            # The backfill daemon looks for work every 10 s instead of Dagster's fixed 30 s (daemon_clock/).
            "VIDEOLAKE_TEST_DAEMON_INTERVAL_S": str(DAEMON_INTERVAL_S),
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), str(DAEMON_CLOCK), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
    )
    env.pop("RAY_ADDRESS", None)  # never attach to another session's Ray cluster
    env.pop("VIDEOLAKE_GATES_FILE", None)
    return env


def wait_for_server(ui: DagsterUI, timeout_s: float = SERVER_START_TIMEOUT_S) -> None:
    """Until /server_info answers and the code location has loaded (the GraphQL workspace reports it)."""
    import json

    deadline = time.monotonic() + timeout_s
    info_ok = False
    query = json.dumps(
        {
            "query": "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
            "locationOrLoadError { __typename } } } } }"
        }
    ).encode()
    last = ""
    while time.monotonic() < deadline:
        if ui.proc.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {ui.proc.returncode}:\n{ui.log_tail()}")
        try:
            if not info_ok:
                with urllib.request.urlopen(f"{ui.url}/server_info", timeout=5) as r:
                    info_ok = r.status == 200
            if info_ok:
                req = urllib.request.Request(
                    f"{ui.url}/graphql", data=query, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(req, timeout=10) as r:
                    body = json.loads(r.read())
                entries = body["data"]["workspaceOrError"]["locationEntries"]
                last = json.dumps(entries)
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    kinds = {e["locationOrLoadError"]["__typename"] for e in entries}
                    if kinds != {"RepositoryLocation"}:
                        raise RuntimeError(f"code location failed to load: {last}\n{ui.log_tail()}")
                    ui.remember_children()
                    return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(1.0)
    raise RuntimeError(f"the Dagster UI did not come up in {timeout_s}s (last: {last}):\n{ui.log_tail()}")


def start_dagster_ui(
    home: Path, data_dir: Path, alert_url: str = "", extra_env: dict[str, str] | None = None
) -> tuple[DagsterUI, object]:
    """Start `dg dev` (Dagster's `dagster dev` behind its project CLI) on a free loopback port; returns (ui, its open log file) once the location is loaded."""
    shutil.copyfile(REPO / "dagster.yaml", home / "dagster.yaml")
    # The instance has shown its "Join the Dagster community" dialog already (dagster._core.nux keeps that as
    # $DAGSTER_HOME/.nux/nux.yaml): the UI opens it 1 s after a page loads, over whatever dialog a test has open.
    (home / ".nux").mkdir(exist_ok=True)
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    port = free_port()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTIFACTS / "dagster-dev.log"
    log = open(log_path, "wb")
    # As `make ui` starts it: `dg dev` reads [tool.dg] of pyproject.toml (code location "videolake").
    cmd = [
        str(Path(sys.executable).parent / "dg"),
        "dev",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--live-data-poll-rate",
        "1000",
    ]
    env = {
        **server_env(home, data_dir, alert_url),
        **(extra_env or {}),
        "VIRTUAL_ENV": str(Path(sys.executable).parent.parent),
    }
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    ui = DagsterUI(
        url=f"http://127.0.0.1:{port}", home=Path(home), data_dir=Path(data_dir), log_path=log_path, proc=proc
    )
    try:
        wait_for_server(ui)
    except BaseException:
        stop_ui(ui, log)
        raise
    return ui, log


def stop_ui(ui: DagsterUI, log) -> None:
    ui.remember_children()
    stop_process_tree(ui.proc, ui.seen)
    log.close()


@pytest.fixture(scope="module")
def alert_receiver():
    """A chat webhook on loopback for the deployment's alert sensors: yields (its URL, the JSON bodies POSTed to it,
    in arrival order)."""
    from webhook_receiver import webhook_receiver

    with webhook_receiver("/alerts") as receiver:
        yield receiver


# Module scope, not session: the UI's webserver, daemon and code servers keep polling (~10 % of a core) and would
# do so through every test file collected after this one.
@pytest.fixture(scope="module")
def dagster_ui(sample_data, alert_receiver, caption_server, tmp_path_factory):
    """The deployment captions through the suite's vLLM API server (the ``caption_server`` fixture, started while
    the deployment starts and ready-checked before the first backfill): the test is about the UI."""
    from vllm_server import deployment_env

    ui, log = start_dagster_ui(
        tmp_path_factory.mktemp("dagster-home"),
        sample_data.data_dir,
        alert_receiver[0],
        extra_env=deployment_env(caption_server, sample_data.data_dir),
    )
    try:
        yield ui
    finally:
        stop_ui(ui, log)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `make test` (it installs Debian's chromium)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def module_page(browser):
    """One 1600x1000 page for the module's tests: the Dagster app loads once, and each test moves through it as a
    user does (test_ui.open_ui), instead of loading it again in a fresh page per test (~1 CPU-s of Chromium each)."""
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    try:
        yield pg
    finally:
        ctx.close()


def save_failure(page, name: str) -> None:
    """Save ``page``'s screenshot and HTML as test-artifacts/browser/FAILED-<name>.png/.html, then leave the page on
    about:blank, so the next test loads the app afresh whatever state the failure left it in. Neither step may hide
    the failure itself (a crashed page included)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        page.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"), full_page=True)
        (ARTIFACTS / f"FAILED-{name}.html").write_text(page.content())
    except Exception as exc:
        print(f"could not save the failure artifacts: {exc}")
    try:
        page.goto("about:blank")
    except Exception as exc:
        print(f"could not leave the page: {exc}")


@pytest.fixture(scope="module")
def on_failure():
    """``save_failure``, for the module fixtures that drive the page themselves (the backfills)."""
    return save_failure


@pytest.fixture
def page(module_page, request):
    """The module's page; a failed test's page is saved and left blank (``save_failure``)."""
    yield module_page
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        save_failure(module_page, request.node.name)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
