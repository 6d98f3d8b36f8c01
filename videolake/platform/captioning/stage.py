"""The caption stage as the platform runs it: streaming, checkpointed per batch, committed in one transaction.

    plan     (one Ray task per day)   passed clips of the day - clips already captioned under this code version
                                      -> "todo" files of at most ``unit_clips`` clips, and the day's wanted list
    pipeline (Ray Data)               todo file -> frame extraction (CPU tasks) -> captioner actors
                                      (ActorPoolStrategy); each actor writes every batch it captions as a
                                      checkpoint piece and returns one summary row (never the captions)
    finalize (one Ray task per day)   pieces of the day ∩ wanted clips -> the table's data files (+ a failed row
                                      for any wanted clip without a caption: nothing goes missing)
    commit   (the step)               ONE Delta transaction: add the files, remove the previous files of the
                                      day's rows of THIS caption track (``Lake.commit_slice``)

Caption tracks: each track (a named captioner setting, ``CaptionerConfig.track``) has its own checkpoints
(``checkpoint_table``) and its own rows of clip_captions; every data file holds one track, and a run replaces only
its own (day, track) files, so re-running one track never touches another, and two tracks committing the same day
at the same time both keep their rows (the commit is optimistic: decided again on a fresh read if another came
first). A second-pass track (``source_track``, input_mode "text") reads the source track's ok captions instead of
frames.

The unit of resume is the batch: a retried or re-run step captions only the clips no piece holds yet, and again
the clips whose only rows are transient failures (``failure_class``: a timeout, an endpoint's 5xx, a lost actor);
an ok row or a permanent failure (an empty output) is reused. Pieces live
under the captioner's code version (model, revision, prompt, sampling, frames), so changing any of these reuses
nothing. The step process holds one summary per batch and the per-day file lists, never a row of the table.

Goodput: every actor keeps a ledger file (started, last seen, GPUs) under the run's partition range, across all
attempts of that range until it commits. goodput = accelerator-seconds spent generating captions that were
committed ÷ accelerator-seconds all actors of all attempts held (model load, idle, and batches lost to a failure
included). On CPU actors count as 1 accelerator each.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.captioning.base import (
    DEFAULT_TRACK,
    METRIC_COLUMNS,
    STATUS_FAILED,
    STATUS_OK,
    CaptionerConfig,
    captioner_class,
    code_version,
)
from videolake.platform.lake.schemas import CLIP_CAPTIONS, PARTITION_COLUMN, table_spec
from videolake.platform.lake.table import Lake, PartitionRange, conform
from videolake.platform.runtime import telemetry
from videolake.platform.runtime.failures import PERMANENT, TRANSIENT
from videolake.platform.runtime.units import Checkpoints, StageProgress, call_each, ensure_ray, file_stats

log = logging.getLogger(__name__)

TABLE = "clip_captions"
TRACK_COLUMN = "caption_track"
PIECE_PREFIX = "piece-"
TODO_DIR = "_todo"
INPUT_COLUMNS = ["clip_id", "video_id", "source_uri", "start_frame", "end_frame", "fps", "clip_uri", PARTITION_COLUMN]
LOST_ROW_ERROR = "no caption row came back from the caption stage (actor lost on every attempt)"


def stage_code_version(config: CaptionerConfig) -> str:
    # cap2: pieces carry the track and the provenance columns (a cap- piece has neither: never reused)
    return "cap2-" + code_version(config)


def checkpoint_table(config: CaptionerConfig) -> str:
    """The name a track's checkpoints live under: ``clip_captions`` for the default track (its checkpoints stay
    where they were), ``clip_captions__<track>`` for another, so no track clears or reuses another's pieces."""
    return TABLE if config.track == DEFAULT_TRACK else f"{TABLE}__{config.track}"


def migrate_untracked(lake: Lake) -> bool:
    """Give a clip_captions table written before caption tracks its ``caption_track`` column: every row is the
    default track's. Delta cannot add a required column to a table, so the table is rewritten once (one overwrite
    commit, its history kept); True when it was."""
    if not lake.exists(TABLE) or TRACK_COLUMN in lake.column_names(TABLE):
        return False
    from deltalake import write_deltalake

    old = lake._dataset(TABLE, None).to_table()
    old = old.append_column(TRACK_COLUMN, pa.array([DEFAULT_TRACK] * old.num_rows, pa.string()))
    log.warning("clip_captions: adding caption_track (%s) to %d rows of an older table", DEFAULT_TRACK, old.num_rows)
    write_deltalake(
        lake.table_uri(TABLE),
        conform(old, CLIP_CAPTIONS),
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=[PARTITION_COLUMN],
        storage_options=lake._options(),
    )
    return True


def track_rows(lake: Lake, rng: PartitionRange, track: str, columns: list[str] | None = None) -> pa.Table:
    """The rows of caption track ``track`` in the range (a filtered scan)."""
    import pyarrow.dataset as pads

    return lake.read_partitions(TABLE, rng, columns=columns, where=pads.field(TRACK_COLUMN) == track)


def actor_env(config: CaptionerConfig) -> dict[str, str]:
    """Environment for the captioner actors: the engine's settings (for backends that run one, see
    ``CaptionerBackend.needs_engine_env``), plus the endpoint variables for the openai backend. It reaches the
    actors through runtime_env: a KubeRay worker does not inherit the driver's environment."""
    if not captioner_class(config.backend).needs_engine_env:
        return {}
    env = {k: str(v) for k, v in dict(config.env).items()}
    if config.backend == "openai" and config.endpoint.forward_env:
        # Visible to anyone with Ray dashboard access: on KubeRay mount the secret into the worker pods instead
        # and set endpoint.forward_env=False.
        for name in (config.endpoint.base_url_env, config.endpoint.api_key_env):
            if os.environ.get(name):
                env[name] = os.environ[name]
    return env


# ------------------------------------------------------------------------------------------------------- plan


def clips_to_caption(lake: Lake, rng: PartitionRange, source_track: str | None = None) -> pa.Table:
    """Passed clips of the range joined with their frame ranges (scene_clips) and frame rate: the clip's own, its
    frames over its measured duration (``clips.clip_rate``; the video's, raw_videos, where none is known); with
    ``source_track`` (a second pass), also each clip's ok caption in that track (``source_caption``)."""
    from videolake.platform.video.clips import clip_rate

    filtered = lake.read_partitions("filtered_clips", rng, columns=["clip_id", "passed"])
    passed = filtered.filter(pc.equal(filtered.column("passed"), True)).select(["clip_id"])
    clips = lake.read_partitions(
        "scene_clips",
        rng,
        columns=[
            "clip_id",
            "video_id",
            "source_uri",
            "start_frame",
            "end_frame",
            "duration_s",
            "clip_uri",
            PARTITION_COLUMN,
        ],
    )
    videos = lake.read_partitions("raw_videos", rng, columns=["video_id", "fps"])
    joined = passed.join(clips, "clip_id", join_type="inner").join(videos, "video_id", join_type="left outer")
    rates = [
        clip_rate(s, e, d, f)
        for s, e, d, f in zip(
            joined.column("start_frame").to_pylist(),
            joined.column("end_frame").to_pylist(),
            joined.column("duration_s").to_pylist(),
            joined.column("fps").to_pylist(),
        )
    ]
    joined = joined.set_column(joined.schema.get_field_index("fps"), "fps", pa.array(rates, pa.float64()))
    joined = joined.sort_by("clip_id").select(INPUT_COLUMNS)
    return joined if source_track is None else with_source_captions(lake, rng, joined, source_track)


def with_source_captions(lake: Lake, rng: PartitionRange, inputs: pa.Table, source_track: str) -> pa.Table:
    """A second pass's inputs: each clip with its ok caption in ``source_track`` (``source_caption``; null where
    that track has none: the clip becomes a failed row that says so)."""
    src = track_rows(lake, rng, source_track, columns=["clip_id", "status", "caption"])
    src = src.filter(pc.equal(src.column("status"), STATUS_OK)).select(["clip_id", "caption"])
    src = src.rename_columns(["clip_id", "source_caption"])
    return inputs.join(src, "clip_id", join_type="left outer").sort_by("clip_id")


def _pieces(checkpoints: Checkpoints, day: str) -> list[str]:
    return sorted(
        e.path
        for e in checkpoints.files.list(checkpoints.day_dir(day), recursive=False)
        if e.path.rsplit("/", 1)[-1].startswith(PIECE_PREFIX)
    )


def plan_day(
    lake: Lake,
    checkpoints: Checkpoints,
    day: str,
    unit_clips: int,
    token: str,
    inputs: pa.Table | None = None,
    source_track: str | None = None,
) -> dict:
    """Runs on a worker: which clips of ``day`` still need a caption; writes them as todo files.

    ``inputs``: the day's clips to caption (default: read from the lake). Returns counts and the todo paths.
    """
    files = checkpoints.files
    if inputs is None:
        inputs = clips_to_caption(lake, PartitionRange.of([day]), source_track)
    elif source_track is not None and "source_caption" not in inputs.column_names:
        inputs = with_source_captions(lake, PartitionRange.of([day]), inputs, source_track)
    wanted = inputs.column("clip_id").to_pylist()
    wanted_set = set(wanted)
    done: set[str] = set()  # clips with an ok row or a permanent failure: reused
    transient: set[str] = set()  # clips whose rows are all transient failures: captioned again
    pieces_reused = 0
    for p in _pieces(checkpoints, day):
        piece = files.read_parquet(p, columns=["clip_id", "failure_class"])
        classes = piece.column("failure_class").to_pylist()
        ids = piece.column("clip_id").to_pylist()
        kept = wanted_set.intersection(c for c, k in zip(ids, classes) if k != TRANSIENT)
        if kept:
            pieces_reused += 1
            done |= kept
        transient |= wanted_set.intersection(c for c, k in zip(ids, classes) if k == TRANSIENT)
    retried = transient - done
    if pieces_reused:
        telemetry.record(telemetry.UNITS, pieces_reused, stage=TABLE, outcome="reused", partition_date=day)
    todo_mask = pa.array([c not in done for c in wanted], pa.bool_())
    todo = inputs.filter(todo_mask)
    day_dir = checkpoints.day_dir(day)
    wanted_path = f"{day_dir}/{TODO_DIR}/wanted-{token}.parquet"
    files.write_parquet(wanted_path, inputs.select(["clip_id", "video_id", "source_uri"]))
    paths, units_retried = [], 0
    for i in range(0, todo.num_rows, max(unit_clips, 1)):
        path = f"{day_dir}/{TODO_DIR}/todo-{token}-{i // max(unit_clips, 1):06d}.parquet"
        unit = todo.slice(i, unit_clips)
        files.write_parquet(path, _plain_inputs(unit))
        paths.append(path)
        units_retried += bool(retried.intersection(unit.column("clip_id").to_pylist()))
    return {
        "day": day,
        "wanted": len(wanted),
        "clips_reused": len(done),
        "pieces_reused": pieces_reused,
        "clips_retried": len(retried),
        "units_retried": units_retried,
        "todo_paths": paths,
        "wanted_path": wanted_path,
    }


def _plain_inputs(t: pa.Table) -> pa.Table:
    """Only what extraction needs, in plain types (the date as text: it names the piece's day)."""
    extra = (
        {"source_caption": t.column("source_caption").cast(pa.string())} if "source_caption" in t.column_names else {}
    )
    return pa.table(
        {
            **extra,
            "clip_id": t.column("clip_id").cast(pa.string()),
            "video_id": t.column("video_id").cast(pa.string()),
            "source_uri": t.column("source_uri").cast(pa.string()),
            "start_frame": t.column("start_frame").cast(pa.int64()),
            "end_frame": t.column("end_frame").cast(pa.int64()),
            "fps": t.column("fps").cast(pa.float64()),
            "clip_uri": t.column("clip_uri").cast(pa.string()),
            "day": t.column(PARTITION_COLUMN).cast(pa.string()),
        }
    )


# --------------------------------------------------------------------------------------------------- pipeline


@dataclass(frozen=True)
class LoadAndExtract:
    """Ray Data task: one todo file in, its clips with sampled frames out (no decode in ``none`` input mode)."""

    checkpoints: Checkpoints
    config: CaptionerConfig
    open_source: Any = None
    frame_cache: Any = None  # clip_frames.FrameCache: pre-decoded frames (benchmarks), else decode

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from videolake.platform.captioning.clip_frames import extract_frames

        tables = [self.checkpoints.files.read_parquet(str(p)) for p in batch["path"]]
        t = pa.concat_tables(tables)
        rows = {c: t.column(c).to_numpy(zero_copy_only=False) for c in t.column_names}
        if self.config.input_mode in ("none", "text"):
            n = t.num_rows  # no frames decoded, none shipped to the actors
            out = {
                "clip_id": rows["clip_id"],
                "video_id": rows["video_id"],
                "source_uri": rows["source_uri"],
                "frame_error": np.array([""] * n, dtype=object),
                "frame_error_class": np.array([""] * n, dtype=object),
                "num_frames": np.zeros(n, np.int32),
            }
            if self.config.input_mode == "text":  # a second pass: the source track's caption is the input
                source = [c if isinstance(c, str) and c.strip() else "" for c in t.column("source_caption").to_pylist()]
                out["source_caption"] = np.array(source, dtype=object)
                missing = f"source track {self.config.source_track!r} has no ok caption of this clip"
                out["frame_error"] = np.array(["" if c else missing for c in source], dtype=object)
                out["frame_error_class"] = np.array(["" if c else PERMANENT for c in source], dtype=object)
        elif self.frame_cache is not None:
            out = self.frame_cache.extract(rows, open_source=self.open_source)
        else:
            out = extract_frames(
                rows, frame_config=self.config.frames, input_mode=self.config.input_mode, open_source=self.open_source
            )
        out["day"] = rows["day"]
        return out


class CaptionWriterActor:
    """A captioner replica that checkpoints: caption a batch, write it as a piece, return one summary row.

    Fractional CPUs for the actors and the extraction tasks on purpose: whole CPUs per actor starve the extraction
    tasks on small nodes (2 actors x 1 CPU on 2 cores deadlocks Ray Data).

    setup() (the model load) happens in the constructor, once per actor. The ledger file records how long this
    actor has held its accelerator, for goodput across attempts.
    """

    def __init__(
        self,
        config: CaptionerConfig,
        checkpoints: Checkpoints,
        ledger_dir: str,
        store: Any | None = None,
        largest_batch: int | None = None,
    ):
        from videolake.platform.captioning.base import get_captioner

        logging.basicConfig(level=logging.INFO)
        self.config = config
        self.checkpoints = checkpoints
        self.ledger_path = f"{ledger_dir}/{uuid.uuid4().hex}.json"
        self.started_at = time.time()
        self._accelerators = self.config.num_gpus_per_actor or 1.0
        self._held_until = self.started_at  # accelerator time up to here is in the held-seconds counter
        self._ledger()
        self.backend = get_captioner(config, store=store)
        self.backend.setup(largest_batch=largest_batch)
        self._ledger()

    def _ledger(self) -> None:
        doc = {
            "started_at": self.started_at,
            "last_at": time.time(),
            "accelerators": self._accelerators,
        }
        tbl = pa.table({k: [v] for k, v in doc.items()})
        self.checkpoints.files.write_parquet(self.ledger_path, tbl)
        # the same held time, live: what the ledger gained since its last write
        telemetry.record(telemetry.HELD_SECONDS, (doc["last_at"] - self._held_until) * doc["accelerators"])
        self._held_until = doc["last_at"]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._ledger()
        t0 = time.perf_counter()
        days = np.asarray(batch["day"], dtype=object)
        rows = self.backend(batch)
        # columns that may be all None (failure_class in a batch without failures) or nested (timestamps, fields):
        # typed as the table's, so pieces always concatenate and compare
        out = pa.table({k: pa.array(list(v) if k in _TYPED else v, _TYPED.get(k)) for k, v in rows.items()})
        summaries, pieces = [], []
        for day in sorted(set(days.tolist())):
            mask = pa.array(days == day)
            piece = out.filter(mask)
            pieces.append(piece)
            name = hashlib.sha256("|".join(sorted(piece.column("clip_id").to_pylist())).encode()).hexdigest()[:32]
            path = f"{self.checkpoints.day_dir(day)}/{PIECE_PREFIX}{name}.parquet"
            self.checkpoints.files.write_parquet(path, piece)
            summaries.append(_summary(piece, day))
        seconds = time.perf_counter() - t0
        for s, piece in zip(summaries, pieces):
            telemetry.record_caption_batch(
                s,
                seconds * s["rows"] / max(out.num_rows, 1),
                telemetry.failure_counts(piece.column("failure_class").to_pylist()),
            )
        telemetry.record(telemetry.GENERATE_SECONDS, sum(s["generate_s"] for s in summaries) * self._accelerators)
        self._ledger()
        return {k: np.array([s[k] for s in summaries]) for k in summaries[0]}


_TYPED = {
    f.name: f.type
    for f in CLIP_CAPTIONS
    if f.name in ("failure_class", "model_revision", "frame_timestamps_s", "caption_fields", "source_track")
}


def actor_pool(config: CaptionerConfig):
    """The captioner actors' pool: ``num_actors`` replicas, each running one batch at a time IN THE THREAD THAT BUILT
    ITS ENGINE.

    Ray Data's default runs a callable class's calls in a helper thread (so that batch formatting overlaps the
    call). The engine is built in the actor's main thread, and vLLM's CPU engine then ran each batch ~1.5x slower in
    the helper thread (measured with ``videolake bench caption`` at 1,000 clips on 2 cores: stage ÷ raw 0.53-0.76
    before, 0.88-0.92 after, with the warm-up change of the same commit). ``enable_true_multi_threading`` with one
    call per actor makes Ray run the call in the actor's main thread; a GPU engine wants one call at a time anyway.
    """
    import ray.data

    return ray.data.ActorPoolStrategy(
        size=config.num_actors, max_concurrent_calls_per_actor=1, enable_true_multi_threading=True
    )


def _summary(piece: pa.Table, day: str) -> dict:
    status = piece.column("status").to_numpy(zero_copy_only=False)
    col = lambda c: piece.column(c).to_numpy(zero_copy_only=False)  # noqa: E731
    return {
        "day": day,
        "rows": piece.num_rows,
        "ok": int(np.sum(status == "ok")),
        "prompt_tokens": int(np.sum(col("prompt_tokens"))),
        "output_tokens": int(np.sum(col("output_tokens"))),
        "generate_s": float(np.sum(col("generate_s"))),
        "actor_id": str(col("actor_id")[0]),
        "actor_load_s": float(col("actor_load_s")[0]),
        "actor_started_at": float(col("actor_started_at")[0]),
        "actor_ready_at": float(col("actor_ready_at")[0]),
        "batch_finished_at": float(col("batch_finished_at")[0]),
    }


# ---------------------------------------------------------------------------------------------------- finalize


def finalize_day(
    checkpoints: Checkpoints,
    day: str,
    wanted_path: str,
    token: str,
    config_label: dict,
    attempts_since: float | None = None,
) -> tuple[list, dict]:
    """Runs on a worker: the day's committed rows = pieces ∩ wanted clips, one row per wanted clip."""
    from videolake.platform.lake.table import DataFile

    files = checkpoints.files
    wanted = files.read_parquet(wanted_path)
    wanted_ids = wanted.column("clip_id").combine_chunks()
    names = [f.name for f in CLIP_CAPTIONS if f.name != PARTITION_COLUMN] + list(METRIC_COLUMNS)
    parts = [files.read_parquet(p).select(names) for p in _pieces(checkpoints, day)]
    rows = None
    if parts:
        rows = pa.concat_tables(parts, promote_options="permissive").combine_chunks()
        rows = rows.filter(pc.is_in(rows.column("clip_id"), value_set=wanted_ids))
        # A clip in two pieces (two attempts raced on it, or a transient failure captioned again): keep its
        # earliest row that is no transient failure, else its latest transient one; deterministically.
        rows = rows.set_column(
            rows.column_names.index("failure_class"), "failure_class", rows.column("failure_class").cast(pa.string())
        )
        late_first = pc.if_else(
            pc.equal(pc.fill_null(rows.column("failure_class"), ""), TRANSIENT),
            pc.negate(rows.column("batch_finished_at")),
            rows.column("batch_finished_at"),
        )
        rows = rows.append_column("_transient", pc.fill_null(pc.equal(rows.column("failure_class"), TRANSIENT), False))
        rows = rows.append_column("_order", late_first)
        rows = rows.sort_by([("clip_id", "ascending"), ("_transient", "ascending"), ("_order", "ascending")])
        rows = rows.drop_columns(["_transient", "_order"])
        ids = rows.column("clip_id").combine_chunks()
        if rows.num_rows > 1:
            first = pa.concat_arrays([pa.array([True]), pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))])
            rows = rows.filter(first)
        if rows.num_rows == 0:
            rows = None
    got = rows.column("clip_id") if rows is not None else pa.array([], pa.string())
    missing = wanted.filter(
        pc.invert(
            pc.is_in(
                wanted.column("clip_id"), value_set=got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got
            )
        )
    )
    useful_s = 0.0  # generate seconds of committed rows captioned by this range's attempts (not older reuse)
    if rows is not None and attempts_since is not None:
        recent = pc.greater_equal(rows.column("batch_finished_at"), attempts_since)
        useful_s = float(pc.sum(pc.if_else(recent, rows.column("generate_s"), 0.0)).as_py() or 0.0)
    data = rows.drop_columns(list(METRIC_COLUMNS)) if rows is not None else None
    if missing.num_rows:
        filled = _failed_rows(missing, config_label)
        data = filled if data is None else pa.concat_tables([conform(data, filled.schema), filled])
    import datetime as dt

    summary = {
        **table_spec(TABLE).figures_of(CLIP_CAPTIONS.empty_table()),
        "missing_filled": missing.num_rows,
        "useful_s": useful_s,
    }
    if data is None or data.num_rows == 0:
        return [], summary
    data = data.append_column(
        CLIP_CAPTIONS.field(PARTITION_COLUMN), pa.array([dt.date.fromisoformat(day)] * data.num_rows, pa.date32())
    )
    data = conform(data, CLIP_CAPTIONS).sort_by("clip_id")
    tracks = set(data.column(TRACK_COLUMN).to_pylist())
    if tracks != {config_label["track"]}:  # a file holds one track: the commit replaces a track by its files
        raise ValueError(f"clip_captions {day}: pieces of tracks {sorted(tracks)} in track {config_label['track']!r}")
    summary.update(table_spec(TABLE).figures_of(data))
    data = data.drop_columns([PARTITION_COLUMN])
    rel = f"{PARTITION_COLUMN}={day}/part-{token}-00000.parquet"
    size = files.write_parquet(files.path(TABLE, rel), data)
    return [DataFile(path=rel, size=size, partition_date=day, rows=data.num_rows, stats=file_stats(data))], summary


def _failed_rows(missing: pa.Table, label: dict) -> pa.Table:
    n = missing.num_rows
    now = pa.array([int(time.time() * 1e6)] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    schema = pa.schema([f for f in CLIP_CAPTIONS if f.name != PARTITION_COLUMN])
    return pa.table(
        {
            "clip_id": missing.column("clip_id"),
            "caption_track": pa.array([label["track"]] * n, pa.string()),
            "video_id": missing.column("video_id"),
            "source_uri": missing.column("source_uri"),
            "status": pa.array([STATUS_FAILED] * n),
            "caption": pa.nulls(n, pa.string()),
            "error": pa.array([LOST_ROW_ERROR] * n),
            "failure_class": pa.array([TRANSIENT] * n),  # a lost actor: captioning again can succeed
            "model": pa.array([label["model"]] * n),
            "model_revision": pa.array([label["model_revision"]] * n, pa.string()),
            "prompt_version": pa.array([label["prompt_version"]] * n),
            "num_frames": pa.array([0] * n, pa.int32()),
            "prompt_tokens": pa.array([0] * n, pa.int64()),
            "output_tokens": pa.array([0] * n, pa.int64()),
            "latency_s": pa.array([0.0] * n),
            "captioned_at": now,
            "prompt_sha256": pa.array([label["prompt_sha256"]] * n, pa.string()),
            "sampling": pa.array([label["sampling"]] * n, pa.string()),
            "engine": pa.array([label["engine"]] * n, pa.string()),
            "engine_version": pa.array([label["engine_version"]] * n, pa.string()),
            "frame_timestamps_s": pa.array([[]] * n, pa.list_(pa.float64())),
            "caption_fields": pa.nulls(n, pa.map_(pa.string(), pa.string())),
            "source_track": pa.array([label["source_track"]] * n, pa.string()),
        }
    ).cast(schema)


# ------------------------------------------------------------------------------------------------------ driver


@dataclass(frozen=True)
class CaptionRun:
    write: Any  # lake.WriteResult
    progress: StageProgress
    metrics: Any  # metrics.CaptionMetrics
    per_partition: dict[str, dict]
    seconds: float
    goodput: float  # committed generate accelerator-seconds / all accelerator-seconds of all attempts
    accelerator_s_all_attempts: float
    clips_reused: int
    clips_computed: int
    clips_retried: int = 0  # captioned again because their last row was a transient failure (part of computed)
    phases: dict[str, float] = field(default_factory=dict)  # seconds: plan, pipeline, finalize, commit
    batches: list[dict] = field(default_factory=list, repr=False)


def caption_partitions(
    lake: Lake,
    partitions: PartitionRange,
    config: CaptionerConfig,
    *,
    store: Any | None = None,
    open_source: Any = None,
    unit_clips: int | None = None,
    progress: Callable[[str], None] | None = None,
    inputs: pa.Table | None = None,
    prepare: Callable[[], object] | None = None,
    frame_cache: Any = None,
) -> CaptionRun:
    """Caption the passed clips of ``partitions`` into clip_captions (see the module docstring).

    ``inputs``: the clips to caption (INPUT_COLUMNS) instead of reading the CPU tables (benchmarks).
    ``prepare()``: called once before the actors start, only when there is something to caption (e.g. staging
    the model), so an empty or fully reused day costs no model work.
    ``frame_cache``: a ``clip_frames.FrameCache`` whose clips are not decoded again (benchmarks).
    """
    _check_and_import(config)
    t0 = time.monotonic()
    run = _set_up(lake, partitions, config, store, open_source, inputs, t0)
    plan = _plan(lake, run, unit_clips or max(config.batch_size, 1), inputs, progress)
    phase = {"plan_s": time.monotonic() - t0}
    batches, wall, ended_at = _run_pipeline(run, plan, store, progress, prepare, frame_cache)
    phase["pipeline_s"] = wall
    done = _finalize_and_commit(lake, partitions, run, plan)
    phase["finalize_s"] = done.finalize_end - t0 - phase["plan_s"] - wall
    phase["commit_s"] = done.commit_s
    return _caption_run(run, plan, done, batches, wall, ended_at, phase)


@dataclass(frozen=True)
class _Run:
    """What every phase of one ``caption_partitions`` call shares."""

    config: CaptionerConfig
    checkpoints: Checkpoints
    open_source: Any
    on_ray: bool
    ledger_dir: str
    token: str
    days: list[str]
    t0: float


@dataclass(frozen=True)
class _Plan:
    """The days' plans and their totals."""

    plans: list[dict]
    todo: list[str]
    wanted: int
    clips_reused: int
    clips_retried: int
    pieces_reused: int


@dataclass(frozen=True)
class _Committed:
    """What finalize and commit leave: the write, the days' summaries and the run's accelerator accounting."""

    write: Any  # lake.WriteResult
    per_day: dict[str, dict]
    held: float
    goodput: float
    finalize_end: float  # monotonic clock when the days were finalized (the commit starts)
    commit_s: float


def _check_and_import(config: CaptionerConfig) -> None:
    """Check the config before anything runs, and import Ray before the run's clock starts."""
    from videolake.platform.captioning.base import backend_params, captioner_class

    backend_params(captioner_class(config.backend), config)  # a bad backend parameter fails here, not in each actor
    config.check_second_pass()

    import ray  # noqa: F401 - imported before the clock starts, as the phases' seconds always were
    import ray.data  # noqa: F401


def _set_up(
    lake: Lake,
    partitions: PartitionRange,
    config: CaptionerConfig,
    store: Any | None,
    open_source: Any,
    inputs: pa.Table | None,
    t0: float,
) -> _Run:
    """Join Ray when there is anything to caption, and name this attempt's checkpoints and token."""
    from videolake.platform.captioning.clip_frames import store_opener

    # A range without a clip to caption runs its few empty calls here: no Ray cluster is started or joined.
    on_ray = inputs.num_rows > 0 if inputs is not None else lake.row_count("filtered_clips", partitions) > 0
    if on_ray:
        ensure_ray()
    if open_source is None and store is not None:
        open_source = store_opener(lambda _uri: store)
    checkpoints = Checkpoints(lake.files(), checkpoint_table(config), stage_code_version(config))
    migrate_untracked(lake)
    run_key = f"{partitions.start.isoformat()}_{partitions.end.isoformat()}"
    return _Run(
        config=config,
        checkpoints=checkpoints,
        open_source=open_source,
        on_ray=on_ray,
        ledger_dir=checkpoints.ledger_dir(run_key),
        token=uuid.uuid4().hex[:16],
        days=[d.isoformat() for d in partitions.days()],
        t0=t0,
    )


def _plan(
    lake: Lake,
    run: _Run,
    unit: int,
    inputs: pa.Table | None,
    progress: Callable[[str], None] | None,
) -> _Plan:
    """Plan every day (one task each): the todo units of clips still to caption and the wanted lists."""
    day_inputs = {}
    if inputs is not None and run.on_ray:
        import ray

        dates = inputs.column(PARTITION_COLUMN).cast(pa.string())
        day_inputs = {d: ray.put(inputs.filter(pc.equal(dates, d))) for d in run.days}
    elif inputs is not None:
        day_inputs = {d: inputs for d in run.days}  # empty
    plans = call_each(
        plan_day,
        [(lake, run.checkpoints, d, unit, run.token, day_inputs.get(d), run.config.source_track) for d in run.days],
        on_ray=run.on_ray,
    )
    del day_inputs
    plan = _Plan(
        plans=plans,
        todo=[p for day_plan in plans for p in day_plan["todo_paths"]],
        wanted=sum(p["wanted"] for p in plans),
        clips_reused=sum(p["clips_reused"] for p in plans),
        clips_retried=sum(p["clips_retried"] for p in plans),
        pieces_reused=sum(p["pieces_reused"] for p in plans),
    )
    if progress:
        progress(
            f"{plan.wanted} clips to caption in {len(run.days)} partition(s): {plan.clips_reused} already captioned "
            f"({plan.pieces_reused} checkpointed batches reused), {plan.wanted - plan.clips_reused} to do in "
            f"{len(plan.todo)} units ({plan.clips_retried} again after a transient failure)"
        )
    return plan


def _run_pipeline(
    run: _Run,
    plan: _Plan,
    store: Any | None,
    progress: Callable[[str], None] | None,
    prepare: Callable[[], object] | None,
    frame_cache: Any,
) -> tuple[list[dict], float, float]:
    """Run the Ray Data pipeline over the todo units: (the batches' summary rows, its wall seconds, its end time)."""
    from videolake.platform.runtime.progress import StageReporter

    batches: list[dict] = []
    t_pipe = time.perf_counter()
    # N = the clips to caption (those captioned under this code version count as reused); a heartbeat line
    # at least every 30 s while the model loads or a batch takes long
    report = StageReporter("captioned", progress, unit="clips")
    report.plan(plan.wanted, reused=plan.clips_reused)
    telemetry.record(telemetry.QUEUE_DEPTH, plan.wanted - plan.clips_reused, stage=TABLE)
    with report:
        if plan.todo and prepare is not None:
            prepare()
        if plan.todo:
            done = plan.clips_reused
            for b in _pipeline(run, plan, store, frame_cache).iter_batches(
                batch_size=None, batch_format="pyarrow", prefetch_batches=0
            ):
                for s in cast(pa.Table, b).to_pylist():  # batch_format="pyarrow" (Ray types any batch format)
                    batches.append(s)
                    done += s["rows"]
                report.update(done, reused=plan.clips_reused)
                telemetry.record(telemetry.QUEUE_DEPTH, max(plan.wanted - done, 0), stage=TABLE)
    telemetry.record(telemetry.QUEUE_DEPTH, 0, stage=TABLE)
    report.finish(plan.clips_reused + sum(b["rows"] for b in batches), reused=plan.clips_reused)
    return batches, time.perf_counter() - t_pipe, time.time()


def _pipeline(run: _Run, plan: _Plan, store: Any | None, frame_cache: Any) -> Any:
    """The Ray Data dataset: todo file -> frame extraction (CPU tasks) -> captioner actors -> one row per batch."""
    import ray.data

    config = run.config
    ds: ray.data.Dataset = ray.data.from_items([{"path": p} for p in plan.todo], override_num_blocks=len(plan.todo))
    ds = ds.map_batches(
        LoadAndExtract(run.checkpoints, config, run.open_source, frame_cache),
        batch_size=1,
        batch_format="numpy",
        num_cpus=config.extract_num_cpus,
    )
    return ds.map_batches(
        CaptionWriterActor,
        fn_constructor_kwargs={
            "config": config,
            "checkpoints": run.checkpoints,
            "ledger_dir": run.ledger_dir,
            "store": store,
            # no batch is larger than the clips left to do: the model's warm-up sends no more than that
            "largest_batch": plan.wanted - plan.clips_reused,
        },
        compute=actor_pool(config),
        batch_size=config.batch_size,
        batch_format="numpy",
        num_cpus=config.num_cpus_per_actor,
        num_gpus=config.num_gpus_per_actor or None,
        runtime_env={"env_vars": env} if (env := actor_env(config)) else None,
    )


def _failed_row_label(config: CaptionerConfig) -> dict[str, Any]:
    """The provenance a failed row gets when no row came back from an engine."""
    return {
        "track": config.track,
        "source_track": config.source_track,
        "model": config.model_label,
        "model_revision": config.model_revision,
        "prompt_version": config.prompt_template().version,
        "prompt_sha256": config.prompt_template().sha256(),
        "sampling": json.dumps({**asdict(config.sampling), "base_seed": config.sampling.seed}, sort_keys=True),
        "engine": config.backend,  # no row came back from an engine: the configured backend, version unknown
        "engine_version": "unknown: no row came back",
    }


def _finalize_and_commit(lake: Lake, partitions: PartitionRange, run: _Run, plan: _Plan) -> _Committed:
    """Finalize every day (one task each), commit the files in one transaction, clean up and account goodput."""
    config, checkpoints = run.config, run.checkpoints
    ledger = _read_ledger(checkpoints, run.ledger_dir)
    since = min((e["started_at"] for e in ledger), default=None)
    label = _failed_row_label(config)
    results = call_each(
        finalize_day,
        [(checkpoints, p["day"], p["wanted_path"], run.token, label, since) for p in plan.plans],
        on_ray=run.on_ray,
    )
    files = [f for fs_, _ in results for f in fs_]
    per_day = {p["day"]: s for p, (_, s) in zip(plan.plans, results)}
    t_commit = time.monotonic()
    write = lake.commit_slice(TABLE, files, partitions, TRACK_COLUMN, config.track, token=run.token)
    commit_s = time.monotonic() - t_commit
    # after the commit: todo/wanted files of this attempt, ledgers of this range, other versions' checkpoints
    for d in run.days:
        checkpoints.files.delete_dir(f"{checkpoints.day_dir(d)}/{TODO_DIR}")
    checkpoints.clear_other_versions(run.days)

    useful = sum(s.get("useful_s", 0.0) for s in per_day.values()) * (config.num_gpus_per_actor or 1.0)
    held = sum(max(e["last_at"] - e["started_at"], 0.0) * e["accelerators"] for e in ledger)
    checkpoints.files.delete_dir(run.ledger_dir)
    goodput = min(useful / held, 1.0) if held > 0 else 0.0
    return _Committed(
        write=write, per_day=per_day, held=held, goodput=goodput, finalize_end=t_commit, commit_s=commit_s
    )


def _caption_run(
    run: _Run,
    plan: _Plan,
    done: _Committed,
    batches: list[dict],
    wall: float,
    ended_at: float,
    phase: dict[str, float],
) -> CaptionRun:
    """The run's progress, metrics and telemetry, logged and returned as a CaptionRun."""
    from videolake.platform.captioning.metrics import compute_metrics_from_batches

    config = run.config
    prog = StageProgress()
    for _ in range(plan.pieces_reused):
        prog.add({"rows": 0, "reused": True, "seconds": 0.0})
    for b in batches:
        prog.add({"rows": b["rows"], "reused": False, "seconds": b["generate_s"]})
    prog.units_retried = sum(p["units_retried"] for p in plan.plans)  # todo units holding a clip captioned again
    metrics = compute_metrics_from_batches(
        batches,
        wall_s=wall,
        num_gpus_per_actor=config.num_gpus_per_actor,
        num_actors=config.num_actors if plan.todo else 0,
        ended_at=ended_at,
    )
    if plan.todo:  # a run that captioned nothing has no goodput of its own to show
        telemetry.record(telemetry.GOODPUT, done.goodput)
        telemetry.record(telemetry.STRAGGLERS, metrics.stragglers)
    log.info(
        "captioned %d clips (%d reused, %d retried after a transient failure) into %d rows in %.1fs; goodput %.3f",
        plan.wanted - plan.clips_reused,
        plan.clips_reused,
        plan.clips_retried,
        done.write.rows,
        time.monotonic() - run.t0,
        done.goodput,
    )
    return CaptionRun(
        write=done.write,
        progress=prog,
        metrics=metrics,
        per_partition=done.per_day,
        seconds=time.monotonic() - run.t0,
        goodput=done.goodput,
        accelerator_s_all_attempts=done.held,
        clips_reused=plan.clips_reused,
        clips_computed=sum(b["rows"] for b in batches),
        clips_retried=plan.clips_retried,
        phases=phase,
        batches=batches,
    )


def _read_ledger(checkpoints: Checkpoints, ledger_dir: str) -> list[dict]:
    out = []
    for e in checkpoints.files.list(ledger_dir, recursive=False):
        try:
            out.extend(checkpoints.files.read_parquet(e.path).to_pylist())
        except Exception:  # noqa: BLE001 - a ledger torn by a kill: skip it, goodput then errs high, not low
            log.warning("unreadable ledger file %s", e.path)
    return out
