"""What a caption run cost and how well it used its actors, as flat numbers Dagster plots over partitions.

Computed from the per-row metric columns the backends emit (base.METRIC_COLUMNS), so nothing needs to be collected
from the actors separately:
- throughput: captions/s over the run's wall time, prompt and output tokens/s;
- per actor: rows, generate seconds, captions per generate-second, model load seconds; an actor below 50 % of the
  median per-actor throughput is a straggler;
- accelerator-seconds: what the actor pool held: num_actors x num_gpus x (first actor setup -> end of the stage).
  Every actor of the pool holds its GPUs until Ray Data releases the pool at the end, including one that got no
  batch (counted in ``idle_actors``). On CPU (num_gpus = 0) it is reported as actor-seconds instead;
- goodput: the share of that pool time spent inside generate (the rest is model load, waiting for frames, idle).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

STRAGGLER_FRACTION = 0.5  # an actor slower than this share of the median throughput is flagged


@dataclass(frozen=True)
class ActorStats:
    actor_id: str
    captions: int  # rows this actor produced (ok + failed)
    generate_s: float  # seconds inside generate
    load_s: float  # model load seconds (setup)
    lifetime_s: float  # first setup to last batch
    captions_per_s: float  # captions per generate-second
    straggler: bool


@dataclass(frozen=True)
class CaptionMetrics:
    captions: int  # ok rows
    failed: int  # failed rows
    wall_s: float  # the whole caption stage (extraction + actors), driver wall clock
    captions_per_s: float  # all rows / wall_s
    prompt_tokens_per_s: float
    output_tokens_per_s: float
    model_load_s_mean: float  # per actor
    model_load_s_max: float
    actors: int  # the pool's size
    idle_actors: int  # actors that captioned nothing (a tiny partition, or an actor that never became ready)
    accelerator: str  # "gpu" or "cpu" (then accelerator_s counts actor-seconds)
    accelerator_s: float  # num_actors x num_gpus x pool lifetime (on CPU: actor-seconds)
    goodput: float  # share of the pool's actor time spent inside generate, 0..1
    stragglers: int
    steady_captions_per_s: float  # rows / (first actor ready -> last batch): throughput without model load
    per_actor: list[ActorStats] = field(default_factory=list)

    def to_metadata(self) -> dict[str, float | int]:
        """Flat numbers for Dagster metadata (plotted over partitions); per-actor values as actor_<i>_* keys."""
        out: dict[str, float | int] = {
            "captions": self.captions,
            "captions_failed": self.failed,
            "caption_wall_s": round(self.wall_s, 3),
            "captions_per_s": round(self.captions_per_s, 4),
            "steady_captions_per_s": round(self.steady_captions_per_s, 4),
            "prompt_tokens_per_s": round(self.prompt_tokens_per_s, 2),
            "output_tokens_per_s": round(self.output_tokens_per_s, 2),
            "model_load_s_mean": round(self.model_load_s_mean, 3),
            "model_load_s_max": round(self.model_load_s_max, 3),
            "actors": self.actors,
            "idle_actors": self.idle_actors,
            "accelerator_is_gpu": int(self.accelerator == "gpu"),
            ("accelerator_s" if self.accelerator == "gpu" else "actor_s"): round(self.accelerator_s, 3),
            "goodput": round(self.goodput, 4),
            "stragglers": self.stragglers,
        }
        for i, a in enumerate(self.per_actor):
            out[f"actor_{i}_captions"] = a.captions
            out[f"actor_{i}_captions_per_s"] = round(a.captions_per_s, 4)
            out[f"actor_{i}_load_s"] = round(a.load_s, 3)
            out[f"actor_{i}_straggler"] = int(a.straggler)
        return out


def compute_metrics(
    rows: pa.Table,
    *,
    wall_s: float,
    num_gpus_per_actor: float,
    num_actors: int | None = None,
    ended_at: float | None = None,
) -> CaptionMetrics:
    """Metrics from the captioner's output rows (clip_captions columns + METRIC_COLUMNS).

    ``num_actors``: the pool size (default: actors seen in the rows); ``ended_at``: epoch seconds when the stage
    ended (default: the last batch), the end of the pool's lifetime.
    """
    n = rows.num_rows
    ok = _ok_rows(rows)
    per_actor = _flag_stragglers(_per_actor(rows) if n and "actor_id" in rows.column_names else [])
    generate = sum(a.generate_s for a in per_actor)
    pool_size = max(num_actors or 0, len(per_actor))
    pool_s = _pool_seconds(rows, pool_size, ended_at) if per_actor else 0.0
    loads = [a.load_s for a in per_actor]
    gpu = num_gpus_per_actor > 0
    return CaptionMetrics(
        captions=ok,
        failed=n - ok,
        wall_s=wall_s,
        captions_per_s=_ratio(n, wall_s),
        prompt_tokens_per_s=_ratio(_column_sum(rows, "prompt_tokens"), wall_s),
        output_tokens_per_s=_ratio(_column_sum(rows, "output_tokens"), wall_s),
        model_load_s_mean=float(np.mean(loads)) if loads else 0.0,
        model_load_s_max=float(np.max(loads)) if loads else 0.0,
        actors=pool_size,
        idle_actors=pool_size - len(per_actor),
        accelerator="gpu" if gpu else "cpu",
        accelerator_s=pool_s * (num_gpus_per_actor if gpu else 1.0),
        goodput=min(generate / pool_s, 1.0) if pool_s > 0 else 0.0,
        stragglers=sum(a.straggler for a in per_actor),
        steady_captions_per_s=_steady_rate(rows) if per_actor else 0.0,
        per_actor=per_actor,
    )


def _ratio(amount: float, seconds: float) -> float:
    """``amount`` per second, 0.0 over no time (an empty or instantaneous run has no rate)."""
    return amount / seconds if seconds > 0 else 0.0


def _ok_rows(rows: pa.Table) -> int:
    """Rows whose status is ok."""
    if not rows.num_rows:
        return 0
    return int(np.sum(rows.column("status").to_numpy(zero_copy_only=False) == "ok"))


def _column_sum(rows: pa.Table, column: str) -> int:
    """The integer sum of a token column (0 for no rows or all nulls)."""
    return int(pc.sum(rows.column(column)).as_py() or 0) if rows.num_rows else 0


def _flag_stragglers(per_actor: list[ActorStats]) -> list[ActorStats]:
    """The actors with ``straggler`` set: slower than STRAGGLER_FRACTION of the median rate of those that generated."""
    rates = [a.captions_per_s for a in per_actor if a.generate_s > 0]
    median = statistics.median(rates) if rates else 0.0
    return [
        ActorStats(**{**a.__dict__, "straggler": bool(median > 0 and a.captions_per_s < STRAGGLER_FRACTION * median)})
        for a in per_actor
    ]


def _pool_seconds(rows: pa.Table, pool_size: int, ended_at: float | None) -> float:
    """Actor-seconds the pool held: every actor from the first actor's setup to the end of the stage (never before
    the last batch)."""
    first_start = float(np.min(rows.column("actor_started_at").to_numpy()))
    last_batch = float(np.max(rows.column("batch_finished_at").to_numpy()))
    end = max(ended_at or last_batch, last_batch)
    return pool_size * max(end - first_start, 0.0)


def _steady_rate(rows: pa.Table) -> float:
    """Rows per second from the first actor ready to the last batch: throughput without model load."""
    ready = float(np.min(rows.column("actor_ready_at").to_numpy()))
    last = float(np.max(rows.column("batch_finished_at").to_numpy()))
    return rows.num_rows / (last - ready) if last > ready else 0.0


def _per_actor(rows: pa.Table) -> list[ActorStats]:
    cols: dict[str, Any] = {
        c: rows.column(c).to_numpy(zero_copy_only=False)
        for c in ("actor_id", "generate_s", "actor_load_s", "actor_started_at", "batch_finished_at")
    }
    out = []
    for actor in sorted(set(cols["actor_id"].tolist())):
        m = cols["actor_id"] == actor
        gen = float(np.sum(cols["generate_s"][m]))
        count = int(np.sum(m))
        lifetime = float(np.max(cols["batch_finished_at"][m]) - np.min(cols["actor_started_at"][m]))
        out.append(
            ActorStats(
                actor_id=str(actor),
                captions=count,
                generate_s=gen,
                load_s=float(np.max(cols["actor_load_s"][m])),
                lifetime_s=max(lifetime, 0.0),
                captions_per_s=count / gen if gen > 0 else 0.0,
                straggler=False,
            )
        )
    return out


def compute_metrics_from_batches(
    batches: list[dict],
    *,
    wall_s: float,
    num_gpus_per_actor: float,
    num_actors: int | None = None,
    ended_at: float | None = None,
) -> CaptionMetrics:
    """The same metrics from one summary per captioned batch (what the streaming stage's driver holds: counts and
    timings per batch, never the rows). Keys: rows, ok, prompt_tokens, output_tokens and the METRIC_COLUMNS."""
    if not batches:
        return compute_metrics(
            _EMPTY, wall_s=wall_s, num_gpus_per_actor=num_gpus_per_actor, num_actors=num_actors, ended_at=ended_at
        )
    # One synthetic row per batch carrying the batch's totals reproduces compute_metrics' sums exactly; counts
    # (captions, rows per actor) are weighted by the batch's rows.
    n_rows = sum(int(b["rows"]) for b in batches)
    ok = sum(int(b["ok"]) for b in batches)
    m = compute_metrics(
        _batch_rows(batches),
        wall_s=wall_s,
        num_gpus_per_actor=num_gpus_per_actor,
        num_actors=num_actors,
        ended_at=ended_at,
    )
    per_actor = _flag_stragglers(_weighted_by_rows(m.per_actor, batches))
    steady = m.steady_captions_per_s * n_rows / len(batches)  # compute_metrics counted one row per batch
    return CaptionMetrics(
        **{
            **m.__dict__,
            "captions": ok,
            "failed": n_rows - ok,
            "captions_per_s": _ratio(n_rows, wall_s),
            "steady_captions_per_s": steady,
            "per_actor": per_actor,
            "stragglers": sum(a.straggler for a in per_actor),
        }
    )


def _batch_rows(batches: list[dict]) -> pa.Table:
    """One synthetic row per batch summary, with the columns compute_metrics reads."""
    return pa.table(
        {
            "status": ["ok"] * len(batches),
            "prompt_tokens": [int(b["prompt_tokens"]) for b in batches],
            "output_tokens": [int(b["output_tokens"]) for b in batches],
            "actor_id": [str(b["actor_id"]) for b in batches],
            "generate_s": [float(b["generate_s"]) for b in batches],
            "actor_load_s": [float(b["actor_load_s"]) for b in batches],
            "actor_started_at": [float(b["actor_started_at"]) for b in batches],
            "actor_ready_at": [float(b["actor_ready_at"]) for b in batches],
            "batch_finished_at": [float(b["batch_finished_at"]) for b in batches],
        }
    )


def _weighted_by_rows(per_actor: list[ActorStats], batches: list[dict]) -> list[ActorStats]:
    """The per-actor stats with captions counted in rows (not batches) and the rate recomputed from them."""
    out = []
    for a in per_actor:
        count = sum(int(b["rows"]) for b in batches if str(b["actor_id"]) == a.actor_id)
        out.append(ActorStats(**{**a.__dict__, "captions": count, "captions_per_s": _ratio(count, a.generate_s)}))
    return out


_EMPTY = pa.table(
    {
        "status": pa.array([], pa.string()),
        "prompt_tokens": pa.array([], pa.int64()),
        "output_tokens": pa.array([], pa.int64()),
    }
)
