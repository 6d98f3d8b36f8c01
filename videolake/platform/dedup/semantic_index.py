"""Semantic duplicates within a day and across days, through a cluster index of the embeddings stored in Delta.

The rule (``embedding.semantic``, NeMo Curator's SemDeDup): within a day, k-means over the day's vectors and pairs
within a cluster with cosine similarity >= 1 - eps. Across days the same threshold decides, and the index finds
every such pair without reading all earlier vectors:

* ``index_day`` (after a filtered_clips commit, one Ray task per day of the run) clusters the day's ok vectors of
  clip_embeddings (k = clips / items_per_cluster, seeded) and replaces the day's rows of ``semantic_index``, in one
  Delta commit: one row per vector (clip_id, its cluster, the vector; the day's file sorted by cluster), and on the
  first row of each cluster the cluster itself: its centroid, its radius (the largest distance of a member from the
  centroid), its size and the model. Why one table: Delta commits one table at a time, and clusters written in a
  commit of their own (an older videolake's ``semantic_clusters`` table) could be killed after the vectors, leaving
  cluster numbers and radii that do not describe the day's vectors; a pruning by such a radius loses pairs. Every
  state of one table is a day's vectors with their own clusters. A day whose rows carry no cluster (indexed by that
  older videolake) is indexed again by the first lookup that meets it (``_cluster_rows``).
* ``matches_of_day`` (one Ray task per judged day) reads the day's own rows, then the cluster rows of the other
  days (one per ~``items_per_cluster`` clips: their columns are null on every other row, so the read is small), and
  reads by predicate only the vectors of the earlier days'
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
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.lake.schemas import LAKE_SCHEMAS, PARTITION_COLUMN

log = logging.getLogger(__name__)

INDEX_TABLE = "semantic_index"
EMBEDDINGS_TABLE = "clip_embeddings"
# The columns of a day's cluster rows: set on the first row of each cluster only (``radius`` marks them).
_CLUSTER_COLUMNS = ["cluster", "centroid", "radius", "model", PARTITION_COLUMN]
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
    from videolake.platform.lake.table import PartitionRange

    return PartitionRange.of([day if isinstance(day, str) else day.isoformat()])


def _vectors(t: pa.Table, column: str = "embedding") -> np.ndarray:
    """The unit vectors of ``t``'s list column as float64 (n, dim)."""
    from videolake.platform.embedding.semantic import unit_rows

    if t.num_rows == 0:
        return np.zeros((0, 0))
    col = t.column(column).combine_chunks()
    flat = pc.list_flatten(col).to_numpy(zero_copy_only=False)
    return unit_rows(flat.reshape(t.num_rows, -1))


def _list_array(rows: np.ndarray, present: np.ndarray | None = None) -> pa.Array:
    """A list<float32> array of the rows of a 2-d array (no Python loop over rows); with ``present`` (bool, one per
    element of the array), the rows go to the True elements in order and the others are null."""
    n, dim = rows.shape if rows.ndim == 2 else (0, 0)
    if present is None:
        present = np.ones(n, dtype=bool)
    counts = np.concatenate([[0], np.cumsum(present, dtype=np.int64)])
    offsets = pa.array((counts * dim).astype(np.int32), pa.int32())
    values = pa.array(np.ascontiguousarray(rows, np.float32).reshape(-1), pa.float32())
    return pa.ListArray.from_arrays(offsets, values, mask=pa.array(~present) if not present.all() else None)


def index_day(lake: Any, day: str, config: Any) -> int:
    """Cluster ``day``'s ok vectors of clip_embeddings (``config``: SemanticDedupConfig) and replace the day's rows
    of the index, vectors and clusters in one commit; returns the vectors indexed (0: the day's rows are removed)."""
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
        order = np.lexsort((np.asarray(ids), labels))
    else:
        labels, order = np.zeros(0, np.int64), np.zeros(0, np.int64)
        centroids, radius, sizes = np.zeros((0, 0)), np.zeros(0), np.zeros(0, np.int64)
    cluster = labels[order]
    first = np.ones(len(order), dtype=bool)  # the first row of each cluster carries the cluster
    first[1:] = cluster[1:] != cluster[:-1]
    heads, others = cluster[first], ~first
    index = pa.table(
        {
            "clip_id": pa.array([ids[i] for i in order], pa.string()),
            "cluster": pa.array(cluster, pa.int32()),
            "embedding": _list_array(x32[order] if ids else np.zeros((0, 0), np.float32)),
            "centroid": _list_array(centroids[heads].astype(np.float32), first),
            "radius": pa.array(radius[cluster], pa.float64(), mask=others),
            "members": pa.array(sizes[cluster], pa.int64(), mask=others),
            "model": pa.array([model if f else None for f in first.tolist()], pa.string()),
            PARTITION_COLUMN: pa.array([date] * len(order), pa.date32()),
        }
    )
    lake.write_partitions(INDEX_TABLE, index, _day_range(day))
    return len(ids)


def _day_model(lake: Any, day: str) -> str | None:
    """The model of the day's ok embeddings (one per commit of clip_embeddings)."""
    t = lake.read_partitions(EMBEDDINGS_TABLE, _day_range(day), columns=["model"], where=pc.field("status") == "ok")
    models = pc.unique(t.column("model")).to_pylist() if t.num_rows else []
    return models[0] if len(models) == 1 else None


def _cluster_rows(lake: Any, config: Any) -> pa.Table:
    """The cluster rows of every day of the index (``_CLUSTER_COLUMNS``). A day with vectors and no cluster row was
    indexed by an older videolake, whose clusters were a table of their own that may not match the vectors (and is
    no longer read): it is indexed again here, from clip_embeddings, as ``index_day`` would after its next
    materialization. A day has vectors exactly when the Delta log holds a file of it (an empty day has none)."""
    if "radius" not in lake.column_names(INDEX_TABLE):  # not written since the index took the clusters in
        clusters = LAKE_SCHEMAS[INDEX_TABLE].empty_table().select(_CLUSTER_COLUMNS)
    else:
        clusters = _read_cluster_rows(lake)
    older = sorted(lake.partition_days(INDEX_TABLE) - set(clusters.column(PARTITION_COLUMN).to_pylist()))
    if not older:
        return clusters
    log.info("semantic_index: %d day(s) without cluster rows (an older index), indexed again: %s", len(older), older)
    for day in older:
        index_day(lake, day.isoformat(), config)
    return _read_cluster_rows(lake)


def _read_cluster_rows(lake: Any) -> pa.Table:
    """The rows that carry a cluster. Why ``radius >= 0`` and not ``is_valid``, and the filter again in memory: a
    file written before the column existed gets from delta-rs a guarantee (``radius >= null``) under which pyarrow
    takes ``is_valid(radius)`` as true and keeps every row of the file (pyarrow 26, deltalake's dataset)."""
    t = lake.read_where(INDEX_TABLE, _CLUSTER_COLUMNS, pc.field("radius") >= 0.0)
    return t.filter(pc.is_valid(t.column("radius")))


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
    clusters = _cluster_rows(lake, config)  # first: it may index the day itself again
    own = lake.read_partitions(INDEX_TABLE, _day_range(day), columns=["clip_id", "cluster", "embedding"])
    if own.num_rows == 0:
        return out
    ids = own.column("clip_id").to_pylist()
    x = _vectors(own)
    labels = own.column("cluster").to_numpy()
    for a, b in duplicate_pairs(x, labels, config.eps, config.block_rows):
        out.pairs.append((ids[int(a)], ids[int(b)]))
    on_day = pc.equal(clusters.column(PARTITION_COLUMN), pa.scalar(date, pa.date32()))
    own_models = pc.unique(clusters.filter(on_day).column("model")).to_pylist()
    clusters = _comparable_clusters(clusters.filter(pc.invert(on_day)), own_models, x.shape[1])
    if clusters.num_rows == 0:
        return out
    flat = pc.list_flatten(clusters.column("centroid").combine_chunks()).to_numpy(zero_copy_only=False)
    near = _within_bound(
        x,
        flat.reshape(-1, x.shape[1]).astype(np.float64),
        clusters.column("radius").to_numpy(),
        config.eps,
        config.block_rows,
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
    earlier = lake.read_where(INDEX_TABLE, ["clip_id", "embedding", PARTITION_COLUMN], _in_clusters(wanted))
    _add_earlier_pairs(out, ids, x, earlier, config)
    return out


def _comparable_clusters(clusters: pa.Table, own_models: list, dim: int) -> pa.Table:
    """The clusters whose vectors can be compared with the day's: same dimension and, when the day's rows name one
    model, that model (or none)."""
    if clusters.num_rows == 0:
        return clusters
    model = own_models[0] if len(own_models) == 1 else None
    lengths = pc.list_value_length(clusters.column("centroid")).to_numpy(zero_copy_only=False)
    same = lengths == dim
    if model is not None:  # another model's vectors cannot be compared (an unknown model: by dimension only)
        others = clusters.column("model").to_pylist()
        same &= np.array([m is None or m == model for m in others], dtype=bool)
    return clusters.filter(pa.array(same))


def _in_clusters(wanted: dict[dt.date, list[int]]) -> Any:
    """The filter of the index rows of the clusters ``wanted`` names per day."""
    where = None
    for d, cs in sorted(wanted.items()):
        term = (pc.field(PARTITION_COLUMN) == d) & pc.field("cluster").isin(pa.array(cs, pa.int32()))
        where = term if where is None else where | term
    return where


def _add_earlier_pairs(out: SemanticMatches, ids: list, x: np.ndarray, earlier: pa.Table, config: Any) -> None:
    """Add to ``out`` the pairs of the day's clips (``ids``, vectors ``x``) with the ``earlier`` days' clips, and
    those earlier clips (clip_id, day)."""
    y = _vectors(earlier)
    if len(y) == 0 or y.shape[1] != x.shape[1]:
        return
    other_ids = earlier.column("clip_id").to_pylist()
    other_days = earlier.column(PARTITION_COLUMN).to_pylist()
    found = set()
    for s in range(0, len(x), config.block_rows):
        rows, cols = _similar(x[s : s + config.block_rows], y, config.eps)
        for i, j in zip(rows.tolist(), cols.tolist()):
            out.pairs.append((ids[s + i], other_ids[j]))
            found.add((other_ids[j], other_days[j]))
    out.earlier = sorted(found, key=lambda t: (t[1], t[0]))
