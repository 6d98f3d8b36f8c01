"""Caption comparison (platform/captioning/compare.py) on planted captions whose every figure is known: two tracks of
clip_captions on two days (plus a day outside the range and a third track, never read), the statistics, each QA
flag firing exactly on its planted caption, the table written through the lake, the judge's order randomization
undone, the CLI end to end and the Dagster job in process.

The planted tracks (word counts in brackets; v3c2 is the 20-word LONG caption):

    clip  day  A (default)                                   B (prompt-v2)
    v1c0  D1   A cat sleeps on a sofa. [6]  duplicate_in_day  a gray cat is sleeping on a soft sofa indoors [10]
    v1c1  D1   I'm sorry, I cannot describe ... [7] refusal   a person stands in a dim room [7]
    v1c2  D1   the dog runs x3 [9]            repeated_ngram  a brown dog runs in circles on grass [8]
    v1c3  D1   (failed)                                       as an AI model I describe a dark frame [9] refusal
    v2c0  D1   waves roll onto a sandy beach at sunset [8]    (failed)
    v2c1  D1   a cat sleeps on a sofa [6]     duplicate_in_day  a cat naps on a blue couch [7]
    v2c2  D1   (missing)                                      the camera pans across a harbour [6]
    v3c0  D2   a child rides a bike in the park [8]  neighbour  a child rides a red bike through a park [9]
    v3c1  D2   in the park a child rides a bike [8]  neighbour  the child turns near a fountain [6]
    v3c2  D2   LONG [20]                      length_outlier  (missing)

A: lengths 6 7 9 8 6 8 8 20 (72 words): mean 9, median 8, p95 20; MAD 1, so only LONG is beyond 3 MADs. 45 distinct
words, 48 distinct of 64 bigrams. B: 10 7 8 9 7 6 9 6 (62 words): mean 7.75, median 7.5, MAD 1.5 (no outlier),
p95 10; 44 distinct words, 53 distinct of 54 bigrams ("on a" twice).
"""

from __future__ import annotations

import datetime as dt
import os
import re

import pyarrow as pa
import pytest

from videolake.platform.captioning.compare import (
    FLAGS,
    TABLE,
    CompareConfig,
    compare_rows,
    compare_tracks,
    day_range,
    p95,
    read_comparison,
    render_report,
    words,
    write_comparison,
)
from videolake.platform.captioning.judge import make_judge, order_for, parse_answer, unmap
from videolake.platform.lake.schemas import CLIP_CAPTIONS
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table
from videolake.platform.params import ParamError, parse_params

D1, D2, D3 = dt.date(2026, 3, 2), dt.date(2026, 3, 3), dt.date(2026, 3, 4)
A, B, THIRD = "default", "prompt-v2", "third"
LONG = "an aerial view shows tall towers, grey clouds, a wide river, small boats and busy bridges under an evening sky"


def cid(video: str, i: int) -> str:
    return f"{video}_{i * 30:08d}_{(i + 1) * 30:08d}"


# (track, video, clip index, day, status, caption)
PLANTED = [
    (A, "v1", 0, D1, "ok", "A cat sleeps on a sofa."),
    (A, "v1", 1, D1, "ok", "I'm sorry, I cannot describe this video"),
    (A, "v1", 2, D1, "ok", "the dog runs the dog runs the dog runs"),
    (A, "v1", 3, D1, "failed", None),
    (A, "v2", 0, D1, "ok", "waves roll onto a sandy beach at sunset"),
    (A, "v2", 1, D1, "ok", "a cat sleeps on a sofa"),
    (A, "v3", 0, D2, "ok", "a child rides a bike in the park"),
    (A, "v3", 1, D2, "ok", "in the park a child rides a bike"),
    (A, "v3", 2, D2, "ok", LONG),
    (A, "v4", 0, D3, "ok", "I'm sorry: a day outside the range"),
    (B, "v1", 0, D1, "ok", "a gray cat is sleeping on a soft sofa indoors"),
    (B, "v1", 1, D1, "ok", "a person stands in a dim room"),
    (B, "v1", 2, D1, "ok", "a brown dog runs in circles on grass"),
    (B, "v1", 3, D1, "ok", "as an AI model I describe a dark frame"),
    (B, "v2", 0, D1, "failed", None),
    (B, "v2", 1, D1, "ok", "a cat naps on a blue couch"),
    (B, "v2", 2, D1, "ok", "the camera pans across a harbour"),
    (B, "v3", 0, D2, "ok", "a child rides a red bike through a park"),
    (B, "v3", 1, D2, "ok", "the child turns near a fountain"),
    (B, "v4", 0, D3, "ok", "as an AI: another day outside the range"),
    (THIRD, "v1", 0, D1, "ok", "as an AI, a third track that is never read"),
]
RANGE = PartitionRange(D1, D3)  # D1 and D2

FLAGGED_A = {
    cid("v1", 0): ["duplicate_in_day"],
    cid("v1", 1): ["refusal"],
    cid("v1", 2): ["repeated_ngram"],
    cid("v2", 0): [],
    cid("v2", 1): ["duplicate_in_day"],
    cid("v3", 0): ["near_duplicate_neighbour"],
    cid("v3", 1): ["near_duplicate_neighbour"],
    cid("v3", 2): ["length_outlier"],
}
FLAGGED_B = {c: [] for c in (cid("v1", 0), cid("v1", 1), cid("v1", 2), cid("v2", 1), cid("v2", 2))}
FLAGGED_B |= {cid("v1", 3): ["refusal"], cid("v3", 0): [], cid("v3", 1): []}

REPORT_LINES = [
    "| rows | 9 | 9 |",
    "| ok captions | 8 | 8 |",
    "| failed rows | 1 | 1 |",
    "| mean length | 9.00 | 7.75 |",
    "| median length | 8 | 7.5 |",
    "| p95 length | 20 | 10 |",
    "| vocabulary | 45 | 44 |",
    "| type-token ratio | 0.625 | 0.710 |",
    "| distinct-2 | 0.750 | 0.981 |",
    "| length_outlier | 1 | 0 |",
    "| repeated_ngram | 1 | 0 |",
    "| refusal | 1 | 1 |",
    "| near_duplicate_neighbour | 2 | 0 |",
    "| duplicate_in_day | 2 | 0 |",
]


def planted_table() -> pa.Table:
    rows = [
        {
            "clip_id": cid(video, i),
            "caption_track": track,
            "video_id": video,
            "source_uri": f"file:///videos/{video}.mp4",
            "status": status,
            "caption": caption,
            "error": None if status == "ok" else "empty output",
            "model": f"model-{track}",
            "prompt_version": "v1-describe",
            "captioned_at": dt.datetime(2026, 3, 5, tzinfo=dt.UTC),
            "partition_date": day,
        }
        for track, video, i, day, status, caption in PLANTED
    ]
    return rows_to_table(rows, CLIP_CAPTIONS)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    """A local profile's data dir whose lake holds the planted clip_captions (written through the lake)."""
    lk = Lake(str(tmp_path_factory.mktemp("compare-data") / "lake"))
    lk.write_partitions("clip_captions", planted_table(), PartitionRange(D1, D3 + dt.timedelta(days=1)))
    return lk


@pytest.fixture(scope="module")
def comparison(lake):
    return compare_tracks(lake, A, B, RANGE)


# ------------------------------------------------------------------------------------------------ the measures
def test_words_and_the_nearest_rank_p95():
    assert words("A dog's ball, RED!  I’m here") == ["a", "dog's", "ball", "red", "i'm", "here"]
    assert words(None) == [] and words("...") == []
    assert p95(list(range(1, 21))) == 19  # ceil(0.95 * 20) = 19th smallest
    assert p95(list(range(1, 22))) == 20  # ceil(19.95) = 20th
    assert p95([7]) == 7 and p95([]) == 0
    assert [len(words(c)) for t, *_, c in PLANTED if t == A and c][:8] == [6, 7, 9, 8, 6, 8, 8, 20]


def test_statistics_per_track_are_exact(comparison):
    a, b = comparison.stats[A], comparison.stats[B]
    assert (a.rows, a.ok, a.failed) == (9, 8, 1)
    assert (b.rows, b.ok, b.failed) == (9, 8, 1)
    assert (a.mean_words, a.median_words, a.p95_words) == (9.0, 8.0, 20)
    assert (b.mean_words, b.median_words, b.p95_words) == (7.75, 7.5, 10)
    assert (a.vocabulary, b.vocabulary) == (45, 44)
    assert a.type_token_ratio == 45 / 72 and b.type_token_ratio == 44 / 62
    assert a.distinct_2 == 48 / 64 and b.distinct_2 == 53 / 54
    assert a.flags == {
        "length_outlier": 1,
        "repeated_ngram": 1,
        "refusal": 1,
        "near_duplicate_neighbour": 2,
        "duplicate_in_day": 2,
    }
    assert b.flags == {f: int(f == "refusal") for f in FLAGS}


def test_each_flag_fires_exactly_on_its_planted_captions(comparison):
    rows = comparison.table.to_pylist()
    got_a = {r["clip_id"]: r["flags_a"] for r in rows if r["status_a"] == "ok"}
    got_b = {r["clip_id"]: r["flags_b"] for r in rows if r["status_b"] == "ok"}
    assert got_a == FLAGGED_A
    assert got_b == FLAGGED_B
    # a failed or missing caption carries no flag
    assert all(r["flags_a"] == [] for r in rows if r["status_a"] != "ok")
    assert all(r["flags_b"] == [] for r in rows if r["status_b"] != "ok")


def test_one_row_per_clip_of_either_track_side_by_side(comparison):
    rows = {r["clip_id"]: r for r in comparison.table.to_pylist()}
    assert sorted(rows) == sorted(set(FLAGGED_A) | set(FLAGGED_B) | {cid("v1", 3), cid("v2", 0)})
    assert len(rows) == 10  # v4 (D3, outside the range) and the third track are never read
    assert comparison.coverage() == {
        "clips": 10,
        "both_ok": 6,
        "missing_in_a": 1,
        "missing_in_b": 1,
        "failed_in_a": 1,
        "failed_in_b": 1,
    }
    assert (rows[cid("v1", 3)]["status_a"], rows[cid("v1", 3)]["caption_a"]) == ("failed", None)
    assert rows[cid("v1", 3)]["caption_b"] == "as an AI model I describe a dark frame"
    assert (rows[cid("v2", 2)]["status_a"], rows[cid("v2", 2)]["status_b"]) == ("missing", "ok")
    assert (rows[cid("v3", 2)]["status_b"], rows[cid("v3", 2)]["words_a"]) == ("missing", 20)
    assert rows[cid("v1", 0)]["words_a"] == 6 and rows[cid("v1", 0)]["words_b"] == 10
    assert {r["partition_date"] for r in rows.values()} == {D1, D2}
    assert {(r["track_a"], r["track_b"]) for r in rows.values()} == {(A, B)}
    assert all(r["judge_verdict"] is None and r["judge_order"] is None for r in rows.values())


def test_thresholds_are_typed_parameters(lake):
    # |20 - 8| = 12 MADs: an outlier at k = 11.9, not at k = 12
    at = {k: compare_tracks(lake, A, B, RANGE, CompareConfig(length_k=k)).stats[A].flags for k in (11.9, 12.0)}
    assert (at[11.9]["length_outlier"], at[12.0]["length_outlier"]) == (1, 0)
    # "the dog runs" occurs 3 times: flagged at ngram_repeats 3, not at 4
    four = parse_params(CompareConfig, {"ngram_repeats": "4"}, "captions compare")
    assert compare_tracks(lake, A, B, RANGE, four).stats[A].flags["repeated_ngram"] == 0
    # v2c0 and v2c1 share one word of twelve (Jaccard 1/12 = 0.083): neighbours at 0.08, not at 0.09
    loose = {
        j: compare_tracks(lake, A, B, RANGE, CompareConfig(neighbour_jaccard=j)).stats[A].flags for j in (0.08, 0.09)
    }
    assert (loose[0.08]["near_duplicate_neighbour"], loose[0.09]["near_duplicate_neighbour"]) == (4, 2)
    with pytest.raises(ParamError, match="unknown parameter 'length'"):
        parse_params(CompareConfig, {"length": "2"}, "captions compare")
    with pytest.raises(ValueError, match="two different tracks"):
        compare_tracks(lake, A, A, RANGE)


def test_report_has_the_exact_figures(comparison):
    report = render_report(comparison)
    for line in REPORT_LINES:
        assert line in report.splitlines(), line
    assert "10 clips, 6 with an ok caption in both tracks; missing in A: 1, in B: 1; failed in A: 1, in B: 1" in report
    assert "No judge model was configured." in report
    assert f"- A `{cid('v1', 1)}`: I'm sorry, I cannot describe this video" in report
    assert f"- B `{cid('v1', 3)}`: as an AI model I describe a dark frame" in report


def test_the_table_keeps_other_pairs_and_replaces_its_own(lake, comparison):
    v1 = write_comparison(lake, comparison)
    other = compare_tracks(lake, A, THIRD, RANGE)
    assert other.clips == 9 and other.coverage()["both_ok"] == 1
    write_comparison(lake, other)
    v3 = write_comparison(lake, comparison)  # again: replaces its own 10 rows, keeps the other pair's 9
    assert v3 == v1 + 2
    stored = lake.read_partitions(TABLE, RANGE)
    assert stored.num_rows == 19
    mine = read_comparison(lake, A, B, RANGE)
    assert mine.num_rows == 10
    assert mine.column("clip_id").to_pylist() == comparison.table.column("clip_id").to_pylist()
    assert mine.column("flags_a").to_pylist() == comparison.table.column("flags_a").to_pylist()
    assert read_comparison(lake, A, THIRD, RANGE).num_rows == 9


# ------------------------------------------------------------------------------------------------ the judge's order
def _longer_caption_answerer(asked: list[tuple[str, str]]):
    """An answerer that prefers the longer caption by its POSITION in the prompt ("1" / "2" / "tie"), and says
    nonsense for one clip: the verdicts it leads to are known whatever order each clip got."""

    def generate(requests: list[tuple[str, str]]) -> list[str | None]:
        asked.extend(requests)
        out: list[str | None] = []
        for clip, text in requests:
            first = re.search(r"Caption 1: (.*)\n", text).group(1)
            second = re.search(r"Caption 2: (.*)\n", text).group(1)
            n1, n2 = len(words(first)), len(words(second))
            out.append("banana" if clip == cid("v3", 1) else ("tie" if n1 == n2 else ("1" if n1 > n2 else "2.")))
        return out

    return generate


def test_judge_order_is_recorded_and_undone(lake):
    asked: list[tuple[str, str]] = []
    judge = make_judge(_longer_caption_answerer(asked), seed=1)
    comp = compare_tracks(lake, A, B, RANGE, judge=judge, judge_model="longer-caption")
    rows = {r["clip_id"]: r for r in comp.table.to_pylist()}
    both = [c for c, r in rows.items() if r["status_a"] == "ok" and r["status_b"] == "ok"]
    assert sorted(c for c, _ in asked) == sorted(both)  # only clips with two ok captions are judged, once each
    expected = {  # words A vs B: 6/10, 7/7, 9/8, 6/7, 8/9, and v3c1's answer is nonsense
        cid("v1", 0): "B",
        cid("v1", 1): "tie",
        cid("v1", 2): "A",
        cid("v2", 1): "B",
        cid("v3", 0): "B",
        cid("v3", 1): "invalid",
    }
    assert {c: rows[c]["judge_verdict"] for c in both} == expected
    orders = {c: rows[c]["judge_order"] for c in both}
    assert orders == {c: order_for(1, c) for c in both}
    # seed 1 shows three clips each way; the B-preferred clips in both orders, the A-preferred one second
    assert list(orders.values()) == ["AB", "AB", "BA", "BA", "BA", "AB"]
    for c, text in asked:  # the prompt shows the captions in the recorded order
        first = rows[c]["caption_a"] if orders[c] == "AB" else rows[c]["caption_b"]
        assert f"Caption 1: {first}\n" in text
    assert all(rows[c]["judge_model"] == "longer-caption" for c in both)
    assert all(r["judge_verdict"] is None for c, r in rows.items() if c not in both)
    assert comp.judge_tally() == {"A": 1, "B": 3, "tie": 1, "invalid": 1}
    report = render_report(comp)
    assert "| B | 3 | 50.0% |" in report and "| invalid | 1 | 16.7% |" in report
    # decided: v1c0 B (AB: second), v1c2 A (BA: second), v2c1 B (BA: first), v3c0 B (BA: first)
    assert "The judge chose the caption shown first in 2 of 4 decided clips" in report


def test_answers_parse_and_map_back():
    assert [parse_answer(t) for t in ("1", " 2.", "Tie", "Caption 2 is better", "12", "", None, "none")] == [
        "1",
        "2",
        "tie",
        "2",
        None,
        None,
        None,
        None,
    ]
    assert [unmap(c, o) for c in ("1", "2", "tie", None) for o in ("AB", "BA")] == [
        "A",
        "B",
        "B",
        "A",
        "tie",
        "tie",
        "invalid",
        "invalid",
    ]
    orders = [order_for(0, f"clip-{i}") for i in range(200)]
    assert orders == [order_for(0, f"clip-{i}") for i in range(200)]  # deterministic
    assert 80 <= orders.count("AB") <= 120  # about half each


def test_rows_without_a_lake_compare_the_same():
    rows = planted_table().to_pylist()
    in_range = [r for r in rows if r["partition_date"] in (D1, D2)]
    comp = compare_rows(
        A,
        B,
        [r for r in in_range if r["caption_track"] == A],
        [r for r in in_range if r["caption_track"] == B],
        RANGE,
    )
    assert comp.stats[A].vocabulary == 45 and comp.clips == 10


# ------------------------------------------------------------------------------------------------ CLI and Dagster
@pytest.fixture
def profile_env(lake, tmp_path, monkeypatch):
    """The local profile, its data dir the planted lake's parent (its lake: <data dir>/lake)."""
    monkeypatch.setenv("VIDEOLAKE_PROFILE", "local")
    monkeypatch.setenv("VIDEOLAKE_DATA_DIR", os.path.dirname(lake.root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))


def test_cli_compare_writes_the_table_and_the_report(profile_env, lake, tmp_path, capsys):
    from videolake.cli import main

    report = tmp_path / "report.md"
    argv = ["captions", "compare", "--track", A, "--track", B, "--start", "2026-03-02", "--end", "2026-03-03"]
    assert main([*argv, "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert f"{A} vs {B}, 2026-03-02..2026-03-03: 10 clips, 6 with both captions ok; mean words 9.00 vs 7.75" in out
    text = report.read_text()
    for line in REPORT_LINES:
        assert line in text.splitlines(), line
    assert read_comparison(lake, A, B, RANGE).num_rows == 10
    # one day only, thresholds as --param, the report on stdout
    assert main([*argv[:-1], "2026-03-02", "--param", "ngram_repeats=4", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "| rows | 6 | 7 |" in out.splitlines() and "| repeated_ngram | 0 | 0 |" in out.splitlines()
    assert main([*argv[:4], "--start", "2026-03-02", "--end", "2026-03-02"]) == 2  # one track only
    assert "exactly two --track" in capsys.readouterr().err
    assert main([*argv, "--param", "length=3"]) == 2
    assert "unknown parameter 'length'" in capsys.readouterr().err


def test_dagster_job_runs_in_process_and_attaches_the_report(lake):
    import dagster as dg

    from videolake.assets.caption_compare import caption_compare_job, compare_run_config
    from videolake.resources import LakeResource

    with dg.instance_for_test() as instance:
        result = caption_compare_job.execute_in_process(
            run_config=compare_run_config([A, B], "2026-03-02", "2026-03-03"),
            resources={"lake": LakeResource(root=lake.root)},
            instance=instance,
        )
        assert result.success
        summary = result.output_for_node("compare_caption_tracks")
        assert (summary["clips"], summary["both_ok"]) == (10, 6)
        assert summary["stats"][A]["vocabulary"] == 45 and summary["stats"][B]["p95_words"] == 10
        mats = result.asset_materializations_for_node("compare_caption_tracks")
        assert [m.asset_key for m in mats] == [dg.AssetKey(TABLE)]
        md = mats[0].metadata
        report = md["report"].value
        for line in REPORT_LINES:
            assert line in report.splitlines(), line
        assert md["clips"].value == 10 and md["failed_in_b"].value == 1
        assert md["delta_version"].value == lake.version(TABLE)
        assert instance.get_latest_materialization_event(dg.AssetKey(TABLE)) is not None
    assert read_comparison(lake, A, B, RANGE).num_rows == 10

    from videolake.definitions import build_definitions

    assert build_definitions("local").resolve_job_def("caption_compare_job").name == "caption_compare_job"
    bad = caption_compare_job.execute_in_process(
        run_config=compare_run_config([A], "2026-03-02", "2026-03-03"),
        resources={"lake": LakeResource(root=lake.root)},
        raise_on_error=False,
    )
    assert not bad.success


def test_day_range_is_inclusive():
    assert day_range("2026-03-02", "2026-03-03") == RANGE
    with pytest.raises(ValueError, match="before start"):
        day_range("2026-03-03", "2026-03-02")


def test_a_configured_judge_model_reaches_the_judge_from_the_cli_and_the_job(profile_env, lake, monkeypatch, capsys):
    """The CLI's --judge-model and the job's judge_model open the judge of that JudgeConfig for the run (here a
    stand-in answerer instead of an engine: tests/integration/test_caption_compare_judge.py runs the real one)."""
    import contextlib

    import videolake.platform.captioning.judge as judge_module
    from videolake.assets.caption_compare import caption_compare_job, compare_run_config
    from videolake.cli import main
    from videolake.resources import LakeResource

    opened = []

    @contextlib.contextmanager
    def stand_in(config):
        opened.append(config)
        yield make_judge(_longer_caption_answerer([]), seed=config.seed)

    monkeypatch.setattr(judge_module, "open_judge", stand_in)
    argv = ["captions", "compare", "--track", A, "--track", B, "--start", "2026-03-02", "--end", "2026-03-03"]
    assert main([*argv, "--judge-model", "/models/judge", "--judge-seed", "1", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "Judge `/models/judge`: 6 clips judged blind" in out
    assert "| A | 1 | 16.7% |" in out.splitlines() and "| B | 3 | 50.0% |" in out.splitlines()
    assert [(c.model, c.backend, c.seed) for c in opened] == [("/models/judge", "vllm", 1)]
    result = caption_compare_job.execute_in_process(
        run_config=compare_run_config([A, B], "2026-03-02", "2026-03-03", judge_model="/models/judge"),
        resources={"lake": LakeResource(root=lake.root)},
    )
    assert result.success
    assert result.output_for_node("compare_caption_tracks")["judge"] == {"A": 1, "B": 3, "tie": 1, "invalid": 1}
    assert [c.model for c in opened] == ["/models/judge", "/models/judge"]
    stored = read_comparison(lake, A, B, RANGE)
    assert sorted(v for v in stored.column("judge_verdict").to_pylist() if v) == ["A", "B", "B", "B", "invalid", "tie"]
    assert set(stored.column("judge_model").to_pylist()) == {"/models/judge", None}
