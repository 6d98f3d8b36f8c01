"""The caption stage on Ray Data: frame extraction (CPU tasks) streaming into a pool of captioner actors.

    from_arrow(clip blocks) -> map_batches(extract_frames, CPU tasks, fractional num_cpus)
                            -> map_batches(CaptionerActor, ActorPoolStrategy(size=num_actors), num_gpus, num_cpus)
                            -> collect

Ray Data's streaming executor keeps decoding ahead of the model and back-pressures it when the actors fall behind.
Fractional CPUs on both stages on purpose: whole CPUs per actor starve the extraction tasks on small nodes
(STACK-NOTES: 2 actors x 1 CPU on 2 cores deadlocks). vLLM's environment reaches the actors through runtime_env
(a KubeRay worker does not inherit the driver's environment).

The result has exactly one row per input clip: a clip whose row did not come back (a lost actor) is filled in as
a ``failed`` row with that reason, never dropped. Ray must already be initialised by the caller (Dagster's
RayResource); if it is not, a local Ray with 2 CPUs is started.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

import pyarrow as pa

from videolake.platform.captioning.base import METRIC_COLUMNS, STATUS_FAILED, CaptionerConfig, get_captioner
from videolake.platform.captioning.frames import REQUIRED_COLUMNS, SourceOpener, extract_frames, store_opener
from videolake.platform.captioning.metrics import CaptionMetrics, compute_metrics
from videolake.platform.schemas import CLIP_CAPTIONS, PARTITION_COLUMN

log = logging.getLogger(__name__)

# clip_captions without partition_date: the engine does not know the partition; the asset (or the input) adds it.
CAPTION_SCHEMA = pa.schema([f for f in CLIP_CAPTIONS if f.name != PARTITION_COLUMN])


class CaptionerActor:
    """The Ray Data callable class around a backend: the model loads once, in the constructor (= setup())."""

    def __init__(self, config: CaptionerConfig, store: Any | None = None) -> None:
        logging.basicConfig(level=logging.INFO)
        self.backend = get_captioner(config, store=store)
        self.backend.setup()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.backend(batch)

    def __del__(self) -> None:
        backend = getattr(self, "backend", None)
        if backend is not None:
            try:
                backend.teardown()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


def actor_env(config: CaptionerConfig) -> dict[str, str]:
    """Environment for the captioner actors: vLLM's settings, plus the endpoint variables for the openai backend."""
    env = {k: str(v) for k, v in dict(config.env).items()}
    if config.backend == "openai" and config.endpoint.forward_env:
        # Visible to anyone with Ray dashboard access: on KubeRay mount the secret into the worker pods instead
        # and set endpoint.forward_env=False.
        for name in (config.endpoint.base_url_env, config.endpoint.api_key_env):
            if os.environ.get(name):
                env[name] = os.environ[name]
    return env


def _ensure_ray() -> None:
    import ray

    if not ray.is_initialized():
        log.info("no Ray cluster connected: starting a local one (2 CPUs)")
        ray.init(num_cpus=min(2, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False,
                 ignore_reinit_error=True)


def caption_clips(
    clips: pa.Table,
    config: CaptionerConfig,
    *,
    open_source: SourceOpener | None = None,
    store: Any | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[pa.Table, CaptionMetrics]:
    """Caption every clip row; returns (clip_captions rows, metrics).

    ``clips`` needs clip_id, video_id, source_uri, start_frame, end_frame, fps (and optionally clip_uri,
    partition_date). The result has the clip_captions columns, sorted by clip_id, with ``partition_date`` when the
    input has it. ``open_source(uri)`` maps a source URI to a local path (or a context manager yielding one);
    by default sources are read through ``store`` when given (``store.open_local``), else file:// URIs and plain
    paths in place. ``store`` (an ObjectStore, pickled to the workers) also serves an object-store model URI.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in clips.column_names]
    if missing:
        raise ValueError(f"clip rows lack columns {missing}")
    ids = clips.column("clip_id").to_pylist()
    if len(set(ids)) != len(ids):
        raise ValueError("clip_id values must be unique")
    if clips.num_rows == 0:
        empty = CAPTION_SCHEMA.empty_table()
        return _with_partition(empty, clips), compute_metrics(_with_metric_columns(empty), wall_s=0.0,
                                                             num_gpus_per_actor=config.num_gpus_per_actor)
    import ray
    import ray.data

    if open_source is None and store is not None:
        open_source = store_opener(lambda _uri: store)
    _ensure_ray()
    t0 = time.perf_counter()
    inputs = _input_table(clips)
    step = max(1, config.extract_batch_size)
    blocks = [inputs.slice(i, step) for i in range(0, inputs.num_rows, step)]
    ds = ray.data.from_arrow(blocks)
    ds = ds.map_batches(
        extract_frames,
        fn_kwargs={"frame_config": config.frames, "input_mode": config.input_mode, "open_source": open_source},
        batch_size=step,
        batch_format="numpy",
        num_cpus=config.extract_num_cpus,
    )
    ds = ds.map_batches(
        CaptionerActor,
        fn_constructor_kwargs={"config": config, "store": store},
        compute=ray.data.ActorPoolStrategy(size=config.num_actors),
        batch_size=config.batch_size,
        batch_format="numpy",
        num_cpus=config.num_cpus_per_actor,
        num_gpus=config.num_gpus_per_actor or None,
        runtime_env={"env_vars": actor_env(config)},
    )
    if progress:
        progress(f"captioning {clips.num_rows} clips with {config.num_actors} {config.backend} actor(s)")
    parts = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
    wall = time.perf_counter() - t0
    ended_at = time.time()
    if parts:
        raw = pa.concat_tables(parts, promote_options="permissive")
    else:
        raw = _with_metric_columns(CAPTION_SCHEMA.empty_table())
    rows = _complete(raw, clips, config)
    metrics = compute_metrics(rows, wall_s=wall, num_gpus_per_actor=config.num_gpus_per_actor,
                              num_actors=config.num_actors, ended_at=ended_at)
    table = _with_partition(rows.select(CAPTION_SCHEMA.names).cast(CAPTION_SCHEMA), clips)
    log.info("captioned %d clips (%d failed) in %.1fs", metrics.captions, metrics.failed, wall)
    return table, metrics


def _input_table(clips: pa.Table) -> pa.Table:
    """Only what extraction needs, in plain types (dates and nested columns stay on the driver)."""
    cols = {
        "clip_id": clips.column("clip_id").cast(pa.string()),
        "video_id": clips.column("video_id").cast(pa.string()),
        "source_uri": clips.column("source_uri").cast(pa.string()),
        "start_frame": clips.column("start_frame").cast(pa.int64()),
        "end_frame": clips.column("end_frame").cast(pa.int64()),
        "fps": clips.column("fps").cast(pa.float64()),
    }
    if "clip_uri" in clips.column_names:
        cols["clip_uri"] = clips.column("clip_uri").cast(pa.string())
    return pa.table(cols).combine_chunks()


def _with_metric_columns(table: pa.Table) -> pa.Table:
    for name in METRIC_COLUMNS:
        if name not in table.column_names:
            typ = pa.string() if name == "actor_id" else pa.float64()
            table = table.append_column(name, pa.nulls(table.num_rows, typ))
    return table


def _complete(raw: pa.Table, clips: pa.Table, config: CaptionerConfig) -> pa.Table:
    """Exactly one row per input clip: duplicates are an engine bug (raise); missing rows become failed rows."""
    raw = _with_metric_columns(raw)
    got = raw.column("clip_id").to_pylist()
    if len(set(got)) != len(got):
        raise RuntimeError("the caption stage returned duplicate clip rows")
    wanted = clips.column("clip_id").to_pylist()
    extra = set(got) - set(wanted)
    if extra:
        raise RuntimeError(f"the caption stage returned rows for unknown clips: {sorted(extra)[:5]}")
    absent = [i for i, cid in enumerate(wanted) if cid not in set(got)]
    names = CAPTION_SCHEMA.names + list(METRIC_COLUMNS)
    raw = raw.select(names).cast(pa.schema([*CAPTION_SCHEMA, *(pa.field(n, pa.string() if n == "actor_id"
                                                                          else pa.float64()) for n in METRIC_COLUMNS)]))
    if absent:
        log.error("%d clips came back without a row; recording them as failed", len(absent))
        sub = clips.take(absent)
        n = len(absent)
        now = pa.array([int(time.time() * 1e6)] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        fill = {
            "clip_id": sub.column("clip_id").cast(pa.string()),
            "video_id": sub.column("video_id").cast(pa.string()),
            "source_uri": sub.column("source_uri").cast(pa.string()),
            "status": pa.array([STATUS_FAILED] * n),
            "caption": pa.nulls(n, pa.string()),
            "error": pa.array(["no caption row came back from the caption stage (actor lost)"] * n),
            "model": pa.array([config.model_label] * n),
            "model_revision": pa.array([config.model_revision] * n, pa.string()),
            "prompt_version": pa.array([config.prompt_template().version] * n),
            "num_frames": pa.array([0] * n, pa.int32()),
            "prompt_tokens": pa.array([0] * n, pa.int64()),
            "output_tokens": pa.array([0] * n, pa.int64()),
            "latency_s": pa.array([0.0] * n),
            "captioned_at": now,
        }
        filled = _with_metric_columns(pa.table(fill)).select(names).cast(raw.schema)
        raw = pa.concat_tables([raw, filled])
    assert raw.num_rows == clips.num_rows and set(raw.column("clip_id").to_pylist()) == set(wanted)
    return raw.sort_by("clip_id")


def _with_partition(table: pa.Table, clips: pa.Table) -> pa.Table:
    """Carry the input's partition_date (by clip_id) so the result matches the clip_captions table schema."""
    if PARTITION_COLUMN not in clips.column_names:
        return table
    lookup = dict(zip(clips.column("clip_id").to_pylist(), clips.column(PARTITION_COLUMN).to_pylist()))
    dates = pa.array([lookup[c] for c in table.column("clip_id").to_pylist()], pa.date32())
    return table.append_column(CLIP_CAPTIONS.field(PARTITION_COLUMN), dates)
