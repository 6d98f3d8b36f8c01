"""Evaluates gates through Great Expectations 1.x and turns GX results into GateResults.

One ephemeral GX context per process (importing GX takes seconds; building the context is cheap but there is no
reason to repeat it), with one pandas data source and one whole-dataframe batch definition reused by every run.
Each frame of a table becomes one ExpectationSuite + ValidationDefinition, run on that frame and then removed from
the context, so a long-lived process (a Dagster code server) does not accumulate suites.

Failing examples come from GX's ``partial_unexpected_index_list`` keyed by the frame's id column (and a row
number, used when the id itself is null).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import uuid
from typing import Any

from videolake.platform.gates.config import GateSettings
from videolake.platform.gates.core import MAX_EXAMPLES, Check, CheckOutcome, Frame, Gate, GateResult

log = logging.getLogger(__name__)

ROW_COLUMN = "__row__"  # row position added to every frame, to name rows whose id is null
_PARTIAL_UNEXPECTED = 20  # GX keeps this many unexpected rows per expectation; we keep MAX_EXAMPLES distinct ids

_lock = threading.Lock()
_state: dict[str, Any] = {}


def _gx() -> tuple[Any, Any, Any]:
    """(great_expectations module, context, batch definition), created once per process."""
    with _lock:
        if not _state:
            os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            context = gx.get_context(mode="ephemeral")
            # No tqdm bars in Dagster logs / test output.
            context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
            source = context.data_sources.add_pandas("videolake_gates")
            asset = source.add_dataframe_asset("partition_frame")
            batch_definition = asset.add_batch_definition_whole_dataframe("whole_frame")
            _state.update(gx=gx, context=context, batch_definition=batch_definition)
        return _state["gx"], _state["context"], _state["batch_definition"]


def evaluate_gates(
    table: str,
    gates: list[Gate],
    frames: dict[str, Frame],
    settings: dict[str, GateSettings],
) -> list[GateResult]:
    """Run every enabled gate's checks through GX (one validation per frame) and assemble the results."""
    enabled = [g for g in gates if settings[g.name].enabled]
    by_frame: dict[str, list[tuple[str, Check]]] = {}
    for gate in enabled:
        for check in gate.checks:
            by_frame.setdefault(check.frame, []).append((gate.name, check))
    outcomes: dict[tuple[str, str], CheckOutcome] = {}
    for frame_name, checks in by_frame.items():
        outcomes.update(_validate(table, frame_name, frames[frame_name], checks))
    return [_assemble(table, gate, frames, outcomes, settings[gate.name]) for gate in gates]


def _validate(
    table: str, frame_name: str, frame: Frame, checks: list[tuple[str, Check]]
) -> dict[tuple[str, str], CheckOutcome]:
    gx, context, batch_definition = _gx()
    import great_expectations.expectations as gxe

    df = frame.df.reset_index(drop=True).copy()
    df[ROW_COLUMN] = range(len(df))
    tag = uuid.uuid4().hex[:12]
    with _lock:  # the ephemeral context's stores are plain dicts: serialize add/run/delete
        suite = context.suites.add(gx.ExpectationSuite(name=f"{table}.{frame_name}.{tag}"))
        for gate_name, check in checks:
            cls = getattr(gxe, check.expectation)
            suite.add_expectation(
                cls(**check.kwargs, meta={"videolake_gate": gate_name, "videolake_check": check.label})
            )
        vd = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"{table}.{frame_name}.{tag}", data=batch_definition, suite=suite)
        )
        try:
            result = vd.run(
                batch_parameters={"dataframe": df},
                result_format={
                    "result_format": "SUMMARY",
                    "unexpected_index_column_names": [frame.id_column, ROW_COLUMN],
                    "partial_unexpected_count": _PARTIAL_UNEXPECTED,
                },
            )
        finally:
            context.validation_definitions.delete(vd.name)
            context.suites.delete(suite.name)
    measure = {(g, c.label): c.measure for g, c in checks}
    out: dict[tuple[str, str], CheckOutcome] = {}
    for r in result.results:
        meta = r.expectation_config.meta or {}
        key = (meta["videolake_gate"], meta["videolake_check"])
        res = r.result or {}
        error = _exception_message(r.exception_info)
        if measure[key] == "observed_value":
            value = _scalar(res.get("observed_value"))
        else:
            value = int(res.get("unexpected_count") or 0)
        examples = _examples(res.get("partial_unexpected_index_list") or [], frame.id_column)
        out[key] = CheckOutcome(success=bool(r.success) and error is None, value=value, examples=examples, error=error)
    missing = set(measure) - set(out)
    if missing:  # would be a GX behaviour change: fail loudly rather than report a gate as passed
        raise RuntimeError(f"GX returned no result for checks {sorted(missing)}")
    return out


def _assemble(
    table: str,
    gate: Gate,
    frames: dict[str, Frame],
    outcomes: dict[tuple[str, str], CheckOutcome],
    settings: GateSettings,
) -> GateResult:
    common: dict[str, Any] = dict(
        gate=gate.name, table=table, thresholds=dict(gate.thresholds), severity=settings.severity
    )
    if not settings.enabled:
        return GateResult(
            **common,
            passed=True,
            enabled=False,
            measured={},
            failing_ids=(),
            description=f"{gate.summary}: disabled by config",
        )
    measured: dict[str, Any] = dict(gate.extra_measured)
    failures: list[str] = []
    examples: list[str] = []
    for check in gate.checks:
        o = outcomes[(gate.name, check.label)]
        measured[check.label] = o.value
        if o.error is not None:
            failures.append(f"{check.label} could not be evaluated: {o.error}")
        elif not o.success:
            failures.append(check.explain.format(n=o.value, value=_fmt(o.value)))
        if not o.success:
            examples.extend(e for e in o.examples if e not in examples)
    if failures:
        examples.extend(e for e in gate.examples if e not in examples)
    failing_ids = tuple(examples[:MAX_EXAMPLES])
    if gate.min_rows is not None:
        rows = len(frames[gate.rate_rows_frame].df)
        measured.setdefault("rows", rows)
        if rows < gate.min_rows and not any(o.error for o in (outcomes[(gate.name, c.label)] for c in gate.checks)):
            note = f"{gate.summary}: not enforced, only {rows} rows (< min_rows_for_rate {gate.min_rows})"
            return GateResult(**common, passed=True, measured=measured, failing_ids=(), description=note)
    if failures:
        text = f"{table}.{gate.name} failed: " + "; ".join(failures)
        if failing_ids:
            text += " (e.g. " + ", ".join(failing_ids) + ")"
        return GateResult(**common, passed=False, measured=measured, failing_ids=failing_ids, description=text)
    return GateResult(**common, passed=True, measured=measured, failing_ids=(), description=gate.summary)


def _examples(index_list: list[dict[str, Any]], id_column: str) -> tuple[str, ...]:
    out: list[str] = []
    for item in index_list:
        ident = item.get(id_column)
        name = f"row {int(item[ROW_COLUMN])}" if _is_null(ident) else str(ident)
        if name not in out:
            out.append(name)
        if len(out) >= MAX_EXAMPLES:
            break
    return tuple(out)


def _exception_message(info: Any) -> str | None:
    """GX reports exceptions either flat or keyed by metric id."""
    if not isinstance(info, dict):
        return None
    if "raised_exception" in info:
        return (info.get("exception_message") or "unknown error") if info.get("raised_exception") else None
    for value in info.values():
        msg = _exception_message(value)
        if msg:
            return msg
    return None


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _scalar(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return value


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
