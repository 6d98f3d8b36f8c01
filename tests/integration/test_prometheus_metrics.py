"""The stages' metrics reach a real Prometheus, and every panel of k8s/grafana-dashboard.json has data.

A real Prometheus (Debian's package) scrapes the session's local Ray (its node's metrics export port, every second)
while one small day runs through the engine's stages on that Ray: ingest, split and score over two generated videos
and a corrupt one, then captions with the tiny vLLM model. Then each panel's PromQL is evaluated through Prometheus's
HTTP API over the run's time range, as Grafana does, and must return data; the counters must equal what the run
reports (units, rows, captions, tokens, failure rows, goodput).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from free_port import free_port

# This module's Ray reports its metrics every 0.5 s instead of 10 s, so the test awaits seconds, not minutes. Only
# this module's: every process of a Ray reads it when it starts (the ray_local fixture below), and set for the whole
# test process it made every Ray of the suite, and every worker process of those Rays, report 20 times as often.
FAST_METRICS = {"RAY_metrics_report_interval_ms": "500"}

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "k8s" / "grafana-dashboard.json"
DAY = "2031-05-17"  # a day no other test uses: its partition_date label keeps this run's series apart
# Grafana's $__rate_interval is at least 4 scrape intervals (4 s here) and grows with the dashboard's range; a
# loaded machine's Ray exports late, so the test takes a window that still holds two samples of a short run.
RATE_INTERVAL = "30s"
DEADLINE_S = 90.0


# ------------------------------------------------------------------------------------------------ Prometheus
class Prometheus:
    """A Prometheus server in a temporary directory, queried through its HTTP API."""

    def __init__(self, binary: str, work: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = work / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: ray\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log = open(work / "prometheus.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: see {self.log.name}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {timeout_s}s")

    def _api(self, path: str, params: dict) -> list[dict]:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def instant(self, expr: str) -> list[dict]:
        return self._api("query", {"query": expr})

    def range(self, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
        return self._api("query_range", {"query": expr, "start": start, "end": end, "step": step})

    def scalar(self, expr: str) -> float | None:
        result = self.instant(expr)
        return float(result[0]["value"][1]) if result else None

    def target_health(self) -> list[str]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as r:
            return [t["health"] for t in json.load(r)["data"]["activeTargets"]]

    def stop(self) -> None:
        from procs import stop_process

        stop_process(self.proc)
        self.log.close()


def await_value(prom: Prometheus, expr: str, expected: float, timeout_s: float = DEADLINE_S) -> float | None:
    """Poll ``expr`` until it equals ``expected`` or the deadline passes; returns the last value seen."""
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = prom.scalar(expr)
        if value is not None and math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9):
            return value
        time.sleep(0.25)
    return value


def has_finite_sample(result: list[dict]) -> bool:
    for series in result:
        for _, v in series.get("values", [series.get("value", (0, "NaN"))]):
            if math.isfinite(float(v)):
                return True
    return False


def panel_targets() -> list[tuple[str, str, str]]:
    """(panel title, refId, PromQL) of every target of every panel (rows' nested panels included)."""
    dash = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                out.append((p["title"], t["refId"], t["expr"]))

    walk(dash["panels"])
    return out


def grafana_expr(expr: str) -> str:
    """The query Grafana sends: its interval variables replaced (the datasource variable is not in queries)."""
    return expr.replace("$__rate_interval", RATE_INTERVAL).replace("${__rate_interval}", RATE_INTERVAL)


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def ray_local(request):
    """The module's own local Ray (it reads the whole node's metrics), its processes started with FAST_METRICS."""
    import ray
    import shared_ray

    with pytest.MonkeyPatch.context() as mp:
        for name, value in FAST_METRICS.items():
            mp.setenv(name, value)
        with shared_ray.module_ray(request.path):
            yield ray


@pytest.fixture(scope="module")
def prometheus(ray_local, tmp_path_factory):
    """Prometheus scraping the session Ray's node (the port Ray reports for it) every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed: run `make test` (it installs system packages)")
    from videolake.platform.runtime.telemetry import metrics_targets

    (target,) = metrics_targets()  # one local node
    prom = Prometheus(binary, tmp_path_factory.mktemp("prometheus"), target)
    try:
        prom.wait_ready()
        yield prom
    finally:
        prom.stop()


@pytest.fixture(scope="module")
def pipeline_day(prometheus, ray_local, tiny_model_dir, caption_videos, tmp_path_factory) -> dict:
    """One day through ingest, split, score and caption on the session Ray; the runs and the committed tables."""
    from videolake.benchmarks.caption import tiny_bench_config
    from videolake.platform.captioning.stage import caption_partitions
    from videolake.platform.filters.quality import QualityConfig
    from videolake.platform.lake.table import Lake, PartitionRange
    from videolake.platform.objectstore import LocalObjectStore
    from videolake.platform.stages.ingest import ingest_partitions, list_landing
    from videolake.platform.stages.score import score_partitions
    from videolake.platform.stages.split import SplitConfig, split_partitions
    from videolake.platform.video.probe import ProbeConfig

    root = tmp_path_factory.mktemp("metrics-day")
    landing = root / "store" / "landing" / DAY
    landing.mkdir(parents=True)
    for name, uri in caption_videos.items():
        shutil.copy(urllib.parse.urlparse(uri).path, landing / f"{name}.mp4")
    store = LocalObjectStore(str(root / "store"))
    lake = Lake(str(root / "lake"))
    rng = PartitionRange.of([DAY])
    started = time.time()
    runs = {
        "raw_videos": ingest_partitions(lake, store, list_landing(store, "landing", [DAY]), ProbeConfig(), rng),
    }
    runs["scene_clips"] = split_partitions(lake, store, rng, SplitConfig())
    runs["filtered_clips"] = score_partitions(lake, store, rng, QualityConfig())
    assert runs["filtered_clips"].write.rows > 0
    config = tiny_bench_config(tiny_model_dir, model_name="tiny-qwen2.5-vl-random", model_revision="r0", batch_size=1)
    runs["clip_captions"] = caption_partitions(lake, rng, config, store=store)
    tables = {t: lake.read_partitions(t, rng).to_pylist() for t in runs}
    assert any(r["passed"] for r in tables["filtered_clips"]), "no clip passed: nothing was captioned"
    return {"runs": runs, "tables": tables, "started": started}


def _sum(metric: str, **labels: str) -> str:
    """The sum of a metric's series with these labels; 0 when there is none (a count that never happened)."""
    sel = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"sum(ray_{metric}{{{sel}}}) or vector(0)"


# ------------------------------------------------------------------------------------------------ tests
@pytest.mark.slow
def test_the_counters_equal_what_the_run_reports(prometheus, pipeline_day):
    runs, tables = pipeline_day["runs"], pipeline_day["tables"]
    expected: dict[str, float] = {}
    for stage in ("raw_videos", "scene_clips", "filtered_clips"):
        prog = runs[stage].progress
        failed = prog.unit_errors
        assert prog.units_reused == 0  # a fresh lake: every unit computed
        expected[_sum("videolake_units_total", stage=stage, partition_date=DAY)] = prog.units_total
        expected[_sum("videolake_units_total", stage=stage, outcome="failed", partition_date=DAY)] = failed
        expected[_sum("videolake_rows_total", stage=stage, partition_date=DAY)] = prog.rows
    # scene_clips: one row per clip, and the committed table holds exactly those
    assert runs["scene_clips"].progress.rows == len(tables["scene_clips"])
    captions = tables["clip_captions"]
    ok = sum(r["status"] == "ok" for r in captions)
    assert ok > 0
    expected[_sum("videolake_captions_total", status="ok", partition_date=DAY)] = ok
    expected[_sum("videolake_captions_total", partition_date=DAY)] = len(captions)
    expected[_sum("videolake_caption_tokens_total", kind="output", partition_date=DAY)] = sum(
        r["output_tokens"] for r in captions
    )
    expected[_sum("videolake_caption_tokens_total", kind="prompt", partition_date=DAY)] = sum(
        r["prompt_tokens"] for r in captions
    )
    # the corrupt file is a permanent rejection at ingest
    rejected = [r for r in tables["raw_videos"] if r["failure_class"] == "permanent"]
    assert rejected
    expected[_sum("videolake_failure_rows_total", stage="raw_videos", failure_class="permanent")] = len(rejected)
    # one caption unit per batch, each batch of one clip
    batches = runs["clip_captions"].batches
    assert len(batches) == len(captions)
    expected[_sum("videolake_units_total", stage="clip_captions", outcome="computed", partition_date=DAY)] = len(
        batches
    )
    expected["max(ray_videolake_caption_goodput)"] = runs["clip_captions"].goodput
    expected['sum(ray_videolake_queue_depth{stage="clip_captions"})'] = 0
    seen = {expr: await_value(prometheus, expr, value) for expr, value in expected.items()}
    wrong = {
        expr: (seen[expr], value)
        for expr, value in expected.items()
        if seen[expr] is None or not math.isclose(seen[expr], value, rel_tol=1e-9, abs_tol=1e-9)
    }
    assert not wrong, f"(seen, expected) per query; targets {prometheus.target_health()}: {wrong}"
    # the unit seconds histogram counted every computed unit of the CPU stages
    for stage in ("raw_videos", "scene_clips", "filtered_clips"):
        expr = f'sum(ray_videolake_unit_seconds_count{{stage="{stage}"}})'
        assert prometheus.scalar(expr) >= runs[stage].progress.units_computed


@pytest.mark.slow
def test_every_panel_query_of_the_dashboard_returns_data(prometheus, pipeline_day):
    # after the counters test (or on its own): wait until the last counter of the run has been scraped
    captions = len(pipeline_day["tables"]["clip_captions"])
    assert await_value(prometheus, _sum("videolake_captions_total", partition_date=DAY), captions) == captions
    targets = panel_targets()
    assert len(targets) >= 10
    # the range Grafana would show: from before the run to a little after now (the last scrape may carry a
    # timestamp a moment later than this process's clock read; later steps reuse the latest samples)
    deadline = time.monotonic() + DEADLINE_S
    while True:  # a rate needs two samples of its series: await the next scrapes rather than sleep a fixed time
        start, end = pipeline_day["started"] - 5, time.time() + 5
        empty = []
        for title, ref, expr in targets:
            result = prometheus.range(grafana_expr(expr), start, end)
            if not has_finite_sample(result):
                empty.append(f"{title} [{ref}]: {expr} -> {result[:2]}")
        if not empty or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not empty, "panel queries without data:\n" + "\n".join(empty)


@pytest.mark.slow
def test_a_panel_query_without_data_is_seen_as_empty(prometheus, pipeline_day):
    """The check above can fail: a query for a stage that never ran, or a metric that does not exist, has no data."""
    start, end = pipeline_day["started"] - 5, time.time()
    missing_stage = 'sum by (stage) (rate(ray_videolake_units_total{stage="no_such_stage"}[4s]))'
    assert not has_finite_sample(prometheus.range(missing_stage, start, end))
    assert not has_finite_sample(prometheus.range("sum(ray_videolake_no_such_metric_total)", start, end))
    # before the run: no series at all
    assert not has_finite_sample(prometheus.range("sum(ray_videolake_units_total)", start - 600, start - 300))


def test_dashboard_is_a_grafana_dashboard_over_a_templated_prometheus_datasource():
    import re

    from videolake.platform.runtime.telemetry import METRICS

    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 30
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
    queries = " ".join(expr for _, _, expr in panel_targets())
    # every metric the stages export is on the dashboard, and the dashboard asks for no other videolake metric
    exported = {m.exported for m in METRICS}
    for m in exported:
        assert m in queries, m
    used = set(re.findall(r"ray_videolake_[a-z_]+", queries))
    used = {u.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum") for u in used}
    assert used <= exported, used - exported
