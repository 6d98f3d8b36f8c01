"""Gates of filtered_clips, checked against scene_clips of the same partition: every scene clip is scored exactly
once, scores are in range, rejections carry reasons, and the pass rate sits inside a band."""

from __future__ import annotations

import pyarrow as pa

from videolake.platform.gates.config import FilteredClipsGates
from videolake.platform.gates.core import Check, Frame, Gate
from videolake.platform.gates.relations import id_reconciliation, no, to_pandas, where

PASSED = "passed == True"
REJECTED = "passed == False"


def score_ranges(cfg: FilteredClipsGates) -> dict[str, tuple[float, float | None]]:
    """Score column -> (min, max) inclusive; None: unbounded."""
    return {
        "motion": (0.0, cfg.max_motion),
        "sharpness": (0.0, None),
        "brightness": (0.0, cfg.max_brightness),
        "black_ratio": (0.0, 1.0),
        "frozen_ratio": (0.0, 1.0),
        "text_area": (0.0, 1.0),
    }


def build(tbl: pa.Table, context: dict[str, pa.Table], cfg: FilteredClipsGates) -> tuple[list[Gate], dict[str, Frame]]:
    ranges = score_ranges(cfg)
    df = to_pandas(tbl, ["clip_id", "passed", "reject_reason", *ranges])
    df["is_passed"] = (df["passed"] == True).astype("float64")  # noqa: E712 (a null passed counts as not passed)
    scene_ids = context["scene_clips"].column("clip_id").to_pylist()
    ids = id_reconciliation(scene_ids, df["clip_id"].tolist(), "clip_id")
    frames = {"rows": Frame(df, "clip_id"), "ids": Frame(ids, "clip_id")}

    need_scores = None if cfg.require_scores_on_rejected else PASSED
    who = "row(s)" if need_scores is None else "passed row(s)"
    score_checks = [Check(f"{c}_missing", "ExpectColumnValuesToNotBeNull", where(need_scores, column=c), f"{{n}} {who} without {c}") for c in ranges]
    for c, (lo, hi) in ranges.items():
        bounds = {"min_value": lo} if hi is None else {"min_value": lo, "max_value": hi}
        text = f">= {lo:g}" if hi is None else f"in [{lo:g}, {hi:g}]"
        score_checks.append(Check(f"{c}_out_of_range", "ExpectColumnValuesToBeBetween", {"column": c, **bounds}, f"{{n}} row(s) with {c} not {text}"))

    rows = len(df)
    gates = [
        Gate(
            "scored_exactly_once",
            "every scene clip of the partition has exactly one score row, and there are no others",
            (
                Check("null_ids", "ExpectColumnValuesToNotBeNull", {"column": "clip_id"}, "{n} row(s) without clip_id"),
                no("missing", label="missing", explain="{n} scene clip(s) not scored", frame="ids"),
                no("extra", label="extra", explain="{n} scored clip(s) not in scene_clips", frame="ids"),
                no("duplicated", label="duplicated", explain="{n} clip(s) scored more than once", frame="ids"),
            ),
            extra_measured={"scene_clips": len({i for i in scene_ids if i is not None}), "rows": rows},
        ),
        Gate(
            "scores_valid",
            "scores are set" + ("" if need_scores is None else " on passed rows") + " and in range",
            tuple(score_checks),
            thresholds={c: ([lo, hi] if hi is not None else [lo, None]) for c, (lo, hi) in ranges.items()}
            | {"require_scores_on_rejected": cfg.require_scores_on_rejected},
        ),
        Gate(
            "reject_reason_consistent",
            "every rejected clip has a reject_reason and no passed clip has one",
            (
                Check("null_passed", "ExpectColumnValuesToNotBeNull", {"column": "passed"}, "{n} row(s) with passed null"),
                Check("rejected_without_reason", "ExpectColumnValuesToNotBeNull", where(REJECTED, column="reject_reason"), "{n} rejected row(s) without reject_reason"),
                Check("rejected_with_empty_reason", "ExpectColumnValueLengthsToBeBetween", where(REJECTED, column="reject_reason", min_value=1), "{n} rejected row(s) with an empty reject_reason"),
                Check("passed_with_reason", "ExpectColumnValuesToBeNull", where(PASSED, column="reject_reason"), "{n} passed row(s) with a reject_reason"),
            ),
        ),
        Gate(
            "pass_rate",
            f"pass rate within [{cfg.min_pass_rate:g}, {cfg.max_pass_rate:g}]",
            (
                Check(
                    "pass_rate",
                    "ExpectColumnMeanToBeBetween",
                    {"column": "is_passed", "min_value": cfg.min_pass_rate, "max_value": cfg.max_pass_rate},
                    f"pass rate {{value}} outside [{cfg.min_pass_rate:g}, {cfg.max_pass_rate:g}]",
                    measure="observed_value",
                ),
            ),
            thresholds={"min_pass_rate": cfg.min_pass_rate, "max_pass_rate": cfg.max_pass_rate, "min_rows_for_rate": cfg.min_rows_for_rate},
            min_rows=cfg.min_rows_for_rate,
            extra_measured={"rows": rows, "passed": int(df["is_passed"].sum())},
        ),
    ]
    return gates, frames
