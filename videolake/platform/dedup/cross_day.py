"""Near-duplicate verdicts within a day and across days, through a band-key index stored in Delta.

The rule (the contract ``filtered_clips.duplicate_group`` keeps; ``dedup.grouping``): clips are taken earliest
first by (partition_date, clip_id); a clip that matches (``dedup.near``, or a semantic pair) the **kept** clip of an
earlier group joins the earliest such group, else it is kept itself, also across days. Every member matches its
kept clip itself: a match with a member only (A ~ B, B ~ C, A !~ C: a longer clip over two shots) joins nothing.
``duplicate_group`` holds the kept clip's clip_id on every member (the kept one too), ``duplicate_kept_date`` its
day, and every member but the kept one is rejected as ``duplicate`` with ``duplicate_kind`` near (or semantic, when
the edge to the kept clip is the semantic rule's). The kept clip a candidate of an earlier day names is read and
verified too, whether the index found it or not (``_kept_clips_of``).

The index: table ``near_dup_index``, one row per (clip, band key) it files the clip under (``near.history_keys``:
8 bands of 28 bits of each view hash of 4 frames evenly spread over the clip, ~600 keys a clip), partitioned by day
and sorted by key within a day's file; a clip is named by an 8-byte digest of its id (``clip_keys``). A day's
candidates from other days are one batched lookup of the keys of every frame of the day's clips
(``near.history_probe_keys``) in the index's integer columns (``_lookup``), never a comparison with every earlier
clip; only clips sharing at least MIN_SHARED_KEYS keys are verified with the full fingerprints, read from their own
days. The lookup reads the key columns of the whole index, so its cost grows with history: filing 4 of the 16
frames at 8 bands (not 16 frames x 16 bands, ~4,100 keys) keeps it a small part of a day's cost
(``videolake bench dedup``).

Order of materialization: ``reconcile`` runs after every filtered_clips commit. It writes the index of the run's
days, then judges the run's days and every later day that shares a band key with a day it re-judged, or whose rows
name one of those days as their kept clip's day, in date order, rewriting the days whose verdicts changed. The
asset records a materialization for each changed day outside the run (Dagster shows its downstream stale), as
raw_videos does for exact copies. So the verdicts of a set of days do not depend on the order the days were
materialized in (tests/assets/test_near_duplicates_across_days.py).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.filters.reject_rules import join_rules
from videolake.platform.lake.schemas import PARTITION_COLUMN

log = logging.getLogger(__name__)

TABLE = "filtered_clips"
INDEX_TABLE = "near_dup_index"
HASH_BYTES = 32
NEAR, SEMANTIC = "near", "semantic"
# Two clips are verified (their fingerprints compared) only when they share at least this many index keys (the
# later clip's probe keys against the earlier one's filed keys). Copies share many (several frames, many views
# within a few bits); two unrelated clips share a key only by chance, with a probability that grows with the index,
# and two chance keys are that probability squared. On the real-footage set (videolake.evaluation.near_copies: 13
# originals x 14 kinds of copy) every (original, copy) pair shares at least 3 keys either way round (5th percentile
# 5); 0.003 % of the pairs of different footage are candidates.
MIN_SHARED_KEYS = 2
DUPLICATE = "duplicate"
VERDICT_COLUMNS = ("duplicate_group", "duplicate_kept_date", "duplicate_kind", "reject_reason", "passed")
CANDIDATE_COLUMNS = ["clip_id", PARTITION_COLUMN, "near_hashes", "duplicate_group", "duplicate_kept_date"]


def fingerprint_of(value: bytes | None) -> np.ndarray:
    """The (k, 32) uint8 PDQ hashes stored in ``near_hashes`` (k = 0 for none)."""
    if not value:
        return np.zeros((0, HASH_BYTES), dtype=np.uint8)
    return np.frombuffer(value, dtype=np.uint8).reshape(-1, HASH_BYTES)


def clip_keys(clip_ids: Iterable[str]) -> np.ndarray:
    """The index's int64 key of each clip id: the first 8 bytes of its BLAKE2b digest (signed). Why not the id:
    the day's lookup reads this column of every index row it matches, and an integer column costs a tenth of a
    string one to read; two of 10^9 clips share a key with probability ~3e-2 % (and then both are verified)."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(c.encode(), digest_size=8).digest(), "little", signed=True) for c in clip_ids],
        dtype=np.int64,
    )


def index_rows(rows: pa.Table, config: Any = None) -> pa.Table:
    """Index rows (band_key, clip_key, partition_date) of ``rows`` (clip_id, near_hashes, partition_date), sorted by
    key: one row per distinct band key of each clip's fingerprint."""
    from videolake.platform.dedup.near import NearDupConfig, history_keys

    config = config or NearDupConfig()
    keys: list[np.ndarray] = []
    days: list[Any] = []
    ckeys = clip_keys(rows.column("clip_id").to_pylist())
    for blob, day in zip(rows.column("near_hashes").to_pylist(), rows.column(PARTITION_COLUMN).to_pylist()):
        k = history_keys(fingerprint_of(blob), config)
        keys.append(k)
        days.extend([day] * len(k))
    out = pa.table(
        {
            "band_key": pa.array(np.concatenate(keys) if keys else np.zeros(0, np.int64), pa.int64()),
            "clip_key": pa.array(np.repeat(ckeys, [len(k) for k in keys]).astype(np.int64), pa.int64()),
            PARTITION_COLUMN: pa.array(days, pa.date32()),
        }
    )
    return out.sort_by([("band_key", "ascending"), ("clip_key", "ascending")])


# ------------------------------------------------------------------------------------------------ one day


def _candidate_pairs(prints: Sequence[np.ndarray], n: int, config: Any) -> list[tuple[int, int]]:
    """Pairs (a, b) of node indices sharing at least MIN_SHARED_KEYS index keys, a a day clip (a < n) and b a later
    day clip or an earlier day's clip: one hash join of the key lists (Arrow), never all pairs."""
    from videolake.platform.dedup.near import index_keys

    keys = [index_keys(fp, config) for fp in prints]
    if not any(len(k) for k in keys):
        return []
    table = pa.table(
        {
            "key": pa.array(np.concatenate(keys), pa.int64()),
            "node": pa.array(np.repeat(np.arange(len(keys)), [len(k) for k in keys]), pa.int64()),
        }
    )
    day = table.filter(pc.less(table.column("node"), n)).rename_columns(["key", "a"])
    joined = day.join(table.rename_columns(["key", "b"]), "key", join_type="inner")
    a, b = joined.column("a"), joined.column("b")
    keep = pc.and_(pc.not_equal(a, b), pc.or_(pc.greater_equal(b, n), pc.greater(b, a)))
    counts = joined.filter(keep).group_by(["a", "b"]).aggregate([("key", "count")])
    counts = counts.filter(pc.greater_equal(counts.column("key_count"), MIN_SHARED_KEYS))
    return sorted(zip(counts.column("a").to_pylist(), counts.column("b").to_pylist()))


def assign_day(
    rows: Sequence[Mapping[str, Any]],
    day: dt.date,
    earlier: Sequence[Mapping[str, Any]] = (),
    config: Any = None,
    semantic_pairs: Iterable[tuple[str, str]] = (),
) -> list[dict[str, Any]]:
    """The day's rows with their duplicate verdicts (``VERDICT_COLUMNS``), from scratch (idempotent).

    ``rows``: the day's filtered_clips rows (at least clip_id, near_hashes, reject_reason). ``earlier``: candidate
    clips of earlier days (``CANDIDATE_COLUMNS``), as their own verdicts name them. ``semantic_pairs``: clip-id pairs
    the semantic rule found (either id may be an earlier clip's). Returns new dicts in the input order.
    """
    from videolake.platform.dedup.grouping import assign
    from videolake.platform.dedup.near import NearDupConfig

    config = config or NearDupConfig()
    out = [dict(r) for r in rows]
    # A kept clip named only by clips of later days carries its own id (``_mark_kept`` sets it; this day's rows
    # cannot tell whether those later clips still name it): kept, unless this judgement makes it a group's member.
    # One that rows of this day named is judged here from scratch like the others.
    marked = {c: d for c, d in _self_marks(out, day).items() if c not in _named_here(out)}
    _forget_verdicts(out)
    nodes = _Nodes(out, day, earlier)
    edges = _edges(nodes, config, semantic_pairs)
    n = len(out)
    fixed = {n + j: nodes.index.get(nodes.kept_of(n + j)[1], -1) for j in range(len(nodes.prior))}
    order = sorted(range(n), key=lambda i: out[i]["clip_id"])
    _record_groups(nodes, assign(order, edges, fixed))
    for r in out:
        if r["duplicate_group"] is None and r["clip_id"] in marked:
            r["duplicate_group"], r["duplicate_kept_date"] = r["clip_id"], marked[r["clip_id"]]
    return out


def _forget_verdicts(out: list[dict[str, Any]]) -> None:
    """Clear the rows' duplicate verdicts (an earlier assignment), keeping their other reject reasons."""
    for r in out:
        reasons = [x for x in (r.get("reject_reason") or "").split(";") if x and x != DUPLICATE]
        r["reject_reason"] = join_rules(reasons)
        r["passed"] = r["reject_reason"] is None
        r["duplicate_group"] = r["duplicate_kept_date"] = r["duplicate_kind"] = None


class _Nodes:
    """The nodes ``assign_day`` groups: the day's rows (0 .. n - 1), then the candidates of earlier days (n ..) in
    (day, clip_id) order, with their fingerprints and an index by clip id."""

    def __init__(self, out: list[dict[str, Any]], day: dt.date, earlier: Sequence[Mapping[str, Any]]) -> None:
        self.out, self.day, self.n = out, day, len(out)
        self.prints = [fingerprint_of(r.get("near_hashes")) for r in out]
        self.prior = sorted(
            (e for e in earlier if e[PARTITION_COLUMN] < day), key=lambda e: (e[PARTITION_COLUMN], e["clip_id"])
        )
        self.prior_prints = [fingerprint_of(e.get("near_hashes")) for e in self.prior]
        self.index = {r["clip_id"]: i for i, r in enumerate(out)}
        self.index.update({e["clip_id"]: self.n + j for j, e in enumerate(self.prior)})

    def kept_of(self, i: int) -> tuple[dt.date, str]:
        """(day, clip_id) of the kept clip of node ``i``'s group (itself for a day clip: judged from scratch)."""
        if i < self.n:
            return self.day, self.out[i]["clip_id"]
        e = self.prior[i - self.n]
        if e.get("duplicate_group"):
            return e["duplicate_kept_date"], e["duplicate_group"]
        return e[PARTITION_COLUMN], e["clip_id"]

    def fingerprint(self, i: int) -> np.ndarray:
        """Node ``i``'s fingerprint."""
        return self.prints[i] if i < self.n else self.prior_prints[i - self.n]


def _edges(nodes: _Nodes, config: Any, semantic_pairs: Iterable[tuple[str, str]]) -> dict[tuple[int, int], str]:
    """The verified matches (a, b) -> kind (near or semantic) between a day clip a and another node b."""
    from videolake.platform.dedup.near import is_near_duplicate

    n, index = nodes.n, nodes.index
    # Only a group's kept clip can be joined (``grouping``): a day clip that shares keys with a member of an earlier
    # group is verified against that group's kept clip too, when it is among the candidates.
    pairs = set(_candidate_pairs(nodes.prints + nodes.prior_prints, n, config))
    for a, b in list(pairs):
        if b >= n and nodes.kept_of(b)[1] in index and index[nodes.kept_of(b)[1]] >= n:
            pairs.add((a, index[nodes.kept_of(b)[1]]))
    edges: dict[tuple[int, int], str] = {}
    for a, b in sorted(pairs):
        if is_near_duplicate(nodes.prints[a], nodes.fingerprint(b), config):
            edges[(a, b)] = NEAR
    for x, y in semantic_pairs:
        if x in index and y in index and x != y:
            edges.setdefault((index[x], index[y]), SEMANTIC)  # a near edge either way round wins (``assign``)
    return edges


def _record_groups(nodes: _Nodes, joined: dict[int, tuple[int, str]]) -> None:
    """Write ``assign``'s grouping into the day's rows: members name their kept clip and are rejected duplicate; a
    day clip that members name names itself."""
    named = {kept for kept, _ in joined.values()}
    for m in range(nodes.n):
        r = nodes.out[m]
        if m in joined:
            kept, kind = joined[m]
            kept_day, kept_id = nodes.kept_of(kept)
            r["duplicate_group"], r["duplicate_kept_date"] = kept_id, kept_day
            r["reject_reason"] = join_rules((r["reject_reason"] or "").split(";") + [DUPLICATE])
            r["passed"] = False
            r["duplicate_kind"] = kind
        elif m in named:
            r["duplicate_group"], r["duplicate_kept_date"] = r["clip_id"], nodes.day


def _self_marks(rows: Sequence[Mapping[str, Any]], day: dt.date) -> dict[str, dt.date]:
    """The day's clips whose ``duplicate_group`` names themselves (kept clips of a group), with their day."""
    return {
        r["clip_id"]: day
        for r in rows
        if r.get("duplicate_group") == r["clip_id"] and r.get("duplicate_kept_date") == day
    }


def _named_here(rows: Sequence[Mapping[str, Any]]) -> set[str]:
    """The kept clips that another of these rows names."""
    return {r["duplicate_group"] for r in rows if r.get("duplicate_group") and r["duplicate_group"] != r["clip_id"]}


# ------------------------------------------------------------------------------------------------ across days


@dataclass
class Reconciled:
    """What ``reconcile`` changed."""

    changed_days: list[str] = field(default_factory=list)  # days whose rows were rewritten (run days included)
    outside_run: list[str] = field(default_factory=list)  # of those, the days the run did not materialize
    judged_days: list[str] = field(default_factory=list)  # every day judged
    candidates: int = 0  # clips of other days found through the index and verified
    indexed_days: list[str] = field(default_factory=list)  # days the index had no rows for, indexed first
    clips_of_copies: int = 0  # rows removed: clips of videos raw_videos marked as copies after they were cut


def _verdict_key(r: Mapping[str, Any]) -> tuple:
    return tuple(r.get(c) for c in VERDICT_COLUMNS)


def write_index(lake: Any, run: Any, config: Any = None) -> int:
    """Replace the index rows of the run's days with those of their filtered_clips rows; returns the rows written.
    A day's keys are written sorted (delta-encoded: ``schemas.COLUMN_ENCODINGS``)."""
    rows = lake.read_partitions(TABLE, run, columns=["clip_id", "near_hashes", PARTITION_COLUMN])
    idx = index_rows(rows, config)
    lake.write_partitions(INDEX_TABLE, idx, run)
    return idx.num_rows


def replace_outdated_index(lake: Any) -> bool:
    """Empty the index when its columns are not the current ones (an index of an older videolake); the days are
    then indexed again by ``index_missing_days``. Returns whether it was replaced."""
    from videolake.platform.lake.schemas import LAKE_SCHEMAS

    if not lake.exists(INDEX_TABLE) or lake.column_names(INDEX_TABLE) == LAKE_SCHEMAS[INDEX_TABLE].names:
        return False
    log.info("near_dup_index: columns of an older version; emptied, to be indexed again")
    lake.replace_table(INDEX_TABLE)
    return True


def index_missing_days(lake: Any, config: Any = None) -> list[str]:
    """Index the filtered_clips days the index has no rows for; returns them (ISO dates).

    Why: a lake written before the index existed, or whose index table was deleted to rebuild it (after a change of
    its keys), would otherwise miss every cross-day duplicate of those days until each day was rematerialized. A day
    whose clips have no fingerprint files no key: it is looked for again at each run (one read of its fingerprint
    column) and never returned. ``reconcile`` judges the returned days again, as their verdicts were made without
    the index."""
    from videolake.platform.lake.table import PartitionRange

    missing = sorted(lake.partition_days(TABLE) - lake.partition_days(INDEX_TABLE))
    for rng in PartitionRange.split([d.isoformat() for d in missing]):
        write_index(lake, rng, config)
    indexed = sorted(set(missing) & lake.partition_days(INDEX_TABLE))  # a day without fingerprints files no key
    if indexed:
        log.info(
            "near_dup_index: indexed %d day(s) it had no rows for (%s .. %s)", len(indexed), indexed[0], indexed[-1]
        )
    return [d.isoformat() for d in indexed]


# What _lookup finds (index rows of other days) and what _sharing makes of them (day clip -> other day's clip).
_HITS = pa.schema([("band_key", pa.int64()), ("clip_key", pa.int64()), (PARTITION_COLUMN, pa.date32())])
_PAIRS = pa.schema([("day_clip", pa.string()), ("clip_key", pa.int64()), (PARTITION_COLUMN, pa.date32())])


def _lookup(lake: Any, keys: np.ndarray, day: dt.date) -> pa.Table:
    """Index rows (band_key, clip_key, partition_date) of other days than ``day`` that hold one of ``keys``.

    Why not a filtered scan (``isin``): its hash lookup of every index row costs ~60 ns a row. Each day's file is
    sorted by key, so this reads the two integer columns of each other day's file and finds its rows among the
    sorted probe keys with a binary search whose successive searches start where the last ended (~30 ns a row;
    a Bloom filter in front measured no cheaper); that cost still grows with the index (docs/duplicates.md, "Cost
    as history grows")."""
    empty = _HITS.empty_table()
    if len(keys) == 0 or not lake.exists(INDEX_TABLE):
        return empty
    from videolake.platform.dedup.near import sorted_unique

    # sorted, with a sentinel above every key: a search never falls off the end
    probe = np.append(sorted_unique(np.asarray(keys, dtype=np.int64)), np.iinfo(np.int64).max)
    parts = [empty]
    for fday, fragment in lake.day_fragments(INDEX_TABLE):
        if fday == day:
            continue
        cols = fragment.to_table(columns=["band_key", "clip_key"])
        k = cols.column("band_key").to_numpy()
        hit = np.flatnonzero(probe[np.searchsorted(probe, k)] == k)
        if len(hit):
            found = cols.take(pa.array(hit))
            parts.append(found.append_column(PARTITION_COLUMN, pa.array([fday] * len(hit), pa.date32())))
    return pa.concat_tables(parts, promote_options="permissive")


def _day_keys(rows: pa.Table, config: Any) -> pa.Table:
    """(band_key, day_clip) of every key the day's clips are looked up with (``near.history_probe_keys``)."""
    from videolake.platform.dedup.near import NearDupConfig, history_probe_keys

    config = config or NearDupConfig()
    keys, ids = [], []
    for cid, blob in zip(rows.column("clip_id").to_pylist(), rows.column("near_hashes").to_pylist()):
        k = history_probe_keys(fingerprint_of(blob), config)
        keys.append(k)
        ids.extend([cid] * len(k))
    return pa.table(
        {
            "band_key": pa.array(np.concatenate(keys) if keys else np.zeros(0, np.int64), pa.int64()),
            "day_clip": pa.array(ids, pa.string()),
        }
    )


def _sharing(day_keys: pa.Table, hits: pa.Table) -> pa.Table:
    """(day_clip, clip_key, partition_date) of the clips of ``hits`` that share at least MIN_SHARED_KEYS keys with a
    clip of the day (``day_clip``)."""
    if hits.num_rows == 0:
        return _PAIRS.empty_table()
    pairs = (
        day_keys.join(hits, "band_key", join_type="inner")
        .group_by(["day_clip", "clip_key", PARTITION_COLUMN])
        .aggregate([("band_key", "count")])
    )
    return pairs.filter(pc.greater_equal(pairs.column("band_key_count"), MIN_SHARED_KEYS)).select(
        ["day_clip", "clip_key", PARTITION_COLUMN]
    )


def _seen_both_ways(
    pairs: pa.Table, day_rows: pa.Table, earlier: list[dict[str, Any]], config: Any
) -> list[dict[str, Any]]:
    """The earlier candidates that also share a key the other way round with a day clip they share keys with:
    an earlier clip's probe keys against that day clip's filed keys.

    Why: a day is judged again when an earlier day it may depend on changes, and that earlier day finds it by
    looking its own clips' probe keys up in the index, which holds the later day's filed keys. Requiring a key
    that way round too makes every candidate the later day can have one that the earlier day's lookup finds, so
    the verdicts do not depend on the order days were materialized in. On the evaluation set every (original,
    copy) pair shares >= 3 keys either way; 5 of 2,510 found same-footage pairs (copies of copies) share none
    the other way."""
    from videolake.platform.dedup.near import history_keys, history_probe_keys

    if not earlier:
        return []
    filed = {
        cid: set(history_keys(fingerprint_of(blob), config).tolist())
        for cid, blob in zip(day_rows.column("clip_id").to_pylist(), day_rows.column("near_hashes").to_pylist())
    }
    partners: dict[tuple[str, Any], list[str]] = {}
    for a, b, d in zip(*(pairs.column(c).to_pylist() for c in ("day_clip", "clip_key", PARTITION_COLUMN))):
        partners.setdefault((b, d), []).append(a)
    out = []
    for e, key in zip(earlier, clip_keys(e["clip_id"] for e in earlier).tolist()):
        probe = set(history_probe_keys(fingerprint_of(e.get("near_hashes")), config).tolist())
        if any(probe & filed.get(a, set()) for a in partners.get((key, e[PARTITION_COLUMN]), ())):
            out.append(e)
    return out


def _candidates(lake: Any, hits: pa.Table) -> list[dict[str, Any]]:
    """The filtered_clips rows (``CANDIDATE_COLUMNS``) of the clips ``hits`` names (clip_key, partition_date), read
    from their days only."""
    from videolake.platform.lake.table import PartitionRange

    if hits.num_rows == 0:
        return []
    wanted = set(zip(hits.column("clip_key").to_pylist(), hits.column(PARTITION_COLUMN).to_pylist()))
    days = sorted({d.isoformat() for _, d in wanted})
    out: list[dict[str, Any]] = []
    for rng in PartitionRange.split(days):
        rows = lake.read_partitions(TABLE, rng, columns=CANDIDATE_COLUMNS).to_pylist()
        keys = clip_keys(r["clip_id"] for r in rows).tolist()
        out.extend(r for r, k in zip(rows, keys) if (k, r[PARTITION_COLUMN]) in wanted)
    return out


def _kept_clips_of(lake: Any, earlier: list[dict[str, Any]], day: dt.date) -> list[dict[str, Any]]:
    """The rows of the kept clips that candidates of earlier days name and that are not candidates themselves.

    Why: a clip joins a group only by matching its kept clip (``grouping``); the index finds the members a clip
    shares keys with, and their kept clip is verified too, whether or not the index found it."""
    have = {e["clip_id"] for e in earlier}
    want = {
        (e["duplicate_group"], e["duplicate_kept_date"])
        for e in earlier
        if e.get("duplicate_group") and e["duplicate_group"] not in have and e["duplicate_kept_date"] < day
    }
    if not want:
        return []
    hits = pa.table(
        {
            "clip_key": pa.array(clip_keys(c for c, _ in sorted(want)), pa.int64()),
            PARTITION_COLUMN: pa.array([d for _, d in sorted(want)], pa.date32()),
        }
    )
    return _candidates(lake, hits)


def _kept_in_earlier_days(rows: Iterable[Mapping[str, Any]], day: dt.date) -> set[tuple[dt.date, str]]:
    return {
        (r["duplicate_kept_date"], r["duplicate_group"])
        for r in rows
        if r.get("duplicate_group") and r["duplicate_kept_date"] < day
    }


def _mark_kept(lake: Any, kept: set[tuple[dt.date, str]]) -> int:
    """A kept clip is a member of its group too: its row names itself in ``duplicate_group`` exactly while another
    row (of any day) names it. Brings the rows of ``kept`` (clips of earlier days that a judged day named, or named
    before) to that, rewriting their days; returns the rows changed. Their verdicts do not change (a kept clip stays
    passed or not), so their days are not recorded as re-evaluated: nothing downstream reads duplicate_group.

    Why a rewrite of the day and not a Delta UPDATE of the rows: delta-rs 1.6's UPDATE writes the string columns it
    rewrites as Arrow string_view, which pyarrow's dataset filters then refuse to compare with the other files'
    strings ("no kernel matching input types (string, string_view)")."""
    from videolake.platform.lake.schemas import FILTERED_CLIPS
    from videolake.platform.lake.table import PartitionRange, rows_to_table

    if not kept:
        return 0
    ids = pa.array(sorted({k for _, k in kept}), pa.string())
    columns = ["clip_id", "duplicate_group", "duplicate_kept_date", PARTITION_COLUMN]
    named = lake.read_where(TABLE, columns, pc.field("duplicate_group").isin(ids))
    found = list(zip(*(named.column(c).to_pylist() for c in columns)))
    has_members = {g for c, g, _, _ in found if c != g}
    mark = {(d, c): (c, k) for c, g, k, d in found if c == g}  # (group, kept date) of the self-marks carried now
    # Only the days where a kept clip's mark is not what it should be are read and rewritten.
    stale = {d for d, c in kept if mark.get((d, c)) != ((c, d) if c in has_members else None)}
    changed = 0
    for day in sorted(stale):
        rows = lake.read_partitions(TABLE, PartitionRange.of([day.isoformat()])).to_pylist()
        dirty = 0
        for r in rows:
            if (day, r["clip_id"]) not in kept or r["duplicate_group"] not in (None, r["clip_id"]):
                continue  # not a kept clip named here, or a member of another group: never touched
            want = (r["clip_id"], day) if r["clip_id"] in has_members else (None, None)
            if (r["duplicate_group"], r["duplicate_kept_date"]) != want:
                r["duplicate_group"], r["duplicate_kept_date"] = want
                dirty += 1
        if dirty:
            lake.write_partitions(TABLE, rows_to_table(rows, FILTERED_CLIPS), PartitionRange.of([day.isoformat()]))
            changed += dirty
    return changed


def _copied_videos(lake: Any, day: dt.date) -> pa.Array:
    """The video ids of ``day`` that raw_videos marks as copies of a video landed on an earlier day."""
    from videolake.platform.lake.table import PartitionRange

    raw = lake.read_partitions(
        "raw_videos", PartitionRange.of([day.isoformat()]), ["video_id"], pc.field("status") == "duplicate"
    )
    return raw.column("video_id").combine_chunks()


def _without_clips_of_copies(lake: Any, rows: pa.Table, day: dt.date) -> tuple[pa.Table, int]:
    """The day's rows without the clips of videos that raw_videos now marks as copies, and how many went.

    Why: when days run at the same time, a day may cut and score a video before another day's run finds that its
    bytes were landed earlier (``dedup.exact``). Run one after another, that video would have no clip at all; its
    clips are stale rows of a verdict that changed, and the raw_videos row records why (status ``duplicate``,
    ``duplicate_of_date``). Removing them gives the table the days give in any order."""
    copies = _copied_videos(lake, day)
    if len(copies) == 0 or rows.num_rows == 0:
        return rows, 0
    stale = pc.is_in(rows.column("video_id"), value_set=copies)
    n = pc.sum(stale).as_py() or 0
    return (rows.filter(pc.invert(stale)), n) if n else (rows, 0)


def _days_with_copies_of(lake: Any, days: list[dt.date]) -> set[dt.date]:
    """Later days whose raw_videos rows are copies of a video of ``days``."""
    expr = pc.field("duplicate_of_date").isin(pa.array(days, pa.date32())) & (pc.field(PARTITION_COLUMN) > min(days))
    return set(lake.read_where("raw_videos", [PARTITION_COLUMN], expr).column(PARTITION_COLUMN).to_pylist())


def _pointing(lake: Any, days: list[dt.date]) -> pa.Table:
    """The partition_date of rows of later days that name one of ``days`` as their kept clip's day."""
    expr = pc.field("duplicate_kept_date").isin(pa.array(days, pa.date32())) & (pc.field(PARTITION_COLUMN) > min(days))
    return lake.read_where(TABLE, [PARTITION_COLUMN], expr)


def _semantic_candidates(lake: Any, found: Any, near: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The filtered_clips rows of the earlier clips a semantic pair names that the near lookup did not find."""
    have = {(e["clip_id"], e[PARTITION_COLUMN]) for e in near}
    extra = [(c, d) for c, d in found.earlier if (c, d) not in have]
    if not extra:
        return []
    hits = pa.table(
        {
            "clip_key": pa.array(clip_keys(c for c, _ in extra), pa.int64()),
            PARTITION_COLUMN: pa.array([d for _, d in extra], pa.date32()),
        }
    )
    return _candidates(lake, hits)


def reconcile(
    lake: Any,
    run: Any,
    config: Any = None,
    semantic: Callable[[str], Any] | None = None,
    *,
    decided_by: str = "",
) -> Reconciled:
    """Bring the run's days and every later day they can affect to their verdicts (module docstring), in one
    optimistic transaction of filtered_clips (``lake_transaction.transact``: made again from a fresh read when
    another commit came first). ``semantic(day)``: what the semantic rule finds for ``day`` (ISO date; a
    ``dedup.semantic_index.SemanticMatches``: pairs within the day and with earlier days, and the later days that
    may hold a duplicate of one of its clips), asked of every judged day, so a later day judged again keeps its
    semantic verdicts and a later day with a semantic duplicate of a changed day is judged again. ``decided_by``
    (a run id) is recorded in the commit."""
    from videolake.platform.dedup.near import NearDupConfig
    from videolake.platform.lake.transaction import transact

    config = config or NearDupConfig()
    if not lake.exists(TABLE):
        return Reconciled()
    # The index rows are each day's own (derived from its clips' fingerprints, which only its run writes): written
    # before the judgement, outside its transaction.
    replace_outdated_index(lake)
    write_index(lake, run, config)
    indexed_days = index_missing_days(lake, config)
    return transact(lake, TABLE, lambda tx: _judge(tx, run, config, semantic, indexed_days), decided_by=decided_by)


def _judge(
    lake: Any, run: Any, config: Any, semantic: Callable[[str], Any] | None, indexed_days: list[str]
) -> Reconciled:
    """One attempt of ``reconcile``'s judgement on ``lake`` (a ``TableTransaction`` of filtered_clips)."""
    out = Reconciled(indexed_days=list(indexed_days))
    run_days = list(run.days())
    # Later days whose rows name a run day as their kept clip's day: that clip may be gone or no longer kept; and
    # days whose videos raw_videos now names copies of a run day's (their clips were cut before that was known).
    work = set(run_days) | set(_pointing(lake, run_days).column(PARTITION_COLUMN).to_pylist())
    work |= _days_with_copies_of(lake, run_days)
    fresh = set(run_days) | {dt.date.fromisoformat(d) for d in out.indexed_days}  # days with new index rows
    work |= fresh
    done: set[dt.date] = set()
    kept_elsewhere: set[tuple[dt.date, str]] = set()  # kept clips of earlier days named by a judged day's rows
    while work:
        day = min(work)
        work.discard(day)
        done.add(day)
        changed, hits, found = _judge_day(lake, day, config, semantic, out, kept_elsewhere)
        # Later days that share a key with a day the run wrote, or with a day whose verdicts changed, may change
        # with it; so may the days whose rows name a changed day as their kept clip's day.
        if changed or day in fresh:
            work |= {d for d in hits.column(PARTITION_COLUMN).to_pylist() if d > day} - done
            work |= set(found.later_days if found is not None else ()) - done
        if changed and day not in run_days:
            work |= set(_pointing(lake, [day]).column(PARTITION_COLUMN).to_pylist()) - done
    out.changed_days.sort()
    _mark_kept(lake, kept_elsewhere)
    out.outside_run = [d for d in out.changed_days if dt.date.fromisoformat(d) not in set(run_days)]
    if out.changed_days:
        log.info("filtered_clips: near-duplicate verdicts changed in %s", out.changed_days)
    return out


def _judge_day(
    lake: Any,
    day: dt.date,
    config: Any,
    semantic: Callable[[str], Any] | None,
    out: Reconciled,
    kept_elsewhere: set[tuple[dt.date, str]],
) -> tuple[bool, pa.Table, Any]:
    """Judge one day again and rewrite it when its verdicts changed (counted in ``out``; the kept clips its rows
    name go to ``kept_elsewhere``). Returns whether it changed, the index hits of its keys on other days, and
    what the semantic rule found for it (None without one)."""
    from videolake.platform.lake.table import PartitionRange

    rows = lake.read_partitions(TABLE, PartitionRange.of([day.isoformat()]))
    rows, copies = _without_clips_of_copies(lake, rows, day)
    out.clips_of_copies += copies
    day_keys = _day_keys(rows, config)
    hits = _lookup(lake, day_keys.column("band_key").to_numpy(), day)
    earlier_pairs = _sharing(day_keys, hits.filter(pc.less(hits.column(PARTITION_COLUMN), day)))
    earlier = _seen_both_ways(
        earlier_pairs, rows, _candidates(lake, earlier_pairs.select(["clip_key", PARTITION_COLUMN])), config
    )
    found = semantic(day.isoformat()) if semantic else None
    if found is not None:
        earlier += _semantic_candidates(lake, found, earlier)
    earlier += _kept_clips_of(lake, earlier, day)
    out.candidates += len(earlier)
    old = rows.to_pylist()
    new = assign_day(old, day, earlier, config, found.pairs if found is not None else ())
    kept_elsewhere |= _kept_in_earlier_days(old, day) | _kept_in_earlier_days(new, day)
    # and the day's own kept clips, before and after: later days' rows may name them (``_mark_kept`` checks)
    kept_elsewhere |= {(day, c) for c in {*_self_marks(old, day), *_self_marks(new, day)}}
    out.judged_days.append(day.isoformat())
    changed = copies > 0 or [_verdict_key(r) for r in new] != [_verdict_key(r) for r in old]
    if changed:
        from videolake.platform.lake.schemas import FILTERED_CLIPS
        from videolake.platform.lake.table import rows_to_table

        lake.write_partitions(TABLE, rows_to_table(new, FILTERED_CLIPS), PartitionRange.of([day.isoformat()]))
        out.changed_days.append(day.isoformat())
    return changed, hits, found
