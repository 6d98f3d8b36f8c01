"""Quality gates (videolake.platform.gates): for every gate a partition that passes and one with planted bad data
that fails it, with the exact measured values and failing ids; config loading; one-partition-only evaluation.

Tables are built by hand against videolake.platform.lake.schemas. GX is real (ephemeral context, imported once).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from videolake.platform.gates import (
    GATE_DOCS,
    LENIENT_CAPTION_CONTENT,
    TABLE_GATES,
    GateConfig,
    GateResult,
    config_to_dict,
    gate_names,
    load_gate_config,
    repetition_score,
    run_gates,
)
from videolake.platform.lake.schemas import CLIP_CAPTIONS, FILTERED_CLIPS, RAW_VIDEOS, SCENE_CLIPS, clip_id
from videolake.platform.lake.table import rows_to_table

D = dt.date(2024, 3, 1)
E = dt.date(2024, 3, 2)
NOW = dt.datetime(2024, 3, 1, 12, tzinfo=dt.UTC)
FPS = 25.0
NUM_FRAMES = 100
CUTS = [(0, 30), (30, 60), (60, 100)]  # three clips per ok video, covering all 100 frames
OK_VIDEOS = ["v1", "v2", "v3", "v4"]
EXAMPLE_YAML = Path(__file__).resolve().parents[2] / "videolake/platform/gates/gates.example.yaml"


@pytest.fixture(scope="module")
def cfg() -> GateConfig:
    return load_gate_config(None, env={})  # defaults, whatever VIDEOLAKE_GATES_FILE says in this shell


# ----------------------------------------------------------------------------------------------- table builders
def raw_row(vid: str, day: dt.date = D, **kw) -> dict:
    row = dict(
        video_id=vid,
        source_uri=f"s3://in/{vid}.mp4",
        size_bytes=1000,
        container="mp4",
        codec="h264",
        width=64,
        height=48,
        fps=FPS,
        duration_s=NUM_FRAMES / FPS,
        num_frames=NUM_FRAMES,
        has_audio=False,
        status="ok",
        reject_reason=None,
        ingested_at=NOW,
        partition_date=day,
    )
    row.update(kw)
    return row


def rejected_row(vid: str, reason: str | None = "undecodable", day: dt.date = D) -> dict:
    return raw_row(
        vid,
        day,
        size_bytes=10,
        container=None,
        codec=None,
        width=None,
        height=None,
        fps=None,
        duration_s=None,
        num_frames=None,
        status="rejected",
        reject_reason=reason,
    )


def good_raw_rows(day: dt.date = D) -> list[dict]:
    return [raw_row(v, day) for v in OK_VIDEOS] + [rejected_row("v5", day=day)]


def clip_row(vid: str, index: int, start: int, end: int, day: dt.date = D, **kw) -> dict:
    row = dict(
        clip_id=clip_id(vid, start, end),
        video_id=vid,
        source_uri=f"s3://in/{vid}.mp4",
        clip_index=index,
        start_frame=start,
        end_frame=end,
        start_s=start / FPS,
        end_s=end / FPS,
        duration_s=(end - start) / FPS,
        clip_uri=None,
        detector="luma",
        detector_params="{}",
        max_clip_s=20.0,
        partition_date=day,
    )
    row.update(kw)
    return row


def clips_of(vid: str, cuts=CUTS, day: dt.date = D) -> list[dict]:
    return [clip_row(vid, i, a, b, day) for i, (a, b) in enumerate(cuts)]


def good_clip_rows(day: dt.date = D) -> list[dict]:
    return [r for v in OK_VIDEOS for r in clips_of(v, day=day)]


# the first clip of v1, v2, v3 is rejected: 9 of 12 pass
REJECTED_CLIPS = {
    clip_id("v1", 0, 30): "too_short",
    clip_id("v2", 0, 30): "black",
    clip_id("v3", 0, 30): "frozen;black",
}


def score_row(clip: dict, **kw) -> dict:
    reason = REJECTED_CLIPS.get(clip["clip_id"])
    row = dict(
        clip_id=clip["clip_id"],
        video_id=clip["video_id"],
        duration_s=clip["duration_s"],
        width=64,
        height=48,
        motion=12.5,
        sharpness=80.0,
        brightness=110.0,
        black_ratio=0.0,
        frozen_ratio=0.1,
        text_area=0.02,
        dhash="00ff00ff00ff00ff",
        duplicate_group=None,
        passed=reason is None,
        reject_reason=reason,
        partition_date=clip["partition_date"],
    )
    row.update(kw)
    return row


def good_score_rows(day: dt.date = D) -> list[dict]:
    return [score_row(c) for c in good_clip_rows(day)]


CAPTIONS = [
    "A red car drives along a coastal road at sunset.",
    "Two children play football on a green field.",
    "A chef slices vegetables on a wooden board.",
    "Waves roll onto a sandy beach under a cloudy sky.",
    "A cyclist rides through a busy city street.",
    "A dog runs across a snowy park chasing a ball.",
    "An old man reads a newspaper on a bench.",
    "Rain falls on a window with blurred lights behind it.",
    "A woman paints a landscape in a bright studio.",
    "Birds fly over a lake surrounded by pine trees.",
]


def caption_row(cid: str, caption: str | None = "A person walks a dog in a park.", **kw) -> dict:
    row = dict(
        clip_id=cid,
        video_id=cid.split("_")[0],
        source_uri="s3://in/x.mp4",
        status="ok",
        caption=caption,
        error=None,
        model="tiny-qwen2.5-vl",
        model_revision="r0",
        prompt_version="caption-v1",
        num_frames=4,
        prompt_tokens=120,
        output_tokens=14,
        latency_s=0.2,
        captioned_at=NOW,
        partition_date=D,
    )
    row.update(kw)
    return row


def failed_row(cid: str, error: str | None = "decode error") -> dict:
    return caption_row(cid, caption=None, status="failed", error=error, output_tokens=0)


def passed_ids() -> list[str]:
    return [r["clip_id"] for r in good_score_rows() if r["passed"]]


def good_caption_rows() -> list[dict]:
    return [caption_row(cid, CAPTIONS[i]) for i, cid in enumerate(passed_ids())]


def t_raw(rows):
    return rows_to_table(rows, RAW_VIDEOS)


def t_clips(rows):
    return rows_to_table(rows, SCENE_CLIPS)


def t_scores(rows):
    return rows_to_table(rows, FILTERED_CLIPS)


def t_caps(rows):
    return rows_to_table(rows, CLIP_CAPTIONS)


def gates_raw(rows, cfg):
    return by_name(run_gates("raw_videos", t_raw(rows), {}, cfg))


def gates_clips(rows, cfg, raw_rows=None):
    return by_name(
        run_gates(
            "scene_clips", t_clips(rows), {"raw_videos": t_raw(good_raw_rows() if raw_rows is None else raw_rows)}, cfg
        )
    )


def gates_scores(rows, cfg, clip_rows=None, raw_rows=None):
    return by_name(
        run_gates(
            "filtered_clips",
            t_scores(rows),
            {
                "scene_clips": t_clips(good_clip_rows() if clip_rows is None else clip_rows),
                "raw_videos": t_raw(good_raw_rows() if raw_rows is None else raw_rows),
            },
            cfg,
        )
    )


def gates_caps(rows, cfg, score_rows=None):
    return by_name(
        run_gates(
            "clip_captions",
            t_caps(rows),
            {"filtered_clips": t_scores(good_score_rows() if score_rows is None else score_rows)},
            cfg,
        )
    )


def by_name(results: list[GateResult]) -> dict[str, GateResult]:
    return {r.gate: r for r in results}


def assert_failed(r: GateResult, measured: dict, ids: tuple[str, ...]) -> None:
    assert r.passed is False, r
    assert r.blocks is True
    for key, value in measured.items():
        assert r.measured[key] == pytest.approx(value), (key, r.measured)
    assert r.failing_ids == ids
    assert r.description.startswith(f"{r.table}.{r.gate} failed: ")


def assert_all_passed(results: dict[str, GateResult], table: str) -> None:
    assert list(results) == list(gate_names(table))
    failed = {n: r.description for n, r in results.items() if not r.passed}
    assert failed == {}
    assert all(r.failing_ids == () and r.enabled for r in results.values())


# ----------------------------------------------------------------------------------------------- raw_videos
def test_raw_videos_good_partition_passes_every_gate(cfg):
    res = gates_raw(good_raw_rows(), cfg)
    assert_all_passed(res, "raw_videos")
    assert res["video_id_unique"].measured == {"null_ids": 0, "duplicated": 0}
    assert res["probe_fields_valid"].measured["fps_out_of_range"] == 0
    assert res["reject_rate"].measured == {"rows": 5, "rejected": 1, "reject_rate": pytest.approx(0.2)}
    assert res["reject_rate"].thresholds == {"max_reject_rate": 0.5, "min_rows_for_rate": 5}


def test_empty_partition_passes_every_gate_of_every_table(cfg):
    # A day without uploads: every table of the partition is empty, and that is not a failure.
    res = gates_raw([], cfg)
    assert_all_passed(res, "raw_videos")
    assert res["reject_rate"].measured == {"rows": 0, "rejected": 0, "reject_rate": None}
    assert "not enforced, only 0 rows" in res["reject_rate"].description
    assert_all_passed(gates_clips([], cfg, raw_rows=[]), "scene_clips")
    assert_all_passed(
        by_name(run_gates("filtered_clips", t_scores([]), {"scene_clips": t_clips([]), "raw_videos": t_raw([])}, cfg)),
        "filtered_clips",
    )
    caps = by_name(run_gates("clip_captions", t_caps([]), {"filtered_clips": t_scores([])}, cfg))
    assert_all_passed(caps, "clip_captions")
    assert caps["one_caption_per_passed_clip"].measured == {
        "passed_clips": 0,
        "rows": 0,
        "tracks": 1,
        "null_ids": 0,
        "missing": 0,
        "extra": 0,
        "duplicated": 0,
    }


def test_raw_video_id_unique_fails_on_duplicate_and_null_id(cfg):
    rows = good_raw_rows() + [raw_row("v2"), raw_row(None)]
    r = gates_raw(rows, cfg)["video_id_unique"]
    assert_failed(r, {"null_ids": 1, "duplicated": 2}, ("row 6", "v2"))
    assert "1 row(s) without video_id" in r.description and "2 row(s) share a video_id" in r.description


def test_raw_status_valid_fails_on_unknown_status(cfg):
    rows = good_raw_rows()
    rows[2]["status"] = "pending"
    assert_failed(gates_raw(rows, cfg)["status_valid"], {"invalid_status": 1}, ("v3",))


def test_raw_copies_name_their_original(cfg):
    import datetime as dt

    rows = good_raw_rows()
    rows[1].update(status="duplicate", duplicate_of_date=dt.date(2026, 1, 1), duplicate_of_uri="file:///a.mp4")  # v2
    assert gates_raw(rows, cfg)["copies_name_their_original"].passed
    rows[2].update(status="duplicate", duplicate_of_date=None, duplicate_of_uri="file:///a.mp4")  # v3
    rows[3].update(status="duplicate")  # v4: names nothing
    assert_failed(
        gates_raw(rows, cfg)["copies_name_their_original"], {"copy_without_day": 2, "copy_without_uri": 1}, ("v3", "v4")
    )


def test_raw_probe_fields_valid_fails_on_missing_and_out_of_range(cfg):
    rows = good_raw_rows()
    rows[0]["fps"] = 0.0  # v1
    rows[1]["width"] = None  # v2
    rows[2]["fps"] = 1200.0  # v3
    rows[3]["num_frames"] = 0  # v4
    # v5 (rejected) has no probe fields at all: not counted
    r = gates_raw(rows, cfg)["probe_fields_valid"]
    expected = {
        f"{f}_{k}": 0
        for k in ("missing", "out_of_range")
        for f in ("fps", "width", "height", "size_bytes", "duration_s", "num_frames")
    }
    expected.update(width_missing=1, fps_out_of_range=2, num_frames_out_of_range=1)
    assert r.measured == expected
    assert_failed(r, expected, ("v2", "v1", "v3", "v4"))
    assert r.thresholds["fps"] == "(0, 1000]"


def test_raw_reject_reason_consistent_fails(cfg):
    rows = good_raw_rows()
    rows[4]["reject_reason"] = None  # v5 rejected without reason
    rows.append(rejected_row("v6", reason=""))
    rows[0]["reject_reason"] = "looks odd"  # v1 ok with a reason
    r = gates_raw(rows, cfg)["reject_reason_consistent"]
    assert_failed(
        r, {"rejected_without_reason": 1, "rejected_with_empty_reason": 1, "ok_with_reason": 1}, ("v5", "v6", "v1")
    )


def test_raw_reject_rate_fails_above_bound(cfg):
    rows = [raw_row("v1"), raw_row("v2")] + [rejected_row(f"r{i}") for i in range(4)]
    r = gates_raw(rows, cfg)["reject_rate"]
    assert_failed(r, {"rows": 6, "rejected": 4, "reject_rate": 4 / 6}, ("r0", "r1", "r2", "r3"))  # the rejected rows
    assert r.description == "raw_videos.reject_rate failed: reject rate 0.6667 > max 0.5 (e.g. r0, r1, r2, r3)"


def test_raw_reject_rate_not_enforced_below_min_rows(cfg):
    r = gates_raw([rejected_row("r1"), rejected_row("r2")], cfg)["reject_rate"]
    assert r.passed is True
    assert r.measured == {"rows": 2, "rejected": 2, "reject_rate": 1.0}
    assert "not enforced, only 2 rows (< min_rows_for_rate 5)" in r.description


# ----------------------------------------------------------------------------------------------- scene_clips
def test_scene_clips_good_partition_passes_every_gate(cfg):
    res = gates_clips(good_clip_rows(), cfg)
    assert_all_passed(res, "scene_clips")
    assert res["coverage"].measured == {"videos": 4, "min_coverage": 1.0, "under_covered_videos": 0}
    assert res["clips_ordered_non_overlapping"].measured == {"out_of_order": 0, "overlapping": 0}


def test_scene_clip_id_unique_fails_on_duplicate(cfg):
    rows = good_clip_rows() + [clip_row("v2", 1, 30, 60)]
    assert_failed(gates_clips(rows, cfg)["clip_id_unique"], {"null_ids": 0, "duplicated": 2}, (clip_id("v2", 30, 60),))


def test_scene_clip_video_known_fails_for_rejected_and_unknown_videos(cfg):
    rows = good_clip_rows() + [clip_row("v5", 0, 0, 10), clip_row("vX", 0, 0, 10)]
    r = gates_clips(rows, cfg)["clip_video_known"]
    assert_failed(r, {"unknown_video": 2}, (clip_id("v5", 0, 10), clip_id("vX", 0, 10)))


def test_clips_of_a_video_marked_a_copy_after_the_split_are_known_and_range_checked(cfg):
    """Days that run at the same time: another day's run marked v6 a copy after this day cut it. Its clips are
    stale (filtered_clips removes them), not unknown; a clip past its end still fails, and coverage asks nothing of
    a copy."""
    raw = good_raw_rows() + [raw_row("v6", status="duplicate", duplicate_of_date=D - dt.timedelta(days=1))]
    rows = good_clip_rows() + clips_of("v6", [(0, 60), (60, 100)])
    res = gates_clips(rows, cfg, raw)
    assert_all_passed(res, "scene_clips")
    assert res["coverage"].measured["videos"] == 4
    res = gates_clips(good_clip_rows() + clips_of("v6", [(0, 60), (60, 130)]), cfg, raw)
    assert res["frame_range_valid"].failing_ids == (clip_id("v6", 60, 130),)


def test_scene_frame_range_valid_fails(cfg):
    rows = (
        clips_of("v1", [(0, 40), (40, 120)])  # ends after frame 100
        + clips_of("v2", [(0, 40), (40, 40), (40, 100)])  # empty clip
        + clips_of("v3", [(-5, 40), (40, 100)])  # negative start
        + clips_of("v4")
    )
    r = gates_clips(rows, cfg)["frame_range_valid"]
    ids = (clip_id("v3", -5, 40), clip_id("v2", 40, 40), clip_id("v1", 40, 120))
    assert_failed(r, {"negative_start": 1, "empty_or_reversed": 1, "past_video_end": 1}, ids)


def test_scene_clips_ordered_non_overlapping_fails(cfg):
    rows = (
        clips_of("v1", [(0, 50), (40, 100)])  # overlap
        + [clip_row("v2", 1, 0, 40), clip_row("v2", 0, 40, 100)]  # indexes swapped
        + clips_of("v3")
        + clips_of("v4")
    )
    r = gates_clips(rows, cfg)["clips_ordered_non_overlapping"]
    ids = (clip_id("v2", 0, 40), clip_id("v2", 40, 100), clip_id("v1", 40, 100))
    assert_failed(r, {"out_of_order": 2, "overlapping": 1}, ids)


def test_scene_coverage_fails_below_min_and_passes_within_tolerance(cfg):
    rows = clips_of("v1", [(0, 40), (40, 90)]) + clips_of("v2", [(0, 40), (40, 98)]) + clips_of("v3") + clips_of("v4")
    r = gates_clips(rows, cfg)["coverage"]
    assert_failed(r, {"videos": 4, "min_coverage": 0.9, "under_covered_videos": 1}, ("v1",))  # v2: 0.98 is enough
    assert r.thresholds == {"coverage_min": 0.98}


def test_scene_every_video_has_clips_fails(cfg):
    rows = clips_of("v1") + clips_of("v2") + clips_of("v3")
    res = gates_clips(rows, cfg)
    assert_failed(res["every_video_has_clips"], {"videos_without_clips": 1}, ("v4",))
    assert res["coverage"].passed is True  # v4 is reported once, by every_video_has_clips


def _rate_from(rows: int) -> GateConfig:
    return load_gate_config(None, {"scene_clips": {"min_rows_for_rate": rows}}, env={})


def test_scene_duration_in_bounds_fails_on_a_share_and_names_the_sources():
    rows = good_clip_rows()
    rows[0]["duration_s"] = 0.0  # v1 clip 0
    rows[4]["duration_s"] = 21.0  # v2 clip 1: over max_clip_s 20 + tolerance 0.5
    rows[5]["duration_s"] = 20.5  # v2 clip 2: exactly at the bound, passes
    r = gates_clips(rows, _rate_from(10))["duration_in_bounds"]
    assert_failed(
        r,
        {
            "duration_out_of_bounds": 2 / 12,
            "rows": 12,
            "clips_out_of_bounds": 2,
            "sources_out_of_bounds": ["s3://in/v1.mp4", "s3://in/v2.mp4"],
            "detect_error_clips_exempt": 0,
            "clips_without_max_clip_s": 0,
        },
        ("s3://in/v1.mp4", "s3://in/v2.mp4"),
    )
    assert r.thresholds == {
        "min_duration_s_exclusive": 0.0,
        "duration_tolerance_s": 0.5,
        "max_out_of_bounds_rate": 0.05,
        "min_rows_for_rate": 10,
    }


def test_scene_duration_one_clip_over_its_bound_in_a_day_is_set_aside_not_blocking():
    # One file's clip over its bound (a still held for 25 s) among 40 clips: 2.5 % <= 5 %, the gate passes, counts
    # it and names the file; filtered_clips rejects the clip too_long.
    rows = good_clip_rows() + [
        r for v in ("v5", "v6", "v7", "v8") for r in clips_of(v, [(i * 10, i * 10 + 10) for i in range(7)])
    ]
    rows[4]["duration_s"] = 25.0
    raw = good_raw_rows() + [raw_row(v) for v in ("v5", "v6", "v7", "v8")]
    r = gates_clips(rows, load_gate_config(None, env={}), raw_rows=raw)["duration_in_bounds"]
    assert r.passed is True, r
    assert (r.measured["rows"], r.measured["clips_out_of_bounds"]) == (40, 1)
    assert r.measured["sources_out_of_bounds"] == ["s3://in/v2.mp4"]
    assert r.measured["duration_out_of_bounds"] == pytest.approx(1 / 40)
    # below min_rows_for_rate (20), a small day with the same clip passes with a note
    small = gates_clips(
        good_clip_rows()[:4] + [dict(good_clip_rows()[4], duration_s=25.0)], load_gate_config(None, env={})
    )
    assert small["duration_in_bounds"].passed is True
    assert "not enforced" in small["duration_in_bounds"].description


def test_scene_duration_is_bounded_by_each_rows_own_max_clip_s():
    # The gate has no max_clip_s of its own: a row cut under max_clip_s 1 s fails at 1.6 s, one cut under 20 s
    # passes at 19 s, and a row written before the column existed (no bound) is counted, not checked.
    rows = good_clip_rows()
    rows[1].update(max_clip_s=1.0, duration_s=1.6)  # v1 clip 1: over 1 + 0.5
    rows[2].update(max_clip_s=1.0, duration_s=1.5)  # v1 clip 2: exactly at its bound
    rows[4].update(duration_s=19.0)  # v2 clip 1, bound 20
    rows[7].update(max_clip_s=None, duration_s=30.0)  # v3 clip 1: no bound recorded
    r = gates_clips(rows, _rate_from(10))["duration_in_bounds"]
    assert_failed(
        r,
        {"clips_out_of_bounds": 1, "detect_error_clips_exempt": 0, "clips_without_max_clip_s": 1},
        ("s3://in/v1.mp4",),
    )


def test_scene_duration_bound_exempts_detect_error_fallback_clip(cfg):
    # Detection failed on v4: the splitter emits one whole-video clip (here 100 s) carrying the error.
    raw = good_raw_rows()
    raw[3].update(num_frames=2500, duration_s=100.0)
    rows = [r for v in ("v1", "v2", "v3") for r in clips_of(v)] + [
        clip_row("v4", 0, 0, 2500, detect_error="decode failed")
    ]
    res = gates_clips(rows, cfg, raw_rows=raw)
    assert_all_passed(res, "scene_clips")
    assert res["duration_in_bounds"].measured == {
        "duration_out_of_bounds": 0.0,
        "rows": 10,
        "clips_out_of_bounds": 0,
        "sources_out_of_bounds": [],
        "detect_error_clips_exempt": 1,
        "clips_without_max_clip_s": 0,
    }


# ----------------------------------------------------------------------------------------------- filtered_clips
def test_filtered_clips_good_partition_passes_every_gate(cfg):
    res = gates_scores(good_score_rows(), cfg)
    assert_all_passed(res, "filtered_clips")
    assert res["scored_exactly_once"].measured == {
        "scene_clips": 12,
        "rows": 12,
        "clips_of_copies": 0,
        "null_ids": 0,
        "missing": 0,
        "extra": 0,
        "duplicated": 0,
    }
    assert res["pass_rate"].measured == {"rows": 12, "passed": 9, "pass_rate": pytest.approx(0.75)}


def _set_aside(rows: list[dict], at: int, reason: str) -> None:
    rows[at].update(
        passed=False, reject_reason=reason, reject_detail="why", source_uri=f"s3://in/{rows[at]['video_id']}.mp4"
    )


def test_filtered_undecodable_clips_are_counted_and_named_and_block_only_in_bulk(cfg):
    # one undecodable clip of 12 is 8 % > 5 %: the gate fails naming the file; the too_long one is counted too
    rows = good_score_rows()
    _set_aside(rows, 4, "undecodable")  # v2
    _set_aside(rows, 8, "too_few_frames;too_long")  # v3
    r = gates_scores(rows, cfg)["undecodable_rate"]
    assert_failed(
        r,
        {
            "undecodable_rate": 1 / 12,
            "rows": 12,
            "undecodable": 1,
            "undecodable_sources": ["s3://in/v2.mp4"],
            "too_long": 1,
            "too_long_sources": ["s3://in/v3.mp4"],
        },
        ("s3://in/v2.mp4",),
    )
    assert r.thresholds == {"max_undecodable_rate": 0.05, "min_rows_for_rate": 10}
    # the same clip in a day of 24 clips (4 %) is set aside and the day goes on
    more = [*good_clip_rows(), *[c for v in ("v5", "v6", "v7", "v8") for c in clips_of(v)]]
    raw = good_raw_rows() + [raw_row(v) for v in ("v5", "v6", "v7", "v8")]
    rows = [score_row(c) for c in more]
    _set_aside(rows, 4, "undecodable")
    r = gates_scores(rows, cfg, clip_rows=more, raw_rows=raw)["undecodable_rate"]
    assert r.passed is True, r
    assert (r.measured["rows"], r.measured["undecodable"], r.measured["undecodable_sources"]) == (
        24,
        1,
        ["s3://in/v2.mp4"],
    )


def test_filtered_scored_exactly_once_fails(cfg):
    rows = good_score_rows()
    dropped = rows.pop(5)  # v2 clip 2 never scored
    rows.append(score_row(clip_row("vX", 0, 0, 10)))  # not a scene clip
    rows.append(score_row(clip_row("v4", 1, 30, 60)))  # scored twice
    r = gates_scores(rows, cfg)["scored_exactly_once"]
    ids = (dropped["clip_id"], clip_id("vX", 0, 10), clip_id("v4", 30, 60))
    assert_failed(r, {"scene_clips": 12, "rows": 13, "null_ids": 0, "missing": 1, "extra": 1, "duplicated": 1}, ids)


def test_clips_of_a_video_marked_a_copy_after_the_split_may_be_scored_or_not(cfg):
    """Days that run at the same time: another day's run marked v6 a copy after this day cut it. The judgement
    removes its clips from filtered_clips, and a day judged before the copy was found still holds them: both pass,
    and a clip of an ok video left unscored still fails."""
    raw = good_raw_rows() + [raw_row("v6", status="duplicate", duplicate_of_date=D - dt.timedelta(days=1))]
    clips = good_clip_rows() + clips_of("v6", [(0, 60), (60, 100)])
    for rows in (good_score_rows(), good_score_rows() + [score_row(c) for c in clips_of("v6", [(0, 60), (60, 100)])]):
        res = gates_scores(rows, cfg, clips, raw)
        assert_all_passed(res, "filtered_clips")
        assert res["scored_exactly_once"].measured["clips_of_copies"] == 2
    rows = good_score_rows()
    dropped = rows.pop(5)
    r = gates_scores(rows, cfg, clips, raw)["scored_exactly_once"]
    assert_failed(r, {"missing": 1, "extra": 0, "clips_of_copies": 2}, (dropped["clip_id"],))
    # without the copy verdict the same clips are expected: unscored, they fail
    r = gates_scores(good_score_rows(), cfg, clips)["scored_exactly_once"]
    assert_failed(
        r, {"missing": 2, "clips_of_copies": 0}, tuple(c["clip_id"] for c in clips_of("v6", [(0, 60), (60, 100)]))
    )


def test_filtered_scores_valid_fails(cfg):
    rows = good_score_rows()
    rows[3]["motion"] = 300.0  # v2 clip 0 (rejected: ranges apply to every row)
    rows[4]["black_ratio"] = 1.5
    rows[6]["sharpness"] = -1.0  # v3 clip 0 (rejected)
    rows[7]["brightness"] = None  # v3 clip 1 (passed: scores required)
    r = gates_scores(rows, cfg)["scores_valid"]
    ids = tuple(rows[i]["clip_id"] for i in (7, 3, 6, 4))  # missing checks first, then ranges in column order
    assert_failed(
        r,
        {
            "brightness_missing": 1,
            "motion_out_of_range": 1,
            "sharpness_out_of_range": 1,
            "black_ratio_out_of_range": 1,
            "motion_missing": 0,
        },
        ids,
    )
    assert r.thresholds["motion"] == [0.0, 255.0] and r.thresholds["sharpness"] == [0.0, None]


def test_filtered_scores_may_be_null_on_rejected_clips_unless_configured(cfg):
    rows = good_score_rows()
    rows[0].update(motion=None, sharpness=None, brightness=None, reject_reason="detect_error")  # v1 clip 0, unscorable
    r = gates_scores(rows, cfg)["scores_valid"]
    assert r.passed is True and r.measured["motion_missing"] == 0  # default: only passed rows need scores
    strict = load_gate_config(None, {"filtered_clips": {"require_scores_on_rejected": True}}, env={})
    ids = (rows[0]["clip_id"],)
    assert_failed(
        gates_scores(rows, strict)["scores_valid"],
        {"motion_missing": 1, "sharpness_missing": 1, "brightness_missing": 1},
        ids,
    )


def test_filtered_reject_reason_consistent_fails(cfg):
    rows = good_score_rows()
    rows[0]["reject_reason"] = None  # rejected, no reason
    rows[3]["reject_reason"] = ""  # rejected (v2 clip 0), empty reason
    rows[1]["reject_reason"] = "black"  # passed, with a reason
    r = gates_scores(rows, cfg)["reject_reason_consistent"]
    ids = (rows[0]["clip_id"], rows[3]["clip_id"], rows[1]["clip_id"])
    assert_failed(
        r,
        {"null_passed": 0, "rejected_without_reason": 1, "rejected_with_empty_reason": 1, "passed_with_reason": 1},
        ids,
    )


def test_filtered_duplicates_name_their_kept_clip(cfg):
    rows = good_score_rows()
    kept = rows[1]["clip_id"]
    # a good group: rows[1] kept (names itself), rows[2] its duplicate, rows[4] a duplicate of a clip of the day before
    rows[1].update(duplicate_group=kept, duplicate_kept_date=D)
    rows[2].update(duplicate_group=kept, duplicate_kept_date=D, passed=False, reject_reason="duplicate")
    rows[4].update(
        duplicate_group="earlier", duplicate_kept_date=D - dt.timedelta(days=1), passed=False, reject_reason="duplicate"
    )
    assert gates_scores(rows, cfg)["duplicates_name_their_kept_clip"].passed
    rows[5].update(passed=False, reject_reason="black;duplicate")  # names nobody
    rows[6].update(
        duplicate_group="later", duplicate_kept_date=D + dt.timedelta(days=1), passed=False, reject_reason="duplicate"
    )  # a kept clip of a later day
    rows[7].update(
        duplicate_group=rows[7]["clip_id"], duplicate_kept_date=D, passed=False, reject_reason="duplicate"
    )  # the kept clip rejected as a duplicate of itself
    r = gates_scores(rows, cfg)["duplicates_name_their_kept_clip"]
    assert_failed(
        r,
        {"duplicates_without_kept_clip": 3, "kept_clips_rejected": 1},
        (rows[5]["clip_id"], rows[6]["clip_id"], rows[7]["clip_id"]),
    )


@pytest.mark.parametrize("passed,rate", [(True, 1.0), (False, 0.0)])
def test_filtered_pass_rate_fails_at_0_and_100_percent(cfg, passed, rate):
    rows = [score_row(c, passed=passed, reject_reason=None if passed else "black") for c in good_clip_rows()]
    r = gates_scores(rows, cfg)["pass_rate"]
    assert_failed(r, {"rows": 12, "passed": 12 if passed else 0, "pass_rate": rate}, ())
    assert f"pass rate {rate:.4g} outside [0.05, 0.999]" in r.description


def test_filtered_pass_rate_not_enforced_below_min_rows(cfg):
    clips = clips_of("v1")
    rows = [score_row(c, passed=True, reject_reason=None) for c in clips]
    r = gates_scores(rows, cfg, clip_rows=clips)["pass_rate"]
    assert r.passed is True and r.measured == {"rows": 3, "passed": 3, "pass_rate": 1.0}
    assert "not enforced, only 3 rows (< min_rows_for_rate 10)" in r.description


# ----------------------------------------------------------------------------------------------- clip_captions
def test_clip_captions_good_partition_passes_every_gate(cfg):
    res = gates_caps(good_caption_rows(), cfg)
    assert_all_passed(res, "clip_captions")
    assert res["one_caption_per_passed_clip"].measured == {
        "passed_clips": 9,
        "rows": 9,
        "tracks": 1,
        "null_ids": 0,
        "missing": 0,
        "extra": 0,
        "duplicated": 0,
    }
    assert res["failure_rate"].measured == {"rows": 9, "failed": 0, "failure_rate": 0.0}


def test_caption_failed_rows_with_errors_pass_structural_gates(cfg):
    rows = good_caption_rows()
    rows[8] = failed_row(rows[8]["clip_id"])  # 1 of 9 failed: 0.111 > 0.1
    res = gates_caps(rows, cfg)
    assert [n for n, r in res.items() if not r.passed] == ["failure_rate"]


def test_one_caption_per_passed_clip_fails(cfg):
    rows = good_caption_rows()
    dropped = rows.pop(0)
    rows.append(caption_row(clip_id("v1", 0, 30), "A caption for a clip that was rejected."))  # v1 clip 0 was rejected
    rows.append(caption_row(rows[2]["clip_id"], "A second caption for the same clip."))
    r = gates_caps(rows, cfg)["one_caption_per_passed_clip"]
    ids = (dropped["clip_id"], clip_id("v1", 0, 30), rows[2]["clip_id"])
    assert_failed(r, {"passed_clips": 9, "rows": 10, "tracks": 1, "missing": 1, "extra": 1, "duplicated": 1}, ids)


def test_caption_status_consistent_fails(cfg):
    rows = good_caption_rows()
    rows[0]["status"] = "done"
    rows[1] = failed_row(rows[1]["clip_id"], error=None)
    rows[2]["error"] = "timeout"
    r = gates_caps(rows, cfg)["status_consistent"]
    ids = tuple(rows[i]["clip_id"] for i in (0, 1, 2))
    assert_failed(r, {"invalid_status": 1, "failed_without_error": 1, "ok_with_error": 1}, ids)


def test_caption_present_fails_on_null_and_blank(cfg):
    rows = good_caption_rows()
    rows[3]["caption"] = None
    rows[5]["caption"] = "   "
    rows[6] = failed_row(rows[6]["clip_id"])  # failed rows have no caption by design: not counted
    r = gates_caps(rows, cfg)["caption_present"]
    assert_failed(r, {"blank_captions": 2}, (rows[3]["clip_id"], rows[5]["clip_id"]))


def test_caption_length_fails_outside_bounds(cfg):
    rows = good_caption_rows()
    rows[1]["caption"] = "A dog."  # 6 < 8
    rows[4]["caption"] = " ".join(f"word{i}" for i in range(400))  # 3089 characters > 2000
    rows[5]["caption"] = "Dog runs"  # exactly 8: passes
    r = gates_caps(rows, cfg)["caption_length"]
    assert_failed(r, {"length_out_of_bounds": 2}, (rows[1]["clip_id"], rows[4]["clip_id"]))
    assert r.thresholds == {"min_len": 8, "max_len": 2000}


def test_no_repetition_fails_on_looping_captions(cfg):
    rows = good_caption_rows()
    rows[2]["caption"] = "dog dog dog dog dog dog dog dog"
    rows[7]["caption"] = "a cat on a mat, a cat on a mat, a cat on a mat"
    r = gates_caps(rows, cfg)["no_repetition"]
    assert_failed(r, {"repetitive": 2}, (rows[2]["clip_id"], rows[7]["clip_id"]))


def test_no_refusal_fails_on_boilerplate(cfg):
    rows = good_caption_rows()
    rows[0]["caption"] = "I'm sorry, but I cannot describe this video."
    rows[4]["caption"] = "As an AI language model, I see a beach."
    rows[5]["caption"] = "A sign reads: sorry, we are closed."  # not boilerplate
    r = gates_caps(rows, cfg)["no_refusal"]
    assert_failed(r, {"refusals": 2}, (rows[0]["clip_id"], rows[4]["clip_id"]))


def test_provenance_set_fails(cfg):
    rows = good_caption_rows()
    rows[1]["model"] = None
    rows[2]["prompt_version"] = ""
    r = gates_caps(rows, cfg)["provenance_set"]
    ids = (rows[1]["clip_id"], rows[2]["clip_id"])
    assert_failed(
        r, {"model_missing": 1, "model_empty": 0, "prompt_version_missing": 0, "prompt_version_empty": 1}, ids
    )


def test_failure_rate_fails_above_bound_and_is_skipped_below_min_rows(cfg):
    rows = good_caption_rows()
    rows[0] = failed_row(rows[0]["clip_id"])
    rows[1] = failed_row(rows[1]["clip_id"])
    r = gates_caps(rows, cfg)["failure_rate"]
    assert_failed(r, {"rows": 9, "failed": 2, "failure_rate": 2 / 9}, (rows[0]["clip_id"], rows[1]["clip_id"]))
    few = gates_caps(rows[:2], cfg)["failure_rate"]  # 2 rows, both failed: rate 1.0 but below min rows
    assert few.passed is True and few.measured["failure_rate"] == 1.0


def test_lenient_caption_profile_turns_content_gates_into_warnings(cfg):
    rows = good_caption_rows()
    rows[0]["caption"] = "zq zq zq zq zq zq"  # what a random-weight model may write
    lenient = load_gate_config(None, LENIENT_CAPTION_CONTENT, env={})
    r = gates_caps(rows, lenient)["no_repetition"]
    assert (r.passed, r.severity, r.blocks, r.measured["repetitive"]) == (False, "warn", False, 1)
    assert gates_caps(rows, cfg)["no_repetition"].blocks is True


def test_disabled_gate_passes_without_evaluation(cfg):
    rows = good_caption_rows()
    rows[0]["caption"] = "I'm sorry, I cannot help with that."
    off = load_gate_config(None, {"clip_captions": {"gates": {"no_refusal": {"enabled": False}}}}, env={})
    r = gates_caps(rows, off)["no_refusal"]
    assert (r.passed, r.enabled, r.measured, r.failing_ids) == (True, False, {}, ())
    assert r.description.endswith("disabled by config")


# ----------------------------------------------------------------------------------------------- one partition only
def test_gates_use_only_the_rows_they_are_given(cfg):
    # Partition E holds planted bad data (overlaps, unknown videos); the check of D gets D's rows only.
    bad_e_clips = clips_of("v1", [(0, 60), (50, 100)], day=E) + [clip_row("vE", 0, 0, 10, day=E)]
    e_ids = {r["clip_id"] for r in bad_e_clips} | {"vE"}
    res = gates_clips(good_clip_rows(D), cfg, raw_rows=good_raw_rows(D))
    assert_all_passed(res, "scene_clips")
    res_e = gates_clips(bad_e_clips, cfg, raw_rows=good_raw_rows(E))
    assert res_e["clips_ordered_non_overlapping"].failing_ids == (clip_id("v1", 50, 100),)
    assert res_e["clip_video_known"].failing_ids == (clip_id("vE", 0, 10),)
    # Failing ids of a D partition with its own defect never name E's rows.
    d_rows = good_clip_rows(D)
    d_rows[1]["start_frame"] = 20  # v1's second clip overlaps its first
    res_d = gates_clips(d_rows, cfg, raw_rows=good_raw_rows(D))
    reported = {i for r in res_d.values() for i in r.failing_ids}
    assert reported == {clip_id("v1", 30, 60)} and not reported & e_ids


def test_run_gates_refuses_rows_of_two_partitions(cfg):
    two_days = t_clips(good_clip_rows(D) + good_clip_rows(E))
    with pytest.raises(ValueError, match="one partition at a time"):
        run_gates("scene_clips", two_days, {"raw_videos": t_raw(good_raw_rows(D))}, cfg)
    with pytest.raises(ValueError, match="one partition at a time"):  # context from another day
        run_gates("scene_clips", t_clips(good_clip_rows(D)), {"raw_videos": t_raw(good_raw_rows(E))}, cfg)
    with pytest.raises(ValueError, match="need context tables"):
        run_gates("scene_clips", t_clips(good_clip_rows(D)), {}, cfg)


# ----------------------------------------------------------------------------------------------- repetition_score
@pytest.mark.parametrize(
    "text,score",
    [
        ("", 0.0),
        (None, 0.0),
        ("Red car drives along a coastal road.", 0.0),
        ("A man walks a dog.", 2 / 6),  # "a" twice among a, man, walks, a, dog, "."
        ("dog dog dog dog", 1.0),
        ("a cat a cat a cat", 1.0),  # bigram "a cat" x3 covers all 6 tokens
        ("a a a a", 1.0),
        ("the cat sat the cat ran", 4 / 6),  # bigram "the cat" x2
        ("Look! Look! LOOK!", 1.0),  # case-insensitive; "!" counts as a token
        ("one two three four one two three four", 6 / 8),  # n-grams up to 3: "one two three" x2 covers 6 of 8
    ],
)
def test_repetition_score(text, score):
    assert repetition_score(text) == pytest.approx(score)


# ----------------------------------------------------------------------------------------------- config
def test_config_from_yaml_file_named_by_env_and_overrides(tmp_path, monkeypatch):
    path = tmp_path / "gates.yaml"
    path.write_text(
        "raw_videos:\n  max_reject_rate: 0.25\nclip_captions:\n  max_len: 500\n  gates:\n    no_refusal: {severity: warn}\n"
    )
    monkeypatch.setenv("VIDEOLAKE_GATES_FILE", str(path))
    c = load_gate_config()
    assert c.raw_videos.max_reject_rate == 0.25 and c.raw_videos.max_fps == 1000.0
    assert c.clip_captions.max_len == 500 and c.clip_captions.settings("no_refusal").severity == "warn"
    assert c.clip_captions.settings("no_repetition").severity == "error"
    c2 = load_gate_config(overrides={"raw_videos": {"max_reject_rate": 0.1}})
    assert c2.raw_videos.max_reject_rate == 0.1 and c2.clip_captions.max_len == 500  # override wins, file kept
    rows = [raw_row("v1"), raw_row("v2"), raw_row("v3"), raw_row("v4"), rejected_row("v5"), rejected_row("v6")]
    r = gates_raw(rows, c)["reject_rate"]  # 2/6 = 0.333 > 0.25 from the file
    assert_failed(r, {"reject_rate": 2 / 6}, ("v5", "v6"))
    assert r.thresholds["max_reject_rate"] == 0.25


@pytest.mark.parametrize(
    "data,message",
    [
        ({"raw_video": {}}, "unknown table"),
        ({"raw_videos": {"max_reject_rat": 0.2}}, "unknown field"),
        ({"raw_videos": {"max_reject_rate": "high"}}, "expected a number"),
        ({"raw_videos": {"gates": {"nope": {}}}}, "unknown gate"),
        ({"raw_videos": {"gates": {"reject_rate": {"severity": "fatal"}}}}, "severity"),
        ({"raw_videos": {"gates": {"reject_rate": {"enabled": "no"}}}}, "expected true/false"),
        ({"clip_captions": {"refusal_patterns": "sorry"}}, "list of strings"),
        ({"scene_clips": {"max_clip_s": 20.0}}, "max_clip_s is no longer a gate setting: each scene_clips row carries"),
    ],
)
def test_config_rejects_typos(data, message):
    with pytest.raises(ValueError, match=message):
        load_gate_config(None, data, env={})


def test_example_yaml_documents_every_default():
    c = load_gate_config(EXAMPLE_YAML, env={})
    assert c == GateConfig()
    assert config_to_dict(c) == config_to_dict(GateConfig())
    text = EXAMPLE_YAML.read_text()
    for table, fields in config_to_dict(GateConfig()).items():
        for name in list(fields) + list(fields["gates"]):
            assert f"{name}:" in text, (table, name)


def test_result_metadata_is_plain_data(cfg):
    rows = good_raw_rows() + [raw_row("v2")]
    md = gates_raw(rows, cfg)["video_id_unique"].to_metadata()
    assert md == {
        "gate": "video_id_unique",
        "table": "raw_videos",
        "passed": False,
        "severity": "error",
        "enabled": True,
        "measured": {"null_ids": 0, "duplicated": 2},
        "thresholds": {},
        "failing_ids": ["v2"],
        "description": "raw_videos.video_id_unique failed: 2 row(s) share a video_id (e.g. v2)",
    }
    assert all(type(v) is int for v in md["measured"].values())


def test_platform_gates_import_neither_dagster_nor_gx():
    import subprocess
    import sys

    code = (
        "import sys, videolake.platform.gates, videolake.platform.gates.raw_videos, videolake.platform.gates.scene_clips,"
        " videolake.platform.gates.filtered_clips, videolake.platform.gates.clip_captions, videolake.platform.gates.gx_runner\n"
        "bad = [m for m in ('dagster', 'great_expectations') if m in sys.modules]\nprint(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_every_gate_is_documented():
    assert {t: set(docs) for t, docs in GATE_DOCS.items()} == {t: set(gate_names(t)) for t in TABLE_GATES}
