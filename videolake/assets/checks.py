"""Blocking quality gates on every asset, per daily partition, evaluated by Great Expectations (platform.gates).

One ``@multi_asset_check`` per table (the partition is read once for all its gates) with one AssetCheckSpec per
gate, ``blocking=True`` and the assets' daily partitions: a gate that fails with ERROR severity skips the downstream
assets of the run and fails the run; a gate configured ``severity: warn`` is reported and does not block.
Thresholds are read when the check runs, from $VIDEOLAKE_GATES_FILE (see platform/gates/gates.example.yaml) and the
``overrides`` given to ``build_gate_checks``, so a threshold change needs no code edit or redeploy.

Each check reads exactly its partition of the table (and of the tables it is compared against) from the lake.
A single-run backfill step covers several partitions: the gates then run once per partition, each partition's
result is logged as its own per-partition check evaluation, and the step's result per gate (which is what blocks)
is the conjunction, with the failing partitions in its metadata.
"""

import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dagster as dg

from videolake.assets.partitions import daily_partitions
from videolake.platform.gates import GATE_DOCS, GateResult, context_tables, gate_names
from videolake.resources import LakeResource

GATED_TABLES: tuple[str, ...] = ("raw_videos", "scene_clips", "filtered_clips", "clip_captions")


def gate_check_specs(table: str) -> list[dg.AssetCheckSpec]:
    """One blocking, daily-partitioned check spec per gate of ``table`` (names: platform.gates.gate_names)."""
    deps = [dg.AssetKey(t) for t in context_tables(table)]
    with warnings.catch_warnings():
        # partitions_def on AssetCheckSpec is a Dagster "preview" feature; its per-partition results, blocking and
        # range-step behaviour are pinned by tests/assets/test_checks.py against the pinned dagster version.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(
                name=gate,
                asset=dg.AssetKey(table),
                description=GATE_DOCS[table][gate],
                blocking=True,
                partitions_def=daily_partitions,
                additional_deps=deps,
            )
            for gate in gate_names(table)
        ]


def build_gate_checks(table: str, overrides: Mapping[str, Any] | None = None) -> dg.AssetChecksDefinition:
    """The gates of ``table`` as one multi-asset check named ``<table>_gates``.

    ``overrides``: gate config on top of the defaults and $VIDEOLAKE_GATES_FILE (e.g. LENIENT_CAPTION_CONTENT for
    a profile whose captioner is a random-weight test model).
    """
    frozen_overrides = dict(overrides or {})

    @dg.multi_asset_check(
        specs=gate_check_specs(table),
        name=f"{table}_gates",
        description=f"Quality gates of {table} (Great Expectations), per partition; thresholds from $VIDEOLAKE_GATES_FILE.",
        compute_kind="great_expectations",
    )
    def _gates(context: dg.AssetCheckExecutionContext, lake: LakeResource) -> Iterator[dg.AssetCheckResult]:
        from videolake.platform.gates import check_partition, load_gate_config

        config = load_gate_config(None, frozen_overrides)
        keys = list(context.partition_keys)
        store = lake.get_lake()
        by_partition: dict[str, list[GateResult]] = {}
        for key in keys:
            results = check_partition(store, table, key, config)
            by_partition[key] = results
            for r in results:
                level = context.log.info if r.passed else (context.log.error if r.blocks else context.log.warning)
                level(f"[{key}] {table}.{r.gate}: {'passed' if r.passed else 'FAILED'} - {r.description}")
        if len(keys) == 1:
            for r in by_partition[keys[0]]:
                yield _result(r)
            return
        # Several partitions in one step (single-run backfill): one evaluation per partition, then the aggregate.
        for key, results in by_partition.items():
            for r in results:
                context.op_execution_context.log_event(_evaluation(r, key))
        for gate in gate_names(table):
            yield _aggregate(table, gate, {k: next(r for r in rs if r.gate == gate) for k, rs in by_partition.items()})

    return _gates


def build_all_gate_checks(
    tables: Sequence[str] = GATED_TABLES, overrides: Mapping[str, Any] | None = None
) -> list[dg.AssetChecksDefinition]:
    """The gate checks of ``tables`` (each table's asset must be in the same Definitions)."""
    return [build_gate_checks(t, overrides) for t in tables]


def _severity(r: GateResult) -> dg.AssetCheckSeverity:
    return dg.AssetCheckSeverity.WARN if r.severity == "warn" else dg.AssetCheckSeverity.ERROR


def gate_metadata(r: GateResult) -> dict[str, Any]:
    """Check metadata: every measured value (numbers plot in the UI), the thresholds and the failing ids."""
    md: dict[str, Any] = {}
    plain = r.to_metadata()
    for label, value in plain["measured"].items():
        if isinstance(value, bool) or value is None:
            md[label] = dg.MetadataValue.text(str(value))
        elif isinstance(value, int):
            md[label] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            md[label] = dg.MetadataValue.float(value)
        else:
            md[label] = dg.MetadataValue.text(str(value))
    md["thresholds"] = dg.MetadataValue.json(plain["thresholds"])
    md["failing_ids"] = dg.MetadataValue.json(plain["failing_ids"])
    md["gate_severity"] = dg.MetadataValue.text(r.severity)
    md["gate_enabled"] = dg.MetadataValue.bool(r.enabled)
    return md


def _result(r: GateResult) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        asset_key=dg.AssetKey(r.table),
        check_name=r.gate,
        passed=r.passed,
        severity=_severity(r),
        description=r.description,
        metadata=gate_metadata(r),
    )


def _evaluation(r: GateResult, partition: str) -> dg.AssetCheckEvaluation:
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(r.table),
        check_name=r.gate,
        passed=r.passed,
        severity=_severity(r),
        description=r.description,
        metadata=gate_metadata(r),
        blocking=True,
        partition=partition,
    )


def _aggregate(table: str, gate: str, per_partition: dict[str, GateResult]) -> dg.AssetCheckResult:
    failed = [k for k, r in per_partition.items() if not r.passed]
    first = next(iter(per_partition.values()))
    if failed:
        text = f"{table}.{gate} failed in {len(failed)} of {len(per_partition)} partitions: " + "; ".join(
            f"{k}: {per_partition[k].description}" for k in failed
        )
    else:
        text = f"{table}.{gate} passed in all {len(per_partition)} partitions"
    return dg.AssetCheckResult(
        asset_key=dg.AssetKey(table),
        check_name=gate,
        passed=not failed,
        severity=_severity(first),
        description=text,
        metadata={
            "partitions": dg.MetadataValue.int(len(per_partition)),
            "failed_partitions": dg.MetadataValue.json(failed),
            "per_partition": dg.MetadataValue.json({k: r.to_metadata() for k, r in per_partition.items()}),
        },
    )
