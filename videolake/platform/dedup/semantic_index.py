"""Semantic duplicates within a day and across days, through a cluster index of the embeddings stored in Delta.

The rule (``embedding.semantic``, NeMo Curator's SemDeDup): within a day, k-means over the day's vectors and pairs
within a cluster with cosine similarity >= 1 - eps. Across days the same threshold decides, and the index finds
every such pair without reading all earlier vectors:

* ``index_day`` (after a filtered_clips commit, one Ray task per day of the run) clusters the day's ok vectors of
  clip_embeddings (k = clips / items_per_cluster, seeded) and writes two tables beside the asset tables:
  ``semantic_index`` (one row per vector: clip_id, its cluster, the vector; the day's file sorted by cluster) and
  ``semantic_clusters`` (one row per cluster: its centroid, its radius, the largest distance of a member from the
  centroid, and its size).
* ``matches_of_day`` (one Ray task per judged day) reads the day's own rows, then the cluster table of the other
  days (one row per ~``items_per_cluster`` clips), and reads by predicate only the vectors of the earlier days'
  clusters that can hold a vector within eps of one of the day's: for unit vectors ``cos(a, b) >= 1 - eps`` is
  ``|a - b| <= sqrt(2 eps)``, so (triangle inequality) ``b``'s cluster ``c`` with radius ``r`` can only hold one
  when ``|a - c| <= r + sqrt(2 eps)``. The bound is exact: no pair is lost at a cluster boundary, unlike within a
  day. Those vectors are compared with the day's. The later days with a cluster within that bound of one of the
  day's vectors may hold a duplicate of it: they are returned, and judged again (``dedup.cross_day.reconcile``).

So a pair of clips of two days is a duplicate exactly when its cosine similarity is >= 1 - eps, whatever the order
the days were materialized in; the kept clip is the earliest by (partition_date, clip_id), as for near-duplicates.
The pruning is as good as the clusters are tight: a day whose clusters are wide (random embeddings, a model that
calls everything alike) makes more clusters candidates, never a wrong verdict.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.schemas import PARTITION_COLUMN

INDEX_TABLE = "semantic_index"
CLUSTERS_TABLE = "semantic_clusters"
EMBEDDINGS_TABLE = "clip_embeddings"
# Slack added to every radius bound: float32 vectors and float64 arithmetic never lose a pair at the bound.
_SLACK = 1e-6


@dataclass
class SemanticMatches:
    """What the semantic rule finds for one day."""

    pairs: list[tuple[str, str]] = field(default_factory=list)  # (clip of the day, clip of the day or an earlier one)
    earlier: list[tuple[str, dt.date]] = field(default_factory=list)  # (clip_id, day) of the earlier clips in pairs
    later_days: list[dt.date] = field(default_factory=list)  # later days that may hold a duplicate of a day's clip
    clusters_read: int = 0  # clusters of earlier days whose vectors were read and compared


def _day_range(day: str | dt.date) -> Any:
    from videolake.platform.lake import PartitionRange

    return PartitionRange.of([day if isinstance(day, str) else day.isoformat()])


def _vectors(t: pa.Table, column: str = "embedding") -> np.ndarray:
    """The unit vectors of ``t``'s list column as float64 (n, dim)."""
    from videolake.platform.embedding.semantic import unit_rows

    if t.num_rows == 0:
        return np.zeros((0, 0))
    col = t.column(column).combine_chunks()
    flat = pc.list_flatten(col).to_numpy(zero_copy_only=False)
    return unit_rows(flat.reshape(t.num_rows, -1))


def _list_array(rows: np.ndarray) -> pa.Array:
    """A list<float32> array of the rows of a 2-d array (no Python loop over rows)."""
    n, dim = rows.shape if rows.ndim == 2 else (0, 0)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * dim, pa.int32())
    return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(rows, np.float32).reshape(-1), pa.float32()))


def index_day(lake: Any, day: str, config: Any) -> int:
    """Cluster ``day``'s ok vectors of clip_embeddings (``config``: SemanticDedupConfig) and replace the day's rows
    of the index and cluster tables; returns the vectors indexed (0: the day's rows are removed)."""
    from videolake.platform.embedding.semantic import kmeans
    from videolake.platform.stages.embed import day_vectors

    ids, x32 = day_vectors(lake, day)
    model = _day_model(lake, day) if ids else None
    date = dt.date.fromisoformat(day)
    if ids:
        from videolake.platform.embedding.semantic import unit_rows

        x = unit_rows(x32)
        centroids, labels = kmeans(x, config.clusters_for(len(x)), iterations=config.iterations, seed=config.seed)
        radius = np.zeros(len(centroids))
        np.maximum.at(radius, labels, np.linalg.norm(x - centroids[labels], axis=1))
        sizes = np.bincount(labels, minlength=len(centroids))
        used = np.flatnonzero(sizes)
        order = np.lexsort((np.asarray(ids), labels))
    else:
        labels, order, used = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        centroids, radius, sizes = np.zeros((0, 0)), np.zeros(0), np.zeros(0, np.int64)
    index = pa.table(
        {
            "clip_id": pa.array([ids[i] for i in order], pa.string()),
            "cluster": pa.array(labels[order], pa.int32()),
            "embedding": _list_array(x32[order] if ids else np.zeros((0, 0), np.float32)),
            PARTITION_COLUMN: pa.array([date] * len(order), pa.date32()),
        }
    )
    clusters = pa.table(
        {
            "cluster": pa.array(used, pa.int32()),
            "centroid": _list_array(centroids[used].astype(np.float32)),
            "radius": pa.array(radius[used], pa.float64()),
            "members": pa.array(sizes[used], pa.int64()),
            "model": pa.array([model] * len(used), pa.string()),
            PARTITION_COLUMN: pa.array([date] * len(used), pa.date32()),
        }
    )
    rng = _day_range(day)
    lake.write_partitions(INDEX_TABLE, index, rng)
    lake.write_partitions(CLUSTERS_TABLE, clusters, rng)
    return len(ids)


def _day_model(lake: Any, day: str) -> str | None:
    """The model of the day's ok embeddings (one per commit of clip_embeddings)."""
    t = lake.read_partitions(EMBEDDINGS_TABLE, _day_range(day), columns=["model"], where=pc.field("status") == "ok")
    models = pc.unique(t.column("model")).to_pylist() if t.num_rows else []
    return models[0] if len(models) == 1 else None


def _within_bound(
    x: np.ndarray, centroids: np.ndarray, radius: np.ndarray, eps: float, block_rows: int = 1024
) -> np.ndarray:
    """(clusters,) bool: can the cluster hold a vector within eps of a row of ``x``? ``|a - c| <= r + sqrt(2 eps)``.
    Blocks of ``block_rows`` rows: memory is block_rows x clusters."""
    nearest = np.full(len(centroids), np.inf)
    if len(x) == 0 or len(centroids) == 0:
        return np.zeros(len(centroids), dtype=bool)
    c2 = (centroids * centroids).sum(1)[None, :]
    for s in range(0, len(x), block_rows):
        b = x[s : s + block_rows]
        d2 = (b * b).sum(1)[:, None] - 2.0 * (b @ centroids.T) + c2
        nearest = np.minimum(nearest, np.sqrt(np.maximum(d2, 0.0)).min(axis=0))
    return nearest <= radius + np.sqrt(2.0 * eps) + _SLACK


def _similar(x: np.ndarray, y: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with cosine(x[i], y[j]) >= 1 - eps; exactly equal vectors count as 1.0 (``eps = 0``
    finds exact copies whatever the rounding of a dot product)."""
    from videolake.platform.embedding.semantic import _BELOW_ONE

    sim = np.clip(x @ y.T, -1.0, _BELOW_ONE)
    same = {row.tobytes(): j for j, row in enumerate(y)}
    for i, row in enumerate(x):
        j = same.get(row.tobytes())
        if j is not None:
            sim[i, j] = 1.0
    rows, cols = np.nonzero(sim >= 1.0 - eps)
    return rows, cols


def matches_of_day(lake: Any, day: str, config: Any) -> SemanticMatches:
    """The semantic pairs of ``day`` (module docstring): within the day by its clusters, with earlier days through
    the cluster index; and the later days that may hold a duplicate of one of its clips."""
    from videolake.platform.embedding.semantic import duplicate_pairs

    out = SemanticMatches()
    if not lake.exists(INDEX_TABLE):
        return out
    date = dt.date.fromisoformat(day)
    own = lake.read_partitions(INDEX_TABLE, _day_range(day), columns=["clip_id", "cluster", "embedding"])
    if own.num_rows == 0:
        return out
    ids = own.column("clip_id").to_pylist()
    x = _vectors(own)
    labels = own.column("cluster").to_numpy()
    for a, b in duplicate_pairs(x, labels, config.eps, config.block_rows):
        out.pairs.append((ids[int(a)], ids[int(b)]))
    clusters = lake.read_where(
        CLUSTERS_TABLE, ["cluster", "centroid", "radius", "model", PARTITION_COLUMN], pc.field(PARTITION_COLUMN) != date
    )
    if clusters.num_rows == 0:
        return out
    dim = x.shape[1]
    own_models = pc.unique(
        lake.read_partitions(CLUSTERS_TABLE, _day_range(day), columns=["model"]).column("model")
    ).to_pylist()
    model = own_models[0] if len(own_models) == 1 else None
    lengths = pc.list_value_length(clusters.column("centroid")).to_numpy(zero_copy_only=False)
    same = lengths == dim
    if model is not None:  # another model's vectors cannot be compared (an unknown model: by dimension only)
        others = clusters.column("model").to_pylist()
        same &= np.array([m is None or m == model for m in others], dtype=bool)
    clusters = clusters.filter(pa.array(same))
    if clusters.num_rows == 0:
        return out
    flat = pc.list_flatten(clusters.column("centroid").combine_chunks()).to_numpy(zero_copy_only=False)
    near = _within_bound(
        x, flat.reshape(-1, dim).astype(np.float64), clusters.column("radius").to_numpy(), config.eps, config.block_rows
    )
    days = clusters.column(PARTITION_COLUMN).to_pylist()
    numbers = clusters.column("cluster").to_pylist()
    out.later_days = sorted({d for d, hit in zip(days, near) if hit and d > date})
    wanted: dict[dt.date, list[int]] = {}
    for d, c, hit in zip(days, numbers, near):
        if hit and d < date:
            wanted.setdefault(d, []).append(c)
    out.clusters_read = sum(len(v) for v in wanted.values())
    if not wanted:
        return out
    where = None
    for d, cs in sorted(wanted.items()):
        term = (pc.field(PARTITION_COLUMN) == d) & pc.field("cluster").isin(pa.array(cs, pa.int32()))
        where = term if where is None else where | term
    earlier = lake.read_where(INDEX_TABLE, ["clip_id", "embedding", PARTITION_COLUMN], where)
    y = _vectors(earlier)
    if len(y) == 0 or y.shape[1] != dim:
        return out
    other_ids = earlier.column("clip_id").to_pylist()
    other_days = earlier.column(PARTITION_COLUMN).to_pylist()
    found = set()
    for s in range(0, len(x), config.block_rows):
        rows, cols = _similar(x[s : s + config.block_rows], y, config.eps)
        for i, j in zip(rows.tolist(), cols.tolist()):
            out.pairs.append((ids[s + i], other_ids[j]))
            found.add((other_ids[j], other_days[j]))
    out.earlier = sorted(found, key=lambda t: (t[1], t[0]))
    return out
