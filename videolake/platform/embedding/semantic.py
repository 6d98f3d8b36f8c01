"""Semantic deduplication of clips by their embeddings, as NVIDIA NeMo Curator's SemDeDup does it.

1. k-means over the L2-normalised embeddings, so that only clips of one cluster are compared (pairs within a
   cluster instead of all n^2 pairs);
2. within each cluster every pair with cosine similarity >= 1 - eps is a duplicate pair;
3. duplicate groups are the connected components of those pairs (a-b and b-c put a, b and c in one group even when
   a-c is below the threshold);
4. each group keeps one clip, by a documented rank: the highest ``rank_score`` (e.g. a quality score the caller
   passes; NaN ranks last), ties broken by the earliest ``order_key`` = (partition_date, clip_id), so that the
   clip that landed first stays and a re-run keeps the same one.

Clusters can split a duplicate pair (two near-copies on either side of a boundary are not compared): that is the
price of not comparing all pairs, the same as NeMo Curator's. Fewer, larger clusters miss fewer pairs and cost more.

Similarity is 1.0 exactly when two normalised vectors are equal and below 1.0 otherwise, so ``eps=0`` groups exact
copies only, whatever the float rounding of a dot product.

Why our own k-means and not scikit-learn's: scikit-learn is not a dependency (and faiss/cuML are not either), and a
seeded k-means++ with a fixed number of Lloyd iterations is a few dozen lines of numpy that is deterministic and fast
at the per-day size (thousands to a few hundred thousand clips). At a larger scale the clusters can be computed per
batch or on a sample and the rest assigned to the nearest centroid (``assign``).

NeMo Curator advises looking at the similarity distribution before choosing ``eps``: ``similarity_summary`` gives
each clip's highest similarity within its cluster (quantiles and a histogram) and what several eps values would
remove.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# The largest float64 below 1.0: the similarity of two vectors that are not equal never reaches 1.0.
_BELOW_ONE = float(np.nextafter(1.0, 0.0))
SUMMARY_EPS = (0.001, 0.01, 0.05, 0.1)


@dataclass(frozen=True)
class SemanticDedupConfig:
    """How clips are clustered and when two are duplicates."""

    n_clusters: int = 0  # k of k-means; 0 = ceil(items / items_per_cluster); never more than the items
    items_per_cluster: int = 1000  # the target cluster size when n_clusters is 0 (pairs cost ~ size^2 per cluster)
    eps: float = 0.01  # a pair is a duplicate when cosine >= 1 - eps (NeMo Curator's examples use 0.01)
    iterations: int = 20  # Lloyd iterations at most (stops earlier when no assignment changes: the same result)
    seed: int = 0  # seed of the k-means++ initialisation: the same seed and input give the same clusters
    block_rows: int = 1024  # rows per similarity block: memory is block_rows x cluster size float64

    def __post_init__(self) -> None:
        if self.n_clusters < 0 or self.items_per_cluster < 1 or self.iterations < 0 or self.block_rows < 1:
            raise ValueError("need n_clusters >= 0, items_per_cluster >= 1, iterations >= 0, block_rows >= 1")
        if not 0.0 <= self.eps <= 1.0:
            raise ValueError(f"eps must be in [0, 1], got {self.eps}")

    def clusters_for(self, n: int) -> int:
        """k for ``n`` items."""
        if n <= 0:
            return 0
        k = self.n_clusters or math.ceil(n / self.items_per_cluster)
        return max(1, min(k, n))


def unit_rows(embeddings: np.ndarray) -> np.ndarray:
    """The rows L2-normalised in float64. Raises ValueError for a non-finite or zero row (a failed embedding must
    not reach deduplication) or for input that is not (n, d)."""
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be (n, d), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("embeddings hold non-finite values")
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norm == 0):
        raise ValueError(f"embeddings hold zero rows: {np.flatnonzero(norm[:, 0] == 0)[:10].tolist()}")
    return x / norm


# -- k-means --------------------------------------------------------------------------------------------------


def _sq_distances(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    return np.maximum((x * x).sum(1)[:, None] - 2.0 * (x @ centroids.T) + (centroids * centroids).sum(1)[None, :], 0.0)


def assign(x: np.ndarray, centroids: np.ndarray, block_rows: int = 65536) -> np.ndarray:
    """The nearest centroid of each row (squared Euclidean; ties go to the lower index)."""
    x = np.asarray(x, dtype=np.float64)
    labels = np.empty(len(x), dtype=np.int64)
    for s in range(0, len(x), block_rows):
        labels[s : s + block_rows] = np.argmin(_sq_distances(x[s : s + block_rows], centroids), axis=1)
    return labels


def _kmeans_pp(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding: each next centre drawn with probability ~ squared distance to the nearest chosen one.
    Stops early when every point coincides with a centre (fewer distinct points than k)."""
    chosen = [int(rng.integers(len(x)))]
    d2 = _sq_distances(x, x[chosen]).min(axis=1)
    while len(chosen) < k:
        total = float(d2.sum())
        if total <= 0.0:
            break
        nxt = int(rng.choice(len(x), p=d2 / total))
        chosen.append(nxt)
        d2 = np.minimum(d2, _sq_distances(x, x[[nxt]])[:, 0])
    return x[chosen].copy()


def kmeans(x: np.ndarray, k: int, *, iterations: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(centroids (k', d), labels (n,)) of Lloyd's k-means with k-means++ seeding; deterministic for a seed.

    k' <= k: fewer when there are fewer items or fewer distinct items. An emptied cluster keeps its centroid.
    """
    x = np.asarray(x, dtype=np.float64)
    if len(x) == 0 or k < 1:
        return np.zeros((0, x.shape[1] if x.ndim == 2 else 0)), np.zeros(0, dtype=np.int64)
    centroids = _kmeans_pp(x, min(k, len(x)), np.random.default_rng(seed))
    labels = assign(x, centroids)
    for _ in range(iterations):
        counts = np.bincount(labels, minlength=len(centroids))
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, x)
        filled = counts > 0
        centroids = centroids.copy()
        centroids[filled] = sums[filled] / counts[filled, None]
        new = assign(x, centroids)
        if np.array_equal(new, labels):  # a fixed point: more iterations change nothing
            break
        labels = new
    return centroids, labels


def cluster_labels(embeddings: np.ndarray, config: SemanticDedupConfig = SemanticDedupConfig()) -> np.ndarray:
    """The k-means cluster of each embedding (normalised first), k from ``config.clusters_for``."""
    x = unit_rows(embeddings)
    return kmeans(x, config.clusters_for(len(x)), iterations=config.iterations, seed=config.seed)[1]


# -- pairs and groups -----------------------------------------------------------------------------------------


def _cluster_blocks(x: np.ndarray, labels: np.ndarray, block_rows: int) -> Iterator[tuple[np.ndarray, int, np.ndarray]]:
    """(members, start, sim) for each block of rows of each cluster: ``sim[r, j]`` is the cosine similarity of
    member ``start + r`` with member ``j`` (exactly 1.0 for equal vectors, below 1.0 for any others)."""
    labels = np.asarray(labels)
    if labels.shape != (len(x),):
        raise ValueError(f"labels must be ({len(x)},), got {labels.shape}")
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        xc = x[members]
        same = np.unique(xc, axis=0, return_inverse=True)[1].reshape(-1)  # equal vectors share an id
        for start in range(0, len(members), block_rows):
            sim = xc[start : start + block_rows] @ xc.T
            np.clip(sim, -1.0, _BELOW_ONE, out=sim)
            sim[same[start : start + block_rows, None] == same[None, :]] = 1.0
            yield members, start, sim


def _upper(sim: np.ndarray, start: int) -> np.ndarray:
    """Mask of the block's entries (r, j) with j > start + r: each unordered pair once, no self pairs."""
    return np.arange(sim.shape[1])[None, :] > (start + np.arange(sim.shape[0]))[:, None]


def duplicate_pairs(embeddings: np.ndarray, labels: np.ndarray, eps: float, block_rows: int = 1024) -> np.ndarray:
    """(p, 2) int64 index pairs (i < j, sorted) of one cluster with cosine similarity >= 1 - eps."""
    x = unit_rows(embeddings)
    found = []
    for members, start, sim in _cluster_blocks(x, labels, block_rows):
        r, j = np.nonzero((sim >= 1.0 - eps) & _upper(sim, start))
        found.append(np.stack([members[start + r], members[j]], axis=1))
    pairs = np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)
    pairs = np.sort(pairs.astype(np.int64), axis=1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))] if len(pairs) else pairs.reshape(0, 2)


def components(n: int, pairs: np.ndarray) -> list[list[int]]:
    """The connected components of size >= 2 of the graph on 0..n-1 with edges ``pairs``; each sorted, listed by
    their smallest member."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in np.asarray(pairs, dtype=np.int64).reshape(-1, 2):
        ra, rb = root(int(a)), root(int(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return [g for _, g in sorted(groups.items()) if len(g) >= 2]


def similarity_summary(
    embeddings: np.ndarray,
    labels: np.ndarray,
    eps_values: Sequence[float] = SUMMARY_EPS,
    bins: int = 20,
    block_rows: int = 1024,
) -> dict[str, Any]:
    """What the similarity within clusters looks like, to choose eps from (JSON-ready).

    ``max_similarity``: each clip's highest cosine similarity to another clip of its cluster (clips alone in their
    cluster have none and are counted as ``singletons``): its quantiles (p50, p90, p99, max; None when no clip has
    a neighbour) and a histogram over ``bins`` equal bins of [0, 1] (``edges``, ``counts``; a value below 0 counts
    in the first bin, 1.0 in the last). ``by_eps``: for each eps, the duplicate ``pairs``, the ``groups`` they form
    and the ``duplicates`` deduplication would remove (group members minus one kept per group).
    """
    x = unit_rows(embeddings)
    n = len(x)
    labels = np.asarray(labels)
    best = np.full(n, np.nan)
    pairs: dict[float, list[np.ndarray]] = {float(e): [] for e in eps_values}
    for members, start, sim in _cluster_blocks(x, labels, block_rows):
        rows = members[start : start + len(sim)]
        if len(members) > 1:
            others = sim.copy()
            others[np.arange(len(sim)), start + np.arange(len(sim))] = -np.inf  # not itself
            best[rows] = others.max(axis=1)
        upper = _upper(sim, start)
        for e in pairs:
            r, j = np.nonzero((sim >= 1.0 - e) & upper)
            pairs[e].append(np.stack([members[start + r], members[j]], axis=1))
    values = best[~np.isnan(best)]
    edges = np.linspace(0.0, 1.0, bins + 1)
    counts = np.histogram(np.clip(values, 0.0, 1.0), bins=edges)[0]
    quant = {
        name: (float(np.quantile(values, q)) if len(values) else None)
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))
    }
    by_eps = []
    for e, found in pairs.items():
        p = np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)
        groups = components(n, p)
        by_eps.append(
            {
                "eps": e,
                "threshold": 1.0 - e,
                "pairs": int(len(p)),
                "groups": len(groups),
                "duplicates": int(sum(len(g) - 1 for g in groups)),
            }
        )
    sizes = np.bincount(np.unique(labels, return_inverse=True)[1].reshape(-1)) if n else np.zeros(0, dtype=np.int64)
    return {
        "items": int(n),
        "clusters": int(len(sizes)),
        "largest_cluster": int(sizes.max()) if len(sizes) else 0,
        "singletons": int(n - len(values)),
        "max_similarity": {
            **quant,
            "histogram": {"edges": [float(v) for v in edges], "counts": [int(c) for c in counts]},
        },
        "by_eps": by_eps,
    }
