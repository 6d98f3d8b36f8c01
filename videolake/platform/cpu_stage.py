"""The CPU stage per video: ingest (hash + probe), split (scene detection + clip ranges/files), score (quality).

Each function handles ONE video and is what a Ray task runs (see raymap.ray_map); the partition-level functions
fan out over videos and turn every failure into a recorded rejection, so a bad video never fails a partition.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

from videolake.platform.objectstore import ObjectInfo, ObjectStore, content_key
from videolake.platform.raymap import TaskFailure, ray_map
from videolake.platform.schemas import FILTERED_CLIPS, RAW_VIDEOS, SCENE_CLIPS, clip_id

log = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_REJECTED = "rejected"
INGEST_ERROR = "ingest_error"
DETECT_ERROR = "detect_error"
SCORE_ERROR = "score_error"
DUPLICATE_FILE = "duplicate_file"


@dataclass(frozen=True)
class SplitConfig:
    detector: str = "luma"  # registered scene detector name (videolake.platform.scenes.DETECTORS)
    detector_params: dict[str, Any] = field(default_factory=dict)  # overrides of the detector's Config fields
    min_clip_s: float = 1.0  # scenes shorter than this are kept as ranges and rejected by the quality stage
    max_clip_s: float = 20.0  # longer scenes are split into near-equal pieces no longer than this
    clip_mode: str = "ranges"  # "ranges": clips are frame ranges of the source; "files": transcoded clip objects
    clip_prefix: str = "clips"  # object-store prefix of transcoded clips (content-addressed keys below it)
    cache_prefix: str = "cache/framestats"  # object-store prefix of per-video frame statistics (npz)


def landing_prefix(landing: str, day: str) -> str:
    return f"{landing.strip('/')}/{day}/"


def list_landing(store: ObjectStore, landing: str, days: list[str]) -> dict[str, list[ObjectInfo]]:
    """The entries to ingest per partition day: one raw_videos row each (a rejection when ``problem`` is set).

    The rules ("What lands" in the README), applied to ``store.list(<landing>/<day>/)``, which never raises for
    one odd entry:
    - Sub-folders are ingested: ``<day>/cam1/a.mp4`` is a video of that day like ``<day>/a.mp4``.
    - Hidden names are skipped: any path segment below the day folder that starts with '.' (``.DS_Store``,
      ``.upload-tmp/...``, editors' and uploaders' partial files). They are logged with their count.
    - Folders are not videos: the day folder's own marker, and a sub-folder with entries under it, give no row
      (their contents do). An empty sub-folder (local, or an S3 folder marker with nothing under it) becomes a
      ``not_a_regular_file`` entry, so a folder where a file was expected (``x.mp4/``) is visible as a rejection.
    - Every other entry is returned, flagged entries included (links, FIFOs, unreadable or non-UTF-8 names...):
      ``ingest_one`` turns them into rejected rows without opening them.
    """
    from dataclasses import replace

    from videolake.platform.objectstore.base import NOT_A_REGULAR_FILE

    out = {}
    for day in days:
        prefix = landing_prefix(landing, day)
        entries = sorted(store.list(prefix), key=lambda o: o.key)
        keep, hidden = [], 0
        for i, o in enumerate(entries):
            rel = o.key[len(prefix):] if o.key.startswith(prefix) else ""
            if any(part.startswith(".") for part in rel.split("/")):
                hidden += 1
                continue
            if o.is_folder and o.problem is None:
                # Sorted keys: whatever lies under a folder key follows it directly.
                if not rel or (i + 1 < len(entries) and entries[i + 1].key.startswith(o.key)):
                    continue  # the day folder itself, or a folder whose contents are listed
                o = replace(o, problem=NOT_A_REGULAR_FILE, detail="an empty folder (nothing to ingest)")
            keep.append(o)
        if hidden:
            log.info("landing %s: skipped %d hidden entr%s (names starting with '.')", prefix, hidden,
                     "y" if hidden == 1 else "ies")
        out[day] = keep
    return out


# ---------------------------------------------------------------------------------------------------- ingest


def ingest_one(obj: ObjectInfo, *, store: ObjectStore, probe_config: Any) -> dict:
    """Hash and probe one landing object; returns a RAW_VIDEOS row (without partition_date / ingested_at).

    Never raises for the object itself: a flagged entry (``obj.problem``) becomes a rejected row without being
    opened; an object that is gone when read is ``vanished``, one that cannot be read ``permission_denied``, one
    that became a link, FIFO or folder since the listing ``not_a_regular_file`` (checked with lstat before opening,
    so a link is never followed), an S3 object in an archive storage class ``archived``. Store-wide failures (an
    outage after the store's retries, bad credentials) still raise: they are not this object's fault.
    """
    import stat

    from videolake.platform.objectstore.base import (
        ARCHIVED,
        NOT_A_REGULAR_FILE,
        PERMISSION_DENIED,
        VANISHED,
        ObjectArchivedError,
        sha256_file,
    )
    from videolake.platform.probe import probe_video, raw_video_row, rejected_row

    if obj.problem is not None:
        return rejected_row(obj.uri, obj.size, obj.problem, obj.detail or obj.problem)
    if obj.is_folder:
        return rejected_row(obj.uri, obj.size, NOT_A_REGULAR_FILE, "a folder, not a file")
    try:
        with store.open_local(obj.key) as path:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                return rejected_row(obj.uri, obj.size, NOT_A_REGULAR_FILE,
                                    f"{what} when read (it was a file when listed)")
            video_id = sha256_file(path)
            outcome = probe_video(path, probe_config)
    except FileNotFoundError as exc:
        return rejected_row(obj.uri, obj.size, VANISHED, f"listed, then gone before it was read ({exc})")
    except PermissionError as exc:
        return rejected_row(obj.uri, obj.size, PERMISSION_DENIED, f"cannot read the file: {exc.strerror or exc}")
    except (IsADirectoryError, NotADirectoryError) as exc:
        return rejected_row(obj.uri, obj.size, NOT_A_REGULAR_FILE, f"a folder when read: {exc}")
    except ObjectArchivedError as exc:
        return rejected_row(obj.uri, obj.size, ARCHIVED, str(exc))
    return raw_video_row(video_id, obj.uri, st.st_size, outcome)


def ingest_partition(
    store: ObjectStore,
    objects_by_day: dict[str, list[ObjectInfo]],
    probe_config: Any,
    *,
    mapper: Callable[..., list[Any]] = ray_map,
    progress: Callable[[int, int], None] | None = None,
    now: dt.datetime | None = None,
) -> pa.Table:
    """RAW_VIDEOS rows for all landing objects of the given days; one row per distinct content per day.

    Identical bytes dropped twice on the same day are one video (video_id is the content hash): the first source
    (by key) is kept and the others are listed in ``duplicate_uris``, so nothing is dropped silently.
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    items = [(day, o) for day, objs in sorted(objects_by_day.items()) for o in objs]
    results = mapper(ingest_one, [o for _, o in items], kwargs={"store": store, "probe_config": probe_config}, progress=progress)
    rows: dict[tuple[str, str], dict] = {}
    for (day, obj), res in zip(items, results):
        if isinstance(res, TaskFailure):
            # Could not even hash the object: still a row, keyed by the object itself so it stays unique.
            import hashlib

            res = {
                "video_id": "err-" + hashlib.sha256(obj.uri.encode()).hexdigest(),
                "source_uri": obj.uri,
                "size_bytes": obj.size,
                "status": STATUS_REJECTED,
                "reject_reason": INGEST_ERROR,
                "reject_detail": res.error[:500],
            }
        key = (day, res["video_id"])
        if key in rows:
            rows[key].setdefault("duplicate_uris", []).append(res["source_uri"])
            continue
        res["partition_date"] = dt.date.fromisoformat(day)
        res["ingested_at"] = now
        res.setdefault("duplicate_uris", [])
        rows[key] = res
    from videolake.platform.lake import rows_to_table

    return rows_to_table(list(rows.values()), RAW_VIDEOS)


# ---------------------------------------------------------------------------------------------------- split


def stats_key(config: SplitConfig, video_id: str, params_json: str) -> str:
    import hashlib

    digest = hashlib.sha256(f"{video_id}|{config.detector}|{params_json}".encode()).hexdigest()
    return content_key(config.cache_prefix, digest, ".npz")


def split_one(video: dict, *, store: ObjectStore, config: SplitConfig) -> list[dict]:
    """Scene clips of one ok video (SCENE_CLIPS rows without partition_date). Caches the frame stats."""
    from videolake.platform.scenes import get_detector
    from videolake.platform.scenes.segments import cuts_to_ranges

    detector = get_detector(config.detector, **config.detector_params)
    params = detector.params_json()
    key = store.key_from_uri(video["source_uri"])
    with store.open_local(key) as path:
        result = detector.detect(path)
        fps = float(result.fps or video["fps"] or 0.0)
        ranges = cuts_to_ranges(result.cuts, result.num_frames, fps, config.min_clip_s, config.max_clip_s)
        if result.stats is not None:
            store.put_bytes(stats_key(config, video["video_id"], params), result.stats.to_npz_bytes())
        clip_uris: dict[tuple[int, int], str] = {}
        if config.clip_mode == "files":
            from videolake.platform.clips import store_clip

            for start, end in ranges:
                clip_uris[(start, end)] = store_clip(store, path, video["video_id"], start, end, fps, prefix=config.clip_prefix)
    pts = result.stats.pts_s if result.stats is not None else None
    rows = []
    for i, (start, end) in enumerate(ranges):
        if pts is not None and end <= len(pts):
            start_s = float(pts[start])
            end_s = float(pts[end]) if end < len(pts) else float(pts[end - 1]) + (1.0 / fps if fps else 0.0)
        else:
            start_s, end_s = start / fps, end / fps
        rows.append(
            {
                "clip_id": clip_id(video["video_id"], start, end),
                "video_id": video["video_id"],
                "source_uri": video["source_uri"],
                "clip_index": i,
                "start_frame": start,
                "end_frame": end,
                "start_s": start_s,
                "end_s": end_s,
                "duration_s": end_s - start_s,
                "clip_uri": clip_uris.get((start, end)),
                "detector": detector.name,
                "detector_params": params,
                "detect_error": None,
            }
        )
    return rows


def split_partition(
    store: ObjectStore,
    videos: pa.Table,
    config: SplitConfig,
    *,
    mapper: Callable[..., list[Any]] = ray_map,
    progress: Callable[[int, int], None] | None = None,
) -> pa.Table:
    """SCENE_CLIPS rows for the ok videos of ``videos`` (RAW_VIDEOS rows of the run's partitions)."""
    ok = [r for r in videos.to_pylist() if r["status"] == STATUS_OK]
    results = mapper(split_one, ok, kwargs={"store": store, "config": config}, progress=progress)
    rows = []
    for video, res in zip(ok, results):
        if isinstance(res, TaskFailure) or not res:
            # Detection failed on a video that probed fine: one whole-video clip carrying the error, which the
            # quality stage rejects with its reason (never a silent drop, never a crashed partition).
            n = int(video["num_frames"] or 0)
            fps = float(video["fps"] or 0.0)
            error = res.error if isinstance(res, TaskFailure) else "no frames decoded"
            dur = n / fps if fps else 0.0
            res = [
                {
                    "clip_id": clip_id(video["video_id"], 0, n),
                    "video_id": video["video_id"],
                    "source_uri": video["source_uri"],
                    "clip_index": 0,
                    "start_frame": 0,
                    "end_frame": n,
                    "start_s": 0.0,
                    "end_s": dur,
                    "duration_s": dur,
                    "clip_uri": None,
                    "detector": config.detector,
                    "detector_params": json.dumps(config.detector_params, sort_keys=True),
                    "detect_error": error[:500],
                }
            ]
        for r in res:
            r["partition_date"] = video["partition_date"]
        rows.extend(res)
    from videolake.platform.lake import rows_to_table

    return rows_to_table(rows, SCENE_CLIPS)


# ---------------------------------------------------------------------------------------------------- score


def score_one(item: tuple[dict, list[dict]], *, store: ObjectStore, split_config: SplitConfig, quality_config: Any) -> list[dict]:
    """FILTERED_CLIPS rows for one video's clips, from cached frame stats (decoding again only if missing)."""
    from videolake.platform.frames import FrameStats, compute_frame_stats
    from videolake.platform.quality import score_video_clips

    video, clips = item
    params = clips[0]["detector_params"]
    key = stats_key(split_config, video["video_id"], params)
    if store.exists(key):
        stats = FrameStats.from_npz_bytes(store.get_bytes(key))
    else:
        with store.open_local(store.key_from_uri(video["source_uri"])) as path:
            stats = compute_frame_stats(path)
        store.put_bytes(key, stats.to_npz_bytes())
    return score_video_clips(clips, stats, video, quality_config)


def score_partition(
    store: ObjectStore,
    videos: pa.Table,
    clips: pa.Table,
    split_config: SplitConfig,
    quality_config: Any,
    *,
    mapper: Callable[..., list[Any]] = ray_map,
    progress: Callable[[int, int], None] | None = None,
) -> pa.Table:
    """FILTERED_CLIPS rows: one per scene clip, scored per video in parallel, then near-duplicates across videos."""
    from videolake.platform.lake import rows_to_table
    from videolake.platform.quality import assign_duplicates, failed_clip_row

    by_video: dict[str, list[dict]] = {}
    for c in clips.to_pylist():
        by_video.setdefault(c["video_id"], []).append(c)
    video_rows = {v["video_id"]: v for v in videos.to_pylist()}
    items, rows = [], []
    for vid, cs in sorted(by_video.items()):
        if any(c["detect_error"] for c in cs) or vid not in video_rows:
            reason = DETECT_ERROR if vid in video_rows else "video_missing"
            rows.extend(failed_clip_row(c, video_rows.get(vid), reason) for c in cs)
        else:
            items.append((video_rows[vid], sorted(cs, key=lambda c: c["start_frame"])))
    results = mapper(
        score_one, items, kwargs={"store": store, "split_config": split_config, "quality_config": quality_config}, progress=progress
    )
    for (video, cs), res in zip(items, results):
        if isinstance(res, TaskFailure):
            res = [failed_clip_row(c, video, SCORE_ERROR) for c in cs]
        rows.extend(res)
    part = {c["clip_id"]: c["partition_date"] for c in clips.to_pylist()}
    for r in rows:
        r["partition_date"] = part[r["clip_id"]]
    # Near-duplicates are grouped within each partition, so a partition's rows never depend on which other days a
    # backfill run happened to cover.
    by_day: dict[Any, list[dict]] = {}
    for r in rows:
        by_day.setdefault(r["partition_date"], []).append(r)
    rows = [r for day in sorted(by_day) for r in assign_duplicates(by_day[day], quality_config)]
    return rows_to_table(rows, FILTERED_CLIPS)


def _score_stats_for_bench(path: str, probe: Any, result: Any, ranges: list[tuple[int, int]]) -> list[dict]:
    """Quality scores of one detected video, as the filtered_clips stage computes them (for bench_cpu)."""
    from videolake.platform.frames import compute_frame_stats
    from videolake.platform.quality import QualityConfig, score_video_clips

    stats = result.stats if result.stats is not None else compute_frame_stats(path)
    video = {"video_id": "bench", "width": probe.width if probe else None, "height": probe.height if probe else None}
    clips = [
        {"clip_id": clip_id("bench", s, e), "video_id": "bench", "start_frame": s, "end_frame": e,
         "duration_s": (e - s) / (result.fps or 30.0), "clip_index": i}
        for i, (s, e) in enumerate(ranges)
    ]
    return score_video_clips(clips, stats, video, QualityConfig())
