"""Gates of raw_videos: one row per distinct video of the partition, probed or rejected with a reason."""

from __future__ import annotations

import pyarrow as pa

from videolake.platform.gates.config import RawVideosGates
from videolake.platform.gates.core import MAX_EXAMPLES, Check, Frame, Gate
from videolake.platform.gates.relations import to_pandas, where

OK = 'status == "ok"'
REJECTED = 'status == "rejected"'
STATUSES = ["ok", "rejected"]
# Probe fields an ok row must have, with their lower bound (exclusive) — all must be > 0.
PROBE_FIELDS = ("fps", "width", "height", "size_bytes", "duration_s", "num_frames")


def build(tbl: pa.Table, context: dict[str, pa.Table], cfg: RawVideosGates) -> tuple[list[Gate], dict[str, Frame]]:
    df = to_pandas(tbl, ["video_id", "status", "reject_reason", *PROBE_FIELDS])
    df["is_rejected"] = (df["status"] == "rejected").astype("float64")
    rows = len(df)
    frames = {"rows": Frame(df, "video_id")}

    probe_checks: list[Check] = []
    for f in PROBE_FIELDS:
        probe_checks.append(Check(f"{f}_missing", "ExpectColumnValuesToNotBeNull", where(OK, column=f), f"{{n}} ok row(s) without {f}"))
    for f in PROBE_FIELDS:
        bounds = dict(min_value=0, strict_min=True)
        if f == "fps":
            bounds.update(max_value=cfg.max_fps)
        rng = f"(0, {cfg.max_fps:g}]" if f == "fps" else "> 0"
        probe_checks.append(
            Check(f"{f}_out_of_range", "ExpectColumnValuesToBeBetween", where(OK, column=f, **bounds), f"{{n}} ok row(s) with {f} not {rng}")
        )

    gates = [
        Gate(
            "video_id_unique",
            "video_id is set and unique",
            (
                Check("null_ids", "ExpectColumnValuesToNotBeNull", {"column": "video_id"}, "{n} row(s) without video_id"),
                Check("duplicated", "ExpectColumnValuesToBeUnique", {"column": "video_id"}, "{n} row(s) share a video_id"),
            ),
        ),
        Gate(
            "status_valid",
            f"status is one of {STATUSES}",
            (Check("invalid_status", "ExpectColumnValuesToBeInSet", {"column": "status", "value_set": STATUSES}, "{n} row(s) with a status outside ok/rejected"),),
            thresholds={"statuses": STATUSES},
        ),
        Gate(
            "probe_fields_valid",
            "every ok row has fps, width, height, size_bytes, duration_s, num_frames set and in range",
            tuple(probe_checks),
            thresholds={"fps": f"(0, {cfg.max_fps:g}]", "width": "> 0", "height": "> 0", "size_bytes": "> 0", "duration_s": "> 0", "num_frames": "> 0"},
        ),
        Gate(
            "reject_reason_consistent",
            "every rejected row has a reject_reason and no ok row has one",
            (
                Check("rejected_without_reason", "ExpectColumnValuesToNotBeNull", where(REJECTED, column="reject_reason"), "{n} rejected row(s) without reject_reason"),
                Check("rejected_with_empty_reason", "ExpectColumnValueLengthsToBeBetween", where(REJECTED, column="reject_reason", min_value=1), "{n} rejected row(s) with an empty reject_reason"),
                Check("ok_with_reason", "ExpectColumnValuesToBeNull", where(OK, column="reject_reason"), "{n} ok row(s) with a reject_reason"),
            ),
        ),
        Gate(
            "reject_rate",
            f"reject rate <= {cfg.max_reject_rate:g}",
            (
                Check(
                    "reject_rate",
                    "ExpectColumnMeanToBeBetween",
                    {"column": "is_rejected", "max_value": cfg.max_reject_rate},
                    f"reject rate {{value}} > max {cfg.max_reject_rate:g}",
                    measure="observed_value",
                ),
            ),
            thresholds={"max_reject_rate": cfg.max_reject_rate, "min_rows_for_rate": cfg.min_rows_for_rate},
            min_rows=cfg.min_rows_for_rate,
            extra_measured={"rows": rows, "rejected": int(df["is_rejected"].sum())},
            examples=tuple(str(v) for v in df.loc[df["is_rejected"] > 0, "video_id"].head(MAX_EXAMPLES)),
        ),
    ]
    return gates, frames
