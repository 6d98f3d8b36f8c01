"""clip_embeddings: one embedding per scene clip, for the semantic duplicate rule of filtered_clips.

The same stage model as the CPU stages (``run_stage``): one unit per video (its clips embedded together, the source
opened once), streamed through Ray Data into checkpoints under the embedder's version, one Delta commit for the run.
A unit asks the cluster for the backend's declared resources (``Embedder.replica_resources``: a GPU with
``device="cuda"``), and the model is loaded once per Ray worker process and kept for every unit that worker runs
(Ray Data reuses its workers), as an actor would keep it. A clip that cannot be embedded is a ``failed`` row with
its reason; a video that cannot be opened gives a failed row per clip.

After the commit a Ray task per day reads back the day's vectors (``similarity_of_days``) to report the similarity
distribution NeMo Curator advises looking at before choosing eps (``semantic.similarity_summary``); the step
process itself never holds the vectors. filtered_clips turns them into duplicates (``dedup.semantic_index``)."""

from __future__ import annotations

import contextlib
import json
from functools import partial
from typing import Any

import numpy as np
import pyarrow.compute as pc

from videolake.platform.objectstore.base import ObjectStore
from videolake.platform.runtime.progress import StageReporter
from videolake.platform.runtime.units import PartitionStep, stage_version, unit_key
from videolake.platform.stages.common import StageRun, run_stage

TABLE = "clip_embeddings"
CLIP_COLUMNS = [
    "clip_id",
    "video_id",
    "source_uri",
    "start_frame",
    "end_frame",
    "clip_uri",
    "detect_error",
    "partition_date",
]

# One loaded backend per Ray worker process, by embedding version: the model loads once, not once per unit.
_LOADED: dict[str, Any] = {}


def _embedder(config: Any) -> Any:
    from videolake.platform.embedding.base import embedding_version, get_embedder

    key = embedding_version(config)
    if key not in _LOADED:
        for old in _LOADED.values():  # another version in the same worker: free the old model first
            old.teardown()
        _LOADED.clear()
        embedder = get_embedder(config)
        embedder.setup()
        _LOADED[key] = embedder
    return _LOADED[key]


def embed_one(payload: dict, *, store: ObjectStore, config: Any) -> list[dict]:
    """clip_embeddings rows for one video's clips: frames extracted from the source (opened once), embedded in
    batches of ``config.batch_size``."""
    from videolake.platform.captioning.clip_frames import extract_frames

    video, clips = payload["video"], payload["clips"]
    embedder = _embedder(config)
    rows: list[dict] = []
    with contextlib.ExitStack() as stack:
        path = stack.enter_context(store.open_local(store.key_from_uri(video["source_uri"])))
        for i in range(0, len(clips), config.batch_size):
            part = clips[i : i + config.batch_size]
            batch = {k: np.array([c[k] for c in part], dtype=object) for k in ("clip_id", "video_id", "source_uri")}
            batch["start_frame"] = np.array([c["start_frame"] for c in part], dtype=np.int64)
            batch["end_frame"] = np.array([c["end_frame"] for c in part], dtype=np.int64)
            batch["fps"] = np.array([float(video["fps"] or 0.0)] * len(part), dtype=np.float64)
            batch["clip_uri"] = np.array([c.get("clip_uri") for c in part], dtype=object)
            extracted = extract_frames(batch, frame_config=config.frame_config(), open_source=lambda _uri: path)
            out = embedder(extracted)
            for j, c in enumerate(part):
                vec = out["embedding"][j]
                rows.append(
                    {
                        "clip_id": c["clip_id"],
                        "video_id": c["video_id"],
                        "model": out["model"][j],
                        "status": out["status"][j],
                        "error": out["error"][j],
                        "failure_class": out["failure_class"][j],
                        "embedding": [float(x) for x in vec],
                        "dim": int(out["dim"][j]),
                    }
                )
    return rows


def _embed_error(payload: dict, error: str, *, model: str) -> list[dict]:
    return [
        {
            "clip_id": c["clip_id"],
            "video_id": c["video_id"],
            "model": model,
            "status": "failed",
            "error": f"embed_error: {error}",
            "failure_class": None,
            "embedding": [],
            "dim": 0,
        }
        for c in payload["clips"]
    ]


def embed_partitions(
    lake: Any, store: ObjectStore, partitions: Any, config: Any, *, progress: StageReporter | None = None
) -> StageRun:
    """clip_embeddings for the run's partitions: every scene clip without a detect_error, one unit per video."""
    from videolake.platform.embedding.base import backend_params, embedder_class, embedding_version
    from videolake.platform.lake.schemas import table_spec

    cls = embedder_class(config.backend)
    backend_params(cls, config)  # a bad setting fails the step before any worker starts
    version = stage_version("clip_embeddings-1", embedding_version(config))
    fps = {
        v["video_id"]: v
        for v in lake.read_partitions("raw_videos", partitions, columns=["video_id", "source_uri", "fps"]).to_pylist()
    }
    clips = lake.read_partitions("scene_clips", partitions, columns=CLIP_COLUMNS)
    clips = clips.filter(pc.is_null(clips.column("detect_error")))
    by_video: dict[tuple[str, str], list[dict]] = {}
    for c in clips.to_pylist():
        day = c.pop("partition_date").isoformat()
        by_video.setdefault((day, c["video_id"]), []).append(c)
    units = []
    for (day, vid), cs in sorted(by_video.items()):
        cs.sort(key=lambda c: c["start_frame"])
        video = fps.get(vid) or {"video_id": vid, "source_uri": cs[0]["source_uri"], "fps": None}
        units.append(
            {
                "unit_key": unit_key("embed", vid, [(c["clip_id"], c["clip_uri"]) for c in cs]),
                "partition_date": day,
                "payload": json.dumps({"video": video, "clips": cs}, default=str),
            }
        )
    spec = table_spec(TABLE)
    step = PartitionStep(reduce=lambda t: t.sort_by("clip_id"), summarize=spec.figures_of)
    return run_stage(
        lake,
        TABLE,
        version,
        partitions,
        units,
        partial(embed_one, store=store, config=config),
        partial(_embed_error, model=config.model_label),
        step,
        progress,
        resources=cls.replica_resources(config),
    )


def day_vectors(lake: Any, day: str) -> tuple[list[str], np.ndarray]:
    """The clip ids and L2-normalised vectors (float32, n x dim) of a day's ok embeddings, sorted by clip_id;
    ``([], empty)`` when the table or the day has none. Rows of another dimension than the day's first are left
    out (a model change within a day's rows cannot happen: one version per commit)."""
    from videolake.platform.lake.table import PartitionRange

    if not lake.exists(TABLE):
        return [], np.zeros((0, 0), np.float32)
    t = lake.read_partitions(TABLE, PartitionRange.of([day]), columns=["clip_id", "status", "embedding"])
    t = t.filter(pc.equal(t.column("status"), "ok")).sort_by("clip_id")
    if t.num_rows == 0:
        return [], np.zeros((0, 0), np.float32)
    ids = t.column("clip_id").to_pylist()
    flat = pc.list_flatten(t.column("embedding")).to_numpy(zero_copy_only=False).astype(np.float32)
    return ids, flat.reshape(t.num_rows, -1)


def similarity_of_day(lake: Any, day: str, config: Any) -> dict[str, Any]:
    """The day's similarity distribution (semantic.similarity_summary) for the asset's metadata."""
    from videolake.platform.embedding.semantic import cluster_labels, similarity_summary

    ids, x = day_vectors(lake, day)
    if len(ids) < 2:
        return {"items": len(ids)}
    return similarity_summary(x, cluster_labels(x, config))


def similarity_of_days(lake: Any, days: list[str], config: Any) -> dict[str, dict[str, Any]]:
    """``similarity_of_day`` of each day, each computed in a Ray task (the step process reads no vectors: its
    memory stays flat however many clips a day has)."""
    from videolake.platform.runtime.units import call_each

    return dict(zip(days, call_each(similarity_of_day, [(lake, d, config) for d in days], on_ray=True)))
