"""Blocking quality gates on every asset, per daily partition, evaluated by Great Expectations (platform.gates).

One ``@multi_asset_check`` per table (each partition is read once for all its gates) with one AssetCheckSpec per
gate, ``blocking=True`` and the assets' daily partitions: a gate that fails with ERROR severity skips the downstream
assets of the run and fails the run; a gate configured ``severity: warn`` is reported and does not block.
Thresholds are read when the check runs, from $VIDEOLAKE_GATES_FILE (see platform/gates/gates.example.yaml) and the
``overrides`` given to ``build_gate_checks``, so a threshold change needs no code edit or redeploy.

Per partition, the way Dagster stores partitioned checks: the run plans one execution row per (check, partition)
and every gate result is recorded as an ``AssetCheckEvaluation`` of exactly one partition, pointing at the
materialization of that partition it judged. A single-run backfill step (several partitions) therefore records the
same rows, check by check and day by day, as the same days run one at a time: the check's Partitions tab, its list
status and the asset graph read them (Dagster only counts a partition's result while it targets the partition's
latest materialization, hence the pointer). There is no range summary row.

Why ``AssetCheckEvaluation`` and not ``AssetCheckResult``: in Dagster 1.13 an AssetCheckResult yielded from a
multi-partition step is stored without a partition (one summary of the range). Yielded evaluations take the same
path through the step (``execute_step.core_dagster_event_sequence_for_step``): a failed blocking ERROR evaluation
fails the step after all partitions were evaluated, which skips the downstream steps of the run.
"""

import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (  # not re-exported by `dagster`
    AssetCheckEvaluationTargetMaterializationData,
)

from videolake.assets.partitions import daily_partitions
from videolake.platform.gates import GATE_DOCS, GateResult, context_tables, gate_names
from videolake.platform.lake.schemas import TABLE_SPECS
from videolake.resources import LakeResource

# Every table is gated; an optional table's gates exist with its asset (definitions.build_definitions).
GATED_TABLES: tuple[str, ...] = tuple(t.name for t in TABLE_SPECS if not t.optional)
OPTIONAL_TABLES: tuple[str, ...] = tuple(t.name for t in TABLE_SPECS if t.optional)
DOWNSTREAM: dict[str, tuple[str, ...]] = {t: GATED_TABLES[i + 1 :] for i, t in enumerate(GATED_TABLES)}


def gate_check_specs(
    table: str, partitions_def: dg.PartitionsDefinition | None = None, asset: str | None = None
) -> list[dg.AssetCheckSpec]:
    """One blocking, daily-partitioned check spec per gate of ``table`` (names: platform.gates.gate_names), on the
    asset ``asset`` (default: the table's own; a caption track's asset checks clip_captions' gates)."""
    deps = [dg.AssetKey(t) for t in context_tables(table)]
    with warnings.catch_warnings():
        # partitions_def on AssetCheckSpec is a Dagster "preview" feature; its per-partition results, blocking and
        # range-step behaviour are pinned by tests/assets/test_checks.py against the pinned dagster version.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(
                name=gate,
                asset=dg.AssetKey(asset or table),
                description=GATE_DOCS[table][gate],
                blocking=True,
                partitions_def=partitions_def or daily_partitions(),
                additional_deps=deps,
            )
            for gate in gate_names(table)
        ]


def build_gate_checks(
    table: str,
    overrides: Mapping[str, Any] | None = None,
    partitions_def: dg.PartitionsDefinition | None = None,
    *,
    track: str | None = None,
) -> dg.AssetChecksDefinition:
    """The gates of ``table`` as one multi-asset check named ``<table>_gates``.

    ``overrides``: gate config on top of the defaults and $VIDEOLAKE_GATES_FILE (e.g. LENIENT_CAPTION_CONTENT for
    a profile whose captioner is a random-weight test model). ``track``: clip_captions' caption track (default
    ``default``): its asset's gates judge its own rows only (``clip_captions__<track>`` for another track).
    """
    frozen_overrides = dict(overrides or {})
    if table == "clip_captions":
        track = track or "default"
    asset = caption_asset_name(track) if track is not None else table
    specs = gate_check_specs(table, partitions_def, asset)

    @dg.multi_asset_check(
        specs=specs,
        name=f"{asset}_gates",
        description=f"Quality gates of {table} (Great Expectations), per partition; thresholds from $VIDEOLAKE_GATES_FILE.",
        compute_kind="great_expectations",
    )
    def _gates(context: dg.AssetCheckExecutionContext, lake: LakeResource) -> Iterator[Any]:
        from videolake.platform.gates import check_partition, load_gate_config

        config = load_gate_config(None, frozen_overrides)
        selected = {k.name for k in context.selected_asset_check_keys if k.asset_key == dg.AssetKey(asset)}
        keys = list(context.partition_keys)
        targets = target_materializations(context.instance, asset, keys)
        store = lake.get_lake()
        blocking: list[tuple[str, GateResult]] = []
        for key in keys:
            for r in check_partition(store, table, key, config, track=track):
                if r.gate not in selected:
                    continue
                level = context.log.info if r.passed else (context.log.error if r.blocks else context.log.warning)
                level(f"[{key}] {table}.{r.gate}: {'passed' if r.passed else 'FAILED'} - {r.description}")
                if r.blocks:
                    blocking.append((key, r))
                yield gate_evaluation(r, key, targets.get(key), asset)
        for spec in specs:  # the check outputs the blocking dependencies of downstream steps wait for
            if spec.name in selected:
                yield dg.Output(None, output_name=spec.get_python_identifier())
        if blocking:
            context.log.error(blocked_message(table, blocking))

    return _gates


def caption_asset_name(track: str) -> str:
    """The asset of caption track ``track``: ``clip_captions`` for the default track, ``clip_captions__<track>``
    for another (one flat name: every place that maps an asset to its table reads the part before ``__``)."""
    return "clip_captions" if track == "default" else f"clip_captions__{track}"


def build_all_gate_checks(
    tables: Sequence[str] = GATED_TABLES,
    overrides: Mapping[str, Any] | None = None,
    partitions_def: dg.PartitionsDefinition | None = None,
) -> list[dg.AssetChecksDefinition]:
    """The gate checks of ``tables`` (each table's asset must be in the same Definitions, over the same
    partitions: default ``daily_partitions()``, read now)."""
    partitions_def = partitions_def or daily_partitions()
    return [build_gate_checks(t, overrides, partitions_def) for t in tables]


def target_materializations(
    instance: dg.DagsterInstance, table: str, keys: Sequence[str]
) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """The latest materialization of each partition of ``table`` (what each partition's evaluation judged)."""
    out = {}
    for key in keys:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(table), asset_partitions=[key]), limit=1
        ).records
        if records:
            r = records[0]
            out[key] = AssetCheckEvaluationTargetMaterializationData(
                storage_id=r.storage_id, run_id=r.event_log_entry.run_id, timestamp=r.timestamp
            )
    return out


def gate_evaluation(
    r: GateResult,
    partition: str,
    target: AssetCheckEvaluationTargetMaterializationData | None,
    asset: str | None = None,
) -> dg.AssetCheckEvaluation:
    """The recorded result of gate ``r`` on ``partition``, with that day's measured values, thresholds and ids
    (``asset``: the asset it judged, default the table's)."""
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(asset or r.table),
        check_name=r.gate,
        passed=r.passed,
        severity=dg.AssetCheckSeverity.WARN if r.severity == "warn" else dg.AssetCheckSeverity.ERROR,
        description=r.description,
        metadata=gate_metadata(r),
        target_materialization_data=target,
        blocking=True,
        partition=partition,
    )


def gate_metadata(r: GateResult) -> dict[str, Any]:
    """Check metadata of one partition: each measured value (numbers, rounded, which the check's plots chart), then
    the thresholds, the failing ids and the severity as text, which the UI shows inline (JSON hides behind a button).
    """
    from videolake.assets.metadata import rounded

    md: dict[str, Any] = {}
    plain = r.to_metadata()
    for label, value in plain["measured"].items():
        if isinstance(value, bool) or value is None:
            md[label] = dg.MetadataValue.text(str(value))
        elif isinstance(value, int):
            md[label] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            md[label] = dg.MetadataValue.float(rounded(value))
        else:
            md[label] = dg.MetadataValue.text(str(value))
    md["thresholds"] = dg.MetadataValue.text(
        ", ".join(f"{k}: {_text(v)}" for k, v in rounded(plain["thresholds"]).items()) or "none"
    )
    md["failing_ids"] = dg.MetadataValue.text(", ".join(plain["failing_ids"]) or "none")
    md["severity"] = dg.MetadataValue.text(r.severity if r.enabled else f"{r.severity} (disabled by config)")
    return md


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def blocked_message(table: str, blocking: Sequence[tuple[str, GateResult]]) -> str:
    """What a failed blocking gate does to the rest of the run, in words (the run log's last line of the step)."""
    failed = "; ".join(f"{table}.{r.gate} on {key}: {r.description}" for key, r in blocking)
    skipped = ", ".join(DOWNSTREAM.get(table, ())) or "nothing"
    return (
        f"blocking gate(s) failed: {failed}. This run stops here: {skipped} and their gates are not run for any "
        "partition of this run (Dagster shows those gates as 'Execution failed' for these partitions)."
    )
