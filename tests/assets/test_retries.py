"""A run that fails once with a transient error succeeds on retry with no duplicate rows (issue 6).

The real CPU assets run on an ephemeral instance with a real Delta lake and a local Ray; two transient failures are
injected ONCE each through test-only resources (subclasses of the real ones), and the assets' own RetryPolicy
retries the failed steps inside the same run:

- raw_videos: the object store's landing listing raises ConnectionError (connection reset) on its first call, before
  anything is written;
- scene_clips: the Delta commit of the partition SUCCEEDS and then the step fails (the connection drops before the
  step sees the acknowledgement). The table now holds the first attempt's rows; the retry writes them again. With an
  append instead of the partition overwrite, every clip would be there twice.

Each injection is recorded in a marker file, as a step retried in a fresh process (multiprocess executor, k8s step
pods) would see it. The run must succeed with each failing step attempted exactly twice, and every table must equal
a clean run's rows, each row once.

Why no run-retry test here: run retries (``run_retries`` in dagster.yaml) are decided and launched by the daemon
(EventLogConsumerDaemon -> auto_run_reexecution.retry_run), which re-executes the failed run from its remote job
origin in a code location. A run made by ``materialize``/``execute_in_process`` has no remote job origin (the daemon
answers "Run does not have an external job origin, unable to retry the run"), so they cannot be shown with
execute_in_process. The repo's dagster.yaml also sets ``retry_on_asset_or_op_failure: false`` on purpose: step
failures are the op retry policies' job (this test); run retries cover run-worker deaths (an evicted run pod). The
browser test (tests/integration) runs the webserver and the daemon against an instance with that configuration.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from dagster_ray import LocalRay

from videolake.assets import cpu_assets
from videolake.platform.lake import Lake, PartitionRange
from videolake.platform.objectstore import ObjectStore
from videolake.resources import LakeResource, ObjectStoreResource

DAY = "2026-03-02"  # tests/assets/conftest.py lands one video there, twice (a duplicate upload): the small day
ASSETS = [cpu_assets.raw_videos, cpu_assets.scene_clips, cpu_assets.filtered_clips]
TABLE_KEYS = {"raw_videos": ("partition_date", "video_id"), "scene_clips": ("clip_id",), "filtered_clips": ("clip_id",)}
RAY = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}


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


@dataclass(frozen=True)
class _CommitThenFailLake(Lake):
    """The real lake, except that the first write of ``fail_table`` commits and then raises ConnectionError."""

    fail_marker: str = ""
    fail_table: str = ""

    def write_partitions(self, table, data, partitions):
        result = super().write_partitions(table, data, partitions)
        if table == self.fail_table:
            _inject_once(self.fail_marker, f"after the commit of {table} version {result.version}")
        return result


class FlakyLakeResource(LakeResource):
    fail_marker: str
    fail_table: str

    def get_lake(self) -> Lake:
        lake = super().get_lake()
        return _CommitThenFailLake(lake.root, lake.storage_options, fail_marker=self.fail_marker,
                                   fail_table=self.fail_table)


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
    resources = {"object_store": ObjectStoreResource(kind="local", root=str(landing["root"])), "lake": lake,
                 "ray_cluster": LocalRay(ray_init_options=dict(RAY))}
    assert dg.materialize(ASSETS, partition_key=DAY, resources=resources,
                          instance=dg.DagsterInstance.ephemeral()).success
    return lake.get_lake()


# ----------------------------------------------------------------------------------- test
def test_transient_failures_are_retried_in_the_run_with_no_duplicate_rows(landing, tmp_path, clean_run):
    list_marker, commit_marker = tmp_path / "list-failed-once", tmp_path / "commit-failed-once"
    lake_resource = FlakyLakeResource(root=str(tmp_path / "lake"), fail_marker=str(commit_marker),
                                      fail_table="scene_clips")
    resources = {
        "object_store": FlakyObjectStoreResource(kind="local", root=str(landing["root"]), fail_marker=str(list_marker)),
        "lake": lake_resource,
        "ray_cluster": LocalRay(ray_init_options=dict(RAY)),
    }
    result = dg.materialize(ASSETS, partition_key=DAY, resources=resources, instance=dg.DagsterInstance.ephemeral())

    assert result.success
    # both failures really happened, once each, and each failing step ran exactly twice inside this one run
    assert list_marker.read_text() == f"list landing/{DAY}/"
    assert commit_marker.read_text() == "after the commit of scene_clips version 0"
    once_retried = {"STEP_START": 1, "STEP_UP_FOR_RETRY": 1, "STEP_RESTARTED": 1, "STEP_SUCCESS": 1, "STEP_FAILURE": 0}
    assert _attempts(result, "raw_videos") == once_retried
    assert _attempts(result, "scene_clips") == once_retried
    assert _attempts(result, "filtered_clips") == {**once_retried, "STEP_UP_FOR_RETRY": 0, "STEP_RESTARTED": 0}

    lake = lake_resource.get_lake()
    # scene_clips was committed twice (the lost acknowledgement, then the retry); the clean run committed once
    assert (lake.version("scene_clips"), clean_run.version("scene_clips")) == (1, 0)
    assert (lake.version("raw_videos"), lake.version("filtered_clips")) == (0, 0)  # the list failed before any write
    for table, key in TABLE_KEYS.items():
        rows = _rows(lake, table)
        ids = [tuple(str(r[k]) for k in key) for r in rows]
        assert len(ids) == len(set(ids)), f"{table}: duplicate rows after the retry"
        assert rows == _rows(clean_run, table), f"{table}: the retried run's rows differ from a clean run's"
        assert rows and {str(r["partition_date"]) for r in rows} == {DAY}
    # the partition read back through the lake (what downstream steps read) has the clean run's clips, once each
    clips = lake.read_partitions("scene_clips", PartitionRange.of([DAY])).column("clip_id").to_pylist()
    assert sorted(clips) == sorted(r["clip_id"] for r in _rows(clean_run, "scene_clips"))
