"""The score stage (filtered_clips): one unit per video, its clips scored together from the frame statistics their
scene_clips rows name (the video is decoded again only when they name none, or opened when a scorer asks for
pixels); near-duplicates are grouped per partition when the day is finalized."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from videolake.platform.failures import PERMANENT
from videolake.platform.objectstore import ObjectStore
from videolake.platform.progress import StageReporter
from videolake.platform.schemas import FILTERED_CLIPS, clip_id, table_spec
from videolake.platform.stages.common import (
    DETECT_ERROR,
    SCORE_ERROR,
    UNIT_VIDEO_COLUMNS,
    StageRun,
    _config_dict,
    run_stage,
)
from videolake.platform.units import FAILURE_CLASS, PartitionStep, stage_version, unit_key

log = logging.getLogger(__name__)


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
        start, end = int(clip["start_frame"]), int(clip["end_frame"])
        fps = float(self._video.get("fps") or 0.0) or (end - start) / max(float(clip["duration_s"]), 1e-9)
        return _file_pixels(self.path(), fps)(clip, count, max_pixels)


SCORE_CLIP_COLUMNS = [
    "clip_id",
    "video_id",
    "clip_index",
    "start_frame",
    "end_frame",
    "duration_s",
    "detector",
    "detector_params",
    "detect_error",
    "frame_stats_uri",
    "partition_date",
]


def _score_payload(payload: dict, *, store: ObjectStore, quality_config: Any) -> list[dict]:
    from videolake.platform.quality import failed_clip_row

    video, clips = payload["video"], payload["clips"]
    # Scoring again cannot mend these: the split's own retry (its rows' failure_class) recomputes a transient
    # detection, and its new rows are a new unit here (the unit key holds their detect_error).
    if video is None:
        return [{**failed_clip_row(c, None, "video_missing"), FAILURE_CLASS: PERMANENT} for c in clips]
    if any(c["detect_error"] for c in clips):
        return [{**failed_clip_row(c, video, DETECT_ERROR), FAILURE_CLASS: PERMANENT} for c in clips]
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
    progress: StageReporter | None = None,
) -> StageRun:
    """filtered_clips for the run's partitions: one unit per video (its clips scored together), near-duplicates
    grouped per partition at finalize, then, after the commit, judged across days (``judge_across_days``)."""
    from functools import partial

    from videolake.platform.quality import SCORERS, assign_duplicates, check_scorers, scorer_resources

    check_scorers(quality_config)
    # The detection's settings are not part of the version: each unit's key holds its rows' stats URI, which is a
    # content key of (video, detector, parameters), so clips cut by another detection are other units.
    versions = {name: SCORERS.get(name).version for name in quality_config.scorers}
    version = stage_version("filtered_clips-6", {"config": _config_dict(quality_config), "scorer_versions": versions})
    videos = {
        v["video_id"]: v for v in lake.read_partitions("raw_videos", partitions, columns=UNIT_VIDEO_COLUMNS).to_pylist()
    }
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
        units.append(
            {
                "unit_key": unit_key(
                    "score",
                    vid,
                    [c["clip_id"] for c in cs],
                    [c["detect_error"] for c in cs],
                    [c["frame_stats_uri"] for c in cs],
                ),
                "partition_date": day,
                "payload": json.dumps(payload, default=str),
            }
        )
    spec = table_spec("filtered_clips")
    step = PartitionStep(
        reduce=lambda t: _assign_duplicates_table(t, quality_config, assign_duplicates), summarize=spec.figures_of
    )
    run = run_stage(
        lake,
        "filtered_clips",
        version,
        partitions,
        units,
        partial(_score_payload, store=store, quality_config=quality_config),
        _score_error,
        step,
        progress,
        resources=scorer_resources(quality_config),
    )
    if quality_config.dup_max_distance >= 0 or quality_config.semantic_config() is not None:
        run.extra["days_reevaluated"] = judge_across_days(lake, partitions, quality_config, run)
    return run


def judge_across_days(lake: Any, partitions: Any, quality_config: Any, run: StageRun) -> list[str]:
    """Near-duplicates across days after the run's commit (dedup.cross_day.reconcile): the run's days against the
    earlier ones, and the later days they affect; semantic pairs within each judged day that has embeddings. Recomputes the figures of the run's days whose verdicts changed;
    returns the days outside the run whose rows changed (the asset records them)."""
    from videolake.platform.dedup.cross_day import reconcile
    from videolake.platform.lake import PartitionRange

    spec = table_spec("filtered_clips")
    semantic = quality_config.semantic_config()
    pairs = None
    if semantic is not None:
        from videolake.platform.stages.embed import semantic_pairs_of_day

        def pairs(day: str) -> list[tuple[str, str]]:
            found = semantic_pairs_of_day(lake, day, semantic)
            run.extra["semantic_pairs"] = run.extra.get("semantic_pairs", 0) + len(found)
            return found

    near = quality_config.near_dup_config()
    reconciled = reconcile(lake, partitions, near, semantic_pairs=pairs)
    for day in reconciled.changed_days:
        if day in run.per_partition:  # its figures were counted before the other days were compared with it
            run.per_partition[day] = spec.figures_of(lake.read_partitions("filtered_clips", PartitionRange.of([day])))
    run.extra["near_dup_candidates"] = reconciled.candidates
    return reconciled.outside_run


def _assign_duplicates_table(t: pa.Table, quality_config: Any, assign: Callable) -> pa.Table:
    from videolake.platform.lake import rows_to_table

    rows = t.sort_by("clip_id").to_pylist()
    return rows_to_table(assign(rows, quality_config), FILTERED_CLIPS) if rows else t


def _score_stats_for_bench(path: str, probe: Any, result: Any, ranges: list[tuple[int, int]]) -> list[dict]:
    """Quality scores of one detected video, as the filtered_clips stage computes them (for videolake.benchmarks.cpu)."""
    from videolake.platform.frames import compute_frame_stats
    from videolake.platform.quality import QualityConfig, score_video_clips

    stats = result.stats if result.stats is not None else compute_frame_stats(path)
    video = {"video_id": "bench", "width": probe.width if probe else None, "height": probe.height if probe else None}
    clips = [
        {
            "clip_id": clip_id("bench", s, e),
            "video_id": "bench",
            "start_frame": s,
            "end_frame": e,
            "duration_s": (e - s) / (result.fps or 30.0),
            "clip_index": i,
        }
        for i, (s, e) in enumerate(ranges)
    ]
    return score_video_clips(clips, stats, video, QualityConfig(), pixels=_file_pixels(path, result.fps or 30.0))


def _file_pixels(path: str, fps: float) -> Any:
    """A PixelSource over a local file (the bench's; the stage's is SourcePixels, which opens the object first)."""
    from videolake.platform.captioning.base import FrameConfig
    from videolake.platform.captioning.clip_frames import read_frames

    def pixels(clip: dict, count: int, max_pixels: int) -> Any:
        # sample_fps high enough that max_frames decides: exactly ``count`` frames (fewer for a shorter clip)
        config = FrameConfig(sample_fps=1e6, min_frames=count, max_frames=count, max_pixels=max_pixels)
        return read_frames(path, int(clip["start_frame"]), int(clip["end_frame"]), fps, config).frames

    return pixels
