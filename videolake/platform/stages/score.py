"""The score stage (filtered_clips): one unit per video, its clips scored together from the frame statistics their
scene_clips rows name (the video is decoded again only when they name none, or opened when a scorer asks for
pixels); near-duplicates are grouped per partition when the day is finalized."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from videolake.platform.lake.schemas import clip_id, table_spec
from videolake.platform.objectstore import ObjectStore
from videolake.platform.runtime.failures import PERMANENT
from videolake.platform.runtime.progress import StageReporter
from videolake.platform.runtime.units import FAILURE_CLASS, PartitionStep, stage_version, unit_key
from videolake.platform.stages.common import (
    DETECT_ERROR,
    SCORE_ERROR,
    UNIT_VIDEO_COLUMNS,
    StageRun,
    _config_dict,
    run_stage,
)

log = logging.getLogger(__name__)


def score_one(item: tuple[dict, list[dict]], *, store: ObjectStore, quality_config: Any) -> list[dict]:
    """FILTERED_CLIPS rows for one video's clips, from the frame statistics their scene_clips rows name (written by
    the detection that cut them); decoding the video again only when the rows name none (a detector that keeps no
    statistics) or the object is gone. The video itself is opened only then, or when a scorer asks for pixels."""
    from videolake.platform.filters.quality import score_video_clips
    from videolake.platform.video.frames import FrameStats, compute_frame_stats

    video, clips = item
    uri = clips[0].get("frame_stats_uri")
    stats = None
    if uri:
        try:  # one GET; a missing object is the rare case
            stats = FrameStats.from_npz_bytes(store.get_bytes(store.key_from_uri(uri)))
        except FileNotFoundError:
            log.warning("frame statistics %s of video %s are gone: decoding the video again", uri, video["video_id"])
    with contextlib.ExitStack() as stack:
        source = SourcePixels(
            store, video, stack, clips, kept=stats.thumbnails if stats is not None else None, config=quality_config
        )
        if stats is None:
            stats = compute_frame_stats(source.path())
        rows = score_video_clips(clips, stats, video, quality_config, pixels=source)
        return set_aside(rows, clips, source.path)


def set_aside(rows: list[dict], clips: list[dict], path: Callable[[], str]) -> list[dict]:
    """The clips that break a per-clip invariant, set aside with a reason and its detail instead of stopping the
    day at a later gate: a passed clip whose frame range does not decode as the shard encoder will read it is
    rejected ``undecodable`` (the decode error in ``reject_detail``; checked here, before any caption is spent), a
    clip over the bound it was cut under gets the measured duration in ``reject_detail``. An undecodable clip takes
    no part in near-duplicate grouping (it would be a group's kept clip that never reaches a shard)."""
    from videolake.platform.filters.reject_rules import join_rules
    from videolake.platform.video.clips import decode_errors

    by_id = {c["clip_id"]: c for c in clips}
    passed = [r["clip_id"] for r in rows if r["passed"]]
    # one decode of each run of nearby passed clips, as the shard encoder reads them
    ranges = [(int(by_id[c]["start_frame"]), int(by_id[c]["end_frame"])) for c in passed]
    errors = dict(zip(passed, decode_errors(path(), ranges))) if passed else {}
    out = []
    for row in rows:
        clip = by_id[row["clip_id"]]
        reasons = (row["reject_reason"] or "").split(";")
        if "too_long" in reasons and clip.get("max_clip_s"):
            row = {
                **row,
                "reject_detail": f"duration_s {float(clip['duration_s']):.3f} > max_clip_s {float(clip['max_clip_s']):g} "
                "(measured from the frames' timestamps; a frame or scene the split could not cut shorter)",
            }
        if row["passed"]:
            error = errors[row["clip_id"]]
            if error is not None:
                log.warning("clip %s does not decode: %s", row["clip_id"], error)
                row = {
                    **row,
                    "passed": False,
                    "reject_reason": join_rules([*reasons, "undecodable"]),
                    "reject_detail": error,
                    "near_hashes": None,
                }
        out.append(row)
    return out


class SourcePixels:
    """The pixels of one video's clips, for scorers that look at frames (``ClipView.frames``): the video is opened
    (downloaded, on S3) on first use only and once for all its clips, and its clips' sampled frames are decoded in
    one pass (``clip_pixels.VideoPixels``); ``stack`` closes it after the video."""

    def __init__(
        self,
        store: ObjectStore,
        video: dict,
        stack: Any,
        clips: Sequence[dict] = (),
        kept: Any = None,
        config: Any = None,
    ) -> None:
        from videolake.platform.video.clip_pixels import VideoPixels

        self._store, self._video, self._stack = store, video, stack
        self._path: str | None = None
        self._pixels = VideoPixels(self.path, list(clips), kept, requests=_requests(config))

    def path(self) -> str:
        if self._path is None:
            key = self._store.key_from_uri(self._video["source_uri"])
            self._path = self._stack.enter_context(self._store.open_local(key))
        return self._path

    def __call__(self, clip: dict, count: int, max_pixels: int) -> Any:
        return self._pixels(clip, count, max_pixels)


def _requests(config: Any) -> list[tuple[int, int]]:
    """The (count, max_pixels) frame requests of the configured scorers: one pass over the video serves them all."""
    from videolake.platform.filters.quality import QualityConfig, frame_requests

    return [(r.count, r.max_pixels) for r in frame_requests(config or QualityConfig())]


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
    "source_uri",
    "max_clip_s",
    "partition_date",
]


def _score_payload(payload: dict, *, lake: Any, store: ObjectStore, quality_config: Any) -> list[dict]:
    from videolake.platform.filters.quality import failed_clip_row

    video, clips = payload["video"], video_clips(lake, payload["partition_date"], payload["video_id"])
    # Scoring again cannot mend these: the split's own retry (its rows' failure_class) recomputes a transient
    # detection, and its new rows are a new unit here (the unit key holds their detect_error).
    if video is None:
        return [{**failed_clip_row(c, None, "video_missing"), FAILURE_CLASS: PERMANENT} for c in clips]
    if any(c["detect_error"] for c in clips):
        return [{**failed_clip_row(c, video, DETECT_ERROR), FAILURE_CLASS: PERMANENT} for c in clips]
    return score_one((video, clips), store=store, quality_config=quality_config)


def video_clips(lake: Any, day: str, video_id: str) -> list[dict]:
    """The scene_clips rows of one video of one day, in frame order: the unit's worker reads them itself (a
    filtered scan of that day's files), so the driver never holds the clip rows of a run."""
    import pyarrow.compute as pc

    from videolake.platform.lake.table import PartitionRange

    rows = lake.read_partitions(
        "scene_clips", PartitionRange.of([day]), columns=SCORE_CLIP_COLUMNS, where=pc.field("video_id") == video_id
    )
    return rows.drop_columns(["partition_date"]).sort_by("start_frame").to_pylist()


def score_units(lake: Any, partitions: Any) -> list[dict]:
    """One unit per (day, video) of scene_clips, its key from its clips' ids, detect errors and statistics URIs.

    The driver holds only these per-video descriptors: the clip columns the keys need are read as Arrow, sorted,
    and walked one video's slice at a time (a video's few strings become Python objects only while its key is
    hashed); the payload names the video (its raw_videos row, a few columns) and the worker reads its clip rows
    (``video_clips``)."""
    import pyarrow.compute as pc

    clips = lake.read_partitions("scene_clips", partitions, columns=_KEY_COLUMNS)
    videos = lake.read_partitions("raw_videos", partitions, columns=UNIT_VIDEO_COLUMNS)
    # per video (a unit's size): its row of the same day, else of any day of the run
    video_days = zip(videos.column("video_id").to_pylist(), videos.column("partition_date").to_pylist())
    video_row: dict[Any, int] = {}
    for i, (vid, day) in enumerate(video_days):
        video_row[(day, vid)] = i
        video_row.setdefault(vid, i)
    if clips.num_rows == 0:
        return []
    clips = clips.sort_by([("partition_date", "ascending"), ("video_id", "ascending"), ("start_frame", "ascending")])
    day, vid = clips.column("partition_date"), clips.column("video_id")
    same = pc.and_(
        pc.equal(day.slice(1), day.slice(0, len(day) - 1)), pc.equal(vid.slice(1), vid.slice(0, len(vid) - 1))
    )
    starts = [0, *(pc.indices_nonzero(pc.invert(same)).to_numpy() + 1).tolist()]
    units = []
    for a, b in zip(starts, [*starts[1:], clips.num_rows]):
        part = clips.slice(a, b - a)
        video_id = part.column("video_id")[0].as_py()
        key = unit_key(
            "score",
            video_id,
            part.column("clip_id").to_pylist(),
            part.column("detect_error").to_pylist(),
            part.column("frame_stats_uri").to_pylist(),
        )
        at = video_row.get((part.column("partition_date")[0].as_py(), video_id), video_row.get(video_id))
        video = None
        if at is not None:
            video = {k: v for k, v in videos.slice(at, 1).to_pylist()[0].items() if k != "partition_date"}
        date = part.column("partition_date")[0].as_py().isoformat()
        units.append(
            {
                "unit_key": key,
                "partition_date": date,
                "payload": json.dumps({"video": video, "video_id": video_id, "partition_date": date}, default=str),
            }
        )
    return units


_KEY_COLUMNS = ["partition_date", "video_id", "clip_id", "start_frame", "detect_error", "frame_stats_uri"]


def _score_error(payload: dict, error: str, *, lake: Any) -> list[dict]:
    from videolake.platform.filters.quality import failed_clip_row

    clips = video_clips(lake, payload["partition_date"], payload["video_id"])
    return [failed_clip_row(c, payload["video"], SCORE_ERROR) for c in clips]


def score_partitions(
    lake: Any,
    store: ObjectStore,
    partitions: Any,
    quality_config: Any,
    *,
    progress: StageReporter | None = None,
    decided_by: str = "",
) -> StageRun:
    """filtered_clips for the run's partitions: one unit per video (its clips scored together), near-duplicates
    grouped per partition at finalize, then, after the commit, judged across days (``judge_across_days``;
    ``decided_by``, the run's id, is recorded in the judgement's commit)."""
    from functools import partial

    from videolake.platform.filters.quality import SCORERS, assign_duplicates, check_scorers, scorer_resources

    check_scorers(quality_config)
    # The detection's settings are not part of the version: each unit's key holds its rows' stats URI, which is a
    # content key of (video, detector, parameters), so clips cut by another detection are other units.
    versions = {name: SCORERS.get(name).version for name in quality_config.scorers}
    # -7: passed clips checked to decode as the shard encoder reads them; too_long against the clip's cut bound
    version = stage_version("filtered_clips-7", {"config": _config_dict(quality_config), "scorer_versions": versions})
    units = score_units(lake, partitions)
    spec = table_spec("filtered_clips")
    step = PartitionStep(
        decide=partial(_assign_duplicates_table, quality_config=quality_config, assign=assign_duplicates),
        decide_columns=DUPLICATE_DECISION_COLUMNS,
        summarize=spec.figures_of,
    )
    run = run_stage(
        lake,
        "filtered_clips",
        version,
        partitions,
        units,
        partial(_score_payload, lake=lake, store=store, quality_config=quality_config),
        partial(_score_error, lake=lake),
        step,
        progress,
        resources=scorer_resources(quality_config),
    )
    semantic = semantic_rule(lake, quality_config)
    if quality_config.dup_max_distance >= 0 or semantic is not None:
        run.extra["days_reevaluated"] = judge_across_days(
            lake, partitions, quality_config, run, semantic, decided_by=decided_by
        )
    return run


def semantic_rule(lake: Any, quality_config: Any) -> Any:
    """The semantic rule's settings (SemanticDedupConfig) when it can run: switched on (``semantic_eps`` >= 0) and
    the lake has a clip_embeddings table (a code location without an embedding model never writes one); else
    None, and filtered_clips does no semantic work at all."""
    semantic = quality_config.semantic_config()
    if semantic is None or not lake.exists("clip_embeddings"):
        return None
    return semantic


def judge_across_days(
    lake: Any, partitions: Any, quality_config: Any, run: StageRun, semantic: Any = None, *, decided_by: str = ""
) -> list[str]:
    """Duplicates across days after the run's commit (dedup.cross_day.reconcile): the run's days against the
    earlier ones, and the later days they affect. With ``semantic`` (SemanticDedupConfig, from ``semantic_rule``),
    the run's days' embeddings are clustered into the semantic index first, and each judged day's semantic pairs,
    within the day and with earlier days (dedup.semantic_index), join its groups: both are Ray tasks, one per
    day, so this process holds no vectors. Recomputes the figures of the run's days whose verdicts changed;
    returns the days outside the run whose rows changed (the asset records them)."""
    from videolake.platform.dedup.cross_day import reconcile
    from videolake.platform.lake.table import PartitionRange

    spec = table_spec("filtered_clips")
    found = None
    if semantic is not None:
        from videolake.platform.dedup.semantic_index import INDEX_TABLE, index_day, matches_of_day
        from videolake.platform.runtime.units import call_each

        lake.ensure_table(INDEX_TABLE)  # created here once: the day tasks then only overwrite their days
        days = [d.isoformat() for d in partitions.days()]
        run.extra["semantic_indexed"] = sum(call_each(index_day, [(lake, d, semantic) for d in days], on_ray=True))
        pairs_of: dict[str, int] = {}  # by day: a judgement made again asks again

        def found(day: str) -> Any:
            (matches,) = call_each(matches_of_day, [(lake, day, semantic)], on_ray=True)
            pairs_of[day] = len(matches.pairs)
            return matches

    near = quality_config.near_dup_config()
    reconciled = reconcile(lake, partitions, near, semantic=found, decided_by=decided_by)
    if semantic is not None:
        run.extra["semantic_pairs"] = sum(pairs_of.values())
    for day in reconciled.changed_days:
        if day in run.per_partition:  # its figures were counted before the other days were compared with it
            run.per_partition[day] = spec.figures_of(lake.read_partitions("filtered_clips", PartitionRange.of([day])))
    run.extra["near_dup_candidates"] = reconciled.candidates
    if reconciled.clips_of_copies:
        run.extra["clips_of_copies_removed"] = reconciled.clips_of_copies
    if reconciled.indexed_days:
        run.extra["near_dup_index_completed"] = reconciled.indexed_days
    return reconciled.outside_run


# What the day's near-duplicate decision reads and sets (``dedup.cross_day.assign_day``), and what the day's figures
# read: the finalize reads only these of the day's rows at once (``units.PartitionStep.decide``).
DUPLICATE_DECISION_COLUMNS = (
    "clip_id",
    "near_hashes",
    "reject_reason",
    "passed",
    "duplicate_group",
    "duplicate_kept_date",
    "duplicate_kind",
    "partition_date",
)


def _assign_duplicates_table(t: pa.Table, quality_config: Any, assign: Callable) -> pa.Table:
    """The day's duplicate verdicts over its narrow decision columns (the same columns out, clip_id order)."""
    rows = t.sort_by("clip_id").to_pylist()
    return pa.Table.from_pylist(assign(rows, quality_config), schema=t.schema) if rows else t


def _score_stats_for_bench(
    path: str, probe: Any, result: Any, ranges: list[tuple[int, int]], kept: Any = None
) -> list[dict]:
    """Quality scores of one detected video, as the filtered_clips stage computes them (for videolake.benchmarks.cpu)."""
    from videolake.platform.filters.quality import QualityConfig, score_video_clips
    from videolake.platform.video.frames import compute_frame_stats

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
    return score_video_clips(clips, stats, video, QualityConfig(), pixels=_file_pixels(path, clips, kept))


def _file_pixels(path: str, clips: list[dict], kept: Any = None, config: Any = None) -> Any:
    """A PixelSource over a local file (the bench's; the stage's is SourcePixels, which opens the object first),
    one pass serving the frame requests of ``config``'s scorers (the defaults' when None)."""
    from videolake.platform.video.clip_pixels import VideoPixels

    return VideoPixels(path, clips, kept, requests=_requests(config))
