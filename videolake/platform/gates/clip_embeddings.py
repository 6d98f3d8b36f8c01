"""Gates of clip_embeddings, checked against scene_clips of the same partition.

- one_row_per_clip: exactly one row per scene clip without a detect_error (those have no pictures to embed), no other;
- vectors_well_formed: every ok row has a vector of the day's one dimension (> 0) and unit length; a failed row has
  an error and no vector;
- failure_rate: clips that could not be embedded.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.gates.config import ClipEmbeddingsGates
from videolake.platform.gates.core import Frame, Gate
from videolake.platform.gates.relations import id_reconciliation, no, to_pandas
from videolake.platform.gates.shared import exactly_once_gate, rate_gate

# |norm - 1| above this is not a normalised float32 vector.
NORM_TOLERANCE = 1e-3


def _norms(column: pa.ChunkedArray) -> np.ndarray:
    """The L2 norm of each row's vector (0.0 for a null or empty one), in float64: one pass over the flattened
    values (Arrow) and a bincount per row, never a Python loop over rows."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    values = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float64)
    rows = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
    return np.sqrt(np.bincount(rows, weights=values * values, minlength=len(column)))


def build(tbl: pa.Table, context: dict[str, pa.Table], cfg: ClipEmbeddingsGates) -> tuple[list[Gate], dict[str, Frame]]:
    df = to_pandas(tbl, ["clip_id", "status", "error", "dim"])
    df["is_failed"] = (df["status"] == "failed").astype("float64")
    ok = (df["status"] == "ok").to_numpy()
    lengths = (
        pc.list_value_length(tbl.column("embedding")).to_numpy(zero_copy_only=False) if tbl.num_rows else np.zeros(0)
    )
    norms = _norms(tbl.column("embedding")) if tbl.num_rows else np.zeros(0)
    dims = sorted({int(d) for d, g in zip(df["dim"].fillna(0), ok) if g})
    day_dim = dims[0] if dims else 0
    df["bad_vector"] = ok & (
        (lengths != df["dim"].fillna(-1).to_numpy())
        | (df["dim"].fillna(0).to_numpy() != day_dim)
        | (day_dim <= 0)
        | (np.abs(norms - 1.0) > NORM_TOLERANCE)
    )
    df["failed_without_error"] = ~ok & (df["error"].isna() | (lengths > 0))
    clips = context["scene_clips"]
    eligible = clips.filter(pc.is_null(clips.column("detect_error"))).column("clip_id").to_pylist()
    ids = id_reconciliation(eligible, df["clip_id"].tolist(), "clip_id")
    frames = {"rows": Frame(df, "clip_id"), "ids": Frame(ids, "clip_id")}
    gates = [
        exactly_once_gate(
            "one_row_per_clip",
            "every scene clip without a detect_error has exactly one row, and no other clip",
            "clip_id",
            missing="{n} scene clip(s) without a row",
            extra="{n} row(s) for clips scene_clips lacks",
            duplicated="{n} clip(s) with more than one row",
            extra_measured={"eligible_clips": len(set(eligible)), "rows": len(df)},
        ),
        Gate(
            "vectors_well_formed",
            "ok rows have a unit vector of the day's one dimension; failed rows an error and no vector",
            (
                no(
                    "bad_vector",
                    label="bad_vectors",
                    explain="{n} ok row(s) whose vector is not a unit vector of the day's dimension",
                ),
                no(
                    "failed_without_error",
                    label="failed_without_error",
                    explain="{n} failed row(s) without an error or with a vector",
                ),
            ),
            extra_measured={"dimensions": dims},
        ),
        rate_gate(
            "failure_rate",
            "is_failed",
            df,
            max_value=cfg.max_failure_rate,
            min_rows=cfg.min_rows_for_rate,
            counted="failed",
            id_column="clip_id",
        ),
    ]
    return gates, frames
