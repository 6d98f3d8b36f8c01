"""Dataset releases in the Dagster UI: one asset, ``dataset_release``, with one dynamic partition per release name.

Making a release from the UI: the asset's page (group ``releases``) -> Materialize -> "add a partition" with the new
name -> launchpad config ``start``, ``end`` (inclusive) and optional ``buckets`` -> launch. The step runs the engine
(``platform.releases.create_release``): it takes the days whose partitions passed every blocking gate of the five
tables, writes the manifest and the card under ``releases/<NAME>/`` and reports the card as markdown metadata, and
the lineage as metadata: the days it took, the days it left out and why, the Delta version of each table it read
and where each gate verdict came from. Its deps are the five table assets (all their partitions: a dynamic
partition cannot name a date range, which is why the days are metadata).

Gate verdicts (``gate_verdicts: recorded``, the default): a partition's verdict is the instance's recorded check
evaluations of that partition (what the asset's Checks tab shows) when they are current: every gate of the table
has a completed evaluation of that partition that targets its latest materialization, and that materialization's
Delta version holds the same data files for the day as the table the release pins (so a table rewritten outside
Dagster, or by a later run whose checks did not run, is not judged by stale evaluations). Otherwise, and for a
table without gates in the instance, the gates are evaluated again on the stored partition, like the CLI. The
metadata says which for each table and day. ``gate_verdicts: evaluate`` always evaluates again.

A release name is never reused: materializing an existing release again does not write it; with no config, or the
config it was made with, the step reports the stored release (a retried step, or a release made with the CLI and
picked up by ``release_sync_sensor``); with another config it fails.

Wiring (videolake/definitions.py, ``build_definitions``): ``release = build_release_defs(overrides=gate_overrides(
resources["captioner"]))`` and add ``*release.assets`` to ``assets``, ``*release.jobs`` to ``jobs`` and
``*release.sensors`` to ``sensors``; the asset uses the ``lake`` and ``object_store`` resources already there.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from videolake.platform.releases.manifest import RELEASE_TABLES
from videolake.resources import LakeResource, ObjectStoreResource

RELEASE_PARTITIONS_NAME = "releases"
RELEASE_PARTITIONS = dg.DynamicPartitionsDefinition(name=RELEASE_PARTITIONS_NAME)
RELEASE_ASSET = "dataset_release"
RELEASE_GROUP = "releases"  # not "videolake": the daily job selects that group


class ReleaseConfig(dg.Config):
    start: str | None = Field(
        default=None,
        description="First day of the release, YYYY-MM-DD. Empty: report the "
        "release of this name that exists (made by the CLI or an earlier run).",
    )
    end: str | None = Field(default=None, description="Last day of the release, YYYY-MM-DD, inclusive.")
    buckets: list[str] | None = Field(
        default=None,
        description="Only the shards of these buckets, e.g. "
        "resolution_720/aspect_16_9/frames_64_127; empty: every bucket.",
    )
    gate_verdicts: Literal["recorded", "evaluate"] = Field(
        default="recorded",
        description="recorded: a partition's recorded check evaluations when they judged the "
        "data the release reads, else evaluate the gates again; evaluate: always evaluate them again.",
    )


# -- gate verdicts from the instance ---------------------------------------------------------------------------------


def recorded_verdict(
    instance: dg.DagsterInstance, lake, table: str, day: str, pinned_version: int | None
) -> list[str] | None:
    """The failed blocking gates of ``table``/``day`` from the instance's check evaluations, or None when they
    cannot be relied on (a gate never evaluated on the day, a run in progress, an evaluation of an older
    materialization, a materialization of other data than the table's version ``pinned_version``)."""
    from videolake.platform.gates import TABLE_GATES

    if table not in TABLE_GATES or pinned_version is None:
        return None
    mat = _pinned_materialization(instance, lake, table, day, pinned_version)
    if mat is None:
        return None
    return _failed_blocking_checks(instance, table, day, mat)


def _pinned_materialization(instance: dg.DagsterInstance, lake, table: str, day: str, pinned_version: int):
    """The latest materialization of ``table``/``day`` when it wrote this lake's table and the day's data files of
    ``pinned_version``; None otherwise (then its check evaluations judged other data)."""
    from videolake.assets.metadata import step_figures
    from videolake.platform.releases.create import _day_files

    mats = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(table), asset_partitions=[day]), limit=1
    ).records
    if not mats:
        return None
    mat = mats[0]
    md = mat.asset_materialization.metadata if mat.asset_materialization else {}
    written = step_figures(md).get("delta_version")
    uri = next((md[k].value for k in ("dagster/uri", "table_uri") if k in md), None)  # table_uri: before 2026-12
    if written is None or uri is None or str(uri).rstrip("/") != lake.table_uri(table).rstrip("/"):
        return None
    if int(written) != pinned_version and _day_files(lake, table, int(written), [day]) != _day_files(
        lake, table, pinned_version, [day]
    ):
        return None
    return mat


def _failed_blocking_checks(instance: dg.DagsterInstance, table: str, day: str, mat) -> list[str] | None:
    """The names of the gates of ``table`` whose latest evaluation on ``day`` failed with severity ERROR, or None
    when a gate has no completed evaluation that targets ``mat``."""
    from dagster._core.event_api import PartitionKeyFilter  # not re-exported by `dagster`
    from dagster._core.storage.asset_check_execution_record import COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES

    from videolake.platform.gates import gate_names

    keys = [dg.AssetCheckKey(dg.AssetKey(table), g) for g in gate_names(table)]
    records = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        keys, partition_filter=PartitionKeyFilter(key=day)
    )
    failed = []
    for key in keys:
        rec = records.get(key)
        if rec is None or rec.status not in COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES:
            return None
        ev = rec.evaluation
        target = ev.target_materialization_data if ev is not None else None
        if ev is None or target is None or target.storage_id != mat.storage_id:
            return None
        if not ev.passed and ev.severity == dg.AssetCheckSeverity.ERROR:
            failed.append(key.name)
    return failed


@dataclass
class VerdictLog:
    """Where each (table, day) verdict came from: "recorded" or "evaluated"."""

    sources: dict[str, dict[str, str]]

    def as_metadata(self) -> dict[str, Any]:
        return {d: dict(sorted(v.items())) for d, v in sorted(self.sources.items())}


def instance_gate_verdicts(instance: dg.DagsterInstance, lake, fallback, mode: str = "recorded"):
    """(verdicts callable for ``create_release``, its VerdictLog): recorded evaluations where reliable, else
    ``fallback`` (the engine's re-evaluation)."""
    versions = {t: lake.version(t) for t in RELEASE_TABLES}
    log = VerdictLog({})

    def verdicts(table: str, day: str) -> list[str]:
        got = recorded_verdict(instance, lake, table, day, versions[table]) if mode == "recorded" else None
        log.sources.setdefault(day, {})[table] = "recorded" if got is not None else "evaluated"
        return got if got is not None else list(fallback(table, day))

    return verdicts, log


# -- the asset -------------------------------------------------------------------------------------------------------


def release_metadata(
    manifest: Mapping[str, Any], card: str, card_uri: str, verdicts: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the UI shows for a release: the card, the lineage (days, versions) and the totals."""
    totals = manifest["totals"]
    md: dict[str, Any] = {
        "card": dg.MetadataValue.md(card),
        "card_uri": dg.MetadataValue.path(card_uri),
        "partitions": dg.MetadataValue.json(list(manifest["partitions"])),
        "excluded_partitions": dg.MetadataValue.json(list(manifest["excluded_partitions"])),
        "table_versions": dg.MetadataValue.json({t: v["version"] for t, v in manifest["tables"].items()}),
        "tables": dg.MetadataValue.json(dict(manifest["tables"])),
        "buckets": dg.MetadataValue.json(manifest["buckets"]),
        "samples": dg.MetadataValue.int(int(totals["samples"])),
        "shards": dg.MetadataValue.int(int(totals["shards"])),
        "hours": dg.MetadataValue.float(float(totals["hours"])),
        "bytes": dg.MetadataValue.int(int(totals["bytes"])),
        "by_bucket": dg.MetadataValue.json(dict(totals["by_bucket"])),
        "created_at": dg.MetadataValue.text(str(manifest["created_at"])),
    }
    if verdicts is not None:
        md["gate_verdicts"] = dg.MetadataValue.json(dict(verdicts))
    return md


def _same_request(manifest: Mapping[str, Any], config: ReleaseConfig) -> bool:
    req = manifest.get("requested") or {}
    buckets = sorted(set(config.buckets)) if config.buckets else None
    return (req.get("start"), req.get("end"), manifest.get("buckets")) == (config.start, config.end, buckets)


def build_release_asset(overrides: Mapping[str, Any] | None = None) -> dg.AssetsDefinition:
    """The ``dataset_release`` asset; ``overrides``: gate config on top of $VIDEOLAKE_GATES_FILE for the
    re-evaluated gates (definitions.gate_overrides of the profile's captioner, as the checks get)."""
    frozen = dict(overrides or {})

    @dg.asset(
        name=RELEASE_ASSET,
        partitions_def=RELEASE_PARTITIONS,
        group_name=RELEASE_GROUP,
        deps=[dg.AssetDep(t, partition_mapping=dg.AllPartitionMapping()) for t in RELEASE_TABLES],
        kinds={"webdataset"},
        description="A named, immutable training-set release (one partition per name): the days of a range whose "
        "partitions passed every gate of every table, their shards, the pinned Delta versions and a dataset card "
        "(docs/releases.md).",
    )
    def dataset_release(
        context: dg.AssetExecutionContext, config: ReleaseConfig, lake: LakeResource, object_store: ObjectStoreResource
    ) -> dg.MaterializeResult:
        from videolake.platform.gates import load_gate_config
        from videolake.platform.releases import (
            ReleaseError,
            create_release,
            gate_verdicts_from_lake,
            read_manifest,
            release_key,
        )
        from videolake.platform.releases.manifest import CARD, MANIFEST

        name = context.partition_key
        store, lk = object_store.get_store(), lake.get_lake()
        try:
            if store.exists(release_key(name, MANIFEST)):
                manifest = read_manifest(store, name)
                if config.start is not None and not _same_request(manifest, config):
                    raise dg.Failure(
                        f"release {name!r} exists with days {manifest.get('requested')} and buckets "
                        f"{manifest.get('buckets')}; a release name is never reused: add a new partition",
                        allow_retries=False,
                    )
                context.log.info(f"release {name} exists: reporting it")
                card = store.get_bytes(release_key(name, CARD)).decode("utf-8")
                return dg.MaterializeResult(
                    metadata={
                        **release_metadata(manifest, card, store.uri(release_key(name, CARD))),
                        "reported_existing": dg.MetadataValue.bool(True),
                    }
                )
            if config.start is None or config.end is None:
                raise dg.Failure(
                    f"release {name!r} does not exist: give start and end (YYYY-MM-DD) in the run config to create it",
                    allow_retries=False,
                )
            fallback = gate_verdicts_from_lake(lk, load_gate_config(None, frozen))
            verdicts, log = instance_gate_verdicts(context.instance, lk, fallback, config.gate_verdicts)
            release = create_release(
                lk, store, name, config.start, config.end, buckets=config.buckets, gate_verdicts=verdicts
            )
        except ReleaseError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        for e in release.excluded_partitions:
            context.log.warning(f"{e['partition_date']} left out: {e['reason']}")
        card = store.get_bytes(release_key(name, CARD)).decode("utf-8")
        return dg.MaterializeResult(
            metadata={
                **release_metadata(release.manifest, card, release.card_uri, log.as_metadata()),
                "manifest_uri": dg.MetadataValue.path(release.manifest_uri),
                "reported_existing": dg.MetadataValue.bool(False),
            }
        )

    return dataset_release


def build_release_sync_sensor(job: Any) -> dg.SensorDefinition:
    """A sensor that gives every release in the store (e.g. made with `videolake release create`) its partition
    and one run that reports it (run key = the name, so each is reported once)."""

    @dg.sensor(
        job=job,
        minimum_interval_seconds=300,
        default_status=dg.DefaultSensorStatus.STOPPED,
        name="release_sync_sensor",
        description="Adds a dataset_release partition for each release in the object store that has none "
        "and reports it (its card and lineage).",
    )
    def release_sync_sensor(context: dg.SensorEvaluationContext, object_store: ObjectStoreResource):
        from videolake.platform.releases import release_names

        names = release_names(object_store.get_store())
        known = set(context.instance.get_dynamic_partitions(RELEASE_PARTITIONS_NAME))
        new = [n for n in names if n not in known]
        if not new:
            return dg.SkipReason(f"{len(names)} release(s), all with a partition")
        return dg.SensorResult(
            run_requests=[dg.RunRequest(partition_key=n, run_key=f"release-{n}") for n in new],
            dynamic_partitions_requests=[RELEASE_PARTITIONS.build_add_request(new)],
        )

    return release_sync_sensor


@dataclass(frozen=True)
class ReleaseDefs:
    assets: tuple[dg.AssetsDefinition, ...]
    jobs: tuple[Any, ...]  # asset jobs (dg.define_asset_job)
    sensors: tuple[dg.SensorDefinition, ...]


def build_release_defs(overrides: Mapping[str, Any] | None = None) -> ReleaseDefs:
    """What the code location adds for releases: the asset, its job (launchable with config from the UI's Jobs
    page) and the sync sensor. Needs the ``lake`` and ``object_store`` resources."""
    asset = build_release_asset(overrides)
    job = dg.define_asset_job(
        name="dataset_release_job",
        selection=dg.AssetSelection.assets(asset),
        description="Create (or report) the dataset release of a 'releases' partition; config: start, end, buckets.",
    )
    return ReleaseDefs(assets=(asset,), jobs=(job,), sensors=(build_release_sync_sensor(job),))


def release_run_config(start: str, end: str, buckets: list[str] | None = None) -> dict[str, Any]:
    """The run config of a release run (tests, scripts: ``dg.materialize(..., run_config=...)``)."""
    cfg: dict[str, Any] = {"start": start, "end": end}
    if buckets:
        cfg["buckets"] = list(buckets)
    return {"ops": {RELEASE_ASSET: {"config": cfg}}}


__all__ = [
    "RELEASE_ASSET",
    "RELEASE_PARTITIONS",
    "ReleaseConfig",
    "ReleaseDefs",
    "build_release_asset",
    "build_release_defs",
    "build_release_sync_sensor",
    "instance_gate_verdicts",
    "recorded_verdict",
    "release_metadata",
    "release_run_config",
]
