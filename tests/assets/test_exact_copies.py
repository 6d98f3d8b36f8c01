"""Exact copies across days (issue: duplicates a training set must not keep): the same bytes landed on an earlier day
are a `duplicate` row naming the original, cut into no clip, whatever order the days are materialized in; a later
day re-evaluated by an earlier day's run is recorded by Dagster, so its downstream shows stale."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver
from landing_days import land, local_resources

from videolake.assets import cpu_assets
from videolake.assets.metadata import table_figures
from videolake.platform.lake.table import PartitionRange
from videolake.synth import Segment, VideoSpec, render

pytestmark = pytest.mark.usefixtures("module_ray")  # one Ray for the module's runs (module_ray.py)

A, B, C = "2026-05-01", "2026-05-02", "2026-05-03"
ASSETS = [cpu_assets.raw_videos, cpu_assets.scene_clips]


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("copies-src")
    out = {}
    for name, source in (("x", "testsrc2"), ("y", "mandelbrot")):
        path, _ = render(
            VideoSpec(
                name=name,
                width=160,
                height=120,
                fps="25",
                codec="h264",
                segments=(Segment(source, 30),),
                transitions=(),
            ),
            work,
        )
        out[name] = path
    return out


def _verdicts(resources: dict) -> dict[tuple[str, str], tuple]:
    rows = resources["lake"].get_lake().read_partitions("raw_videos", PartitionRange.of([A, B, C])).to_pylist()
    return {
        (str(r["partition_date"]), Path(r["source_uri"]).name): (
            r["status"],
            r["duplicate_of_date"] and str(r["duplicate_of_date"]),
            r["duplicate_of_uri"] and Path(r["duplicate_of_uri"]).name,
        )
        for r in rows
    }


def test_copies_across_days_in_any_order(videos, tmp_path):
    root = tmp_path / "store"
    land(root, A, {"x.mp4": videos["x"]})
    land(root, B, {"x_again.mp4": videos["x"], "y.mp4": videos["y"]})
    land(root, C, {"x_third.mp4": videos["x"]})
    res = local_resources(root, tmp_path / "lake")
    lake = res["lake"].get_lake()
    instance = dg.DagsterInstance.ephemeral()

    # The later day first: x is new there.
    assert dg.materialize(ASSETS, partition_key=B, resources=res, instance=instance).success
    assert _verdicts(res)[(B, "x_again.mp4")] == ("ok", None, None)
    x_id = next(
        r["video_id"]
        for r in lake.read_partitions("raw_videos", PartitionRange.of([B])).to_pylist()
        if r["source_uri"].endswith("x_again.mp4")
    )
    clips_b = lake.read_partitions("scene_clips", PartitionRange.of([B])).to_pylist()
    assert x_id in {c["video_id"] for c in clips_b}
    resolver = get_stale_status_resolver(instance, ASSETS)
    assert resolver.get_status(dg.AssetKey("scene_clips"), B) == StaleStatus.FRESH

    # Then the earlier day: B's x is now a copy of A's, and the run records B as re-evaluated.
    result = dg.materialize([cpu_assets.raw_videos], partition_key=A, resources=res, instance=instance)
    assert result.success
    recorded = {(e.asset_key.path[-1], e.partition) for e in result.get_asset_materialization_events()}
    assert recorded == {("raw_videos", A), ("raw_videos", B)}
    assert _verdicts(res)[(B, "x_again.mp4")] == ("duplicate", A, "x.mp4")
    resolver = get_stale_status_resolver(instance, ASSETS)
    assert resolver.get_status(dg.AssetKey("scene_clips"), B) == StaleStatus.STALE

    # B materialized again: no clip of the copy, y's clips stay.
    assert dg.materialize(ASSETS, partition_key=B, resources=res, instance=instance).success
    clips_b = lake.read_partitions("scene_clips", PartitionRange.of([B])).to_pylist()
    assert clips_b and x_id not in {c["video_id"] for c in clips_b}
    assert dg.materialize([cpu_assets.raw_videos], partition_key=C, resources=res, instance=instance).success
    late_order = _verdicts(res)
    assert late_order == {
        (A, "x.mp4"): ("ok", None, None),
        (B, "x_again.mp4"): ("duplicate", A, "x.mp4"),
        (B, "y.mp4"): ("ok", None, None),
        (C, "x_third.mp4"): ("duplicate", A, "x.mp4"),
    }

    # The same landing materialized in date order, in one run, into another lake: the same verdicts.
    fresh = local_resources(root, tmp_path / "lake2")
    job = dg.Definitions(assets=[cpu_assets.raw_videos], resources=fresh).resolve_implicit_global_asset_job_def()
    run = job.execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        tags={"dagster/asset_partition_range_start": A, "dagster/asset_partition_range_end": C},
    )
    assert run.success and _verdicts(fresh) == late_order
    md = {e.partition: e.materialization.metadata for e in run.get_asset_materialization_events()}
    assert md[C]["copies_of_earlier_days"].value == 1 and table_figures(md[B]["details"])["videos_ok"] == 1

    # The original leaves A and A is materialized again: B's copy is the original now, C's names B.
    (root / "landing" / A / "x.mp4").unlink()
    land(root, A, {"y_early.mp4": videos["y"]})
    result = dg.materialize([cpu_assets.raw_videos], partition_key=A, resources=res, instance=instance)
    assert result.success
    assert {e.partition for e in result.get_asset_materialization_events()} == {A, B, C}
    assert _verdicts(res) == {
        (A, "y_early.mp4"): ("ok", None, None),
        (B, "x_again.mp4"): ("ok", None, None),
        (B, "y.mp4"): ("duplicate", A, "y_early.mp4"),
        (C, "x_third.mp4"): ("duplicate", B, "x_again.mp4"),
    }
