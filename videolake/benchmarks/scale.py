"""`videolake bench scale` and `videolake bench ray`: the platform's own data path, measured without a model.

bench scale --rows N
    The caption stage's data path over N synthetic clip rows: plan tasks, Ray Data, an actor pool (one actor by
    default: the stand-in has no work to spread, and on 2 cores a second actor process only adds start-up), checkpoint
    pieces, finalize tasks and the Delta commit, exactly as the asset runs them. The actors run a STAND-IN
    captioner (a fixed caption, instantly) and no frames are decoded (input mode ``none``): the figure is the
    platform's ceiling, not a model's. The upstream tables are written by a Ray worker beforehand, so the step
    process (this one) only does what the asset's step does. Its peak RSS is sampled every 20 ms while the stage
    runs. Baseline in the same process: the same N rows written straight to a Delta table by this process
    (``write_deltalake``: no Ray, no checkpoints, no resume), after the stage (the baseline holds N rows in this
    process's heap). A second, smaller run (``--compare-rows``, default N/10; 0: none) gives a memory ratio in one
    process; ``make bench`` runs each size in a fresh process instead (an earlier, larger run leaves the heap
    grown). The LAST line is one JSON object {"rows", "peak_rss_mb", "rows_per_s"}.

bench ray
    - scaling: the scene_clips stage (real scene detection on synthetic 360p videos) with 1 Ray CPU, then with
      2, same videos, fresh checkpoints each: throughput ratio 2-CPU / 1-CPU.
    - fixed overhead: the whole pipeline job (four assets and their gates) through Dagster on a temporary
      instance, for a day whose landing folder exists but is empty: seconds per partition (the Dagster part is
      passed in by videolake.commands.bench: the engine never imports Dagster).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass

import pyarrow as pa

DAY = "2026-02-01"


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class PeakRss:
    """Samples this process's resident set size every ``interval_s`` while in the ``with`` block."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.interval_s = interval_s
        self.peak = 0.0
        self._stop = threading.Event()

    def __enter__(self) -> PeakRss:
        self.peak = rss_mb()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, rss_mb())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


def make_upstream(lake, rows: int, day: str = DAY) -> int:
    """raw_videos, scene_clips and filtered_clips for ``rows`` passed clips (10 per video) of one day.

    Runs in a Ray worker (see ``bench_scale``) so that the measured process never holds these rows."""
    from videolake.platform.lake.schemas import FILTERED_CLIPS, RAW_VIDEOS, SCENE_CLIPS, clip_id
    from videolake.platform.lake.table import PartitionRange

    d = dt.date.fromisoformat(day)
    now = dt.datetime.now(dt.UTC)
    videos = (rows + 9) // 10
    vids = [f"{i:064x}" for i in range(videos)]
    rng = PartitionRange.of([day])
    raw = pa.table(
        {
            "video_id": vids,
            "source_uri": [f"file:///bench/{v[-8:]}.mp4" for v in vids],
            "size_bytes": [1] * videos,
            "fps": [30.0] * videos,
            "status": ["ok"] * videos,
            "ingested_at": pa.array([now] * videos, pa.timestamp("us", tz="UTC")),
            "partition_date": pa.array([d] * videos, pa.date32()),
        }
    )
    lake.write_partitions("raw_videos", _conform(raw, RAW_VIDEOS), rng)
    vid = [vids[i // 10] for i in range(rows)]
    start = [(i % 10) * 30 for i in range(rows)]
    ids = [clip_id(v, s, s + 30) for v, s in zip(vid, start)]
    common = {"clip_id": ids, "video_id": vid, "partition_date": pa.array([d] * rows, pa.date32())}
    scene = pa.table(
        {
            **common,
            "source_uri": [f"file:///bench/{v[-8:]}.mp4" for v in vid],
            "clip_index": pa.array([i % 10 for i in range(rows)], pa.int32()),
            "start_frame": start,
            "end_frame": [s + 30 for s in start],
            "start_s": [s / 30 for s in start],
            "end_s": [(s + 30) / 30 for s in start],
            "duration_s": [1.0] * rows,
            "detector": ["bench"] * rows,
            "detector_params": ["{}"] * rows,
        }
    )
    lake.write_partitions("scene_clips", _conform(scene, SCENE_CLIPS), rng)
    filt = pa.table({**common, "duration_s": [1.0] * rows, "passed": [True] * rows})
    lake.write_partitions("filtered_clips", _conform(filt, FILTERED_CLIPS), rng)
    return rows


def _conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    from videolake.platform.lake.table import conform

    return conform(t, schema)


@dataclass(frozen=True)
class ScaleResult:
    rows: int
    seconds: float
    peak_rss_mb: float
    start_rss_mb: float
    phases: dict
    units: dict

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def run_scale(rows: int, work: str, *, batch: int, actors: int) -> ScaleResult:
    import ray

    from videolake.platform.captioning.base import CaptionerConfig
    from videolake.platform.captioning.stage import caption_partitions
    from videolake.platform.lake.table import Lake, PartitionRange

    lake = Lake(os.path.join(work, f"lake-{rows}"))
    ray.get(ray.remote(num_cpus=1)(make_upstream).remote(lake, rows))
    config = CaptionerConfig(
        model="standin",
        backend="standin",
        model_name="standin-fixed-caption",
        input_mode="none",
        batch_size=batch,
        num_actors=actors,
    )
    start = rss_mb()
    with PeakRss() as peak:
        t0 = time.perf_counter()
        run = caption_partitions(lake, PartitionRange.of([DAY]), config, unit_clips=batch)
        seconds = time.perf_counter() - t0
    if run.write.rows != rows:
        raise RuntimeError(f"the stage committed {run.write.rows} rows for {rows} clips")
    return ScaleResult(
        rows=rows,
        seconds=seconds,
        peak_rss_mb=peak.peak,
        start_rss_mb=start,
        phases={k: round(v, 2) for k, v in run.phases.items()},
        units=run.progress.as_metadata(),
    )


def baseline_direct_write(rows: int, work: str) -> float:
    """Seconds to build N caption rows in this process and write them with one write_deltalake (no Ray)."""
    from videolake.platform.lake.schemas import CLIP_CAPTIONS
    from videolake.platform.lake.table import Lake, PartitionRange, conform

    t0 = time.perf_counter()
    d = dt.date.fromisoformat(DAY)
    now = dt.datetime.now(dt.UTC)
    t = pa.table(
        {
            "clip_id": [f"{i:064x}_00000000_00000030" for i in range(rows)],
            "video_id": [f"{i // 10:064x}" for i in range(rows)],
            "source_uri": [f"file:///bench/{i // 10}.mp4" for i in range(rows)],
            "status": ["ok"] * rows,
            "caption": ["stand-in caption: no model was run"] * rows,
            "model": ["standin"] * rows,
            "prompt_version": ["v1-describe"] * rows,
            "captioned_at": pa.array([now] * rows, pa.timestamp("us", tz="UTC")),
            "partition_date": pa.array([d] * rows, pa.date32()),
        }
    )
    Lake(os.path.join(work, "baseline")).write_partitions(
        "clip_captions", conform(t, CLIP_CAPTIONS), PartitionRange.of([DAY])
    )
    return time.perf_counter() - t0


def bench_scale(rows: int, compare_rows: int | None = None, *, batch: int = 4096, actors: int = 1, echo=print) -> dict:
    import ray

    from videolake.platform.runtime.units import ensure_ray

    compare_rows = compare_rows if compare_rows is not None else max(rows // 10, 1)
    work = tempfile.mkdtemp(prefix="videolake-bench-scale-")
    try:
        ensure_ray()
        echo(
            f"ray: {ray.cluster_resources().get('CPU', 0):.0f} CPUs; stand-in captioner (fixed caption, no model, "
            f"no frame decoding); batch {batch}, {actors} actors"
        )
        # The stage runs first: the baseline builds its N rows in this process's heap, and Python keeps most of
        # that memory, which would count in the stage's peak RSS if it ran before.
        small = run_scale(compare_rows, work, batch=batch, actors=actors) if compare_rows else None
        big = run_scale(rows, work, batch=batch, actors=actors)
        base_s = baseline_direct_write(rows, work)
        echo(
            f"baseline: {rows} rows written directly by this process with write_deltalake: {base_s:.2f}s "
            f"({rows / base_s:,.0f} rows/s)"
        )
        for r in filter(None, (small, big)):
            echo(
                f"stage: {r.rows} rows in {r.seconds:.2f}s = {r.rows_per_s:,.0f} rows/s; peak RSS {r.peak_rss_mb:.0f} MB "
                f"(start {r.start_rss_mb:.0f} MB); phases {r.phases}; {r.units}"
            )
        echo(f"ratio stage / direct write (rows/s): {big.rows_per_s / (rows / base_s):.2f}")
        if small:
            echo(f"peak RSS {rows} rows / {compare_rows} rows: {big.peak_rss_mb / small.peak_rss_mb:.2f} (goal <= 1.5)")
        echo(f"rows/s goal >= 13,000 (the reference run's 12,666 captions/s): {big.rows_per_s:,.0f}")
        out = {"rows": rows, "peak_rss_mb": round(big.peak_rss_mb, 1), "rows_per_s": round(big.rows_per_s, 1)}
        echo(json.dumps(out))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------- bench ray


def _videos(folder: str, count: int, seconds: int) -> list[str]:
    """``count`` distinct 360p videos with one cut each. Every video differs (hue per index: ingest would merge
    identical files as duplicates) and carries film-like noise, so decoding costs what real footage costs and the
    units are of even size; two encoders run at a time."""
    import subprocess

    sources = ["testsrc2", "smptehdbars", "rgbtestsrc", "testsrc"]
    paths, procs = [], []
    half = seconds / 2
    for i in range(count):
        a, b = sources[i % 4], sources[(i + 1) % 4]
        p = os.path.join(folder, f"v{i}.mp4")
        procs.append(
            subprocess.Popen(
                [
                    "ffmpeg",
                    "-nostdin",
                    "-v",
                    "error",
                    "-y",
                    "-t",
                    str(half),
                    "-f",
                    "lavfi",
                    "-i",
                    f"{a}=size=640x360:rate=30",
                    "-t",
                    str(half),
                    "-f",
                    "lavfi",
                    "-i",
                    f"{b}=size=640x360:rate=30",
                    "-filter_complex",
                    "[0:v]format=yuv420p,setsar=1[a];[1:v]format=yuv420p,setsar=1[b];"
                    f"[a][b]concat=n=2:v=1,noise=alls=12:allf=t+u,hue=h={i * 360 / count:.1f}[v]",
                    "-map",
                    "[v]",
                    "-c:v",
                    "libx264",
                    "-preset",
                    "ultrafast",
                    "-pix_fmt",
                    "yuv420p",
                    p,
                ]
            )
        )
        paths.append(p)
        if len(procs) >= 2:
            _wait(procs.pop(0))
    for proc in procs:
        _wait(proc)
    return paths


def _wait(proc) -> None:
    if proc.wait() != 0:
        raise RuntimeError(f"ffmpeg failed making a benchmark video: {proc.args}")


def _split_seconds(store_root: str, lake_root: str, cpus: int) -> float:
    import ray

    from videolake.platform.lake.table import Lake, PartitionRange
    from videolake.platform.objectstore import LocalObjectStore
    from videolake.platform.stages.ingest import ingest_partitions, list_landing
    from videolake.platform.stages.split import SplitConfig, split_partitions
    from videolake.platform.video.probe import ProbeConfig

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        store, lake, rng = LocalObjectStore(store_root), Lake(lake_root), PartitionRange.of([DAY])
        ingest_partitions(lake, store, list_landing(store, "landing", [DAY]), ProbeConfig(), rng)
        t0 = time.perf_counter()
        split_partitions(lake, store, rng, SplitConfig())
        return time.perf_counter() - t0
    finally:
        ray.shutdown()


def bench_ray(fixed_overhead_s, videos: int = 16, seconds: int = 60, echo=print) -> dict:
    """``fixed_overhead_s(work_dir) -> seconds``: the Dagster part, given by the caller (the engine has no Dagster)."""
    work = tempfile.mkdtemp(prefix="videolake-bench-ray-")
    try:
        store = os.path.join(work, "store")
        folder = os.path.join(store, "landing", DAY)
        os.makedirs(folder)
        _videos(folder, videos, seconds)
        frames = videos * seconds * 30
        # Order 1, 2, 2, 1 and sums: a machine that slows or speeds up during the run moves both sides alike.
        one = _split_seconds(store, os.path.join(work, "lake1a"), 1)
        two = _split_seconds(store, os.path.join(work, "lake2a"), 2)
        two += _split_seconds(store, os.path.join(work, "lake2b"), 2)
        one += _split_seconds(store, os.path.join(work, "lake1b"), 1)
        one, two = one / 2, two / 2
        echo(
            f"scene_clips over {videos} videos x {seconds}s 360p ({frames} frames): 1 Ray CPU {one:.2f}s "
            f"({frames / one:,.0f} frames/s), 2 Ray CPUs {two:.2f}s ({frames / two:,.0f} frames/s)"
        )
        echo(f"scaling 2 CPUs / 1 CPU: {one / two:.2f} (goal >= 1.8)")
        over = fixed_overhead_s(work)
        echo(
            f"fixed overhead: the whole daily job (every asset and its gates) for an empty-but-existing day: {over:.1f}s (goal < 15 s)"
        )
        out = {"scaling_2_over_1": round(one / two, 3), "empty_day_run_s": round(over, 2)}
        echo(json.dumps(out))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)
