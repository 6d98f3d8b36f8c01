"""Gates of filtered_clips, checked against scene_clips of the same partition: every scene clip is scored exactly
once, scores are in range, rejections carry reasons, and the pass rate sits inside a band."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from videolake.platform.gates.config import FilteredClipsGates
from videolake.platform.gates.core import Check, Frame, Gate
from videolake.platform.gates.relations import id_reconciliation, no, to_pandas, where
from videolake.platform.gates.shared import exactly_once_gate, rate_gate, reason_consistent_gate

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
    df = _rows(tbl, ranges)
    scene_ids, stale, ids = _reconciled_ids(df, context)
    frames = {"rows": Frame(df, "clip_id"), "ids": Frame(ids, "clip_id")}

    need_scores = None if cfg.require_scores_on_rejected else PASSED
    rows = len(df)
    gates = [
        exactly_once_gate(
            "scored_exactly_once",
            "every scene clip of the partition has exactly one score row, and there are no others",
            "clip_id",
            missing="{n} scene clip(s) not scored",
            extra="{n} scored clip(s) not in scene_clips",
            duplicated="{n} clip(s) scored more than once",
            extra_measured={
                "scene_clips": len({i for i in scene_ids if i is not None}),
                "rows": rows,
                "clips_of_copies": len(stale),
            },
        ),
        Gate(
            "scores_valid",
            "scores are set" + ("" if need_scores is None else " on passed rows") + " and in range",
            tuple(_score_checks(ranges, need_scores)),
            thresholds={c: ([lo, hi] if hi is not None else [lo, None]) for c, (lo, hi) in ranges.items()}
            | {"require_scores_on_rejected": cfg.require_scores_on_rejected},
        ),
        reason_consistent_gate(
            "every rejected clip has a reject_reason and no passed clip has one",
            bad=REJECTED,
            good=PASSED,
            bad_noun="rejected",
            good_noun="passed",
            first=(
                Check(
                    "null_passed", "ExpectColumnValuesToNotBeNull", {"column": "passed"}, "{n} row(s) with passed null"
                ),
            ),
        ),
        _duplicates_gate(),
        _undecodable_gate(df, cfg),
        rate_gate(
            "pass_rate",
            "is_passed",
            df,
            min_value=cfg.min_pass_rate,
            max_value=cfg.max_pass_rate,
            min_rows=cfg.min_rows_for_rate,
            counted="passed",
        ),
    ]
    return gates, frames


def _rows(tbl: pa.Table, ranges: dict[str, tuple[float, float | None]]) -> Any:
    """filtered_clips as a DataFrame with the per-row flags the checks count."""
    df = to_pandas(
        tbl,
        [
            "clip_id",
            "passed",
            "reject_reason",
            "duplicate_group",
            "duplicate_kept_date",
            "partition_date",
            "source_uri",
            *ranges,
        ],
    )
    # Clips set aside for breaking a per-clip invariant (their frames do not decode as the shard encoder reads them;
    # longer than the bound they were cut under): rows with reasons, counted, and a blocking share only in bulk.
    rules = df["reject_reason"].map(lambda r: set(r.split(";")) if isinstance(r, str) else set())
    df["is_undecodable"] = rules.map(lambda r: "undecodable" in r).astype("float64")
    df["is_too_long"] = rules.map(lambda r: "too_long" in r).astype("float64")
    df["is_passed"] = (df["passed"] == True).astype("float64")  # noqa: E712 (a null passed counts as not passed)
    df["is_duplicate"] = df["reject_reason"].map(lambda r: isinstance(r, str) and "duplicate" in r.split(";"))
    # A duplicate names another clip, kept on its own day or an earlier one; a clip naming itself is a kept one.
    df["duplicate_unnamed"] = df["is_duplicate"] & (
        df["duplicate_group"].isna()
        | (df["duplicate_group"] == df["clip_id"])
        | df["duplicate_kept_date"].isna()
        | (df["duplicate_kept_date"] > df["partition_date"])
    ).astype(bool)
    df["kept_rejected_as_duplicate"] = ((df["duplicate_group"] == df["clip_id"]) & df["is_duplicate"]).astype(bool)
    return df


def _reconciled_ids(df: Any, context: dict[str, pa.Table]) -> tuple[list, set, Any]:
    """(scene_clips' clip ids, the ids of clips of videos found to be copies, the id reconciliation frame of the
    others against the rows)."""
    scene = context["scene_clips"]
    scene_ids = scene.column("clip_id").to_pylist()
    # Clips of a video that another day's run marked as a copy after this day cut it (days that run at the same
    # time): the judgement removes them from filtered_clips (dedup.cross_day), and a day judged before the copy was
    # found still holds them. Either is right, so they are neither expected nor extra.
    raw = context["raw_videos"]
    copies = {
        v for v, st in zip(raw.column("video_id").to_pylist(), raw.column("status").to_pylist()) if st == "duplicate"
    }
    stale = {c for c, v in zip(scene_ids, scene.column("video_id").to_pylist()) if v in copies}
    ids = id_reconciliation(
        [i for i in scene_ids if i not in stale], [i for i in df["clip_id"].tolist() if i not in stale], "clip_id"
    )
    return scene_ids, stale, ids


def _score_checks(ranges: dict[str, tuple[float, float | None]], need_scores: str | None) -> list[Check]:
    """Every score is set (on passed rows only when ``need_scores`` says so) and within its range."""
    who = "row(s)" if need_scores is None else "passed row(s)"
    score_checks = [
        Check(f"{c}_missing", "ExpectColumnValuesToNotBeNull", where(need_scores, column=c), f"{{n}} {who} without {c}")
        for c in ranges
    ]
    for c, (lo, hi) in ranges.items():
        bounds = {"min_value": lo} if hi is None else {"min_value": lo, "max_value": hi}
        text = f">= {lo:g}" if hi is None else f"in [{lo:g}, {hi:g}]"
        score_checks.append(
            Check(
                f"{c}_out_of_range",
                "ExpectColumnValuesToBeBetween",
                {"column": c, **bounds},
                f"{{n}} row(s) with {c} not {text}",
            )
        )
    return score_checks


def _duplicates_gate() -> Gate:
    """Every duplicate names its group's kept clip, and no kept clip is rejected as a duplicate."""
    return Gate(
        "duplicates_name_their_kept_clip",
        "every clip rejected as duplicate names its group's kept clip (duplicate_group, duplicate_kept_date on "
        "or before its day); the kept clip is never rejected as duplicate",
        (
            no(
                "duplicate_unnamed",
                label="duplicates_without_kept_clip",
                explain="{n} duplicate row(s) without a kept clip of their own day or earlier",
            ),
            no(
                "kept_rejected_as_duplicate",
                label="kept_clips_rejected",
                explain="{n} kept clip(s) rejected as duplicate",
            ),
        ),
    )


def _undecodable_gate(df, cfg: FilteredClipsGates) -> Gate:
    """The clips whose frames do not decode as the shard encoder will read them are rejected ``undecodable`` before
    any caption is spent; one odd file does not stop the day, a share above ``max_undecodable_rate`` does (a broken
    decoder or store). Names the source objects either way."""
    rate = cfg.max_undecodable_rate
    flagged = df["is_undecodable"] > 0
    sources = tuple(dict.fromkeys(str(u) for u in df.loc[flagged, "source_uri"]))
    too_long = tuple(dict.fromkeys(str(u) for u in df.loc[df["is_too_long"] > 0, "source_uri"]))
    return Gate(
        "undecodable_rate",
        f"share of clips rejected undecodable <= {rate:g} (not enforced below {cfg.min_rows_for_rate} rows)",
        (
            Check(
                "undecodable_rate",
                "ExpectColumnMeanToBeBetween",
                {"column": "is_undecodable", "max_value": rate},
                f"undecodable rate {{value}} > max {rate:g}",
                measure="observed_value",
            ),
        ),
        thresholds={"max_undecodable_rate": rate, "min_rows_for_rate": cfg.min_rows_for_rate},
        min_rows=cfg.min_rows_for_rate,
        extra_measured={
            "rows": len(df),
            "undecodable": int(flagged.sum()),
            "undecodable_sources": list(sources[:MAX_SOURCES]),
            "too_long": int((df["is_too_long"] > 0).sum()),
            "too_long_sources": list(too_long[:MAX_SOURCES]),
        },
        examples=sources[:MAX_SOURCES],
    )


# Source objects a gate names (in its metadata and as its failing ids).
MAX_SOURCES = 10
