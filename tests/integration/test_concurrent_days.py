"""Days that run at the same time give the tables days run one after another give (issue 40), through the real
machinery: `dagster dev` (webserver, daemon, run queue with the repository's dagster.yaml: two runs at a time, one
attempt per partition day), runs launched over GraphQL as the UI does.

Four days of short synthetic videos, where later days hold exact and near copies of earlier days and of each other:

1. one run per day, one after another: the reference raw_videos and filtered_clips;
2. the lake wiped, the four days as ONE asset backfill (one run per day, the queue runs two at a time): every row
   of raw_videos and filtered_clips equals the reference, and two runs did overlap;
3. two attempts of the same day launched together: the queue runs them one after the other (they never overlap),
   and the tables still equal the reference;
4. the lake wiped, two command-line runs of different days started together on the same local instance (Dagster's
   `dagster asset materialize`, in-process runs past the queue), the later days first: the tables equal the
   reference again.

Only raw_videos, scene_clips and filtered_clips (and their blocking checks) run: the tables the cross-day
judgements write. Processes that open a fresh local instance together: tests/ops/test_instance_storage_init.py."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster_dev import REPO, Deployment, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TODAY = dt.datetime.now(dt.UTC).date()
DAYS = [(TODAY - dt.timedelta(days=n)).isoformat() for n in (6, 5, 4, 3)]
START = (TODAY - dt.timedelta(days=10)).isoformat()
ASSETS = ("raw_videos", "scene_clips", "filtered_clips")
TABLES = {"raw_videos": "video_id", "filtered_clips": "clip_id"}
VOLATILE = {"ingested_at"}  # wall-clock columns: differ between any two runs
RUN_TIMEOUT_S = 600
DAEMON_CLOCK = REPO / "tests" / "browser" / "daemon_clock"  # the backfill daemon looks for work every few seconds


def _render(work: Path) -> dict[str, Path]:
    from videolake.synth import Segment, Transition, VideoSpec, render

    def two_shots(name: str, a: str, b: str) -> Path:
        spec = VideoSpec(
            name=name,
            width=192,
            height=144,
            fps="25",
            codec="h264",
            segments=(Segment(a, 30), Segment(b, 30)),
            transitions=(Transition("cut"),),
        )
        return render(spec, work)[0]

    out = {
        "a": two_shots("a", "testsrc2", "mandelbrot"),
        "b": two_shots("b", "gradients", "sierpinski"),
        "c": two_shots("c", "smptehdbars", "testsrc2"),
    }
    for name in ("b", "c"):  # near copies: brightened re-encodes
        dst = work / f"{name}_bright.mp4"
        subprocess.run(
            ["ffmpeg", "-v", "error", "-y", "-i", str(out[name]), "-vf", "eq=brightness=0.06:contrast=1.1"]
            + ["-c:v", "libx264", "-crf", "28", "-pix_fmt", "yuv420p", "-threads", "1", str(dst)],
            check=True,
        )
        out[f"{name}_bright"] = dst
    return out


# day -> landed name -> source video: exact copies (the same bytes) and near copies across days and of each other
LANDING = {
    0: {"a.mp4": "a", "b.mp4": "b"},
    1: {"a_again.mp4": "a", "c.mp4": "c"},
    2: {"b_bright.mp4": "b_bright", "c_again.mp4": "c"},
    3: {"c_bright.mp4": "c_bright", "a_third.mp4": "a"},
}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    if shutil.which("ffmpeg") is None:
        pytest.fail("ffmpeg is not installed: run `make test`")
    root = tmp_path_factory.mktemp("concurrent")
    dep = Deployment(root, START)
    dep.extra_path = [str(DAEMON_CLOCK)]
    dep.extra_env = {"VIDEOLAKE_TEST_DAEMON_INTERVAL_S": "3"}
    videos = _render(root / "synth")
    for i, files in LANDING.items():
        folder = dep.data / "store" / "landing" / DAYS[i]
        folder.mkdir(parents=True)
        for name, src in files.items():
            shutil.copy(videos[src], folder / name)
    dep.start()
    try:
        yield dep
    finally:
        dep.stop()


def _instance(dep: Deployment):
    import dagster as dg

    return dg.DagsterInstance.from_config(str(dep.home))


SELECTION = [{"path": [a]} for a in ASSETS]


def _launch_run(dep: Deployment, day: str) -> str:
    """One run of the CPU assets of ``day``, launched as the UI's "Materialize" does (the run queue decides when)."""
    out = dep.graphql(
        """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
             __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
        {
            "params": {
                "selector": {
                    "repositoryLocationName": "videolake",
                    "repositoryName": "__repository__",
                    "jobName": "videolake_daily",
                    "assetSelection": SELECTION,
                },
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": day}]},
            }
        },
    )["launchRun"]
    assert out["__typename"] == "LaunchRunSuccess", out
    return out["run"]["runId"]


def _launch_backfill(dep: Deployment, days: list[str]) -> str:
    out = dep.graphql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
             __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
        {"params": {"partitionNames": days, "assetSelection": SELECTION}},
    )["launchPartitionBackfill"]
    assert out["__typename"] == "LaunchBackfillSuccess", out
    return out["backfillId"]


def _wait_runs(dep: Deployment, run_ids: list[str]) -> list:
    """Wait until every run finished; every one must have succeeded. Returns the run records."""
    import dagster as dg

    with _instance(dep) as instance:
        wait_for(
            lambda: all(instance.get_run_by_id(r).is_finished for r in run_ids),
            RUN_TIMEOUT_S * len(run_ids),
            f"runs {run_ids}",
            dep,
            poll_s=1,
        )
        records = instance.get_run_records(dg.RunsFilter(run_ids=run_ids))
    failed = [r.dagster_run.run_id for r in records if r.dagster_run.status != dg.DagsterRunStatus.SUCCESS]
    assert not failed, f"runs {failed} did not succeed\n{dep.tail(150)}"
    return records


def _backfill_runs(dep: Deployment, backfill_id: str) -> list:
    import dagster as dg
    from dagster._core.execution.backfill import BulkActionStatus  # not exported by dagster

    with _instance(dep) as instance:
        done = {BulkActionStatus.COMPLETED, BulkActionStatus.COMPLETED_SUCCESS, BulkActionStatus.FAILED}
        wait_for(
            lambda: instance.get_backfill(backfill_id).status in done,
            RUN_TIMEOUT_S * len(DAYS),
            f"backfill {backfill_id}",
            dep,
            poll_s=1,
        )
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    return _wait_runs(dep, [r.run_id for r in runs])


def _overlapping(records) -> int:
    """The most runs that were running at the same moment."""
    edges = sorted(
        [(r.start_time, 1) for r in records] + [(r.end_time, -1) for r in records], key=lambda e: (e[0], e[1])
    )
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _snapshot(dep: Deployment) -> dict[str, list[tuple]]:
    """Every row of raw_videos and filtered_clips (all partitions), wall-clock columns left out, sorted; ids unique
    per day."""
    from deltalake import DeltaTable

    out = {}
    for table, key in TABLES.items():
        rows = DeltaTable(str(dep.data / "lake" / table)).to_pyarrow_table().to_pylist()
        ids = [(r["partition_date"], r[key]) for r in rows]
        assert len(ids) == len(set(ids)), f"{table}: duplicate rows"
        out[table] = sorted(tuple(sorted((k, str(v)) for k, v in r.items() if k not in VOLATILE)) for r in rows)
    return out


def _wipe(dep: Deployment) -> None:
    shutil.rmtree(dep.data / "lake", ignore_errors=True)


@pytest.fixture(scope="module")
def sequential(deployment) -> dict[str, list[tuple]]:
    for day in DAYS:
        _wait_runs(deployment, [_launch_run(deployment, day)])
    rows = _snapshot(deployment)
    from deltalake import DeltaTable

    raw = DeltaTable(str(deployment.data / "lake" / "raw_videos")).to_pyarrow_table().to_pylist()
    status = {(str(r["partition_date"]), Path(r["source_uri"]).name): r["status"] for r in raw}
    # the exact copies, whatever day they landed on, name the earliest
    assert status == {
        (DAYS[0], "a.mp4"): "ok",
        (DAYS[0], "b.mp4"): "ok",
        (DAYS[1], "a_again.mp4"): "duplicate",
        (DAYS[1], "c.mp4"): "ok",
        (DAYS[2], "b_bright.mp4"): "ok",
        (DAYS[2], "c_again.mp4"): "duplicate",
        (DAYS[3], "c_bright.mp4"): "ok",
        (DAYS[3], "a_third.mp4"): "duplicate",
    }
    clips = DeltaTable(str(deployment.data / "lake" / "filtered_clips")).to_pyarrow_table().to_pylist()
    near = [r for r in clips if r["duplicate_kind"] == "near"]
    # the near copies' clips (b_bright on day 2, c_bright on day 3) name a clip of an earlier day
    across = {str(r["partition_date"]) for r in near if r["duplicate_kept_date"] < r["partition_date"]}
    assert {DAYS[2], DAYS[3]} <= across
    return rows


def test_a_backfill_two_runs_at_a_time_equals_days_run_one_after_another(deployment, sequential):
    _wipe(deployment)
    records = _backfill_runs(deployment, _launch_backfill(deployment, DAYS))
    assert len(records) == len(DAYS)
    assert _overlapping(records) == 2, "the queue ran the backfill's runs one at a time: nothing was concurrent"
    assert _snapshot(deployment) == sequential


def test_two_attempts_of_one_day_run_one_after_the_other_and_change_nothing(deployment, sequential):
    day = DAYS[1]
    records = _wait_runs(deployment, [_launch_run(deployment, day), _launch_run(deployment, day)])
    assert _overlapping(records) == 1, "two attempts of one day ran at the same time"
    assert _snapshot(deployment) == sequential


def _materialize(dep: Deployment, day: str) -> subprocess.Popen:
    """Dagster's own command line: the CPU assets of ``day`` and their checks, run in this process on the local
    instance (DAGSTER_HOME), as a team runs a day from a shell."""
    dagster = str(Path(sys.executable).parent / "dagster")
    cmd = [dagster, "asset", "materialize", "-m", "videolake.definitions", "--select", ",".join(ASSETS)]
    return subprocess.Popen(
        [*cmd, "--partition", day],
        cwd=REPO,
        env=dep.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _latest_run(dep: Deployment, day: str):
    import dagster as dg

    with _instance(dep) as instance:
        return instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": day}), limit=1)[0]


def test_two_command_line_runs_of_different_days_started_together_equal_days_run_one_after_another(
    deployment, sequential
):
    _wipe(deployment)
    # later days first: their copies are judged 'ok' until the earlier days' runs find them (order must not matter)
    for pair in ((DAYS[3], DAYS[2]), (DAYS[1], DAYS[0])):
        procs = [_materialize(deployment, day) for day in pair]
        outs = [p.communicate(timeout=RUN_TIMEOUT_S)[0] for p in procs]
        for day, p, out in zip(pair, procs, outs, strict=True):
            assert p.returncode == 0, f"the run of {day} failed:\n{out[-6000:]}"
        records = [_latest_run(deployment, day) for day in pair]
        assert _overlapping(records) == 2, "the two command-line runs did not run at the same time"
    assert _snapshot(deployment) == sequential
