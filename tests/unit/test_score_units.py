"""The score stage's driver holds one descriptor per video: its units are keyed by their clips, and each worker
reads its own video's clip rows from the lake (``video_clips``)."""

from __future__ import annotations

import datetime as dt
import json

from videolake.platform.lake.schemas import TABLES, clip_id
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table
from videolake.platform.runtime.units import unit_key
from videolake.platform.stages.score import score_units, video_clips

DAYS = ("2026-05-01", "2026-05-02")


def _video(vid: str, day: str) -> dict:
    return {
        "video_id": vid,
        "source_uri": f"file:///landing/{day}/{vid}.mp4",
        "fps": 30.0,
        "num_frames": 90,
        "width": 640,
        "height": 360,
        "status": "ok",
        "size_bytes": 1000,
        "ingested_at": dt.datetime(2026, 5, 1, tzinfo=dt.UTC),
        "partition_date": dt.date.fromisoformat(day),
    }


def _clip(vid: str, day: str, start: int, end: int, error: str | None = None) -> dict:
    return {
        "clip_id": clip_id(vid, start, end),
        "video_id": vid,
        "source_uri": f"file:///landing/{day}/{vid}.mp4",
        "clip_index": start // 30,
        "start_frame": start,
        "end_frame": end,
        "start_s": start / 30,
        "end_s": end / 30,
        "duration_s": (end - start) / 30,
        "detector": "luma",
        "detector_params": "{}",
        "detect_error": error,
        "frame_stats_uri": f"file:///stats/{vid}.npz",
        "partition_date": dt.date.fromisoformat(day),
    }


def test_units_are_per_video_and_workers_read_their_clips(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    days = PartitionRange.of(list(DAYS))
    videos = [_video("v1", DAYS[0]), _video("v2", DAYS[0]), _video("v1", DAYS[1])]
    # written out of frame order, v3 without a raw_videos row
    clips = [
        _clip("v1", DAYS[0], 60, 90),
        _clip("v2", DAYS[0], 0, 90),
        _clip("v1", DAYS[0], 0, 30),
        _clip("v1", DAYS[0], 30, 60),
        _clip("v1", DAYS[1], 0, 90, "decode failed"),
        _clip("v3", DAYS[1], 0, 45),
    ]
    lake.write_partitions("raw_videos", rows_to_table(videos, TABLES["raw_videos"]), days)
    lake.write_partitions("scene_clips", rows_to_table(clips, TABLES["scene_clips"]), days)

    units = score_units(lake, days)
    payloads = [json.loads(u["payload"]) for u in units]
    assert [(u["partition_date"], p["video_id"]) for u, p in zip(units, payloads)] == [
        (DAYS[0], "v1"),
        (DAYS[0], "v2"),
        (DAYS[1], "v1"),
        (DAYS[1], "v3"),
    ]
    assert all(set(p) == {"video", "video_id", "partition_date"} for p in payloads)  # no clip rows in the driver
    assert payloads[0]["video"]["source_uri"] == "file:///landing/2026-05-01/v1.mp4" and payloads[3]["video"] is None
    v1 = [clip_id("v1", s, e) for s, e in [(0, 30), (30, 60), (60, 90)]]
    assert units[0]["unit_key"] == unit_key("score", "v1", v1, [None] * 3, ["file:///stats/v1.npz"] * 3)
    assert units[2]["unit_key"] == unit_key(
        "score", "v1", [clip_id("v1", 0, 90)], ["decode failed"], ["file:///stats/v1.npz"]
    )

    rows = video_clips(lake, DAYS[0], "v1")
    assert [r["clip_id"] for r in rows] == v1 and "partition_date" not in rows[0]
    assert [r["detect_error"] for r in video_clips(lake, DAYS[1], "v1")] == ["decode failed"]
    assert video_clips(lake, DAYS[1], "v2") == []
