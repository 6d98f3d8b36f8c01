"""A contact sheet of a day's captioned clips: the middle frame of a few clips with their captions, one JPEG.

The clip_captions asset shows it on each partition's materialization, so a person sees what the day's clips look like
and what the model said about them without opening a table. Only a few clips are read (the first ``count`` ok rows
the table returns for the day); each frame is decoded from the clip's source range.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import pyarrow.compute as pc

log = logging.getLogger(__name__)

COUNT = 6  # clips on a sheet
TILE_WIDTH = 200  # pixels per tile
CAPTION_CHARS = 90  # shown characters of a caption


def day_samples(lake: Any, day: str, count: int = COUNT, track: str = "default") -> list[dict]:
    """Up to ``count`` ok captions of caption track ``track`` of ``day`` with their clip's frame range and source
    (clip_id order)."""
    from videolake.platform.lake.table import PartitionRange

    rng = PartitionRange.of([day])
    caps = lake.read_partitions(
        "clip_captions",
        rng,
        ["clip_id", "video_id", "source_uri", "status", "caption"],
        where=(pc.field("caption_track") == track) & (pc.field("status") == "ok"),
    )
    caps = caps.sort_by("clip_id").slice(0, count)
    if caps.num_rows == 0:
        return []
    ids = caps.column("clip_id")
    clips = lake.read_where(
        "scene_clips", ["clip_id", "start_frame", "end_frame", "partition_date"], pc.field("clip_id").isin(ids)
    )
    ranges = {r["clip_id"]: (r["start_frame"], r["end_frame"]) for r in clips.to_pylist()}
    vids = pc.unique(caps.column("video_id"))
    videos = lake.read_where("raw_videos", ["video_id", "fps", "status"], pc.field("video_id").isin(vids))
    fps = {r["video_id"]: r["fps"] for r in videos.to_pylist() if r["status"] == "ok"}
    out = []
    for r in caps.to_pylist():
        if r["clip_id"] in ranges and fps.get(r["video_id"]):
            out.append(
                {
                    **r,
                    "start_frame": ranges[r["clip_id"]][0],
                    "end_frame": ranges[r["clip_id"]][1],
                    "fps": fps[r["video_id"]],
                }
            )
    return out


def contact_sheet_jpeg(store: Any, samples: list[dict], quality: int = 75) -> bytes | None:
    """The sheet of ``samples`` (``day_samples``) as JPEG bytes; None when no frame could be read. A clip whose frame
    cannot be decoded is left out (logged): a sheet is a view, never a reason to fail the step."""
    from PIL import Image

    from videolake.platform.captioning.base import FrameConfig
    from videolake.platform.captioning.clip_frames import read_frames
    from videolake.platform.releases.plots import contact_sheet_png

    config = FrameConfig(sample_fps=1e6, min_frames=1, max_frames=1, max_pixels=TILE_WIDTH * TILE_WIDTH)
    tiles = []
    for s in samples:
        try:
            with store.open_local(store.key_from_uri(s["source_uri"])) as path:
                mid = (s["start_frame"] + s["end_frame"]) // 2
                frames = read_frames(path, mid, mid + 1, float(s["fps"]), config).frames
            caption = s["caption"] if len(s["caption"]) <= CAPTION_CHARS else s["caption"][: CAPTION_CHARS - 1] + "…"
            tiles.append((caption, Image.fromarray(frames[0])))
        except Exception as exc:  # noqa: BLE001 - a view: skip the clip
            log.warning("contact sheet: no frame for clip %s: %s", s["clip_id"], exc)
    if not tiles:
        return None
    sheet = Image.open(io.BytesIO(contact_sheet_png(tiles, columns=3, tile_width=TILE_WIDTH))).convert("RGB")
    buf = io.BytesIO()
    sheet.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
