"""The CPU stages: ingest (hash + probe), split (scene detection + clip ranges/files), score (quality).

Each ``*_one`` function handles ONE unit (a landing object or a video) and is what a Ray Data task runs; the
``*_partitions`` functions describe a stage for ``videolake.platform.units`` (its units, its per-unit function, the
rows that record a failed unit, its per-partition step) and run it: units stream through Ray Data into checkpoint
files, and one Delta transaction commits the result. Every failure becomes a recorded rejection row, so a bad video
never fails a partition.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import pyarrow as pa

from videolake.platform.objectstore import ObjectInfo, ObjectStore, content_key
from videolake.platform.schemas import FILTERED_CLIPS, TABLES, clip_id
from videolake.platform.figures import table_figures
from videolake.platform.unit_resources import UnitResources
from videolake.platform.units import PartitionStep, stage_version, unit_key

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


def ingest_error_row(payload: dict, error: str) -> list[dict]:
    """The raw_videos row of an object that could not even be hashed: keyed by the object, so it stays unique."""
    import hashlib

    return [{
        "video_id": "err-" + hashlib.sha256(payload["uri"].encode()).hexdigest(),
        "source_uri": payload["uri"],
        "size_bytes": int(payload.get("size") or 0),
        "status": STATUS_REJECTED,
        "reject_reason": INGEST_ERROR,
        "reject_detail": error[:500],
        "duplicate_uris": [],
    }]


def merge_duplicates(day_rows: pa.Table) -> pa.Table:
    """One row per distinct content in a day: identical bytes landed twice are one video (video_id is the hash).

    The first source (by URI) is kept and the others are listed in ``duplicate_uris``, so nothing is dropped
    silently. Runs once per partition at finalize (it needs every row of the day).
    """
    if day_rows.num_rows == 0:
        return day_rows
    day_rows = day_rows.sort_by([("video_id", "ascending"), ("source_uri", "ascending")])
    ids = day_rows.column("video_id").to_pylist()
    uris = day_rows.column("source_uri").to_pylist()
    keep, dups, first = [], {}, {}
    for i, (vid, uri) in enumerate(zip(ids, uris)):
        if vid in first:
            dups.setdefault(first[vid], []).append(uri)
        else:
            first[vid] = i
            keep.append(i)
    out = day_rows.take(keep)
    if dups:
        merged = [sorted(dups.get(i, [])) for i in keep]
        idx = out.column_names.index("duplicate_uris")
        out = out.set_column(idx, out.schema.field("duplicate_uris"), pa.array(merged, out.schema.field("duplicate_uris").type))
    return out


def raw_videos_units(objects_by_day: dict[str, list[ObjectInfo]], store: ObjectStore) -> list[dict]:
    """One unit per landing object."""
    units = []
    for day, objs in sorted(objects_by_day.items()):
        for o in objs:
            payload = {"key": o.key, "uri": o.uri, "size": o.size,
                       **{k: v for k, v in vars(o).items() if k not in ("key", "uri", "size")}}
            # Name, size and listing problem: a re-landed object with other bytes under the same name and size is
            # not detected (stores give no cheap content version here); a changed size or a fixed problem is.
            units.append({"unit_key": unit_key("raw", o.uri, o.size, o.problem),
                          "partition_date": day, "payload": json.dumps(payload, default=str)})
    return units


def _ingest_payload(payload: dict, *, store: ObjectStore, probe_config: Any) -> list[dict]:
    obj = ObjectInfo(**{k: v for k, v in payload.items() if k in ObjectInfo.__dataclass_fields__})
    row = ingest_one(obj, store=store, probe_config=probe_config)
    row.setdefault("duplicate_uris", [])
    row["ingested_at"] = dt.datetime.now(dt.timezone.utc)
    return [row]


def _ingest_error(payload: dict, error: str) -> list[dict]:
    rows = ingest_error_row(payload, error)
    rows[0]["ingested_at"] = dt.datetime.now(dt.timezone.utc)
    return rows


def ingest_partitions(
    lake: Any,
    store: ObjectStore,
    objects_by_day: dict[str, list[ObjectInfo]],
    probe_config: Any,
    partitions: Any,
    *,
    progress: Callable[[Any], None] | None = None,
) -> "StageRun":
    """raw_videos for the run's partitions: one unit per landing object, one row per distinct content per day."""
    from functools import partial

    version = stage_version("raw_videos-2", _config_dict(probe_config))
    units = raw_videos_units(objects_by_day, store)
    step = PartitionStep(reduce=merge_duplicates, summarize=partial(table_figures, "raw_videos"))
    return run_stage(lake, "raw_videos", version, partitions, units,
                     partial(_ingest_payload, store=store, probe_config=probe_config), _ingest_error, step, progress)


# ---------------------------------------------------------------------------------------------------- split


def stats_key(config: SplitConfig, video_id: str, params_json: str) -> str:
    import hashlib

    digest = hashlib.sha256(f"{video_id}|{config.detector}|{params_json}".encode()).hexdigest()
    return content_key(config.cache_prefix, digest, ".npz")


@dataclass(frozen=True)
class FrameStatsSink:
    """Stores one video's frame statistics (npz, content-keyed by video, detector and parameters) and returns their
    URI, which the video's scene_clips rows carry. Picklable: the GPU route's decode tasks call it on Ray workers."""

    store: ObjectStore
    config: SplitConfig
    params_json: str  # the detector's parameters, as in the rows

    def __call__(self, video_id: str, stats: Any) -> str:
        key = stats_key(self.config, video_id, self.params_json)
        self.store.put_bytes(key, stats.to_npz_bytes())
        return self.store.uri(key)


def _stored_pts(store: ObjectStore, stats_uri: str | None) -> Any:
    """Presentation times from stored frame statistics (None when there are none or they cannot be read)."""
    from videolake.platform.frames import FrameStats

    if not stats_uri:
        return None
    try:
        return FrameStats.from_npz_bytes(store.get_bytes(store.key_from_uri(stats_uri))).pts_s
    except (OSError, KeyError, ValueError) as exc:
        log.warning("frame statistics %s unreadable (%s): clip times from frame numbers", stats_uri, exc)
        return None


def split_one(video: dict, *, store: ObjectStore, config: SplitConfig, detected: dict | None = None) -> list[dict]:
    """Scene clips of one ok video (SCENE_CLIPS rows without partition_date). Caches the frame stats.

    ``detected`` (cuts, fps, num_frames, error, stats_uri) is the result of a detection already run elsewhere
    (TransNetV2 on the cluster's GPUs, batched across videos, whose decode tasks stored the frame statistics); the
    detector then does not run here.
    """
    from videolake.platform.scenes import get_detector
    from videolake.platform.scenes.base import SceneResult
    from videolake.platform.scenes.segments import cuts_to_ranges

    detector = get_detector(config.detector, **config.detector_params)
    params = detector.params_json()
    key = store.key_from_uri(video["source_uri"])
    # The video's bytes are needed only to detect here or to encode clip files: with cuts detected elsewhere and
    # clips as frame ranges, an S3 source is not downloaded again.
    needs_file = detected is None or config.clip_mode == "files"
    with (store.open_local(key) if needs_file else contextlib.nullcontext(None)) as path:
        if detected is None:
            result = detector.detect(path)
        elif detected["error"]:
            raise ValueError(detected["error"])
        else:
            result = SceneResult(cuts=list(detected["cuts"]), fps=float(detected["fps"]),
                                 num_frames=int(detected["num_frames"]), stats=None)
        fps = float(result.fps or video["fps"] or 0.0)
        ranges = cuts_to_ranges(result.cuts, result.num_frames, fps, config.max_clip_s)
        if result.stats is not None:
            stats_uri = FrameStatsSink(store, config, params)(video["video_id"], result.stats)
            pts = result.stats.pts_s
        else:
            stats_uri = (detected or {}).get("stats_uri")
            pts = _stored_pts(store, stats_uri)
        clip_uris: dict[tuple[int, int], str] = {}
        if config.clip_mode == "files":
            from videolake.platform.clips import store_clip

            for start, end in ranges:
                clip_uris[(start, end)] = store_clip(store, path, video["video_id"], start, end, fps, prefix=config.clip_prefix)
    rows = []
    for i, (start, end) in enumerate(ranges):
        if pts is not None and end <= len(pts):
            start_s = float(pts[start])
            end_s = float(pts[end]) if end < len(pts) else float(pts[end - 1]) + (1.0 / fps if fps else 0.0)
        else:
            start_s, end_s = start / fps, end / fps
        rows.append(scene_row(video, i, start, end, start_s, end_s, detector.name, params,
                              clip_uri=clip_uris.get((start, end)), frame_stats_uri=stats_uri,
                              max_clip_s=config.max_clip_s))
    return rows


def scene_row(video: dict, index: int, start: int, end: int, start_s: float, end_s: float, detector: str,
              params_json: str, *, clip_uri: str | None = None, error: str | None = None,
              frame_stats_uri: str | None = None, max_clip_s: float | None = None) -> dict:
    """One scene_clips row (without partition_date). The row names the detector, its parameters, the clip-length
    bound it was cut under and where the frame statistics of its detection are, so later stages and gates need no
    copy of scene_clips' run config."""
    return {
        "clip_id": clip_id(video["video_id"], start, end),
        "video_id": video["video_id"],
        "source_uri": video["source_uri"],
        "clip_index": index,
        "start_frame": start,
        "end_frame": end,
        "start_s": start_s,
        "end_s": end_s,
        "duration_s": end_s - start_s,
        "clip_uri": clip_uri,
        "detector": detector,
        "detector_params": params_json,
        "detect_error": error,
        "max_clip_s": max_clip_s,
        "frame_stats_uri": frame_stats_uri,
    }


def detect_error_rows(video: dict, error: str, config: SplitConfig) -> list[dict]:
    """Detection failed on a video that probed fine: one whole-video clip carrying the error, which the quality
    stage rejects with its reason (never a silent drop, never a crashed partition)."""
    n = int(video["num_frames"] or 0)
    fps = float(video["fps"] or 0.0)
    return [scene_row(video, 0, 0, n, 0.0, n / fps if fps else 0.0, config.detector,
                      json.dumps(config.detector_params, sort_keys=True), error=error[:500],
                      max_clip_s=config.max_clip_s)]


def _split_payload(video: dict, *, store: ObjectStore, config: SplitConfig) -> list[dict]:
    detected = video.pop("detected", None)
    rows = split_one(video, store=store, config=config, detected=detected)
    return rows or detect_error_rows(video, "no frames decoded", config)


UNIT_VIDEO_COLUMNS = ["video_id", "source_uri", "fps", "num_frames", "width", "height", "status", "partition_date"]


def video_units(lake: Any, partitions: Any, tag: str) -> list[dict]:
    """One unit per ok video of the run's partitions (read from raw_videos: a few columns per video)."""
    videos = lake.read_partitions("raw_videos", partitions, columns=UNIT_VIDEO_COLUMNS)
    units = []
    for v in videos.to_pylist():
        if v["status"] != STATUS_OK:
            continue
        day = v.pop("partition_date").isoformat()
        units.append({"unit_key": unit_key(tag, v["video_id"], v["source_uri"]), "partition_date": day,
                      "payload": json.dumps(v)})
    # Longest first: decode cost follows pixels x frames, and a day whose longest video starts last ends with one
    # busy worker and the rest idle (longest-processing-time-first scheduling; Ray Data keeps the input order).
    units.sort(key=lambda u: -_decode_cost(json.loads(u["payload"])))
    return units


def _decode_cost(video: dict) -> float:
    return float(video.get("num_frames") or 0) * float(video.get("width") or 0) * float(video.get("height") or 0)


def split_partitions(
    lake: Any,
    store: ObjectStore,
    partitions: Any,
    config: SplitConfig,
    *,
    progress: Callable[[Any], None] | None = None,
    scalable_gpus: int = 0,
) -> "StageRun":
    """scene_clips for the run's partitions: one unit per ok video.

    ``scalable_gpus``: GPUs the Ray cluster's autoscaler can add (a GPU worker group that starts empty); with
    ``detector="transnetv2"`` they are asked for, used for detection, and released."""
    from functools import partial

    from videolake.platform.scenes import get_detector

    # A bad detector name or parameter is the run's configuration, not a video's fault: fail here, at once,
    # instead of recording every video as a detection error. The canonical parameters define the version.
    detector = get_detector(config.detector, **config.detector_params)
    params = detector.params_json()
    version = stage_version("scene_clips-4", _config_dict(config), params)  # -4: rows name stats and max_clip_s
    units = video_units(lake, partitions, "split")
    gpu_videos = _detect_on_gpus(lake, store, config, version, params, units, scalable_gpus)
    step = PartitionStep(summarize=partial(table_figures, "scene_clips"))
    run = run_stage(lake, "scene_clips", version, partitions, units,
                    partial(_split_payload, store=store, config=config),
                    lambda video, error: detect_error_rows(video, error, config), step, progress,
                    resources=detector.resources())
    frames = sum(int(json.loads(u["payload"]).get("num_frames") or 0) for u in units)
    return replace(run, extra={"frames": frames, "videos_detected_on_gpus": gpu_videos})


def _detect_on_gpus(lake: Any, store: ObjectStore, config: SplitConfig, version: str, params_json: str,
                    units: list[dict], scalable_gpus: int = 0) -> int:
    """TransNetV2 on the cluster's GPUs for the units still to do; their results travel in the unit payloads (the
    units then only cut ranges and write rows). Returns how many videos were detected there (0: no route)."""
    if config.detector != "transnetv2" or not units:
        return 0
    from videolake.platform.captioning.clip_frames import store_opener
    from videolake.platform.scenes.transnet_ray import detect_on_cluster_gpus
    from videolake.platform.units import Checkpoints, ensure_ray

    ensure_ray()
    checkpoints = Checkpoints(lake.files(), "scene_clips", version)
    finished = {day: checkpoints.finished_keys(day) for day in {u["partition_date"] for u in units}}
    todo = [u for u in units if u["unit_key"] not in finished[u["partition_date"]]]
    payloads = [json.loads(u["payload"]) for u in todo]
    videos = {p["video_id"]: p["source_uri"] for p in payloads}  # one video landed on two days is detected once
    sink = FrameStatsSink(store, config, params_json)
    detected = detect_on_cluster_gpus(list(videos.items()), config.detector_params,
                                      open_source=store_opener(lambda _uri: store), scalable_gpus=scalable_gpus,
                                      stats_sink=sink)
    if detected is None:
        return 0
    for u, p in zip(todo, payloads):
        d = detected[p["video_id"]]
        p["detected"] = {"cuts": d["cuts"], "fps": d["fps"], "num_frames": d["num_frames"], "error": d["error"],
                         "stats_uri": d.get("stats_uri")}
        u["payload"] = json.dumps(p)
    return len(todo)


# ---------------------------------------------------------------------------------------------------- score


def score_one(item: tuple[dict, list[dict]], *, store: ObjectStore, quality_config: Any) -> list[dict]:
    """FILTERED_CLIPS rows for one video's clips, from the frame statistics their scene_clips rows name (written by
    the detection that cut them); decoding the video again only when the rows name none (a detector that keeps no
    statistics) or the object is gone. The video itself is opened only then, or when a scorer asks for pixels."""
    from videolake.platform.frames import FrameStats, compute_frame_stats
    from videolake.platform.quality import score_video_clips

    video, clips = item
    uri = clips[0].get("frame_stats_uri")
    stats = None
    if uri:
        try:  # one GET; a missing object is the rare case
            stats = FrameStats.from_npz_bytes(store.get_bytes(store.key_from_uri(uri)))
        except FileNotFoundError:
            log.warning("frame statistics %s of video %s are gone: decoding the video again", uri, video["video_id"])
    with contextlib.ExitStack() as stack:
        source = SourcePixels(store, video, stack)
        if stats is None:
            stats = compute_frame_stats(source.path())
        return score_video_clips(clips, stats, video, quality_config, pixels=source)


class SourcePixels:
    """The pixels of one video's clips, for scorers that look at frames (``ClipView.frames``): the video is opened
    (downloaded, on S3) on first use only and once for all its clips; ``stack`` closes it after the video."""

    def __init__(self, store: ObjectStore, video: dict, stack: Any) -> None:
        self._store, self._video, self._stack = store, video, stack
        self._path: str | None = None

    def path(self) -> str:
        if self._path is None:
            key = self._store.key_from_uri(self._video["source_uri"])
            self._path = self._stack.enter_context(self._store.open_local(key))
        return self._path

    def __call__(self, clip: dict, count: int, max_pixels: int) -> Any:
        from videolake.platform.captioning.base import FrameConfig
        from videolake.platform.captioning.clip_frames import read_frames

        start, end = int(clip["start_frame"]), int(clip["end_frame"])
        fps = float(self._video.get("fps") or 0.0) or (end - start) / max(float(clip["duration_s"]), 1e-9)
        # sample_fps high enough that max_frames decides: exactly ``count`` frames (fewer for a shorter clip)
        config = FrameConfig(sample_fps=1e6, min_frames=count, max_frames=count, max_pixels=max_pixels)
        return read_frames(self.path(), start, end, fps, config).frames


SCORE_CLIP_COLUMNS = ["clip_id", "video_id", "clip_index", "start_frame", "end_frame", "duration_s", "detector",
                      "detector_params", "detect_error", "frame_stats_uri", "partition_date"]


def _score_payload(payload: dict, *, store: ObjectStore, quality_config: Any) -> list[dict]:
    from videolake.platform.quality import failed_clip_row

    video, clips = payload["video"], payload["clips"]
    if video is None:
        return [failed_clip_row(c, None, "video_missing") for c in clips]
    if any(c["detect_error"] for c in clips):
        return [failed_clip_row(c, video, DETECT_ERROR) for c in clips]
    return score_one((video, clips), store=store, quality_config=quality_config)


def _score_error(payload: dict, error: str) -> list[dict]:
    from videolake.platform.quality import failed_clip_row

    return [failed_clip_row(c, payload["video"], SCORE_ERROR) for c in payload["clips"]]


def score_partitions(
    lake: Any,
    store: ObjectStore,
    partitions: Any,
    quality_config: Any,
    *,
    progress: Callable[[Any], None] | None = None,
) -> "StageRun":
    """filtered_clips for the run's partitions: one unit per video (its clips scored together), then
    near-duplicates grouped per partition at finalize, so a day's rows never depend on the other days of a run."""
    from functools import partial

    from videolake.platform.quality import SCORERS, assign_duplicates, check_scorers, scorer_resources

    check_scorers(quality_config)
    # The detection's settings are not part of the version: each unit's key holds its rows' stats URI, which is a
    # content key of (video, detector, parameters), so clips cut by another detection are other units.
    versions = {name: SCORERS.get(name).version for name in quality_config.scorers}
    version = stage_version("filtered_clips-4", {"config": _config_dict(quality_config), "scorer_versions": versions})
    videos = {v["video_id"]: v for v in lake.read_partitions("raw_videos", partitions, columns=UNIT_VIDEO_COLUMNS).to_pylist()}
    by_video: dict[tuple[str, str], list[dict]] = {}
    for c in lake.read_partitions("scene_clips", partitions, columns=SCORE_CLIP_COLUMNS).to_pylist():
        day = c.pop("partition_date").isoformat()
        by_video.setdefault((day, c["video_id"]), []).append(c)
    units = []
    for (day, vid), cs in sorted(by_video.items()):
        cs.sort(key=lambda c: c["start_frame"])
        video = videos.get(vid)
        if video is not None:
            video = {k: v for k, v in video.items() if k != "partition_date"}
        payload = {"video": video, "clips": cs}
        units.append({"unit_key": unit_key("score", vid, [c["clip_id"] for c in cs], [c["detect_error"] for c in cs],
                                           [c["frame_stats_uri"] for c in cs]),
                      "partition_date": day, "payload": json.dumps(payload, default=str)})
    step = PartitionStep(reduce=lambda t: _assign_duplicates_table(t, quality_config, assign_duplicates),
                         summarize=partial(table_figures, "filtered_clips"))
    return run_stage(lake, "filtered_clips", version, partitions, units,
                     partial(_score_payload, store=store, quality_config=quality_config),
                     _score_error, step, progress, resources=scorer_resources(quality_config))


def _assign_duplicates_table(t: pa.Table, quality_config: Any, assign: Callable) -> pa.Table:
    from videolake.platform.lake import rows_to_table

    rows = t.sort_by("clip_id").to_pylist()
    return rows_to_table(assign(rows, quality_config), FILTERED_CLIPS) if rows else t


# ---------------------------------------------------------------------------------------------------- shared


@dataclass(frozen=True)
class StageRun:
    """What one stage run did: the commit, the unit counts, and each day's figures."""

    write: Any  # lake.WriteResult
    progress: Any  # units.StageProgress
    per_partition: dict[str, dict]
    seconds: float
    extra: dict = field(default_factory=dict)  # stage-specific step figures (e.g. frames decoded)


def run_stage(lake, table, version, partitions, units, process, on_error, step, progress, *,
              resources: UnitResources = UnitResources()) -> StageRun:
    import time

    from videolake.platform.units import Checkpoints, UnitTask, commit_stage, run_units

    t0 = time.monotonic()
    checkpoints = Checkpoints(lake.files(), table, version)
    task = UnitTask(checkpoints=checkpoints, schema=TABLES[table], process=process, on_error=on_error)
    prog = run_units(units, task, resources=resources, progress=progress)
    keys: dict[str, list[str]] = {}
    for u in units:
        keys.setdefault(u["partition_date"], []).append(u["unit_key"])
    write, per_day = commit_stage(lake, checkpoints, table, partitions, keys, step)
    return StageRun(write=write, progress=prog, per_partition=per_day, seconds=time.monotonic() - t0)


def _config_dict(config: Any) -> Any:
    import dataclasses

    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config


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
