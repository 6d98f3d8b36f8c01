"""Days without data (issue 9, item 4), through materialize() on an ephemeral instance with a real lake and Ray:
a day whose landing folder exists but is empty materializes 0 rows and the WARNING check raw_videos.landing_not_empty
fails for it (without blocking); a day with videos passes the check. (A day without a folder: test_retries.py.)"""

from __future__ import annotations

import dagster as dg
import pytest
from module_ray import joining_local_ray

from videolake.assets import cpu_assets
from videolake.assets.landing import landing_not_empty
from videolake.platform.lake.table import PartitionRange
from videolake.resources import LakeResource, ObjectStoreResource

pytestmark = pytest.mark.usefixtures("module_ray")  # one Ray for the module's runs (module_ray.py)


def _check(result) -> dg.AssetCheckEvaluation:
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "landing_not_empty"]
    return evaluation


def test_empty_landing_folder_materializes_zero_rows_with_a_warning(landing, tmp_path):
    empty_day = "2026-03-04"
    (landing["root"] / "landing" / empty_day).mkdir(exist_ok=True)
    lake = LakeResource(root=str(tmp_path / "lake"))
    resources = {
        "object_store": ObjectStoreResource(kind="local", root=str(landing["root"])),
        "lake": lake,
        "ray_cluster": joining_local_ray(),
    }
    instance = dg.DagsterInstance.ephemeral()

    empty = dg.materialize(
        [cpu_assets.raw_videos, landing_not_empty], partition_key=empty_day, resources=resources, instance=instance
    )
    assert empty.success  # a WARN check does not fail the run
    check = _check(empty)
    assert (check.passed, check.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert check.description == "landing folder empty for 2026-03-04: 0 raw_videos rows (0 landing objects)"
    assert check.metadata["empty_days"].value == [empty_day]
    assert lake.get_lake().read_partitions("raw_videos", PartitionRange.of([empty_day])).num_rows == 0
    # the partition is materialized (with 0 rows): the table exists (version 0) and the day's commit is version 1
    assert lake.get_lake().version("raw_videos") == 1
    assert [e.partition for e in empty.get_asset_materialization_events()] == [empty_day]

    full = dg.materialize(
        [cpu_assets.raw_videos, landing_not_empty], partition_key="2026-03-02", resources=resources, instance=instance
    )
    check = _check(full)
    assert check.passed and check.description == "every day has data (1 raw_videos rows)"
    assert check.metadata["landing_objects_by_day"].value == {"2026-03-02": 2}  # one video landed twice
