"""The clip_embeddings gate vectors_well_formed on real Great Expectations runs: unit vectors of the day's one
dimension pass; a vector that is not of unit length, one of another dimension and a failed row carrying a vector
fail it, each named by clip id (the norms are computed over the flattened values, not row by row)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from videolake.platform.gates import load_gate_config, run_gates
from videolake.platform.gates.clip_embeddings import _norms
from videolake.platform.lake.schemas import CLIP_EMBEDDINGS, SCENE_CLIPS
from videolake.platform.lake.table import rows_to_table

D = dt.date(2026, 5, 1)


def _row(cid: str, vector: list[float] | None, status: str = "ok", error: str | None = None) -> dict:
    return {
        "clip_id": cid,
        "video_id": "v",
        "model": "m",
        "status": status,
        "error": error,
        "embedding": vector or [],
        "dim": len(vector) if vector else None,
        "partition_date": D,
    }


def _clips(ids: list[str]) -> object:
    rows = [
        {
            "clip_id": c,
            "video_id": "v",
            "clip_index": i,
            "start_frame": 10 * i,
            "end_frame": 10 * i + 10,
            "start_s": i,
            "end_s": i + 1,
            "duration_s": 1.0,
            "partition_date": D,
        }
        for i, c in enumerate(ids)
    ]
    return rows_to_table(rows, SCENE_CLIPS)


def _unit(v: list[float]) -> list[float]:
    return (np.array(v) / np.linalg.norm(v)).tolist()


def test_norms_are_per_row_and_zero_for_empty_rows():
    tbl = rows_to_table(
        [_row("a", [3.0, 4.0]), _row("b", None, "failed", "x"), _row("c", [0.0, 0.0, 2.0])], CLIP_EMBEDDINGS
    )
    assert _norms(tbl.column("embedding")).tolist() == pytest.approx([5.0, 0.0, 2.0])


def test_vectors_well_formed_names_each_bad_row():
    cfg = load_gate_config(None, env={})
    rows = [
        _row("ok1", _unit([1.0, 2.0, 2.0])),
        _row("ok2", _unit([0.0, 1.0, 0.0])),
        _row("long", [1.0, 2.0, 2.0]),  # norm 3
        _row("other_dim", _unit([1.0, 1.0, 1.0, 1.0])),  # another dimension than the day's (the smallest: 3)
        _row("failed_with_vector", _unit([1.0, 0.0, 0.0]), status="failed", error="boom"),
        _row("failed_ok", None, status="failed", error="boom"),
    ]
    tbl = rows_to_table(rows, CLIP_EMBEDDINGS)
    results = {
        r.gate: r for r in run_gates("clip_embeddings", tbl, {"scene_clips": _clips([r["clip_id"] for r in rows])}, cfg)
    }
    gate = results["vectors_well_formed"]
    assert gate.passed is False
    assert gate.measured["bad_vectors"] == 2 and gate.measured["failed_without_error"] == 1
    assert results["one_row_per_clip"].passed is True
    good = rows_to_table(rows[:2] + rows[-1:], CLIP_EMBEDDINGS)
    ok = {
        r.gate: r for r in run_gates("clip_embeddings", good, {"scene_clips": _clips(["ok1", "ok2", "failed_ok"])}, cfg)
    }
    assert ok["vectors_well_formed"].passed is True and ok["vectors_well_formed"].measured["bad_vectors"] == 0
