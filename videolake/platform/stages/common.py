"""What the CPU stages share: row statuses, how a stage run is described (``StageRun``) and run (``run_stage``).

The stages themselves are ``ingest`` (raw_videos: hash + probe), ``split`` (scene_clips: detection + clip ranges or
files) and ``score`` (filtered_clips: quality). Each ``*_one`` function handles ONE unit (a landing object or a
video) and is what a Ray Data task runs; the ``*_partitions`` functions describe a stage for
``videolake.platform.runtime.units`` (its units, its per-unit function, the rows that record a failed unit, its
per-partition step) and run it: units stream through Ray Data into checkpoint files, and one Delta transaction
commits the result. Every failure becomes a recorded rejection row, so a bad video never fails a partition.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from videolake.platform.lake.schemas import TABLES
from videolake.platform.runtime.unit_resources import UnitResources
from videolake.platform.runtime.units import unit_key

STATUS_OK = "ok"
STATUS_REJECTED = "rejected"
INGEST_ERROR = "ingest_error"
DETECT_ERROR = "detect_error"
SCORE_ERROR = "score_error"


UNIT_VIDEO_COLUMNS = [
    "video_id",
    "source_uri",
    "fps",
    "num_frames",
    "duration_s",
    "width",
    "height",
    "status",
    "partition_date",
]


def video_units(lake: Any, partitions: Any, tag: str) -> list[dict]:
    """One unit per ok video of the run's partitions (read from raw_videos: a few columns per video)."""
    videos = lake.read_partitions("raw_videos", partitions, columns=UNIT_VIDEO_COLUMNS)
    units = []
    for v in videos.to_pylist():
        if v["status"] != STATUS_OK:
            continue
        day = v.pop("partition_date").isoformat()
        units.append(
            {"unit_key": unit_key(tag, v["video_id"], v["source_uri"]), "partition_date": day, "payload": json.dumps(v)}
        )
    # Longest first: decode cost follows pixels x frames, and a day whose longest video starts last ends with one
    # busy worker and the rest idle (longest-processing-time-first scheduling; Ray Data keeps the input order).
    units.sort(key=lambda u: -_decode_cost(json.loads(u["payload"])))
    return units


def _decode_cost(video: dict) -> float:
    return float(video.get("num_frames") or 0) * float(video.get("width") or 0) * float(video.get("height") or 0)


@dataclass(frozen=True)
class StageRun:
    """What one stage run did: the commit, the unit counts, and each day's figures."""

    write: Any  # lake.WriteResult
    progress: Any  # units.StageProgress
    per_partition: dict[str, dict]
    seconds: float
    extra: dict = field(default_factory=dict)  # stage-specific step figures (e.g. frames decoded)


def run_stage(
    lake,
    table,
    version,
    partitions,
    units,
    process,
    on_error,
    step,
    progress,
    *,
    resources: UnitResources = UnitResources(),
) -> StageRun:
    import time

    from videolake.platform.runtime.units import Checkpoints, UnitTask, commit_stage, run_units

    t0 = time.monotonic()
    checkpoints = Checkpoints(lake.files(), table, version)
    task = UnitTask(checkpoints=checkpoints, schema=TABLES[table], process=process, on_error=on_error)
    prog = run_units(units, task, resources=resources, progress=progress, stage=table)
    keys: dict[str, list[str]] = {}
    for u in units:
        keys.setdefault(u["partition_date"], []).append(u["unit_key"])
    write, per_day = commit_stage(lake, checkpoints, table, partitions, keys, step)
    return StageRun(write=write, progress=prog, per_partition=per_day, seconds=time.monotonic() - t0)


def _config_dict(config: Any) -> Any:
    import dataclasses

    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) and not isinstance(config, type) else config
