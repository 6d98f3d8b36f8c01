"""Ray is started only when a stage has work (resources/ray_on_demand.py, units.ensure_ray/call_each).

An empty-but-existing day runs raw_videos -> scene_clips -> filtered_clips and the caption stage without starting
or joining a Ray cluster; a day with videos joins the cluster through the Dagster resource, with the resource's
own ray.init options."""

from __future__ import annotations

import datetime as dt
import socket

import dagster as dg
import pyarrow as pa
import ray
from dagster_ray import Lifecycle, LocalRay

from videolake.assets import cpu_assets
from videolake.platform.captioning.base import CaptionerConfig
from videolake.platform.captioning.stage import caption_partitions
from videolake.platform.lake.schemas import FILTERED_CLIPS
from videolake.platform.lake.table import Lake, PartitionRange, conform
from videolake.resources import LakeResource, ObjectStoreResource

ASSETS = [cpu_assets.raw_videos, cpu_assets.scene_clips, cpu_assets.filtered_clips]


def _resources(landing, tmp_path) -> dict:
    ray_init = {"num_cpus": 1, "include_dashboard": False, "log_to_driver": False}
    return {
        "object_store": ObjectStoreResource(kind="local", root=str(landing["root"])),
        "lake": LakeResource(root=str(tmp_path / "lake")),
        "ray_cluster": LocalRay(ray_init_options=ray_init, lifecycle=Lifecycle(connect=False)),
    }


def test_empty_day_never_starts_ray_and_a_day_with_videos_joins_through_the_resource(landing, tmp_path, monkeypatch):
    ray.shutdown()
    empty_day = "2026-03-04"
    (landing["root"] / "landing" / empty_day).mkdir(exist_ok=True)
    resources = _resources(landing, tmp_path)
    instance = dg.DagsterInstance.ephemeral()

    empty = dg.materialize(ASSETS, partition_key=empty_day, resources=resources, instance=instance)
    assert empty.success
    assert not ray.is_initialized()
    lake = resources["lake"].get_lake()
    for table in ("raw_videos", "scene_clips", "filtered_clips"):
        assert lake.version(table) == 1  # created, then the day's (empty) overwrite committed
        assert lake.read_partitions(table, PartitionRange.of([empty_day])).num_rows == 0
    mats = [e.materialization for e in empty.get_asset_materialization_events()]
    units = {m.asset_key.to_user_string(): m.metadata["units_total"].value for m in mats}
    assert units == {"raw_videos": 0, "scene_clips": 0, "filtered_clips": 0}

    assert _connects(instance, empty.run_id) == []

    # the local Ray exports its metrics on the port VIDEOLAKE_RAY_METRICS_PORT pins (docs/metrics.md)
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("VIDEOLAKE_RAY_METRICS_PORT", str(port))
    full = dg.materialize(ASSETS, partition_key="2026-03-02", resources=resources, instance=instance)
    assert full.success
    exports = [m for m in _messages(instance, full.run_id) if "exports its metrics" in m]
    assert len(exports) == 1 and exports[0].endswith(f":{port}"), exports  # the node's port, as Ray reports it
    # the first step with work joined Ray through the Dagster resource (its create -> wait -> connect chain, its
    # ray.init options); in this one-process run the later steps find it joined
    assert _connects(instance, full.run_id) == ["raw_videos"]
    assert lake.read_partitions("scene_clips", PartitionRange.of(["2026-03-02"])).num_rows > 0
    ray.shutdown()


def _messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [e.user_message or "" for e in instance.all_logs(run_id)]


def _connects(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [
        e.step_key
        for e in instance.all_logs(run_id)
        if "the stage has work: connecting to LocalRay" in (e.user_message or "")
    ]


def test_lake_row_count_reads_the_delta_log(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    day = PartitionRange.of(["2026-03-02"])
    assert lake.row_count("filtered_clips", day) == 0  # no table yet
    rows = [
        {**_required(FILTERED_CLIPS), "clip_id": f"c{i}", "partition_date": dt.date(2026, 3, 2 + i % 2)}
        for i in range(5)
    ]
    lake.write_partitions(
        "filtered_clips",
        conform(pa.Table.from_pylist(rows), FILTERED_CLIPS),
        PartitionRange.of(["2026-03-02", "2026-03-03"]),
    )
    assert lake.row_count("filtered_clips", day) == 3
    assert lake.row_count("filtered_clips", PartitionRange.of(["2026-03-03"])) == 2
    assert lake.row_count("filtered_clips", PartitionRange.of(["2026-03-02", "2026-03-03"])) == 5
    assert lake.row_count("filtered_clips", PartitionRange.of(["2026-03-05"])) == 0


def _required(schema: pa.Schema) -> dict:
    """A value for every non-nullable column (the row count is what the test is about)."""
    zero = {
        pa.types.is_string: "x",
        pa.types.is_boolean: False,
        pa.types.is_integer: 0,
        pa.types.is_floating: 0.0,
        pa.types.is_timestamp: dt.datetime(2026, 3, 2, tzinfo=dt.UTC),
    }
    out = {}
    for f in schema:
        if not f.nullable:
            out[f.name] = next((v for test, v in zero.items() if test(f.type)), None)
    return out


def test_caption_stage_over_a_day_without_clips_runs_without_ray(tmp_path):
    ray.shutdown()
    lake = Lake(str(tmp_path / "lake"))
    day = PartitionRange.of(["2026-03-02"])
    lake.ensure_table("filtered_clips")
    config = CaptionerConfig(model="standin", backend="standin", model_name="standin-fixed-caption", input_mode="none")
    prepared = []
    run = caption_partitions(lake, day, config, prepare=lambda: prepared.append(1))
    assert not ray.is_initialized()
    assert prepared == []  # no model is staged for nothing
    assert run.write.rows == 0 and lake.version("clip_captions") == 1
    assert run.progress.as_metadata() == {"units_total": 0, "units_reused": 0, "units_computed": 0, "units_retried": 0}


def test_the_local_profile_starts_its_own_ray_whatever_cluster_ray_init_would_join(monkeypatch):
    """With no address, ``ray.init`` joins the cluster $RAY_ADDRESS names, else the latest one ``ray start`` left on
    the machine (its address file outlives a killed head), and joining with the profile's num_cpus fails at once.
    The local profile's Ray resources start a new local Ray whatever the environment names (StepLocalRay)."""
    from videolake.resources.local import local_resources

    ray.shutdown()
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # what ray.init(address=None) would join: nothing listens
    monkeypatch.setenv("VIDEOLAKE_RAY_CPUS", "1")
    resources = local_resources()
    for name in ("ray_cluster", "caption_ray"):
        try:
            resources[name]._connect(dg.build_init_resource_context())
            assert ray.is_initialized(), name
            assert ray.cluster_resources().get("CPU") == 1.0, name  # the profile's own options: a Ray it started
        finally:
            ray.shutdown()
