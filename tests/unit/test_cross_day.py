"""One day's near-duplicate verdicts against earlier days (dedup.cross_day.assign_day), on planted fingerprints:
the kept clip is the earliest by (partition_date, clip_id), chains name the group's kept clip, semantic pairs join
groups, chance sharing of one index key never makes a candidate, and the index rows are what the lookups need."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
from planted_prints import CONFIG, fingerprint

from videolake.platform.dedup.cross_day import MIN_SHARED_KEYS, _candidate_pairs, assign_day, clip_keys, index_rows
from videolake.platform.dedup.near import hashes_per_frame, history_keys, history_probe_keys, index_keys

D0, D1, D2 = dt.date(2026, 3, 1), dt.date(2026, 3, 2), dt.date(2026, 3, 3)


def row(cid: str, fp: bytes | None, reason: str | None = None) -> dict:
    return {"clip_id": cid, "near_hashes": fp, "reject_reason": reason, "passed": reason is None}


def earlier(cid: str, day: dt.date, fp: bytes, group: str | None = None, kept_day: dt.date | None = None) -> dict:
    return {
        "clip_id": cid,
        "partition_date": day,
        "near_hashes": fp,
        "duplicate_group": group,
        "duplicate_kept_date": kept_day,
    }


def verdicts(rows: list[dict]) -> dict[str, tuple]:
    return {
        r["clip_id"]: (r["passed"], r["duplicate_group"], r["duplicate_kept_date"], r["duplicate_kind"]) for r in rows
    }


def test_a_copy_of_an_earlier_clip_names_the_kept_clip_of_its_group():
    # e1 (day 1) is itself a duplicate of k0 (day 0): a copy of e1 on day 2 names k0, the group's kept clip.
    prior = [earlier("k0", D0, fingerprint(1)), earlier("e1", D1, fingerprint(1, 6), "k0", D0)]
    out = assign_day([row("b", fingerprint(1, 9)), row("a", fingerprint(2))], D2, prior, CONFIG)
    assert verdicts(out) == {"b": (False, "k0", D0, "near"), "a": (True, None, None, None)}
    assert out[0]["reject_reason"] == "duplicate"


def _two_shots(seed_a: int, seed_c: int) -> tuple[bytes, bytes, bytes]:
    """Shot A, shot C (6 frames each, different footage) and B, a longer clip over both (A's frames, then C's):
    B matches A and C (all of a shot's frames are in it), A and C do not match."""
    a, c = fingerprint(seed_a), fingerprint(seed_c)
    b = fingerprint(seed_a, 5) + fingerprint(seed_c, 5)
    return a, b, c


def test_grouping_never_chains_two_shots_through_a_longer_clip():
    a, b, c = _two_shots(40, 41)
    # A kept; B matches A and joins it; C matches only B, a member, not the kept clip A: C is kept, not dropped.
    out = assign_day([row("c", c), row("b", b), row("a", a)], D1, [], CONFIG)
    assert verdicts(out) == {
        "c": (True, None, None, None),
        "b": (False, "a", D1, "near"),
        "a": (True, "a", D1, None),
    }
    # The longer clip first: both shots are in it, so both go to it (each matches the kept clip itself).
    out = assign_day([row("s1", a), row("l0", b), row("s2", c)], D1, [], CONFIG)
    assert verdicts(out) == {
        "s1": (False, "l0", D1, "near"),
        "l0": (True, "l0", D1, None),
        "s2": (False, "l0", D1, "near"),
    }


def test_across_days_a_clip_joins_a_group_only_through_its_kept_clip():
    a, b, c = _two_shots(42, 43)
    # Day 0 kept A, day 1's B joined A. Day 2's C matches B only: C is kept (before: C named A through B).
    prior = [earlier("a", D0, a, "a", D0), earlier("b", D1, b, "a", D0)]
    out = assign_day([row("c", c)], D2, prior, CONFIG)
    assert verdicts(out) == {"c": (True, None, None, None)}
    # A copy of A on day 2, found through B only (A not among the candidates): no group; with A there, it joins A.
    out = assign_day([row("x", fingerprint(42, 7))], D2, prior[1:], CONFIG)
    assert verdicts(out) == {"x": (True, None, None, None)}
    out = assign_day([row("x", fingerprint(42, 7))], D2, prior, CONFIG)
    assert verdicts(out) == {"x": (False, "a", D0, "near")}


def test_the_kept_clip_is_the_earliest_by_day_then_clip_id():
    # Within the day "a" < "b"; a clip of an earlier day beats both, whatever its id.
    out = assign_day([row("b", fingerprint(3, 4)), row("a", fingerprint(3))], D1, [], CONFIG)
    assert verdicts(out) == {"b": (False, "a", D1, "near"), "a": (True, "a", D1, None)}
    out = assign_day(
        [row("b", fingerprint(3, 4)), row("a", fingerprint(3))], D1, [earlier("z", D0, fingerprint(3, 8))], CONFIG
    )
    assert verdicts(out) == {"b": (False, "z", D0, "near"), "a": (False, "z", D0, "near")}
    # A clip of a later day given as a candidate is ignored: it cannot be kept over this day's clips.
    out = assign_day([row("a", fingerprint(3))], D1, [earlier("z", D2, fingerprint(3, 8))], CONFIG)
    assert verdicts(out) == {"a": (True, None, None, None)}


def test_semantic_pairs_join_groups_and_are_marked_semantic():
    out = assign_day(
        [row("a", fingerprint(4)), row("b", fingerprint(5)), row("c", fingerprint(4, 5))],
        D1,
        [],
        CONFIG,
        semantic_pairs=[("b", "a")],
    )
    assert verdicts(out) == {
        "a": (True, "a", D1, None),
        "b": (False, "a", D1, "semantic"),
        "c": (False, "a", D1, "near"),
    }


def test_clips_without_fingerprints_and_other_rules_are_kept_apart():
    out = assign_day([row("a", b""), row("b", None), row("c", fingerprint(6), "blurry;duplicate")], D1, [], CONFIG)
    assert verdicts(out) == {
        "a": (True, None, None, None),
        "b": (True, None, None, None),
        "c": (False, None, None, None),
    }
    assert out[2]["reject_reason"] == "blurry"  # an old duplicate verdict is forgotten, the other rules stay


def test_one_shared_key_is_not_a_candidate():
    a = np.frombuffer(fingerprint(8), np.uint8).reshape(-1, 32)
    b = np.frombuffer(fingerprint(9), np.uint8).reshape(-1, 32).copy()
    b[0, :4] = a[0, :4]  # bits 0..31 of one view hash in common: band 0 (bits 0..29) only, by chance
    assert len(set(index_keys(a, CONFIG).tolist()) & set(index_keys(b, CONFIG).tolist())) == 1
    assert MIN_SHARED_KEYS == 2 and _candidate_pairs([a, b], 1, CONFIG) == []
    b[0] = a[0]  # a whole view hash in common: all its keys
    assert _candidate_pairs([a, b], 1, CONFIG) == [(0, 1)]
    assert _candidate_pairs([a, b], 2, CONFIG) == [(0, 1)]  # both in the day: each pair once, smaller index first


def test_index_rows_hold_every_filed_key_once_per_clip_sorted():
    fp = fingerprint(11, frames=16)
    rows = pa.table(
        {"clip_id": ["x", "y"], "near_hashes": [fp, b""], "partition_date": pa.array([D0, D0], pa.date32())}
    )
    idx = index_rows(rows, CONFIG)
    hashes = np.frombuffer(fp, np.uint8).reshape(-1, 32)
    keys = history_keys(hashes, CONFIG)
    assert idx.column("band_key").to_pylist() == sorted(keys.tolist())
    assert set(idx.column("clip_key").to_pylist()) == {int(clip_keys(["x"])[0])} and idx.num_rows == len(keys)
    # Filed: the views of 4 of the 16 frames (the first, the last and two between), 8 bands each; looked up with
    # the keys of every frame, which include them.
    v = hashes_per_frame(CONFIG)
    assert CONFIG.history_frames == 4 and CONFIG.history_bands == 8
    frames = hashes.reshape(16, v, 32)
    expected = np.unique(np.concatenate([history_probe_keys(frames[i], CONFIG) for i in (0, 5, 10, 15)]))
    assert keys.tolist() == expected.tolist() and len(keys) <= 4 * v * 8
    probe = history_probe_keys(hashes, CONFIG)
    assert set(keys.tolist()) < set(probe.tolist())
    # A clip with fewer informative frames than history_frames files them all.
    short = hashes[: 2 * v]
    assert history_keys(short, CONFIG).tolist() == history_probe_keys(short, CONFIG).tolist()


def test_a_lake_without_index_rows_for_earlier_days_is_indexed_and_judged_at_the_next_run(tmp_path):
    """A lake written before the index existed (or whose index was deleted to rebuild it): the next run indexes the
    days the index lacks and judges them, so a copy on the run's day names the earlier day's clip."""
    import shutil

    from videolake.platform.dedup.cross_day import INDEX_TABLE, reconcile
    from videolake.platform.lake.schemas import FILTERED_CLIPS
    from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table

    lake = Lake(root=str(tmp_path))
    days = {
        D0: [row("a0", fingerprint(1, frames=16)), row("b0", fingerprint(2, frames=16)), row("n0", None)],
        D1: [row("c1", fingerprint(3, frames=16)), row("a1", fingerprint(1, flip_bits=10, frames=16))],
        D2: [row("f2", None)],  # no fingerprint: files no key, never reported as indexed
    }
    for day, rows in days.items():
        clips = [{**r, "video_id": r["clip_id"], "partition_date": day, "duration_s": 2.0} for r in rows]
        table = rows_to_table(clips, FILTERED_CLIPS)
        lake.write_partitions("filtered_clips", table, PartitionRange.of([day.isoformat()]))
    out = reconcile(lake, PartitionRange.of([D1.isoformat()]), CONFIG)
    assert out.indexed_days == [D0.isoformat()]  # D1 is the run's own day, D2 files no key
    assert lake.partition_days(INDEX_TABLE) == {D0, D1}
    got = {
        r["clip_id"]: (r["passed"], r["duplicate_group"])
        for r in lake.read_partitions(
            "filtered_clips", PartitionRange(D0, D2), ["clip_id", "passed", "duplicate_group"]
        ).to_pylist()
    }
    assert got == {"a0": (True, "a0"), "b0": (True, None), "n0": (True, None), "c1": (True, None), "a1": (False, "a0")}
    # Deleting the index rebuilds it at the next run, with the same verdicts and nothing rewritten.
    before = lake.version("filtered_clips")
    shutil.rmtree(tmp_path / INDEX_TABLE)
    again = reconcile(lake, PartitionRange.of([D2.isoformat()]), CONFIG)
    assert again.indexed_days == [D0.isoformat(), D1.isoformat()] and again.changed_days == []
    assert lake.version("filtered_clips") == before


def test_an_index_of_an_older_version_is_emptied_and_built_again(tmp_path):
    """An index written by an older videolake (clip ids instead of clip keys) is replaced in one Delta commit and
    every day is indexed again from filtered_clips: the copy on the later day is found through the new index."""
    from deltalake import DeltaTable, write_deltalake

    from videolake.platform.dedup.cross_day import INDEX_TABLE, reconcile
    from videolake.platform.lake.schemas import FILTERED_CLIPS
    from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table

    lake = Lake(root=str(tmp_path))
    for day, rows in {D0: [row("a0", fingerprint(1, frames=16))], D1: [row("a1", fingerprint(1, 10, 16))]}.items():
        clips = [{**r, "video_id": r["clip_id"], "partition_date": day, "duration_s": 2.0} for r in rows]
        lake.write_partitions("filtered_clips", rows_to_table(clips, FILTERED_CLIPS), PartitionRange.of([str(day)]))
    old = pa.table(
        {"band_key": pa.array([1, 2], pa.int64()), "clip_id": ["a0", "a0"], "partition_date": pa.array([D0, D0])}
    )
    write_deltalake(lake.table_uri(INDEX_TABLE), old, partition_by=["partition_date"])
    out = reconcile(lake, PartitionRange.of([D1.isoformat()]), CONFIG)
    assert lake.column_names(INDEX_TABLE) == ["band_key", "clip_key", "partition_date"]
    assert out.indexed_days == [D0.isoformat()]
    assert DeltaTable(lake.table_uri(INDEX_TABLE)).version() == 3  # old, emptied, D1's rows, D0's rows
    got = lake.read_partitions("filtered_clips", PartitionRange(D0, D2), ["clip_id", "passed", "duplicate_group"])
    assert sorted(got.to_pylist(), key=lambda r: r["clip_id"]) == [
        {"clip_id": "a0", "passed": True, "duplicate_group": "a0"},
        {"clip_id": "a1", "passed": False, "duplicate_group": "a0"},
    ]
