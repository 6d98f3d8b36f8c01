"""The whole pipeline on the production storage path: landing videos, clip sources and all four Delta tables in a
real S3 server (SeaweedFS, started here on free loopback ports), driven by the real assets and gate checks.

1. One partition through raw_videos -> scene_clips -> filtered_clips -> clip_captions (real vLLM on CPU with the
   tiny random-weight model) with every gate check: each table exists in the bucket (its ``_delta_log``), the rows
   are exactly what the synthetic ground truth predicts, one caption row per passed clip, every blocking gate passed.
2. Two more partitions materialized CONCURRENTLY into the same tables, by two separate processes (each its own
   Dagster ephemeral instance and its own local Ray, like two run pods). A barrier in the lake makes both processes
   commit to each table at the same moment, so the delta-rs commit race on S3 (conditional puts) really happens.
   Afterwards every row of both partitions is in every table exactly once and partition 1 is untouched (same rows,
   same data files). The concurrent part runs the CPU assets and their gates only: two more vLLM engines (one per
   process, ~2.4 GB and ~30 s each) on a shared 2-core machine would double the test's time, and the caption asset
   commits through the same ``Lake.commit_files`` as the three CPU assets that are raced here.

Run alone: ``.venv/bin/python -m pytest tests/integration/test_pipeline_s3.py``. Also a script: the concurrent
writers are this file run as ``python test_pipeline_s3.py '<json args>'`` (see ``_child_main``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from dagster_ray import LocalRay

from videolake.platform.lake.table import Lake, PartitionRange
from videolake.resources import LakeResource, ObjectStoreResource, S3Resource

pytestmark = pytest.mark.slow

DAY1, DAY2, DAY3 = "2026-04-01", "2026-04-02", "2026-04-03"
TABLES = ("raw_videos", "scene_clips", "filtered_clips", "clip_captions", "training_shards")
CPU_TABLES = TABLES[:3]
MAX_CLIP_S = 20.0  # the SplitConfig default, which the assets run with
# ignore_reinit_error: dg.materialize runs in process and sets up every resource of the run at its start, so
# ray_cluster and caption_ray both call ray.init in one process (the local profile passes it for the same reason).
RAY_INIT = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True}
CHILD_TIMEOUT_S = 600
BARRIER_TIMEOUT_S = 300.0


# ------------------------------------------------------------------------------------------------- landing data
def _landing_specs():
    """(day, kind, spec or special name): 240p videos whose cuts the luma detector finds exactly, and two specials
    (an all-black video the quality stage filters, a text file named .mp4 the probe rejects). Each day's bytes differ
    so that no clip id repeats across partitions."""
    from videolake.synth import Segment, Transition, VideoSpec

    def spec(name, fps, *segments, seed=0):
        return VideoSpec(
            name=name,
            width=320,
            height=240,
            fps=fps,
            codec="h264",
            seed=seed,
            segments=tuple(Segment(s, n) for s, n in segments),
            transitions=tuple(Transition("cut") for _ in segments[1:]),
        )

    return [
        (DAY1, "video", spec("cuts3", "30", ("testsrc2", 45), ("color:red", 40), ("mandelbrot", 50))),
        (DAY1, "video", spec("gradblue", "25", ("gradients", 40), ("color:blue", 40))),
        (DAY1, "special", "black"),
        (DAY1, "special", "not_video"),
        # Footage the first day does not have (lavfi's testsrc2 and mandelbrot are the same pictures on every render:
        # the later days' clips of them would be near-duplicates of the first day's and none would pass).
        (DAY2, "video", spec("day2_pan_red_grad", "25", ("pan", 45), ("color:red", 40), ("gradients", 50))),
        (DAY3, "video", spec("day3_sierp_blue_pan", "30", ("sierpinski", 50), ("color:blue", 40), ("pan", 45), seed=3)),
    ]


@dataclass(frozen=True)
class Landed:
    """One landed object with its ground truth."""

    day: str
    key: str  # object-store key, relative to the store prefix
    uri: str  # s3:// URI, as raw_videos.source_uri records it
    video_id: str  # sha256 of the bytes
    truth: dict


def _expected_rows(landed: list[Landed], day: str) -> dict[str, set]:
    """What raw_videos and scene_clips must hold for ``day`` (ids), from the ground truth alone."""
    from videolake.platform.lake.schemas import clip_id
    from videolake.platform.scenes.segments import cuts_to_ranges

    raw, clips = set(), set()
    for obj in (o for o in landed if o.day == day):
        raw.add(obj.video_id)
        if obj.truth["expect"].startswith("reject:"):
            continue
        t = obj.truth
        for s, e in cuts_to_ranges(t["cuts"], t["num_frames"], t["fps"], MAX_CLIP_S):
            clips.add(clip_id(obj.video_id, s, e))
    return {"raw_videos": raw, "scene_clips": clips}


# ------------------------------------------------------------------------------------------------- resources
def s3_resources(
    *,
    endpoint_url: str,
    bucket: str,
    prefix: str,
    access_key_id,
    secret_access_key,
    lake_resource: type[LakeResource] = LakeResource,
    ray_start_lock: str | None = None,
    **lake_extra,
) -> dict:
    """The prod profile's storage resources pointed at the test server (credentials: plain strings in the test
    process, dg.EnvVar in the child processes, as in prod) and a local Ray for the CPU steps."""
    s3 = S3Resource(
        endpoint_url=endpoint_url, region="us-east-1", access_key_id=access_key_id, secret_access_key=secret_access_key
    )
    return {
        "s3": s3,
        "object_store": ObjectStoreResource(kind="s3", bucket=bucket, prefix=prefix, s3=s3),
        "lake": lake_resource(bucket=bucket, prefix=prefix, s3=s3, **lake_extra),
        "ray_cluster": (
            SerialStartLocalRay(ray_init_options=dict(RAY_INIT), start_lock=ray_start_lock)
            if ray_start_lock
            else LocalRay(ray_init_options=dict(RAY_INIT))
        ),
    }


def cpu_assets_and_checks():
    from videolake.assets import cpu_assets
    from videolake.assets.checks import build_all_gate_checks

    return [*cpu_assets.CPU_ASSETS[:3], *build_all_gate_checks(tables=CPU_TABLES)]  # the CPU row tables


@dataclass(frozen=True)
class BarrierLake(Lake):
    """A Lake whose writes wait until ``parties`` processes are about to write the same table, then all commit at
    once: the concurrent commits to one Delta table on S3 are forced, not left to timing luck."""

    barrier_dir: str = ""
    parties: int = 2

    def commit_files(self, table, files, partitions, **kwargs):
        d = Path(self.barrier_dir)
        (d / f"{table}.{os.getpid()}").touch()
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        while len(list(d.glob(f"{table}.*"))) < self.parties:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the other writer never reached the {table} write")
            time.sleep(0.05)
        return super().commit_files(table, files, partitions, **kwargs)


class SerialStartLocalRay(LocalRay):
    """LocalRay whose start waits for the other writer's Ray to be up (a file lock around ray.init): Ray gives a
    node 30 s to register, which two simultaneous starts on a busy 2-core machine can exceed. Only the start is
    serialized; the runs and their writes overlap."""

    start_lock: str = ""

    def connect(self, context):
        import fcntl

        with open(self.start_lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                return super().connect(context)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


class BarrierLakeResource(LakeResource):
    barrier_dir: str
    parties: int = 2

    def get_lake(self) -> Lake:
        lake = super().get_lake()
        return BarrierLake(lake.root, lake.storage_options, barrier_dir=self.barrier_dir, parties=self.parties)


# ------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def prefix() -> str:
    return f"pipeline-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def landed(seaweed, prefix, tmp_path_factory) -> list[Landed]:
    """Render the landing videos and upload them through the S3 object store, as an uploader would."""
    from videolake.platform.objectstore.s3 import S3ObjectStore
    from videolake.synth import render, render_special

    work = tmp_path_factory.mktemp("synth")
    store = S3ObjectStore(
        seaweed.bucket,
        prefix,
        endpoint_url=seaweed.endpoint_url,
        region=seaweed.region,
        access_key_id=seaweed.access_key,
        secret_access_key=seaweed.secret_key,
    )
    out = []
    for day, kind, what in _landing_specs():
        path, truth = render(what, work) if kind == "video" else render_special(what, work)
        key = f"landing/{day}/{path.name}"
        uri = store.put_file(key, str(path))
        out.append(Landed(day, key, uri, hashlib.sha256(path.read_bytes()).hexdigest(), truth))
    return out


@pytest.fixture(scope="module")
def resources(seaweed, prefix) -> dict:
    return s3_resources(
        endpoint_url=seaweed.endpoint_url,
        bucket=seaweed.bucket,
        prefix=prefix,
        access_key_id=seaweed.access_key,
        secret_access_key=seaweed.secret_key,
    )


def _rows(resources, table: str, days: list[str]) -> list[dict]:
    lake = resources["lake"].get_lake()
    rng = PartitionRange.of(days)
    return lake.read_partitions(table, rng).to_pylist()


def _partition_files(resources, table: str, day: str) -> list[str]:
    from deltalake import DeltaTable

    lake = resources["lake"].get_lake()
    dt_ = DeltaTable(lake.table_uri(table), storage_options=lake.storage_options)
    return sorted(dt_.file_uris(partition_filters=[("partition_date", "=", day)]))


def _bucket_keys(seaweed, prefix: str) -> list[str]:
    client, keys, token = seaweed.client(), [], None
    while True:
        kw = {"Bucket": seaweed.bucket, "Prefix": f"{prefix}/tables/"}
        if token:
            kw["ContinuationToken"] = token
        page = client.list_objects_v2(**kw)
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return keys
        token = page["NextContinuationToken"]


def _check_cpu_tables(resources, landed: list[Landed], day: str) -> dict[str, list[dict]]:
    """raw_videos and scene_clips of ``day`` equal the ground truth; filtered_clips scores each clip once."""
    expected = _expected_rows(landed, day)
    raw = _rows(resources, "raw_videos", [day])
    assert sorted(r["video_id"] for r in raw) == sorted(expected["raw_videos"]), day
    by_uri = {r["source_uri"]: r for r in raw}
    for obj in (o for o in landed if o.day == day):
        row = by_uri[obj.uri]
        verdict = obj.truth["expect"]
        if verdict.startswith("reject:"):
            assert (row["status"], row["reject_reason"]) == ("rejected", verdict.split(":", 1)[1]), obj.key
        else:
            assert (row["status"], row["num_frames"]) == ("ok", obj.truth["num_frames"]), obj.key
    clips = _rows(resources, "scene_clips", [day])
    assert sorted(c["clip_id"] for c in clips) == sorted(expected["scene_clips"]), day
    filtered = _rows(resources, "filtered_clips", [day])
    assert sorted(f["clip_id"] for f in filtered) == sorted(expected["scene_clips"]), day
    for obj in (o for o in landed if o.day == day and o.truth["expect"].startswith("filter:")):
        reason = obj.truth["expect"].split(":", 1)[1]  # e.g. the all-black special: every clip rejected as black
        rows = [f for f in filtered if f["video_id"] == obj.video_id]
        assert rows and all(not f["passed"] and reason in f["reject_reason"].split(";") for f in rows), obj.key
    assert any(f["passed"] for f in filtered), day
    return {"raw_videos": raw, "scene_clips": clips, "filtered_clips": filtered}


# ------------------------------------------------------------------------------------------------- tests
def test_one_partition_all_five_assets_a_release_and_the_loader_on_s3(
    seaweed, prefix, landed, resources, tiny_captioner
):
    from videolake.assets import cpu_assets
    from videolake.assets.captions import build_clip_captions
    from videolake.assets.checks import build_all_gate_checks
    from videolake.platform.gates import LENIENT_CAPTION_CONTENT, gate_names

    captioner = tiny_captioner
    assets = [*cpu_assets.CPU_ASSETS, build_clip_captions(captioner)]
    checks = build_all_gate_checks(overrides=LENIENT_CAPTION_CONTENT)
    all_resources = {**resources, "caption_ray": LocalRay(ray_init_options=dict(RAY_INIT)), "captioner": captioner}

    result = dg.materialize(
        [*assets, *checks], partition_key=DAY1, resources=all_resources, instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success

    # every table lives in the bucket: a Delta log and the partition's data files under tables/<name>/
    keys = _bucket_keys(seaweed, prefix)
    for table in TABLES:
        assert f"{prefix}/tables/{table}/_delta_log/00000000000000000000.json" in keys, table
        assert any(
            k.startswith(f"{prefix}/tables/{table}/partition_date={DAY1}/") and k.endswith(".parquet") for k in keys
        ), table
    assert not any(k.startswith(f"{prefix}/tables/") and "partition_date=" in k and DAY1 not in k for k in keys)

    cpu = _check_cpu_tables(resources, landed, DAY1)
    assert len(cpu["raw_videos"]) == sum(o.day == DAY1 for o in landed) == 4
    passed = sorted(f["clip_id"] for f in cpu["filtered_clips"] if f["passed"])
    captions = _rows(resources, "clip_captions", [DAY1])
    assert sorted(c["clip_id"] for c in captions) == passed  # exactly one caption row per passed clip
    assert [(c["status"], c["error"]) for c in captions] == [("ok", None)] * len(captions)
    for c in captions:
        assert c["caption"] and c["caption"].strip(), c
        assert c["model"] == "tiny-qwen2.5-vl-random" and c["num_frames"] == 4, c
        assert c["source_uri"].startswith(f"s3://{seaweed.bucket}/{prefix}/landing/{DAY1}/"), c

    # every gate of the four tables was evaluated once, for this partition; every blocking one passed
    evals = result.get_asset_check_evaluations()
    assert sorted((e.asset_key.path[-1], e.check_name) for e in evals) == sorted(
        (t, g) for t in TABLES for g in gate_names(t)
    )
    failed_blocking = [
        (e.check_name, e.description) for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
    ]
    assert failed_blocking == []
    mats = {e.asset_key.path[-1]: e.materialization.metadata for e in result.get_asset_materialization_events()}
    assert mats["clip_captions"]["dagster/partition_row_count"].value == len(passed)
    assert str(mats["raw_videos"]["dagster/uri"].value) == f"s3://{seaweed.bucket}/{prefix}/tables/raw_videos"
    assert mats["raw_videos"]["dagster/table_name"].value == "videolake.raw_videos"
    # the day's contact sheet: frames read from the bucket, the first ok captions listed by clip id
    import base64
    import io
    import re

    from PIL import Image

    sheet = mats["clip_captions"]["contact_sheet"].value
    image = Image.open(io.BytesIO(base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)\)", sheet).group(1))))
    assert image.format == "JPEG" and image.size[0] == 3 * 200 + 4 * 4
    listed = re.findall(r"^- `([0-9a-f_]+)`: ", sheet, re.M)
    assert listed and set(listed) <= set(passed), listed
    # the whole table's rows (every day written so far), beside the day's
    assert mats["clip_captions"]["dagster/row_count"].value == resources["lake"].get_lake().row_count(
        "clip_captions", None
    )

    # The training shards are in the bucket; a release of the day (its gates, as this run judged them, passed),
    # verified and read back through the loader, all over S3.
    from videolake.dataset import open_release
    from videolake.platform.gates import load_gate_config
    from videolake.platform.releases import create_release, gate_verdicts_from_lake, verify_release

    samples = _rows(resources, "training_shards", [DAY1])
    assert sorted(r["clip_id"] for r in samples) == passed and {r["status"] for r in samples} == {"ok"}
    assert all(r["shard_uri"].startswith(f"s3://{seaweed.bucket}/{prefix}/shards/{DAY1}/") for r in samples)
    store, lake = resources["object_store"].get_store(), resources["lake"].get_lake()
    verdicts = gate_verdicts_from_lake(lake, load_gate_config(None, LENIENT_CAPTION_CONTENT))
    release = create_release(lake, store, "s3-test", DAY1, DAY1, gate_verdicts=verdicts)
    assert release.partitions == [DAY1], release.excluded_partitions
    assert {s["uri"] for s in release.manifest["shards"]} == {r["shard_uri"] for r in samples}
    assert verify_release(store, "s3-test", storage_options=lake.storage_options).ok
    ds = open_release(
        store.uri("releases/s3-test"), num_frames=2, shuffle_seed=None, storage_options=lake.storage_options
    )
    got = {s["__key__"]: s for s in ds}
    text = {c["clip_id"]: c["caption"] for c in captions}
    assert sorted(got) == passed
    assert all(s["frames"].shape[0] == 2 and s["caption"] == text[k] for k, s in got.items())


def test_two_partitions_concurrently_into_the_same_tables(seaweed, prefix, landed, resources, tmp_path):
    """Runs after the first test (module order): partition DAY1 exists in all four tables."""
    before = {t: _partition_files(resources, t, DAY1) for t in TABLES}
    rows_before = {t: _rows(resources, t, [DAY1]) for t in TABLES}
    assert all(before.values()) and all(rows_before.values()), "run the whole module: DAY1 must exist first"

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": seaweed.access_key, "AWS_SECRET_ACCESS_KEY": seaweed.secret_key}
    procs = {}
    for day in (DAY2, DAY3):
        args = {
            "endpoint_url": seaweed.endpoint_url,
            "bucket": seaweed.bucket,
            "prefix": prefix,
            "day": day,
            "barrier_dir": str(barrier),
            "ray_start_lock": str(tmp_path / "ray-start.lock"),
        }
        log = open(tmp_path / f"child-{day}.log", "wb")
        procs[day] = (
            subprocess.Popen(
                [sys.executable, __file__, json.dumps(args)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).parent,
                env=env,
            ),
            log,
        )
    outcomes = {}
    try:
        for day, (proc, log) in procs.items():
            proc.wait(timeout=CHILD_TIMEOUT_S)
            log.close()
            text = (tmp_path / f"child-{day}.log").read_text(errors="replace")
            lines = [ln for ln in text.splitlines() if ln.startswith("CHILD-RESULT ")]
            assert proc.returncode == 0 and lines, f"writer of {day} failed (rc {proc.returncode}):\n{text[-4000:]}"
            outcomes[day] = json.loads(lines[-1].split(" ", 1)[1])
    finally:
        for proc, log in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()

    for day, out in outcomes.items():
        assert out["success"] and out["failed_blocking_checks"] == [], (day, out)
    # both writers reached every table's write (the barrier files), so each table had two racing commits
    assert sorted(p.name.split(".")[0] for p in barrier.iterdir()) == sorted([*CPU_TABLES, *CPU_TABLES])
    print(f"\ncommit conflicts retried by the writers: { {d: o['commit_conflicts'] for d, o in outcomes.items()} }")

    # every row of both partitions present exactly once, in every table
    for day in (DAY2, DAY3):
        _check_cpu_tables(resources, landed, day)
    keys = {"raw_videos": ("partition_date", "video_id"), "scene_clips": ("clip_id",), "filtered_clips": ("clip_id",)}
    for table, key in keys.items():
        rows = _rows(resources, table, [DAY1, DAY2, DAY3])
        ids = [tuple(str(r[k]) for k in key) for r in rows]
        assert len(ids) == len(set(ids)), table
        expected_n = sum(
            len(_expected_rows(landed, d)["raw_videos" if table == "raw_videos" else "scene_clips"])
            for d in (DAY1, DAY2, DAY3)
        )
        assert len(rows) == expected_n, table
    # partition DAY1 untouched: the same data files and the same rows in all four tables
    assert {t: _partition_files(resources, t, DAY1) for t in TABLES} == before
    assert {t: _rows(resources, t, [DAY1]) for t in TABLES} == rows_before
    assert _rows(resources, "clip_captions", [DAY2, DAY3]) == []


# ------------------------------------------------------------------------------------------------- child process
def _child_main(raw_args: str) -> int:
    """One concurrent writer: the CPU assets and their gates for one partition, on its own ephemeral instance and
    its own local Ray; credentials from the environment through dg.EnvVar, as the prod profile reads them."""
    args = json.loads(raw_args)
    conflicts = []

    class _Count(logging.Handler):
        def emit(self, record):
            if "commit conflict" in record.getMessage():
                conflicts.append(record.getMessage())

    logging.getLogger("videolake.platform.lake.storage").addHandler(_Count(level=logging.WARNING))
    logging.getLogger("videolake.platform.lake.storage").setLevel(logging.WARNING)
    resources = s3_resources(
        endpoint_url=args["endpoint_url"],
        bucket=args["bucket"],
        prefix=args["prefix"],
        access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID"),
        secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
        lake_resource=BarrierLakeResource,
        barrier_dir=args["barrier_dir"],
        ray_start_lock=args["ray_start_lock"],
    )
    result = dg.materialize(
        cpu_assets_and_checks(),
        partition_key=args["day"],
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    evals = result.get_asset_check_evaluations()
    out = {
        "success": result.success,
        "checks": len(evals),
        "failed_blocking_checks": [
            e.check_name for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
        ],
        "commit_conflicts": len(conflicts),
    }
    print("CHILD-RESULT " + json.dumps(out), flush=True)
    return 0 if result.success else 1


if __name__ == "__main__":
    for _k, _v in {"GX_ANALYTICS_ENABLED": "false", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        os.environ.setdefault(_k, _v)
    sys.exit(_child_main(sys.argv[1]))
