"""Gates of clip_captions, checked against the passed clips of filtered_clips of the same partition.

Structural gates (one row per passed clip, status/error consistency, non-empty caption, provenance, failure rate)
guard the table's contract. Content gates (length, repetition, refusal boilerplate) guard caption quality; a
random-weight test model writes random text, so a test profile can make those warn (config.LENIENT_CAPTION_CONTENT).
"""

from __future__ import annotations

import pyarrow as pa

from videolake.platform.gates.config import ClipCaptionsGates
from videolake.platform.gates.core import Check, Frame, Gate
from videolake.platform.gates.relations import id_reconciliation, no, to_pandas, where
from videolake.platform.gates.shared import exactly_once_gate, rate_gate
from videolake.platform.gates.text import repetition_score

OK = 'status == "ok"'
FAILED = 'status == "failed"'
STATUSES = ["ok", "failed"]


def build(tbl: pa.Table, context: dict[str, pa.Table], cfg: ClipCaptionsGates) -> tuple[list[Gate], dict[str, Frame]]:
    df = to_pandas(tbl, ["clip_id", "caption_track", "status", "caption", "error", "model", "prompt_version"])
    df["caption_blank"] = df["caption"].map(lambda c: not isinstance(c, str) or not c.strip()).astype(bool)
    df["repetition"] = (
        df["caption"].map(lambda c: repetition_score(c) if isinstance(c, str) else None).astype("float64")
    )
    df["is_failed"] = (df["status"] == "failed").astype("float64")
    filtered = context["filtered_clips"]
    passed_mask = filtered.column("passed").to_pylist()
    passed_ids = [i for i, p in zip(filtered.column("clip_id").to_pylist(), passed_mask) if p is True]
    # Per caption track: every passed clip has one row in each track the partition holds (a track's asset checks
    # its own rows only: check_partition(track=...)). With one track the ids are plain clip ids.
    tracks = sorted(set(df["caption_track"].dropna().tolist())) or ["default"]
    if len(tracks) == 1:
        ids = id_reconciliation(passed_ids, df["clip_id"].tolist(), "clip_id")
    else:
        expected = [f"{c}@{t}" for t in tracks for c in passed_ids]
        actual = [f"{c}@{t}" for c, t in zip(df["clip_id"].tolist(), df["caption_track"].tolist())]
        ids = id_reconciliation(expected, actual, "clip_id")
    frames = {"rows": Frame(df, "clip_id"), "ids": Frame(ids, "clip_id")}

    rows = len(df)
    gates = [
        exactly_once_gate(
            "one_caption_per_passed_clip",
            "every passed clip has exactly one caption row (per caption track), and there are no others",
            "clip_id",
            missing="{n} passed clip(s) without a caption row",
            extra="{n} caption row(s) for clips that did not pass filtering",
            duplicated="{n} clip(s) with more than one caption row",
            extra_measured={"passed_clips": len(set(passed_ids)), "rows": rows, "tracks": len(tracks)},
        ),
        Gate(
            "status_consistent",
            "status is ok or failed; failed rows have an error, ok rows none",
            (
                Check(
                    "invalid_status",
                    "ExpectColumnValuesToBeInSet",
                    {"column": "status", "value_set": STATUSES},
                    "{n} row(s) with a status outside ok/failed",
                ),
                Check(
                    "failed_without_error",
                    "ExpectColumnValuesToNotBeNull",
                    where(FAILED, column="error"),
                    "{n} failed row(s) without error",
                ),
                Check(
                    "ok_with_error",
                    "ExpectColumnValuesToBeNull",
                    where(OK, column="error"),
                    "{n} ok row(s) with an error",
                ),
            ),
            thresholds={"statuses": STATUSES},
        ),
        Gate(
            "caption_present",
            "every ok row has a non-blank caption",
            (
                no(
                    "caption_blank",
                    label="blank_captions",
                    explain="{n} ok row(s) with a null or blank caption",
                    row_condition=OK,
                ),
            ),
        ),
        Gate(
            "caption_length",
            f"ok captions are {cfg.min_len}..{cfg.max_len} characters long",
            (
                Check(
                    "length_out_of_bounds",
                    "ExpectColumnValueLengthsToBeBetween",
                    where(OK, column="caption", min_value=cfg.min_len, max_value=cfg.max_len),
                    f"{{n}} ok caption(s) shorter than {cfg.min_len} or longer than {cfg.max_len} characters",
                ),
            ),
            thresholds={"min_len": cfg.min_len, "max_len": cfg.max_len},
        ),
        Gate(
            "no_repetition",
            f"no ok caption has a repetition_score above {cfg.max_repetition:g}",
            (
                Check(
                    "repetitive",
                    "ExpectColumnValuesToBeBetween",
                    where(OK, column="repetition", min_value=0, max_value=cfg.max_repetition),
                    f"{{n}} ok caption(s) with a repeated token or phrase covering > {cfg.max_repetition:g} of it",
                ),
            ),
            thresholds={"max_repetition": cfg.max_repetition},
        ),
        Gate(
            "no_refusal",
            "no ok caption contains refusal or assistant boilerplate",
            (
                Check(
                    "refusals",
                    "ExpectColumnValuesToNotMatchRegexList",
                    where(OK, column="caption", regex_list=list(cfg.refusal_patterns)),
                    "{n} ok caption(s) with refusal boilerplate",
                ),
            ),
            thresholds={"refusal_patterns": list(cfg.refusal_patterns)},
        ),
        Gate(
            "provenance_set",
            "every row names its model and prompt_version",
            (
                Check(
                    "model_missing", "ExpectColumnValuesToNotBeNull", {"column": "model"}, "{n} row(s) without model"
                ),
                Check(
                    "model_empty",
                    "ExpectColumnValueLengthsToBeBetween",
                    {"column": "model", "min_value": 1},
                    "{n} row(s) with an empty model",
                ),
                Check(
                    "prompt_version_missing",
                    "ExpectColumnValuesToNotBeNull",
                    {"column": "prompt_version"},
                    "{n} row(s) without prompt_version",
                ),
                Check(
                    "prompt_version_empty",
                    "ExpectColumnValueLengthsToBeBetween",
                    {"column": "prompt_version", "min_value": 1},
                    "{n} row(s) with an empty prompt_version",
                ),
            ),
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
