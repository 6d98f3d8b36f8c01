"""Days without data: a day whose landing folder does not exist is not materialized; an empty one is, with a warning.

Why: a backfill over dates that never received data used to "succeed" with four green 0-row partitions and passing
gates, indistinguishable from a real day with nothing worth keeping. The rule:

- **no folder** ``<landing>/<D>/``: raw_videos fails at once with "no landing data for D" (a deterministic error:
  never retried), nothing downstream runs, and the partition stays missing in the UI. The schedule and the sensor
  never request such a day.
- **a folder with no objects**: the day materializes 0 rows, and the WARNING-severity check
  ``raw_videos.landing_not_empty`` fails visibly for it (it does not block: an empty day is a fact, not an error).

When does a folder exist? In a filesystem store: the directory exists. In S3 (no real folders): at least one object
has the prefix ``<landing>/<D>/``, a folder-marker object (``<landing>/<D>/``, what consoles create) included.
"""

import os
import warnings
from collections.abc import Iterable

import dagster as dg

from videolake.assets.errors import DeterministicError
from videolake.assets.partitions import DEFAULT_PARTITIONS
from videolake.platform.objectstore import ObjectStore
from videolake.resources import LakeResource, ObjectStoreResource


class NoLandingDataError(DeterministicError):
    """Raised for partition days without a landing folder."""


def day_prefix(landing: str, day: str) -> str:
    return f"{landing.strip('/')}/{day}/"


def folder_uri(store: ObjectStore, prefix: str) -> str:
    """The URI of a folder, ending in '/' (a local store's uri() drops it)."""
    return store.uri(prefix.strip("/")).rstrip("/") + "/"


def landing_folder_exists(store: ObjectStore, landing: str, day: str) -> bool:
    prefix = day_prefix(landing, day)
    local = store.local_path(prefix.rstrip("/"))
    if local is not None:
        return os.path.isdir(local)
    return bool(store.list(prefix))


def missing_landing_days(store: ObjectStore, landing: str, days: Iterable[str]) -> list[str]:
    return [d for d in days if not landing_folder_exists(store, landing, d)]


def require_landing_data(store: ObjectStore, landing: str, days: Iterable[str]) -> None:
    """Raise NoLandingDataError naming every day of ``days`` whose landing folder does not exist."""
    days = list(days)
    missing = missing_landing_days(store, landing, days)
    if not missing:
        return
    where = folder_uri(store, landing.strip("/"))
    shown = ", ".join(missing)
    if len(days) == 1:
        message = f"no landing data for {shown}: the folder {where}{shown}/ does not exist"
        hint = f"land the day's videos under {where}{shown}/ (or pick a date that has them), then run it again"
    else:
        message = (
            f"no landing data for {shown} ({len(missing)} of the {len(days)} days of this run): "
            f"their folders under {where} do not exist"
        )
        hint = "backfill only days that have a landing folder (the partitions of a run are written together)"
    raise NoLandingDataError(message, hint)


def _count_rows(lake, day: str) -> int:
    from videolake.platform.lake.table import PartitionRange

    return lake.read_partitions("raw_videos", PartitionRange.of([day]), columns=["video_id"]).num_rows


def _landing_objects(store: ObjectStore, landing: str, day: str) -> int:
    return sum(1 for o in store.list(day_prefix(landing, day)) if not o.key.endswith("/"))


def build_landing_checks(partitions_def: dg.PartitionsDefinition) -> list[dg.AssetChecksDefinition]:
    """The landing checks of raw_videos over ``partitions_def`` (the code location's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)  # partitions_def on asset checks is a Dagster preview

        @dg.asset_check(
            asset="raw_videos",
            name="landing_not_empty",
            blocking=False,
            partitions_def=partitions_def,
            description="WARNING when a day's landing folder exists but holds no objects (0 rows materialized). A day "
            "without a folder is never materialized (raw_videos fails with 'no landing data for D').",
        )
        def landing_not_empty(
            context: dg.AssetCheckExecutionContext, object_store: ObjectStoreResource, lake: LakeResource
        ) -> dg.AssetCheckResult:
            store, lk = object_store.get_store(), lake.get_lake()
            keys = list(context.partition_keys)
            rows = {k: _count_rows(lk, k) for k in keys}
            objects = {k: _landing_objects(store, object_store.landing, k) for k in keys}
            empty = [k for k in keys if rows[k] == 0]
            if empty:
                description = (
                    f"landing folder empty for {', '.join(empty)}: 0 raw_videos rows "
                    f"({sum(objects[k] for k in empty)} landing objects)"
                )
            else:
                description = f"every day has data ({sum(rows.values())} raw_videos rows)"
            return dg.AssetCheckResult(
                passed=not empty,
                severity=dg.AssetCheckSeverity.WARN,
                description=description,
                metadata={
                    "empty_days": dg.MetadataValue.json(empty),
                    "rows_by_day": dg.MetadataValue.json(rows),
                    "landing_objects_by_day": dg.MetadataValue.json(objects),
                },
            )

    return [landing_not_empty]


# The check over the asset modules' default partitions (tests materialize it with ``cpu_assets.raw_videos``).
(landing_not_empty,) = build_landing_checks(DEFAULT_PARTITIONS)
