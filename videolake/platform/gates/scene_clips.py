"""Gates of scene_clips, checked against the ok videos of raw_videos of the same partition.

Order and overlap: within a video, clips sorted by (start_frame, end_frame) must carry clip_index 0, 1, 2, ...
(``out_of_order`` otherwise) and none may start before an earlier clip ends (``overlaps_previous``). Coverage: the
clips of a video must cover at least ``coverage_min`` of its frames (sum of end_frame - start_frame).
"""

from __future__ import annotations

import pyarrow as pa

from videolake.platform.gates.config import SceneClipsGates
from videolake.platform.gates.core import Check, Frame, Gate
from videolake.platform.gates.relations import no, to_pandas, where
from videolake.platform.gates.shared import unique_id_gate

KNOWN = "video_known == True"


def build(tbl: pa.Table, context: dict[str, pa.Table], cfg: SceneClipsGates) -> tuple[list[Gate], dict[str, Frame]]:
    import pandas as pd

    raw = to_pandas(context["raw_videos"], ["video_id", "status", "num_frames"])
    ok = raw[raw["status"] == "ok"].drop_duplicates("video_id")
    frames_of = dict(zip(ok["video_id"], ok["num_frames"]))
    # A video that another day's run marked as a copy after this day cut it (days that run at the same time): its
    # clips are stale, not unknown, and filtered_clips' judgement removes them (dedup.cross_day). Known and range
    # checked; coverage is asked of ok videos only.
    copies = raw[raw["status"] == "duplicate"].drop_duplicates("video_id")
    cut_from = {**dict(zip(copies["video_id"], copies["num_frames"])), **frames_of}

    df = to_pandas(
        tbl,
        [
            "clip_id",
            "video_id",
            "source_uri",
            "clip_index",
            "start_frame",
            "end_frame",
            "duration_s",
            "detect_error",
            "max_clip_s",
        ],
    )
    df["detect_failed"] = df["detect_error"].notna().astype(bool)
    # Each row is checked against the bound it was cut under (its own max_clip_s): the gate holds no copy of
    # scene_clips' run config. Rows written before the column existed carry none and are counted, not checked.
    bound = df["max_clip_s"].astype("float64")
    duration = df["duration_s"].astype("float64")
    df["duration_out_of_bounds"] = (
        ~df["detect_failed"] & ((duration <= 0) | (bound.notna() & (duration > bound + cfg.duration_tolerance_s)))
    ).astype("float64")
    df["video_known"] = df["video_id"].isin(cut_from.keys())
    df["num_frames"] = df["video_id"].map(cut_from).astype("float64")
    ordered = df.sort_values(["video_id", "start_frame", "end_frame", "clip_id"], kind="stable")
    rank = ordered.groupby("video_id", sort=False).cumcount()
    df["out_of_order"] = (ordered["clip_index"] != rank).reindex(df.index).astype(bool)
    prev_end = ordered.groupby("video_id", sort=False)["end_frame"].transform(lambda s: s.cummax().shift(1))
    df["overlaps_previous"] = (ordered["start_frame"] < prev_end).reindex(df.index).astype(bool)

    span = (df["end_frame"] - df["start_frame"]).clip(lower=0)
    per_video = span.groupby(df["video_id"]).sum()
    count = df.groupby("video_id").size()
    videos = pd.DataFrame({"video_id": pd.Series(list(frames_of), dtype=object)})
    videos["num_frames"] = videos["video_id"].map(frames_of).astype("float64")
    videos["clip_count"] = videos["video_id"].map(count).fillna(0).astype("int64")
    videos["covered_frames"] = videos["video_id"].map(per_video).fillna(0).astype("float64")
    videos["coverage"] = videos["covered_frames"] / videos["num_frames"]
    frames = {"rows": Frame(df, "clip_id"), "videos": Frame(videos, "video_id")}

    gates = [
        unique_id_gate("clip_id_unique", "clip_id"),
        Gate(
            "clip_video_known",
            "every clip belongs to an ok video of raw_videos in the same partition (or one marked a copy since)",
            (
                Check(
                    "unknown_video",
                    "ExpectColumnValuesToBeInSet",
                    {"column": "video_known", "value_set": [True]},
                    "{n} clip(s) of a video that is neither an ok raw_videos row of the partition nor a copy",
                ),
            ),
        ),
        Gate(
            "frame_range_valid",
            "0 <= start_frame < end_frame <= num_frames of the clip's video",
            (
                Check(
                    "negative_start",
                    "ExpectColumnValuesToBeBetween",
                    {"column": "start_frame", "min_value": 0},
                    "{n} clip(s) with start_frame < 0",
                ),
                Check(
                    "empty_or_reversed",
                    "ExpectColumnPairValuesAToBeGreaterThanB",
                    {"column_A": "end_frame", "column_B": "start_frame", "or_equal": False},
                    "{n} clip(s) with end_frame <= start_frame",
                ),
                Check(
                    "past_video_end",
                    "ExpectColumnPairValuesAToBeGreaterThanB",
                    where(KNOWN, column_A="num_frames", column_B="end_frame", or_equal=True),
                    "{n} clip(s) ending after their video's last frame",
                ),
            ),
        ),
        Gate(
            "clips_ordered_non_overlapping",
            "the clips of a video are numbered 0, 1, ... in frame order and do not overlap",
            (
                no(
                    "out_of_order",
                    label="out_of_order",
                    explain="{n} clip(s) whose clip_index is not their position in frame order",
                ),
                no(
                    "overlaps_previous",
                    label="overlapping",
                    explain="{n} clip(s) starting before an earlier clip of the video ends",
                ),
            ),
        ),
        Gate(
            "coverage",
            f"the clips of every ok video cover >= {cfg.coverage_min:g} of its frames",
            (
                Check(
                    "under_covered_videos",
                    "ExpectColumnValuesToBeBetween",
                    where("clip_count >= 1", column="coverage", min_value=cfg.coverage_min),
                    f"{{n}} video(s) whose clips cover < {cfg.coverage_min:g} of their frames",
                    frame="videos",
                ),
            ),
            thresholds={"coverage_min": cfg.coverage_min},
            extra_measured={
                "videos": len(videos),
                "min_coverage": _min_or_none(videos.loc[videos["clip_count"] >= 1, "coverage"]),
            },
        ),
        Gate(
            "every_video_has_clips",
            "every ok video has at least one clip",
            (
                Check(
                    "videos_without_clips",
                    "ExpectColumnValuesToBeBetween",
                    {"column": "clip_count", "min_value": 1},
                    "{n} ok video(s) without any clip",
                    frame="videos",
                ),
            ),
        ),
        _duration_gate(df, cfg, bound),
    ]
    return gates, frames


def _duration_gate(df, cfg: SceneClipsGates, bound) -> Gate:
    """A clip over the bound it was cut under (a single frame held longer than ``max_clip_s``, timestamps that do
    not advance) is one file's oddity: filtered_clips rejects it ``too_long`` with its measured duration, so it
    never reaches a caption. The day stops only when such clips are a share of the day above
    ``max_out_of_bounds_rate`` (the split itself broken); the gate names their source objects either way."""
    tol, rate = cfg.duration_tolerance_s, cfg.max_out_of_bounds_rate
    flagged = df["duration_out_of_bounds"] > 0
    sources = tuple(dict.fromkeys(str(u) for u in df.loc[flagged, "source_uri"]))
    return Gate(
        "duration_in_bounds",
        f"share of clips with duration_s <= 0 or over their max_clip_s + {tol:g} s <= {rate:g} (those clips are "
        "rejected too_long by filtered_clips; detect_error fallback clips exempt)",
        (
            Check(
                "duration_out_of_bounds",
                "ExpectColumnMeanToBeBetween",
                {"column": "duration_out_of_bounds", "max_value": rate},
                f"share of clips out of bounds {{value}} > max {rate:g}",
                measure="observed_value",
            ),
        ),
        thresholds={
            "min_duration_s_exclusive": 0.0,
            "duration_tolerance_s": tol,
            "max_out_of_bounds_rate": rate,
            "min_rows_for_rate": cfg.min_rows_for_rate,
        },
        min_rows=cfg.min_rows_for_rate,
        extra_measured={
            "rows": len(df),
            "clips_out_of_bounds": int(flagged.sum()),
            "sources_out_of_bounds": list(sources[:MAX_SOURCES]),
            "detect_error_clips_exempt": int(df["detect_failed"].sum()),
            "clips_without_max_clip_s": int(bound.isna().sum()),
        },
        examples=sources[:MAX_SOURCES],
    )


# Source objects a gate names (in its metadata and as its failing ids).
MAX_SOURCES = 10


def _min_or_none(s) -> float | None:
    return None if s.dropna().empty else round(float(s.min()), 6)
