"""``caption_clips``: the caption stage on clip rows held in memory (tools, tests, benchmarks).

The stage itself is videolake.platform.captioning.stage (Ray Data: frame extraction tasks -> captioner actors that
checkpoint every batch -> finalize -> one Delta commit); ``caption_clips`` runs that same stage on a scratch lake.
This module depends on the stage, never the reverse. Ray must already be initialised by the caller (Dagster's
RayResource); if it is not, a local Ray is started.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from videolake.platform.captioning.base import METRIC_COLUMNS, CaptionerConfig
from videolake.platform.captioning.clip_frames import REQUIRED_COLUMNS, SourceOpener
from videolake.platform.captioning.metrics import CaptionMetrics, compute_metrics
from videolake.platform.lake.schemas import CLIP_CAPTIONS, PARTITION_COLUMN

log = logging.getLogger(__name__)

# clip_captions without partition_date: the engine does not know the partition; the asset (or the input) adds it.
CAPTION_SCHEMA = pa.schema([f for f in CLIP_CAPTIONS if f.name != PARTITION_COLUMN])


def caption_clips(
    clips: pa.Table,
    config: CaptionerConfig,
    *,
    open_source: SourceOpener | None = None,
    store: Any | None = None,
    progress: Callable[[str], None] | None = None,
    work_dir: str | None = None,
    frame_cache: Any | None = None,
) -> tuple[pa.Table, CaptionMetrics]:
    """Caption clip rows held in memory; returns (clip_captions rows, metrics). For tools, tests and benchmarks.

    The SAME stage the asset runs (videolake.platform.captioning.stage: plan, Ray Data pipeline with checkpoint
    pieces, finalize, one Delta commit), on a scratch lake under ``work_dir`` (a temporary directory by default),
    read back at the end. ``clips`` needs clip_id, video_id, source_uri, start_frame, end_frame, fps (optionally
    clip_uri, partition_date). The result has the clip_captions columns sorted by clip_id, with ``partition_date``
    when the input has it. ``open_source(uri)`` maps a source URI to a local path (or a context manager yielding
    one); by default sources are read through ``store`` when given, else file:// URIs and plain paths in place.
    ``frame_cache`` (a ``clip_frames.FrameCache``): clips found there are not decoded again.
    """
    import datetime as dt
    import tempfile

    from videolake.platform.captioning.stage import INPUT_COLUMNS, caption_partitions
    from videolake.platform.lake.table import Lake, PartitionRange

    missing = [c for c in REQUIRED_COLUMNS if c not in clips.column_names]
    if missing:
        raise ValueError(f"clip rows lack columns {missing}")
    ids = clips.column("clip_id").to_pylist()
    if len(set(ids)) != len(ids):
        raise ValueError("clip_id values must be unique")
    if clips.num_rows == 0:
        empty = CAPTION_SCHEMA.empty_table()
        return _with_partition(empty, clips), compute_metrics(
            _with_metric_columns(empty), wall_s=0.0, num_gpus_per_actor=config.num_gpus_per_actor
        )
    has_day = PARTITION_COLUMN in clips.column_names
    inputs = clips
    if not has_day:
        inputs = inputs.append_column(PARTITION_COLUMN, pa.array([dt.date(2000, 1, 1)] * clips.num_rows, pa.date32()))
    if "clip_uri" not in inputs.column_names:
        inputs = inputs.append_column("clip_uri", pa.nulls(inputs.num_rows, pa.string()))
    inputs = inputs.select(INPUT_COLUMNS)
    days = sorted({d.isoformat() for d in inputs.column(PARTITION_COLUMN).to_pylist()})
    with tempfile.TemporaryDirectory(prefix="videolake-captions-", dir=work_dir) as tmp:
        lake = Lake(tmp)
        rng = PartitionRange.of(days) if _contiguous(days) else None
        if rng is None:
            raise ValueError("caption_clips needs rows of contiguous days")
        run = caption_partitions(
            lake,
            rng,
            config,
            store=store,
            open_source=open_source,
            progress=progress,
            inputs=inputs,
            frame_cache=frame_cache,
        )
        table = lake.read_partitions("clip_captions", rng).sort_by("clip_id")
    if not has_day:
        table = table.drop_columns([PARTITION_COLUMN])
    log.info("captioned %d clips (%d failed) in %.1fs", run.metrics.captions, run.metrics.failed, run.seconds)
    return table, run.metrics


def _contiguous(days: list[str]) -> bool:
    import datetime as dt

    ds = [dt.date.fromisoformat(d) for d in days]
    return all((b - a).days == 1 for a, b in zip(ds, ds[1:]))


def _with_metric_columns(table: pa.Table) -> pa.Table:
    for name in METRIC_COLUMNS:
        if name not in table.column_names:
            typ = pa.string() if name == "actor_id" else pa.float64()
            table = table.append_column(name, pa.nulls(table.num_rows, typ))
    return table


def _with_partition(table: pa.Table, clips: pa.Table) -> pa.Table:
    """Carry the input's partition_date (by clip_id) so the result matches the clip_captions table schema."""
    if PARTITION_COLUMN not in clips.column_names:
        return table
    lookup = dict(zip(clips.column("clip_id").to_pylist(), clips.column(PARTITION_COLUMN).to_pylist()))
    dates = pa.array([lookup[c] for c in table.column("clip_id").to_pylist()], pa.date32())
    return table.append_column(CLIP_CAPTIONS.field(PARTITION_COLUMN), dates)
