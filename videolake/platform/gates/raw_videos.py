"""Gates of raw_videos: one row per distinct video of the partition, probed or rejected with a reason."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from videolake.platform.gates.config import RawVideosGates
from videolake.platform.gates.core import Check, Frame, Gate
from videolake.platform.gates.relations import to_pandas, where
from videolake.platform.gates.shared import rate_gate, reason_consistent_gate, unique_id_gate

OK = 'status == "ok"'
REJECTED = 'status == "rejected"'
DUPLICATE = 'status == "duplicate"'
STATUSES = ["ok", "rejected", "duplicate"]
# Probe fields an ok row must have, with their lower bound (exclusive) — all must be > 0.
PROBE_FIELDS = ("fps", "width", "height", "size_bytes", "duration_s", "num_frames")


def build(tbl: pa.Table, context: dict[str, pa.Table], cfg: RawVideosGates) -> tuple[list[Gate], dict[str, Frame]]:
    df = to_pandas(tbl, ["video_id", "status", "reject_reason", "duplicate_of_date", "duplicate_of_uri", *PROBE_FIELDS])
    df["is_rejected"] = (df["status"] == "rejected").astype("float64")
    frames = {"rows": Frame(df, "video_id")}

    probe_checks: list[Check] = []
    for f in PROBE_FIELDS:
        probe_checks.append(
            Check(f"{f}_missing", "ExpectColumnValuesToNotBeNull", where(OK, column=f), f"{{n}} ok row(s) without {f}")
        )
    for f in PROBE_FIELDS:
        bounds: dict[str, Any] = dict(min_value=0, strict_min=True)
        if f == "fps":
            bounds.update(max_value=cfg.max_fps)
        rng = f"(0, {cfg.max_fps:g}]" if f == "fps" else "> 0"
        probe_checks.append(
            Check(
                f"{f}_out_of_range",
                "ExpectColumnValuesToBeBetween",
                where(OK, column=f, **bounds),
                f"{{n}} ok row(s) with {f} not {rng}",
            )
        )

    gates = [
        unique_id_gate("video_id_unique", "video_id"),
        Gate(
            "status_valid",
            f"status is one of {STATUSES}",
            (
                Check(
                    "invalid_status",
                    "ExpectColumnValuesToBeInSet",
                    {"column": "status", "value_set": STATUSES},
                    "{n} row(s) with a status outside ok/rejected/duplicate",
                ),
            ),
            thresholds={"statuses": STATUSES},
        ),
        Gate(
            "probe_fields_valid",
            "every ok row has fps, width, height, size_bytes, duration_s, num_frames set and in range",
            tuple(probe_checks),
            thresholds={
                "fps": f"(0, {cfg.max_fps:g}]",
                "width": "> 0",
                "height": "> 0",
                "size_bytes": "> 0",
                "duration_s": "> 0",
                "num_frames": "> 0",
            },
        ),
        Gate(
            "copies_name_their_original",
            "every duplicate row (bytes landed on an earlier day) names the original's day and object",
            (
                Check(
                    "copy_without_day",
                    "ExpectColumnValuesToNotBeNull",
                    where(DUPLICATE, column="duplicate_of_date"),
                    "{n} duplicate row(s) without duplicate_of_date",
                ),
                Check(
                    "copy_without_uri",
                    "ExpectColumnValuesToNotBeNull",
                    where(DUPLICATE, column="duplicate_of_uri"),
                    "{n} duplicate row(s) without duplicate_of_uri",
                ),
            ),
        ),
        reason_consistent_gate(
            "every rejected row has a reject_reason and no ok row has one",
            bad=REJECTED,
            good=OK,
            bad_noun="rejected",
            good_noun="ok",
        ),
        rate_gate(
            "reject_rate",
            "is_rejected",
            df,
            max_value=cfg.max_reject_rate,
            min_rows=cfg.min_rows_for_rate,
            counted="rejected",
            id_column="video_id",
        ),
    ]
    return gates, frames
