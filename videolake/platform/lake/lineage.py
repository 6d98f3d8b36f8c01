"""Lineage of one id through every table: from a sample key, clip_id, video_id or source object to the rest.

A training sample's key is its clip_id; a clip_id is ``<video_id>_<start>_<end>``; a video_id is the sha256 of the
source object's bytes; raw_videos names the object (``source_uri``, and ``duplicate_uris`` for the same bytes landed
under other names that day). ``trace`` resolves any of them to the video and its clips, and reads each table's rows
for them with the table's Delta version, so a person (or ``videolake lineage ID``) sees one chain with the versions
it was read at. The partition of an id is not known up front: each table is read with a filter on the id, which
Delta's per-file statistics and the Parquet row groups narrow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc

# What a row of each table shows in the chain (the rest stays in the table).
SHOWN: dict[str, tuple[str, ...]] = {
    "raw_videos": (
        "video_id",
        "source_uri",
        "status",
        "reject_reason",
        "duplicate_of_uri",
        "width",
        "height",
        "fps",
        "num_frames",
        "partition_date",
    ),
    "scene_clips": (
        "clip_id",
        "video_id",
        "start_frame",
        "end_frame",
        "start_s",
        "end_s",
        "detector",
        "detect_error",
        "partition_date",
    ),
    "clip_embeddings": ("clip_id", "model", "status", "dim", "partition_date"),
    "filtered_clips": ("clip_id", "passed", "reject_reason", "duplicate_group", "duplicate_kind", "partition_date"),
    "clip_captions": ("clip_id", "caption_track", "status", "caption", "model", "prompt_version", "partition_date"),
    "training_shards": ("clip_id", "status", "shard_uri", "bucket", "shard_sha256", "partition_date"),
}
CLIP_TABLES = ("scene_clips", "clip_embeddings", "filtered_clips", "clip_captions", "training_shards")

_VIDEO_ID = re.compile(r"[0-9a-f]{64}")
_CLIP_ID = re.compile(r"([0-9a-f]{64})_(\d+)_(\d+)")


@dataclass
class Lineage:
    """The chain of one id: what it was, the video, the clips, and each table's rows with its Delta version."""

    query: str
    kind: str  # "clip" (a clip_id or sample key) | "video" (a video_id) | "source" (an object uri)
    video_id: str | None = None
    clip_ids: list[str] = field(default_factory=list)  # the clip asked for, or every clip of the video
    versions: dict[str, int | None] = field(default_factory=dict)  # table -> the Delta version read
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> its rows for the chain

    @property
    def found(self) -> bool:
        return bool(self.rows.get("raw_videos"))


def kind_of(query: str) -> str:
    if _CLIP_ID.fullmatch(query):
        return "clip"
    if _VIDEO_ID.fullmatch(query):
        return "video"
    return "source"


def _rows(lake: Any, table: str, column: str, values: list[str]) -> list[dict[str, Any]]:
    from videolake.platform.lake.schemas import LAKE_SCHEMAS

    if not values or not lake.exists(table):
        return []
    names = LAKE_SCHEMAS[table].names
    columns = [c for c in SHOWN[table] if c in names]
    t = lake.read_where(table, columns, pc.field(column).isin(values))
    return sorted(t.to_pylist(), key=lambda r: (str(r.get("partition_date")), r.get("clip_id") or ""))


def trace(lake: Any, query: str) -> Lineage:
    """The lineage of ``query`` (a sample key / clip_id, a video_id, or a source object's uri) in ``lake``."""
    query = query.strip()
    out = Lineage(query=query, kind=kind_of(query))
    for table in SHOWN:
        out.versions[table] = lake.version(table) if lake.exists(table) else None
    if out.kind == "clip":
        match = _CLIP_ID.fullmatch(query)  # kind_of said it matches
        out.video_id = match.group(1) if match else None
        out.clip_ids = [query]
    elif out.kind == "video":
        out.video_id = query
    else:
        found = _rows(lake, "raw_videos", "source_uri", [query])
        if not found and lake.exists("raw_videos"):  # the same bytes landed under another name that day
            t = lake.read_where("raw_videos", ["video_id", "duplicate_uris"], pc.field("video_id").is_valid())
            hits = [r["video_id"] for r in t.to_pylist() if query in (r["duplicate_uris"] or [])]
            found = [{"video_id": v} for v in hits]
        out.video_id = found[0]["video_id"] if found else None
    if out.video_id is None:
        return out
    out.rows["raw_videos"] = _rows(lake, "raw_videos", "video_id", [out.video_id])
    if out.kind != "clip":
        out.clip_ids = sorted({r["clip_id"] for r in _rows(lake, "scene_clips", "video_id", [out.video_id])})
    for table in CLIP_TABLES:
        out.rows[table] = _rows(lake, table, "clip_id", out.clip_ids)
    return out


def clip_frames(store: Any, lineage: Lineage, count: int = 8, max_pixels: int = 320 * 240) -> list[Any]:
    """``count`` frames spread over the first clip of the chain, decoded from its source (uint8 RGB arrays)."""
    from videolake.platform.captioning.base import FrameConfig
    from videolake.platform.captioning.clip_frames import read_frames

    clips = lineage.rows.get("scene_clips") or []
    videos = lineage.rows.get("raw_videos") or []
    if not clips or not videos:
        return []
    clip = clips[0]
    video = next(
        (v for v in videos if v.get("status") == "ok"), videos[0]
    )  # a later day's copy names no file of its own
    config = FrameConfig(sample_fps=1e6, min_frames=count, max_frames=count, max_pixels=max_pixels)
    with store.open_local(store.key_from_uri(video["source_uri"])) as path:
        got = read_frames(path, int(clip["start_frame"]), int(clip["end_frame"]), float(video["fps"] or 0.0), config)
    return list(got.frames)
