"""Semantic duplicates across days through the cluster index (dedup.semantic_index), on a real Delta lake: a copy
landed on a later day is a `semantic` duplicate naming the earlier day's clip, a chain across three days names the
first clip, the verdicts are the same whatever order the days are materialized in, a day reads the vectors of the earlier
clusters that can hold a duplicate only, not every earlier vector, and a day's vectors and clusters are one commit:
a process killed while indexing leaves them matching (an index of an older videolake, whose clusters were a table of
their own, is indexed again)."""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from videolake.platform.dedup.cross_day import reconcile
from videolake.platform.dedup.semantic_index import INDEX_TABLE, index_day, matches_of_day
from videolake.platform.embedding.semantic import SemanticDedupConfig
from videolake.platform.lake.schemas import CLIP_EMBEDDINGS, FILTERED_CLIPS
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table

A, B, C = dt.date(2026, 4, 1), dt.date(2026, 4, 2), dt.date(2026, 4, 3)
DIM = 16
# eps 0.01: cosine >= 0.99. Small clusters, so that a day has several and the index can leave most unread.
CONFIG = SemanticDedupConfig(eps=0.01, items_per_cluster=2)


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _nudged(v: np.ndarray, rng: np.random.Generator, angle: float) -> np.ndarray:
    """A unit vector at ``angle`` radians from unit ``v``."""
    w = rng.normal(size=v.shape)
    w -= (w @ v) * v
    return _unit(np.cos(angle) * v + np.sin(angle) * _unit(w))


def _days() -> dict[dt.date, dict[str, np.ndarray]]:
    """Three days of vectors: ``orig`` on A, its copy ``copy`` on B (cosine ~0.998), a copy of the copy on C
    (cosine ~0.998 to ``copy``, ~0.992 to ``orig``), a far relative ``kin`` on C (cosine ~0.95: not a duplicate),
    and unrelated clips on every day: pairs of clips near directions of their own day (cosine ~0.96 to it, ~0.91 to each other)."""
    rng = np.random.default_rng(7)
    orig = _unit(rng.normal(size=DIM))
    copy = _nudged(orig, rng, 0.06)
    out: dict[dt.date, dict[str, np.ndarray]] = {A: {"a_orig": orig}, B: {"b_copy": copy}, C: {}}
    out[C]["c_copy2"] = _nudged(copy, rng, 0.06)
    out[C]["c_kin"] = _nudged(orig, rng, 0.32)
    for day, tag in ((A, "a"), (B, "b"), (C, "c")):
        for i in range(6):
            centre = _unit(rng.normal(size=DIM))
            for j in range(2):
                out[day][f"{tag}_other{i}{j}"] = _nudged(centre, rng, 0.3)
    return out


def _land(lake: Lake, day: dt.date, vectors: dict[str, np.ndarray], model: str = "test") -> None:
    """The day's clip_embeddings and filtered_clips rows (no fingerprints: only the semantic rule decides)."""
    rng = PartitionRange.of([day.isoformat()])
    emb = [
        {
            "clip_id": cid,
            "video_id": cid,
            "model": model,
            "status": "ok",
            "embedding": v.tolist(),
            "dim": DIM,
            "partition_date": day,
        }
        for cid, v in sorted(vectors.items())
    ]
    lake.write_partitions("clip_embeddings", rows_to_table(emb, CLIP_EMBEDDINGS), rng)
    rows = [
        {"clip_id": cid, "video_id": cid, "duration_s": 2.0, "passed": True, "partition_date": day}
        for cid in sorted(vectors)
    ]
    lake.write_partitions("filtered_clips", rows_to_table(rows, FILTERED_CLIPS), rng)


def _materialize(lake: Lake, day: dt.date, vectors: dict[str, np.ndarray]) -> list[str]:
    """What filtered_clips does for one day (stages.score.judge_across_days, without Ray)."""
    _land(lake, day, vectors)
    index_day(lake, day.isoformat(), CONFIG)
    return reconcile(lake, PartitionRange.of([day.isoformat()]), semantic=lambda d: matches_of_day(lake, d, CONFIG))


def _clusters(lake: Lake, days: PartitionRange) -> pa.Table:
    """The cluster rows of the index in ``days``: the rows that carry their cluster (a radius; filtered in memory,
    as pyarrow keeps every row of a file without the column under ``is_valid``, see semantic_index)."""
    rows = lake.read_partitions(INDEX_TABLE, days)
    return rows.filter(pc.is_valid(rows.column("radius")))


def _verdicts(lake: Lake) -> dict[str, tuple]:
    rows = lake.read_partitions("filtered_clips", PartitionRange(A, C + dt.timedelta(days=1))).to_pylist()
    return {
        r["clip_id"]: (r["passed"], r["duplicate_group"], r["duplicate_kept_date"], r["duplicate_kind"]) for r in rows
    }


@pytest.fixture(scope="module")
def days() -> dict[dt.date, dict[str, np.ndarray]]:
    return _days()


@pytest.fixture(scope="module")
def in_date_order(days, tmp_path_factory) -> Lake:
    lake = Lake(root=str(tmp_path_factory.mktemp("semantic-lake")))
    for day in (A, B, C):
        _materialize(lake, day, days[day])
    return lake


def test_a_copy_on_a_later_day_is_a_semantic_duplicate_of_the_earlier_clip(in_date_order, days):
    v = _verdicts(in_date_order)
    assert v["a_orig"] == (True, "a_orig", A, None)  # the kept clip names itself
    assert v["b_copy"] == (False, "a_orig", A, "semantic")
    assert v["c_copy2"] == (False, "a_orig", A, "semantic")  # a chain names the first clip
    assert v["c_kin"] == (True, None, None, None)  # cosine ~0.95 < 0.99
    dups = {c for c, x in v.items() if x[3] is not None}
    assert dups == {"b_copy", "c_copy2"}
    # The similarities the test relies on are what the docstring of _days says.
    cos = float(days[A]["a_orig"] @ days[C]["c_copy2"])
    assert 0.99 <= cos < float(days[A]["a_orig"] @ days[B]["b_copy"])


def test_verdicts_do_not_depend_on_materialization_order(in_date_order, days, tmp_path):
    expected = _verdicts(in_date_order)
    for order in ((C, B, A), (B, C, A), (C, A, B)):
        lake = Lake(root=str(tmp_path / "".join(d.strftime("%d") for d in order)))
        for day in order:
            _materialize(lake, day, days[day])
        assert _verdicts(lake) == expected, order
    # Re-materializing the earliest day without its clip frees the copies: the later days are judged again.
    lake = Lake(root=str(tmp_path / "again"))
    for day in (A, B, C):
        _materialize(lake, day, days[day])
    _materialize(lake, A, {k: x for k, x in days[A].items() if k != "a_orig"})
    v = _verdicts(lake)
    assert v["b_copy"] == (True, "b_copy", B, None) and v["c_copy2"] == (False, "b_copy", B, "semantic")


def test_a_day_reads_only_the_clusters_that_can_hold_a_duplicate(in_date_order, days):
    clusters = _clusters(in_date_order, PartitionRange(A, B + dt.timedelta(days=1)))
    assert clusters.num_rows == 14  # A and B: 13 vectors each, k = 7
    found = matches_of_day(in_date_order, C.isoformat(), CONFIG)
    assert 2 <= found.clusters_read <= 4  # those of a_orig and b_copy (and a neighbour that k-means put with them)
    assert set(found.earlier) >= {("a_orig", A), ("b_copy", B)}
    assert {("c_copy2", "a_orig"), ("c_copy2", "b_copy")} <= set(found.pairs)
    assert found.later_days == []
    # From A, the later days with a cluster within reach of its vectors: both hold a copy.
    assert matches_of_day(in_date_order, A.isoformat(), CONFIG).later_days == [B, C]
    # The index holds every vector once, under its day's cluster, the radius bounds each member.
    index = in_date_order.read_partitions(INDEX_TABLE, PartitionRange.of([A.isoformat()]))
    assert sorted(index.column("clip_id").to_pylist()) == sorted(days[A])
    by_cluster = {r["cluster"]: r for r in clusters.to_pylist() if r["partition_date"] == A}
    for r in index.to_pylist():
        c = by_cluster[r["cluster"]]
        assert np.linalg.norm(np.array(r["embedding"]) - np.array(c["centroid"])) <= c["radius"] + 1e-5


def test_an_exact_pair_at_any_distance_from_the_centroids_is_found(tmp_path):
    # Pairs the bound must not lose: every vector of a later day equal to one of an earlier day's, whichever cluster
    # it fell in (eps 0: only exact copies).
    rng = np.random.default_rng(3)
    earlier = {f"e{i:02d}": _unit(rng.normal(size=DIM)) for i in range(20)}
    later = {f"l{i:02d}": earlier[f"e{i:02d}"] for i in range(0, 20, 3)}
    exact = SemanticDedupConfig(eps=0.0, items_per_cluster=3)
    lake = Lake(root=str(tmp_path / "lake"))
    for day, vectors in ((A, earlier), (B, later)):
        _land(lake, day, vectors)
        index_day(lake, day.isoformat(), exact)
    found = matches_of_day(lake, B.isoformat(), exact)
    assert sorted(found.pairs) == sorted((f"l{i:02d}", f"e{i:02d}") for i in range(0, 20, 3))
    assert found.later_days == []


def test_vectors_of_another_model_are_never_compared(tmp_path):
    """The same vectors embedded on a later day by another model of the same dimension: no pair, no later day; the
    cluster rows name their model."""
    rng = np.random.default_rng(5)
    vectors = {f"e{i:02d}": _unit(rng.normal(size=DIM)) for i in range(8)}
    exact = SemanticDedupConfig(eps=0.0, items_per_cluster=3)
    lake = Lake(root=str(tmp_path / "lake"))
    for day, model in ((A, "model-a"), (B, "model-b"), (C, "model-a")):
        _land(lake, day, {f"{day:%d}{k}": v for k, v in vectors.items()}, model=model)
        index_day(lake, day.isoformat(), exact)
    clusters = _clusters(lake, PartitionRange(A, C + dt.timedelta(days=1)))
    assert {(r["partition_date"], r["model"]) for r in clusters.to_pylist()} == {
        (A, "model-a"),
        (B, "model-b"),
        (C, "model-a"),
    }
    found = matches_of_day(lake, B.isoformat(), exact)
    assert found.pairs == [] and found.later_days == [] and found.clusters_read == 0
    # the same model on C: every vector is an exact copy of A's
    on_c = matches_of_day(lake, C.isoformat(), exact)
    assert sorted(on_c.pairs) == sorted((f"03{k}", f"01{k}") for k in vectors)


class _Killed(Exception):
    """The process indexing a day was killed here."""


@dataclass(frozen=True)
class _KilledAfter(Lake):
    """A lake whose process is killed after ``writes`` Delta commits: the next write raises before it commits."""

    writes: int = 1
    done: list = field(default_factory=list)

    def write_partitions(self, table, data, partitions):
        if len(self.done) >= self.writes:
            raise _Killed(f"killed before writing {table}")
        self.done.append(table)
        return super().write_partitions(table, data, partitions)


def _assert_consistent(lake: Lake, day: dt.date) -> pa.Table:
    """Every vector of the day's index lies within the radius of its cluster as the index records it; returns the
    day's index rows."""
    rows = lake.read_partitions(INDEX_TABLE, PartitionRange.of([day.isoformat()]))
    heads = {r["cluster"]: r for r in rows.filter(pc.is_valid(rows.column("radius"))).to_pylist()}
    assert set(heads) == set(rows.column("cluster").to_pylist())
    for r in rows.to_pylist():
        c = heads[r["cluster"]]
        assert np.linalg.norm(np.array(r["embedding"]) - np.array(c["centroid"])) <= c["radius"] + 1e-5, r["clip_id"]
    return rows


@pytest.mark.parametrize("writes", [0, 1], ids=["killed-before-the-first-write", "killed-after-the-first-write"])
def test_a_day_killed_while_indexed_keeps_vectors_and_clusters_that_match(days, tmp_path, writes):
    """Day A indexed, then landed again with other vectors (the first ones negated) and indexed by a process that is
    killed after ``writes`` commits: whatever the point, the index holds A's vectors with their own clusters, and a
    lookup from B, which holds a copy of one of A's new vectors, finds exactly the pairs the index's vectors make.
    (With the clusters in a second commit, a kill after the first left A's new vectors under the old vectors'
    clusters, whose radii hid the copy.)"""
    lake = Lake(root=str(tmp_path / "lake"))
    first = days[A]
    again = {f"{k}_again": -v for k, v in first.items()}
    _land(lake, A, first)
    index_day(lake, A.isoformat(), CONFIG)
    _land(lake, B, {"b_copy_of_again": again["a_other00_again"]})
    index_day(lake, B.isoformat(), CONFIG)
    _land(lake, A, again)
    with contextlib.suppress(_Killed):
        index_day(_KilledAfter(root=lake.root, writes=writes), A.isoformat(), CONFIG)
    indexed = _assert_consistent(lake, A)
    assert sorted(indexed.column("clip_id").to_pylist()) == sorted(first if writes == 0 else again)
    held = dict(zip(indexed.column("clip_id").to_pylist(), indexed.column("embedding").to_pylist()))
    expected = [("b_copy_of_again", k) for k, v in held.items() if float(np.dot(v, again["a_other00_again"])) >= 0.99]
    assert expected == ([] if writes == 0 else [("b_copy_of_again", "a_other00_again")])
    assert matches_of_day(lake, B.isoformat(), CONFIG).pairs == expected


def test_an_index_of_an_older_videolake_is_indexed_again(days, tmp_path):
    """A day indexed by an older videolake (vectors without cluster rows: its clusters were the table
    semantic_clusters, committed apart) is indexed again by the first lookup that meets it, its clusters then
    committed with its vectors; a later copy of one of its clips is found."""
    from deltalake import write_deltalake

    lake = Lake(root=str(tmp_path / "lake"))
    _land(lake, A, days[A])
    old = pa.table(  # the older columns; every vector under one cluster, as clusters of another run might say
        {
            "clip_id": pa.array(sorted(days[A]), pa.string()),
            "cluster": pa.array([0] * len(days[A]), pa.int32()),
            "embedding": pa.array([days[A][k].tolist() for k in sorted(days[A])], pa.list_(pa.float32())),
            "partition_date": pa.array([A] * len(days[A]), pa.date32()),
        }
    )
    write_deltalake(lake.table_uri(INDEX_TABLE), old, partition_by=["partition_date"])
    _land(lake, B, {"b_copy": days[B]["b_copy"]})
    index_day(lake, B.isoformat(), CONFIG)  # the table gains the cluster columns; A's rows have none
    assert _clusters(lake, PartitionRange.of([A.isoformat()])).num_rows == 0
    found = matches_of_day(lake, B.isoformat(), CONFIG)
    assert found.pairs == [("b_copy", "a_orig")] and found.earlier == [("a_orig", A)]
    assert _clusters(lake, PartitionRange.of([A.isoformat()])).num_rows == 7  # 13 vectors, k = 7
    _assert_consistent(lake, A)
    # a day left without vectors has no file, so it is never taken for an older index
    _land(lake, B, {})
    index_day(lake, B.isoformat(), CONFIG)
    assert lake.partition_days(INDEX_TABLE) == {A}
