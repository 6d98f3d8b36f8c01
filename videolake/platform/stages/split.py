"""The split stage (scene_clips): one unit per ok video; its scene detector finds the cuts (and keeps the frame
statistics of its decode pass for the quality stage), long scenes are cut into near-equal clips, and each clip is a
frame range of the source or (``clip_mode="files"``) its own transcoded object. With TransNetV2 on a cluster with
GPUs, detection runs first on the GPUs for all the day's videos (``_detect_on_gpus``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from videolake.platform.lake.schemas import clip_id, table_spec
from videolake.platform.objectstore import ObjectStore, content_key
from videolake.platform.runtime.failures import PERMANENT
from videolake.platform.runtime.progress import StageReporter
from videolake.platform.runtime.units import FAILURE_CLASS, PartitionStep, stage_version
from videolake.platform.stages.common import StageRun, _config_dict, run_stage, video_units

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitConfig:
    detector: str = "luma"  # registered scene detector name (videolake.platform.scenes.DETECTORS)
    detector_params: dict[str, Any] = field(default_factory=dict)  # overrides of the detector's Config fields
    max_clip_s: float = 20.0  # longer scenes are split into near-equal pieces no longer than this
    clip_mode: str = "ranges"  # "ranges": clips are frame ranges of the source; "files": transcoded clip objects
    clip_prefix: str = "clips"  # object-store prefix of transcoded clips (content-addressed keys below it)
    cache_prefix: str = "cache/framestats"  # object-store prefix of per-video frame statistics (npz)


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
    from videolake.platform.video.frames import FrameStats

    if not stats_uri:
        return None
    try:
        return FrameStats.from_npz_bytes(store.get_bytes(store.key_from_uri(stats_uri))).pts_s
    except (OSError, KeyError, ValueError) as exc:
        log.warning("frame statistics %s unreadable (%s): clip times from frame numbers", stats_uri, exc)
        return None


def _index_pts(path: str, num_frames: int) -> Any:
    """The frames' presentation times from the file's packets (no decode), for a detector that keeps no frame
    statistics; None when they do not number the detector's frames (a count that differs, timestamps missing)."""
    from videolake.platform.video.clips import frame_index

    try:
        index = frame_index(path)
    except ValueError:
        return None
    if index.sequential or index.num_frames != num_frames:
        return None
    return index.pts.astype("float64") * float(index.time_base)


def _content_end(video: dict, pts: Any) -> float | None:
    """Where the video's content ends on the frames' clock: its first frame plus the duration the probe measured
    from the stream's timestamps (the end of its last frame, which may be held by empty repeat chunks)."""
    duration = video.get("duration_s")
    if pts is None or len(pts) == 0 or not duration:
        return None
    return float(min(pts)) + float(duration)


def _detect(detector: Any, path: str) -> tuple[Any, Any]:
    """The detection, and the ``FrameKeeper`` that kept its frames when the detector shares its decode pass (luma)."""
    from videolake.platform.scenes.luma import LumaDetector

    if not isinstance(detector, LumaDetector):
        return detector.detect(path), None
    from videolake.platform.video.clip_pixels import FrameKeeper

    keeper = FrameKeeper()
    return detector.detect(path, tap=keeper), keeper


def split_one(video: dict, *, store: ObjectStore, config: SplitConfig, detected: dict | None = None) -> list[dict]:
    """Scene clips of one ok video (SCENE_CLIPS rows without partition_date). Caches the frame stats.

    ``detected`` (cuts, fps, num_frames, error, stats_uri) is the result of a detection already run elsewhere
    (TransNetV2 on the cluster's GPUs, batched across videos, whose decode tasks stored the frame statistics); the
    detector then does not run here.
    """
    from videolake.platform.scenes import get_detector
    from videolake.platform.scenes.base import SceneResult
    from videolake.platform.scenes.segments import cuts_to_ranges, frame_times

    detector = get_detector(config.detector, **config.detector_params)
    params = detector.params_json()
    key = store.key_from_uri(video["source_uri"])
    # The video's bytes are needed only to detect here or to encode clip files: with cuts detected elsewhere and
    # clips as frame ranges, an S3 source is not downloaded again.
    needs_file = detected is None or config.clip_mode == "files"
    with store.open_local(key) if needs_file else contextlib.nullcontext(None) as path:
        keeper = None
        if detected is None:
            assert path is not None  # opened above: needs_file
            result, keeper = _detect(detector, path)
        elif detected["error"]:
            raise ValueError(detected["error"])
        else:
            result = SceneResult(
                cuts=list(detected["cuts"]),
                fps=float(detected["fps"]),
                num_frames=int(detected["num_frames"]),
                stats=None,
            )
        # The probe's rate (measured from timestamps) before the detector's (a header rate): it only numbers
        # frames where no timestamps are known.
        fps = float(video.get("fps") or result.fps or 0.0)
        stats_uri: str | None = None
        if result.stats is not None:
            pts = result.stats.pts_s
        else:
            stats_uri = (detected or {}).get("stats_uri")
            pts = _stored_pts(store, stats_uri)
            if pts is None and path is not None:
                pts = _index_pts(path, result.num_frames)
        times = frame_times(pts, result.num_frames, _content_end(video, pts), fps)
        ranges = cuts_to_ranges(result.cuts, result.num_frames, fps, config.max_clip_s, times=times)
        if result.stats is not None:
            stats = result.stats
            if keeper is not None:  # the clips' sampled frames, for the score stage's fingerprint (no decode there)
                stats = dataclasses.replace(stats, thumbnails=keeper.sampled(ranges))
            stats_uri = FrameStatsSink(store, config, params)(video["video_id"], stats)
        clip_uris: dict[tuple[int, int], str] = {}
        if config.clip_mode == "files":
            from videolake.platform.video.clips import store_clip

            assert path is not None  # opened above: needs_file
            for start, end in ranges:
                clip_uris[(start, end)] = store_clip(
                    store, path, video["video_id"], start, end, fps, prefix=config.clip_prefix
                )
    rows = []
    for i, (start, end) in enumerate(ranges):
        rows.append(
            scene_row(
                video,
                i,
                start,
                end,
                float(times[start]),
                float(times[end]),
                detector.name,
                params,
                clip_uri=clip_uris.get((start, end)),
                frame_stats_uri=stats_uri,
                max_clip_s=config.max_clip_s,
            )
        )
    return rows


def scene_row(
    video: dict,
    index: int,
    start: int,
    end: int,
    start_s: float,
    end_s: float,
    detector: str,
    params_json: str,
    *,
    clip_uri: str | None = None,
    error: str | None = None,
    frame_stats_uri: str | None = None,
    max_clip_s: float | None = None,
) -> dict:
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
    measured = video.get("duration_s")  # the probe's, from timestamps
    return [
        scene_row(
            video,
            0,
            0,
            n,
            0.0,
            float(measured) if measured else (n / fps if fps else 0.0),
            config.detector,
            json.dumps(config.detector_params, sort_keys=True),
            error=error[:500],
            max_clip_s=config.max_clip_s,
        )
    ]


def _split_payload(video: dict, *, store: ObjectStore, config: SplitConfig) -> list[dict]:
    detected = video.pop("detected", None)
    rows = split_one(video, store=store, config=config, detected=detected)
    return rows or [{**r, FAILURE_CLASS: PERMANENT} for r in detect_error_rows(video, "no frames decoded", config)]


def split_partitions(
    lake: Any,
    store: ObjectStore,
    partitions: Any,
    config: SplitConfig,
    *,
    progress: StageReporter | None = None,
    scalable_gpus: int = 0,
) -> StageRun:
    """scene_clips for the run's partitions: one unit per ok video.

    ``scalable_gpus``: GPUs the Ray cluster's autoscaler can add (a GPU worker group that starts empty); with
    ``detector="transnetv2"`` they are asked for, used for detection, and released."""
    from functools import partial

    from videolake.platform.scenes import get_detector

    # A bad detector name or parameter is the run's configuration, not a video's fault: fail here, at once,
    # instead of recording every video as a detection error. The canonical parameters define the version.
    detector = get_detector(config.detector, **config.detector_params)
    params = detector.params_json()
    # -5: failure rows carry failure_class; -6: clips timed and split by their frames' timestamps
    version = stage_version("scene_clips-6", _config_dict(config), params)
    units = video_units(lake, partitions, "split")
    gpu_videos = _detect_on_gpus(lake, store, config, version, params, units, scalable_gpus)
    step = PartitionStep(summarize=table_spec("scene_clips").figures_of)
    run = run_stage(
        lake,
        "scene_clips",
        version,
        partitions,
        units,
        partial(_split_payload, store=store, config=config),
        lambda video, error: detect_error_rows(video, error, config),
        step,
        progress,
        resources=detector.resources(),
    )
    frames = sum(int(json.loads(u["payload"]).get("num_frames") or 0) for u in units)
    return replace(run, extra={"frames": frames, "videos_detected_on_gpus": gpu_videos})


def _detect_on_gpus(
    lake: Any,
    store: ObjectStore,
    config: SplitConfig,
    version: str,
    params_json: str,
    units: list[dict],
    scalable_gpus: int = 0,
) -> int:
    """TransNetV2 on the cluster's GPUs for the units still to do; their results travel in the unit payloads (the
    units then only cut ranges and write rows). Returns how many videos were detected there (0: no route)."""
    if config.detector != "transnetv2" or not units:
        return 0
    from videolake.platform.captioning.clip_frames import store_opener
    from videolake.platform.runtime.units import Checkpoints, ensure_ray
    from videolake.platform.scenes.transnet_ray import detect_on_cluster_gpus

    ensure_ray()
    checkpoints = Checkpoints(lake.files(), "scene_clips", version)
    finished = {day: checkpoints.finished_keys(day) for day in {u["partition_date"] for u in units}}
    todo = [u for u in units if u["unit_key"] not in finished[u["partition_date"]]]
    payloads = [json.loads(u["payload"]) for u in todo]
    videos = {p["video_id"]: p["source_uri"] for p in payloads}  # one video landed on two days is detected once
    sink = FrameStatsSink(store, config, params_json)
    detected = detect_on_cluster_gpus(
        list(videos.items()),
        config.detector_params,
        open_source=store_opener(lambda _uri: store),
        scalable_gpus=scalable_gpus,
        stats_sink=sink,
    )
    if detected is None:
        return 0
    for u, p in zip(todo, payloads):
        d = detected[p["video_id"]]
        p["detected"] = {
            "cuts": d["cuts"],
            "fps": d["fps"],
            "num_frames": d["num_frames"],
            "error": d["error"],
            "stats_uri": d.get("stats_uri"),
        }
        u["payload"] = json.dumps(p)
    return len(todo)
