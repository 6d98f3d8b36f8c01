"""Quality gates: Great Expectations 1.x suites built in code, evaluated on one partition of one table.

    from videolake.platform.gates import load_gate_config, run_gates
    results = run_gates("scene_clips", clips, {"raw_videos": videos}, load_gate_config())
    blocking = [r for r in results if r.blocks]

The caller reads exactly one partition of the table and of each context table; ``run_gates`` refuses rows from more
than one partition. Every gate of the table gets a result (a disabled one passes with "disabled by config"), in the
order of ``gate_names(table)``, which is stable and names the Dagster asset checks. No dagster imports here; GX is
imported on first use.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from videolake.platform.gates.config import (
    DEFAULT_REFUSAL_PATTERNS,
    GATE_DOCS,
    GATES_FILE_ENV,
    LENIENT_CAPTION_CONTENT,
    ClipCaptionsGates,
    FilteredClipsGates,
    GateConfig,
    GateSettings,
    RawVideosGates,
    SceneClipsGates,
    TrainingShardsGates,
    config_from_dict,
    config_to_dict,
    gate_names,
    load_gate_config,
)
from videolake.platform.gates.core import GateResult
from videolake.platform.gates.text import repetition_score
from videolake.platform.lake.schemas import TABLE_SPECS

if TYPE_CHECKING:
    from videolake.platform.gates.config import _TableGates
    from videolake.platform.gates.core import Frame, Gate
    from videolake.platform.lake.table import Lake

log = logging.getLogger(__name__)

# table -> (module building its gates, context tables it is checked against): from the table specs.
TABLE_GATES: dict[str, tuple[str, tuple[str, ...]]] = {
    t.name: (t.gate_module, ((t.upstream,) if t.upstream else ()) + t.gated_against) for t in TABLE_SPECS
}


def context_tables(table: str) -> tuple[str, ...]:
    """The tables (same partition) that ``run_gates(table, ...)`` needs in ``context_tables``."""
    return TABLE_GATES[table][1]


def run_gates(
    table_name: str,
    tbl: pa.Table,
    context_tables: Mapping[str, pa.Table] | None = None,
    config: GateConfig | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> list[GateResult]:
    """Evaluate every gate of ``table_name`` on ``tbl`` (one partition) and return one GateResult per gate.

    A gate module with an ``evidence(tbl, cfg, storage_options)`` function (training_shards: the shards' bytes)
    gathers what its gates judge beyond the rows first; ``storage_options`` reach S3 objects (the lake's)."""
    from videolake.platform.gates.gx_runner import evaluate_gates
    from videolake.platform.lake.schemas import TABLES
    from videolake.platform.lake.table import conform

    if table_name not in TABLE_GATES:
        raise KeyError(f"no gates for table {table_name!r}; known: {', '.join(TABLE_GATES)}")
    module_name, needed = TABLE_GATES[table_name]
    context_tables = dict(context_tables or {})
    missing = [t for t in needed if t not in context_tables]
    if missing:
        raise ValueError(f"gates of {table_name} need context tables {missing} (same partition)")
    config = config if config is not None else load_gate_config()
    tbl = conform(tbl, TABLES[table_name])
    ctx = {t: conform(context_tables[t], TABLES[t]) for t in needed}
    _require_one_partition(table_name, list({table_name: tbl, **ctx}.values()))
    table_cfg = config.for_table(table_name)
    gates, frames = _build_gates(table_name, module_name, tbl, ctx, table_cfg, storage_options)
    settings = {g.name: table_cfg.settings(g.name) for g in gates}
    results = evaluate_gates(table_name, gates, frames, settings)
    _log_results(table_name, results)
    return results


def _require_one_partition(table_name: str, tables: list[pa.Table]) -> None:
    """Raise ValueError when the table and its context tables span more than one partition."""
    from videolake.platform.lake.schemas import PARTITION_COLUMN

    partitions = set()
    for t in tables:
        partitions |= {d for d in t.column(PARTITION_COLUMN).to_pylist()}
    if len(partitions) > 1:
        raise ValueError(
            f"run_gates checks one partition at a time; {table_name} and its context span {sorted(str(p) for p in partitions)}"
        )


def _build_gates(
    table_name: str,
    module_name: str,
    tbl: pa.Table,
    ctx: dict[str, pa.Table],
    table_cfg: _TableGates,
    storage_options: Mapping[str, str] | None,
) -> tuple[list[Gate], dict[str, Frame]]:
    """The table's gates and the frames they judge, from its gate module (evidence first where it has some)."""
    module = importlib.import_module(module_name)
    found: dict[str, Any] = {}
    if hasattr(module, "evidence"):
        found["found"] = module.evidence(tbl, table_cfg, dict(storage_options or {}))
    gates, frames = module.build(tbl, ctx, table_cfg, **found)
    names = [g.name for g in gates]
    if tuple(names) != gate_names(table_name):  # the config's gate list and the builders must agree
        raise RuntimeError(f"{table_name}: built gates {names} != configured {list(gate_names(table_name))}")
    return gates, frames


def _log_results(table_name: str, results: list[GateResult]) -> None:
    """Log each gate's verdict: passed at INFO, a failed error-severity gate at ERROR, other failures at WARNING."""
    for r in results:
        level = logging.INFO if r.passed else (logging.ERROR if r.severity == "error" else logging.WARNING)
        log.log(level, "gate %s.%s %s: %s", table_name, r.gate, "passed" if r.passed else "FAILED", r.description)


def check_partition(
    lake: Lake, table_name: str, partition_key: str, config: GateConfig | None = None, *, track: str | None = None
) -> list[GateResult]:
    """Read exactly one partition of ``table_name`` and of its context tables from ``lake`` and run its gates.

    The read is partition-pruned (Lake.read_partitions): other partitions' files are never opened. Used by the
    Dagster checks and by ``videolake check --partition DATE``. ``track``: clip_captions' rows of that caption
    track only (a track's asset checks its own rows); None: every track, each complete.
    """
    from videolake.platform.lake.table import PartitionRange

    rng = PartitionRange.of([partition_key])
    where = None
    if track is not None and table_name == "clip_captions":
        import pyarrow.dataset as pads

        where = pads.field("caption_track") == track
    tbl = lake.read_partitions(table_name, rng, where=where)
    ctx = {t: lake.read_partitions(t, rng) for t in context_tables(table_name)}
    return run_gates(table_name, tbl, ctx, config, storage_options=lake.storage_options)


__all__ = [
    "check_partition",
    "DEFAULT_REFUSAL_PATTERNS",
    "GATE_DOCS",
    "GATES_FILE_ENV",
    "LENIENT_CAPTION_CONTENT",
    "TABLE_GATES",
    "ClipCaptionsGates",
    "FilteredClipsGates",
    "GateConfig",
    "GateResult",
    "GateSettings",
    "RawVideosGates",
    "SceneClipsGates",
    "TrainingShardsGates",
    "config_from_dict",
    "config_to_dict",
    "context_tables",
    "gate_names",
    "load_gate_config",
    "repetition_score",
    "run_gates",
]
