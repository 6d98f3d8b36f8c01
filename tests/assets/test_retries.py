"""Retries only for what can succeed (issues 6 and 9): a transient failure is retried inside the run and leaves no
duplicate rows; a deterministic one fails the step after exactly one attempt, with its message.

The real CPU assets run on an ephemeral instance with a real Delta lake and a local Ray. Failures are injected ONCE
each through test-only resources (subclasses of the real ones); a marker file per injection remembers it, as a step
retried in a fresh process would see it.

Transient (retried by the assets' own RetryPolicy inside the same run), all in one run:
- raw_videos: the landing listing raises ConnectionError (connection reset) before anything is written;
- scene_clips: the Delta commit SUCCEEDS and then the step fails (the acknowledgement was lost). The table holds the
  first attempt's rows; the retry writes them again. With an append instead of the partition overwrite, every clip
  would be there twice;
- filtered_clips: a Ray worker crashes (ray.exceptions.WorkerCrashedError) before the commit.
The run must succeed with each failing step attempted exactly twice, and every table must equal a clean run's rows.

Deterministic (fail at once; the RetryPolicy is bypassed by dg.Failure(allow_retries=False)): a listing error (the
injected ValueError would NOT recur: the marker proves no second attempt was made), a table with another schema
(SchemaMismatchError from delta-rs), a day without a landing folder. Each fails raw_videos after one attempt, with
the error's first line; nothing downstream runs.

Run retries (a dead run worker) need the daemon and a launched run: tests/integration/test_run_recovery.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from module_ray import joining_local_ray

from videolake.assets import cpu_assets
from videolake.platform.lake.table import Lake, PartitionRange
from videolake.platform.objectstore import ObjectStore
from videolake.resources import LakeResource, ObjectStoreResource

DAY = "2026-03-02"  # tests/assets/conftest.py lands one video there, twice (a duplicate upload): the small day
ASSETS = [cpu_assets.raw_videos, cpu_assets.scene_clips, cpu_assets.filtered_clips]
TABLE_KEYS = {"raw_videos": ("partition_date", "video_id"), "scene_clips": ("clip_id",), "filtered_clips": ("clip_id",)}
pytestmark = pytest.mark.usefixtures("module_ray")  # one Ray for the module's runs (module_ray.py)


def _inject_once(marker: str, what: str) -> None:
    """Raise a transient error the first time only: the marker file remembers it across attempts and processes."""
    path = Path(marker)
    if not path.exists():
        path.write_text(what)
        raise ConnectionError(f"[Errno 104] Connection reset by peer (injected once: {what})")


# ----------------------------------------------------------------------------------- test-only failing resources
class _FirstListFails(ObjectStore):
    """The real store, except that its first ``list`` in the marker's lifetime raises ConnectionError.

    Pickles as a copy of the real store: Ray tasks (which receive the store) never see the wrapper, and the listing
    the raw_videos step does itself is where the failure lands."""

    def __init__(self, inner: ObjectStore, marker: str) -> None:
        self._inner, self._marker = inner, marker

    def __reduce__(self):
        return copy.copy, (self._inner,)

    def list(self, prefix):
        _inject_once(self._marker, f"list {prefix}")
        return self._inner.list(prefix)

    def get_bytes(self, key):
        return self._inner.get_bytes(key)

    def put_bytes(self, key, data):
        return self._inner.put_bytes(key, data)

    def put_file(self, key, path):
        return self._inner.put_file(key, path)

    def download(self, key, path):
        return self._inner.download(key, path)

    def exists(self, key):
        return self._inner.exists(key)

    def uri(self, key):
        return self._inner.uri(key)

    def key_from_uri(self, uri):
        return self._inner.key_from_uri(uri)

    def local_path(self, key):
        return self._inner.local_path(key)


class FlakyObjectStoreResource(ObjectStoreResource):
    fail_marker: str

    def get_store(self) -> ObjectStore:
        return _FirstListFails(super().get_store(), self.fail_marker)


def _transient_error(kind: str, what: str) -> Exception:
    """A real exception object of the kind a lost worker, a store outage or a lost connection raises."""
    if kind == "connection_reset":
        return ConnectionError(f"[Errno 104] Connection reset by peer (injected once: {what})")
    if kind == "ray_worker_crashed":
        from ray.exceptions import WorkerCrashedError

        return WorkerCrashedError()
    if kind == "storage_outage":
        from botocore.exceptions import EndpointConnectionError

        from videolake.platform.objectstore.base import ObjectStoreError

        try:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
        except EndpointConnectionError as cause:
            error = ObjectStoreError(f"S3 still failing after 9 tries over 120s while trying to {what}")
            error.__cause__ = cause
            return error
    raise ValueError(kind)


@dataclass(frozen=True)
class _FlakyLake(Lake):
    """The real lake, except for the planned failures, each raised once (its marker file remembers it):
    ``{table: "after_commit:<kind>" | "before_commit:<kind>"}``."""

    marker_dir: str = ""
    plan: tuple[tuple[str, str], ...] = ()

    def __reduce__(self):
        # a Ray worker that reads the lake (the score stage's units read their clip rows) gets the real Lake: the
        # planned failures are the step's commits, and the workers cannot import this test module
        return Lake, (self.root, self.storage_options)

    def commit_files(self, table, files, partitions, **kwargs):
        when, _, kind = dict(self.plan).get(table, ":").partition(":")
        marker = Path(self.marker_dir) / f"{table}-failed-once"
        if when == "before_commit" and not marker.exists():
            marker.write_text(f"{kind} before the commit of {table}")
            raise _transient_error(kind, f"commit {table}")
        result = super().commit_files(table, files, partitions, **kwargs)
        if when == "after_commit" and not marker.exists():
            marker.write_text(f"{kind} after the commit of {table} version {result.version}")
            raise _transient_error(kind, f"after the commit of {table}")
        return result


class FlakyLakeResource(LakeResource):
    marker_dir: str
    plan: dict[str, str]

    def get_lake(self) -> Lake:
        lake = super().get_lake()
        return _FlakyLake(
            lake.root, lake.storage_options, marker_dir=self.marker_dir, plan=tuple(sorted(self.plan.items()))
        )


# ----------------------------------------------------------------------------------- helpers
def _rows(lake: Lake, table: str) -> list[dict]:
    """Every row of the table (all partitions), without the run-time timestamp, in a stable order."""
    from deltalake import DeltaTable

    rows = DeltaTable(lake.table_uri(table)).to_pyarrow_table().to_pylist()
    return sorted(({k: v for k, v in r.items() if k != "ingested_at"} for r in rows), key=str)


def _attempts(result, step: str) -> dict[str, int]:
    counts = {"STEP_START": 0, "STEP_UP_FOR_RETRY": 0, "STEP_RESTARTED": 0, "STEP_SUCCESS": 0, "STEP_FAILURE": 0}
    for e in result.all_events:
        if e.step_key == step and e.event_type_value in counts:
            counts[e.event_type_value] += 1
    return counts


@pytest.fixture()
def clean_run(landing, tmp_path) -> Lake:
    """The reference: the same partition materialized without failures into its own lake."""
    lake = LakeResource(root=str(tmp_path / "clean-lake"))
    resources = {
        "object_store": ObjectStoreResource(kind="local", root=str(landing["root"])),
        "lake": lake,
        "ray_cluster": joining_local_ray(),
    }
    assert dg.materialize(
        ASSETS, partition_key=DAY, resources=resources, instance=dg.DagsterInstance.ephemeral()
    ).success
    return lake.get_lake()


# ----------------------------------------------------------------------------------- test
def test_transient_failures_are_retried_in_the_run_with_no_duplicate_rows(landing, tmp_path, clean_run):
    list_marker = tmp_path / "list-failed-once"
    lake_resource = FlakyLakeResource(
        root=str(tmp_path / "lake"),
        marker_dir=str(tmp_path),
        plan={
            "scene_clips": "after_commit:connection_reset",  # the commit succeeded, its acknowledgement was lost
            "filtered_clips": "before_commit:ray_worker_crashed",  # a Ray worker died under the step
        },
    )
    resources = {
        "object_store": FlakyObjectStoreResource(kind="local", root=str(landing["root"]), fail_marker=str(list_marker)),
        "lake": lake_resource,
        "ray_cluster": joining_local_ray(),
    }
    result = dg.materialize(ASSETS, partition_key=DAY, resources=resources, instance=dg.DagsterInstance.ephemeral())

    assert result.success
    # every failure really happened, once each, and each failing step ran exactly twice inside this one run
    assert list_marker.read_text() == f"list landing/{DAY}/"
    assert (
        tmp_path / "scene_clips-failed-once"
    ).read_text() == "connection_reset after the commit of scene_clips version 1"
    assert (
        tmp_path / "filtered_clips-failed-once"
    ).read_text() == "ray_worker_crashed before the commit of filtered_clips"
    once_retried = {"STEP_START": 1, "STEP_UP_FOR_RETRY": 1, "STEP_RESTARTED": 1, "STEP_SUCCESS": 1, "STEP_FAILURE": 0}
    for step in ("raw_videos", "scene_clips", "filtered_clips"):
        assert _attempts(result, step) == once_retried, step

    lake = lake_resource.get_lake()
    # scene_clips was committed twice (the lost acknowledgement, then the retry); the clean run committed once.
    # Version 0 of every table is its creation (empty), so one commit is version 1.
    assert (lake.version("scene_clips"), clean_run.version("scene_clips")) == (2, 1)
    assert (lake.version("raw_videos"), lake.version("filtered_clips")) == (1, 1)  # failed before any write
    for table, key in TABLE_KEYS.items():
        rows = _rows(lake, table)
        ids = [tuple(str(r[k]) for k in key) for r in rows]
        assert len(ids) == len(set(ids)), f"{table}: duplicate rows after the retry"
        assert rows == _rows(clean_run, table), f"{table}: the retried run's rows differ from a clean run's"
        assert rows and {str(r["partition_date"]) for r in rows} == {DAY}
    # the partition read back through the lake (what downstream steps read) has the clean run's clips, once each
    clips = lake.read_partitions("scene_clips", PartitionRange.of([DAY])).column("clip_id").to_pylist()
    assert sorted(clips) == sorted(r["clip_id"] for r in _rows(clean_run, "scene_clips"))


class _FirstListRaisesValueError(_FirstListFails):
    def list(self, prefix):
        marker = Path(self._marker)
        if not marker.exists():
            marker.write_text(f"list {prefix}")
            raise ValueError(f"key '{prefix}../../etc' escapes the store root (injected once)")
        return self._inner.list(prefix)


class BadListingObjectStoreResource(ObjectStoreResource):
    fail_marker: str

    def get_store(self) -> ObjectStore:
        return _FirstListRaisesValueError(super().get_store(), self.fail_marker)


def _failure_description(result, step: str) -> str:
    (event,) = [e for e in result.all_events if e.step_key == step and e.event_type_value == "STEP_FAILURE"]
    return event.step_failure_data.user_failure_data.description


def _schema_mismatched_lake(root: Path) -> None:
    """A raw_videos table written earlier with another schema (e.g. by an incompatible version)."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(
        str(root / "raw_videos"),
        pa.table({"partition_date": [dt.date(2026, 3, 1)], "vid": ["x"]}),
        partition_by=["partition_date"],
    )


@pytest.mark.parametrize("case", ["listing_error", "schema_mismatch", "no_landing_folder"])
def test_deterministic_failures_fail_after_exactly_one_attempt(landing, tmp_path, case):
    marker = tmp_path / "list-failed-once"
    store_cls = BadListingObjectStoreResource if case == "listing_error" else FlakyObjectStoreResource
    store = store_cls(kind="local", root=str(landing["root"]), fail_marker=str(marker))
    if case != "listing_error":
        marker.write_text("no injected listing failure in this case")
    if case == "schema_mismatch":
        _schema_mismatched_lake(tmp_path / "lake")
    day = "2026-03-05" if case == "no_landing_folder" else DAY  # tests/assets/conftest.py lands nothing there
    resources = {
        "object_store": store,
        "lake": LakeResource(root=str(tmp_path / "lake")),
        "ray_cluster": joining_local_ray(),
    }
    result = dg.materialize(
        ASSETS, partition_key=day, resources=resources, instance=dg.DagsterInstance.ephemeral(), raise_on_error=False
    )

    assert not result.success
    assert _attempts(result, "raw_videos") == {
        "STEP_START": 1,
        "STEP_UP_FOR_RETRY": 0,
        "STEP_RESTARTED": 0,
        "STEP_SUCCESS": 0,
        "STEP_FAILURE": 1,
    }
    assert _attempts(result, "scene_clips")["STEP_START"] == 0  # nothing downstream ran
    description = _failure_description(result, "raw_videos")
    root = landing["root"].resolve().as_uri()
    expected_first_line = {
        "listing_error": f"ValueError: key 'landing/{DAY}/../../etc' escapes the store root (injected once) "
        "(deterministic: not retried)",
        "no_landing_folder": "NoLandingDataError: no landing data for 2026-03-05: the folder "
        f"{root}/landing/2026-03-05/ does not exist (deterministic: not retried)",
    }
    if case == "schema_mismatch":
        assert description.startswith("SchemaMismatchError: ") and "(deterministic: not retried)" in description
    else:
        assert description.splitlines()[0] == expected_first_line[case]
    if case == "no_landing_folder":
        assert description.splitlines()[1] == (
            f"What to do: land the day's videos under {root}/landing/2026-03-05/ "
            "(or pick a date that has them), then run it again"
        )
        assert not (tmp_path / "lake" / "raw_videos").exists()  # the partition stays missing
    if case == "listing_error":
        assert marker.read_text() == f"list landing/{DAY}/"  # a retry would have listed fine: none was made
