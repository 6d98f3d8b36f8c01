"""Quality scores: exact values and reasons on synthetic frame statistics, then one run on real decoded videos."""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import pytest

from videolake.platform.filters.quality import (
    DEFAULT_SCORERS,
    SCORERS,
    QualityConfig,
    assign_duplicates,
    failed_clip_row,
    score_video_clips,
)
from videolake.platform.filters.reject_rules import REJECT_RULES
from videolake.platform.lake.schemas import SCENE_CLIPS, clip_id
from videolake.platform.video.frames import FrameStats

FPS = 30.0
BASE_HASH = 0x0F0F_3C3C_AAAA_5555


def _score(
    clips: list[dict], stats: dict[str, FrameStats], videos: list[dict], paths: dict[str, str] | None = None
) -> list[dict]:
    """What the filtered_clips stage does: each video's clips scored together (a unit; with its pixels when
    ``paths`` names its file), then duplicates assigned over the day's rows in clip_id order (its finalize step)."""
    from videolake.platform.captioning.base import FrameConfig
    from videolake.platform.captioning.clip_frames import read_frames

    def pixels_of(path: str):
        def pixels(clip: dict, count: int, max_pixels: int) -> np.ndarray:
            config = FrameConfig(sample_fps=1e6, min_frames=count, max_frames=count, max_pixels=max_pixels)
            return read_frames(path, int(clip["start_frame"]), int(clip["end_frame"]), FPS, config).frames

        return pixels

    by_video: dict[str, list[dict]] = {}
    for c in clips:
        by_video.setdefault(c["video_id"], []).append(c)
    video_rows = {v["video_id"]: v for v in videos}
    rows = [
        r
        for vid, cs in by_video.items()
        for r in score_video_clips(cs, stats[vid], video_rows.get(vid), pixels=pixels_of(paths[vid]) if paths else None)
    ]
    return assign_duplicates(sorted(rows, key=lambda r: r["clip_id"]))


def _stats(n: int, *, luma=128.0, diff=5.0, sharp=200.0, edge=0.05, dhash=BASE_HASH, w=320, h=240) -> FrameStats:
    full = lambda v, dtype: np.full(n, v, dtype=dtype)  # noqa: E731
    d = full(diff, np.float32)
    if n:
        d[0] = 0.0
    return FrameStats(
        pts_s=np.arange(n, dtype=np.float64) / FPS,
        luma_mean=full(luma, np.float32),
        luma_diff=d,
        sharpness=full(sharp, np.float32),
        edge_density=full(edge, np.float32),
        dhash=full(dhash, np.uint64),
        width=w,
        height=h,
    )


def _clip(video_id: str, start: int, end: int, index: int = 0) -> dict:
    return {
        "clip_id": clip_id(video_id, start, end),
        "video_id": video_id,
        "source_uri": f"file:///{video_id}.mp4",
        "clip_index": index,
        "start_frame": start,
        "end_frame": end,
        "start_s": start / FPS,
        "end_s": end / FPS,
        "duration_s": (end - start) / FPS,
        "clip_uri": None,
        "detector": "test",
        "detector_params": "{}",
    }


def _video(video_id: str, w: int = 320, h: int = 240) -> dict:
    return {"video_id": video_id, "width": w, "height": h}


def _one(
    stats: FrameStats, start: int, end: int, video: dict | None = None, config: QualityConfig | None = None
) -> dict:
    (row,) = score_video_clips([_clip("v", start, end)], stats, video or _video("v"), config)
    return row


def test_good_clip_scores_exactly():
    st = _stats(60, luma=100.0, sharp=250.0, edge=0.02)
    st.luma_diff[:] = np.tile(np.array([2.0, 4.0, 6.0], dtype=np.float32), 20)
    st.luma_diff[30] = 99.0  # the cut into the clip [30, 60): must not count as motion
    row = _one(st, 30, 60)
    assert row["passed"] is True and row["reject_reason"] is None
    assert row["motion"] == pytest.approx(np.mean(np.tile([2.0, 4.0, 6.0], 10)[1:]))  # frames 31..59
    assert (row["brightness"], row["sharpness"], row["black_ratio"], row["frozen_ratio"]) == (100.0, 250.0, 0.0, 0.0)
    assert row["text_area"] == pytest.approx(0.02)
    assert (row["width"], row["height"], row["duration_s"]) == (320, 240, 1.0)
    assert row["dhash"] is None and row["near_hashes"] is None  # dhash is not a default scorer; no pixels here
    assert row["duplicate_group"] is None


def test_black_clip():
    st = _stats(40, luma=100.0)
    st.luma_mean[:24] = 5.0  # 24 of 40 frames black
    row = _one(st, 0, 40)
    assert row["black_ratio"] == pytest.approx(0.6)
    assert row["brightness"] == pytest.approx((24 * 5 + 16 * 100) / 40)
    assert row["reject_reason"] == "black" and row["passed"] is False


def test_frozen_clip():
    st = _stats(31, diff=0.1)
    st.luma_diff[10] = 20.0  # one real change among 30 comparisons
    row = _one(st, 0, 31)
    assert row["frozen_ratio"] == pytest.approx(29 / 30)
    assert row["motion"] == pytest.approx((29 * 0.1 + 20.0) / 30, rel=1e-6)
    assert row["reject_reason"] == "frozen"


def test_too_short_and_black_in_rule_order():
    row = _one(_stats(20, luma=3.0, diff=5.0), 0, 20)
    assert row["duration_s"] == pytest.approx(20 / 30)
    assert row["reject_reason"] == "too_short;black;too_dark"


def test_low_resolution_uses_the_video_size():
    row = _one(_stats(60, w=640, h=480), 0, 60, video=_video("v", 120, 90))
    assert (row["width"], row["height"], row["reject_reason"]) == (120, 90, "low_resolution")
    # without a raw_videos size the statistics' decoded size is used
    row = _one(_stats(60, w=100, h=300), 0, 60, video={"video_id": "v", "width": None, "height": None})
    assert (row["width"], row["height"], row["reject_reason"]) == (100, 300, "low_resolution")


def test_each_threshold_fires_its_rule():
    cases = {
        "too_bright": _stats(60, luma=250.0),
        "low_motion": _stats(60, diff=np.tile(np.array([0.1, 0.7], np.float32), 30)),  # 50% frozen, mean 0.4
        "high_motion": _stats(60, diff=90.0),
        "blurry": _stats(60, sharp=3.0),
        "text": _stats(60, edge=0.4),
    }
    for rule, st in cases.items():
        assert _one(st, 0, 60)["reject_reason"] == rule
    assert _one(_stats(60), 0, 60, config=QualityConfig(max_clip_s=1.5))["reject_reason"] == "too_long"


@pytest.mark.parametrize("n", [0, 1])
def test_clips_with_0_or_1_frames_are_rejected_without_nan(n):
    st = _stats(n)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        row = _one(st, 0, n)
    assert row["reject_reason"] == "too_few_frames;too_short"
    assert row["motion"] is None and row["frozen_ratio"] is None
    if n == 0:
        assert row["brightness"] is None and row["dhash"] is None
    else:
        assert row["brightness"] == 128.0 and row["black_ratio"] == 0.0


def test_clip_beyond_the_statistics_is_scored_on_what_exists():
    row = _one(_stats(10), 5, 40)  # statistics end at frame 10: 5 frames of the clip are there
    assert row["brightness"] == 128.0 and row["passed"] is True


def _fingerprint(seed: int, flip_bits: int = 0, frames: int = 8) -> bytes:
    """A clip fingerprint of ``frames`` frames of random PDQ view hashes (seeded), ``flip_bits`` bits of each hash
    flipped."""
    from videolake.platform.dedup.near import hashes_per_frame

    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 256, (frames * hashes_per_frame(QualityConfig().near_dup_config()), 32), dtype=np.uint8)
    bits = np.unpackbits(hashes, axis=1)
    flip = np.random.default_rng(seed + 1000 * flip_bits).permutation(256)[:flip_bits]
    bits[:, flip] ^= 1
    return np.packbits(bits, axis=1).tobytes()


def _rows(fingerprints: dict[str, bytes | None], reasons: dict[str, str] | None = None) -> list[dict]:
    rows = []
    for v, fp in fingerprints.items():
        row = {**_clip(v, 0, 60), "near_hashes": fp, "reject_reason": (reasons or {}).get(v)}
        row["passed"] = row["reject_reason"] is None
        rows.append(row)
    return rows


def test_near_duplicates_across_videos():
    # b's frames are 12 bits from a's (a re-encode); c's are 100 bits from a's and ~110 from b's (other footage as
    # far as PDQ goes)
    rows = _rows({"b": _fingerprint(1, 12), "a": _fingerprint(1), "c": _fingerprint(1, 100)})
    by = {r["video_id"]: r for r in assign_duplicates(rows)}
    first = clip_id("a", 0, 60)
    assert (by["a"]["passed"], by["a"]["duplicate_group"], by["a"]["reject_reason"]) == (True, first, None)
    assert (by["b"]["passed"], by["b"]["duplicate_group"], by["b"]["reject_reason"]) == (False, first, "duplicate")
    assert by["b"]["duplicate_kind"] == "near" and by["a"]["duplicate_kind"] is None
    assert (by["c"]["passed"], by["c"]["duplicate_group"]) == (True, None)


def test_clips_without_a_fingerprint_are_never_near_duplicates():
    # Flat clips (black, solid, smooth) get an empty fingerprint from dedup.near; clips scored without pixels none.
    rows = _rows({"black": b"", "grey": b"", "none": None, "busy": _fingerprint(7), "busy2": _fingerprint(7, 3)})
    by = {r["video_id"]: r for r in assign_duplicates(rows)}
    assert [by[v]["duplicate_group"] for v in ("black", "grey", "none")] == [None, None, None]
    kept = clip_id("busy2", 0, 60)  # the smaller clip_id ("2" sorts before "_")
    assert by["busy"]["duplicate_group"] == by["busy2"]["duplicate_group"] == kept
    assert (by["busy2"]["passed"], by["busy"]["reject_reason"]) == (True, "duplicate")


def test_the_kept_clip_is_the_earliest_even_when_another_rule_rejects_it():
    rows = _rows({"a": _fingerprint(3), "b": _fingerprint(3, 5)}, reasons={"a": "too_short"})
    out = assign_duplicates(rows)
    assert (out[0]["reject_reason"], out[0]["duplicate_group"]) == ("too_short", out[0]["clip_id"])
    assert (out[1]["reject_reason"], out[1]["duplicate_group"]) == ("duplicate", out[0]["clip_id"])
    assert assign_duplicates(out) == out  # idempotent
    off = assign_duplicates(out, QualityConfig(dup_max_distance=-1))  # grouping turned off
    assert [(r["reject_reason"], r["duplicate_group"]) for r in off] == [("too_short", None), (None, None)]


def test_failed_rows_carry_the_reason_and_no_scores():
    row = failed_clip_row(_clip("z", 0, 60), _video("z"), "detect_error")
    assert (row["passed"], row["reject_reason"], row["motion"], row["width"]) == (False, "detect_error", None, 320)


def test_registry_and_scorer_selection():
    assert set(DEFAULT_SCORERS) <= set(SCORERS.names())
    for name in SCORERS.names():
        assert set(SCORERS.get(name).rules) <= set(REJECT_RULES)
    row = _one(_stats(60, luma=2.0), 0, 60, config=QualityConfig(scorers=("duration", "motion")))
    assert row["brightness"] is None and row["black_ratio"] is None and row["passed"] is True


def test_the_scorer_contract_typed_params_setup_once_scores_map_and_clear_errors():
    """What a plugin scorer relies on (the end-to-end plugin, installed by entry point and decoding pixels on Ray
    workers, is tests/unit/test_plugins.py)."""
    from dataclasses import dataclass

    from videolake.platform.filters.quality import ClipView, Scorer, check_scorers
    from videolake.platform.params import ParamError, param

    @dataclass(frozen=True)
    class LimitConfig:
        limit: int = param(3, "a limit", min=0)

    setups = []

    class Limit(Scorer):
        Config = LimitConfig
        columns = ("limit_score",)
        rules = ("over_limit",)

        def setup(self):
            setups.append(self.params.limit)

        def score(self, clip):
            n = clip.stats.num_frames
            return {"limit_score": n, "unmeasured": None}, (["over_limit"] if n > self.params.limit else [])

    class Wordy(Scorer):
        def score(self, clip):
            return {"word": "many"}, []

    SCORERS.register("test_limit")(Limit)
    SCORERS.register("test_wordy")(Wordy)
    config = QualityConfig(scorers=("duration", "test_limit"), scorer_params={"test_limit": {"limit": "45"}})
    rows = [_one(_stats(60), 0, end, config=config) for end in (30, 50, 60)]
    assert setups == [45]  # set up once for the process and config, not per video
    assert [r["scores"] for r in rows] == [
        {"limit_score": 30.0, "unmeasured": None},
        {"limit_score": 50.0, "unmeasured": None},
        {"limit_score": 60.0, "unmeasured": None},
    ]
    # an unknown rule sorts after the built-ins' (too_short is a built-in rule)
    assert [r["reject_reason"] for r in rows] == [None, "over_limit", "over_limit"]
    assert _one(_stats(60), 0, 20, config=config)["reject_reason"] == "too_short"
    assert (
        _one(_stats(60), 0, 59, config=QualityConfig(scorers=("duration", "test_limit"), min_clip_s=2.5))[
            "reject_reason"
        ]
        == "too_short;over_limit"
    )
    assert _one(_stats(60), 0, 60)["scores"] is None  # no plugin ran: null, not an empty map

    with pytest.raises(ParamError, match="quality scorer 'test_limit': parameter 'limit' must be >= 0, got -1"):
        check_scorers(QualityConfig(scorers=("test_limit",), scorer_params={"test_limit": {"limit": -1}}))
    with pytest.raises(ParamError, match="quality scorer 'motion' takes no parameters"):
        check_scorers(QualityConfig(scorer_params={"motion": {"min": 1}}))
    with pytest.raises(ParamError, match=r"scorer_params names scorers that are not run: \['nope'\]"):
        QualityConfig(scorer_params={"nope": {}})
    with pytest.raises(KeyError, match="unknown quality scorer 'nope'"):
        check_scorers(QualityConfig(scorers=("nope",)))
    with pytest.raises(TypeError, match="'test_wordy' returned str for score 'word'"):
        _one(_stats(60), 0, 60, config=QualityConfig(scorers=("test_wordy",)))
    view = ClipView(clip=_clip("v", 0, 60), stats=_stats(60), width=320, height=240)
    with pytest.raises(ValueError, match="pixels of clip v_00000000_00000060 are not available"):
        view.frames()


def test_scorers_see_a_video_in_batches_and_declare_the_frames_they_read():
    """score_batch is called once per scorer per batch of ``batch_clips`` clips, in clip order, with the same rows
    as one by one; frame_requests names each distinct request once, a near_dup switched off asks for none."""
    from videolake.platform.filters.quality import FrameRequest, Scorer, frame_requests

    batches: list[list[int]] = []

    class Batched(Scorer):
        columns = ("batch_start",)

        def frames_wanted(self):
            return FrameRequest(4, 640 * 360)

        def score(self, clip):
            raise AssertionError("score_batch is used")

        def score_batch(self, clips):
            batches.append([int(c.clip["start_frame"]) for c in clips])
            return [({"batch_start": batches[-1][0]}, []) for _ in clips]

    SCORERS.register("test_batched")(Batched)
    clips = [_clip("v", s, s + 40, i) for i, s in enumerate(range(0, 200, 40))]
    config = QualityConfig(scorers=("duration", "test_batched"), batch_clips=2)
    rows = score_video_clips(clips, _stats(200), _video("v"), config)
    assert batches == [[0, 40], [80, 120], [160]]
    assert [r["scores"]["batch_start"] for r in rows] == [0.0, 0.0, 80.0, 80.0, 160.0]
    assert [r["clip_id"] for r in rows] == [c["clip_id"] for c in clips]
    assert frame_requests(QualityConfig(scorers=("near_dup", "test_batched", "test_batched"))) == [
        FrameRequest(16, 128 * 72),
        FrameRequest(4, 640 * 360),
    ]
    assert frame_requests(QualityConfig(scorers=("near_dup",), dup_max_distance=-1)) == []


# ------------------------------------------------------------------------------------------------ real videos


def test_end_to_end_black_and_moving_video(ffmpeg, tmp_path):
    from videolake.platform.video.frames import compute_frame_stats
    from videolake.platform.video.probe import probe_video, raw_video_row

    paths = {}
    sources = {
        "black": ("color=black:size=320x240:rate=30", "null"),
        "moving": ("testsrc2=size=320x240:rate=30", "null"),
        "moving_blur": ("testsrc2=size=320x240:rate=30", "gblur=sigma=3"),  # same scene, softer: a near-duplicate
    }
    for name, (src, vf) in sources.items():
        paths[name] = str(tmp_path / f"{name}.mp4")
        subprocess.run(
            [
                ffmpeg,
                "-nostdin",
                "-v",
                "error",
                "-f",
                "lavfi",
                "-t",
                "2",
                "-i",
                src,
                "-vf",
                vf,
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-pix_fmt",
                "yuv420p",
                paths[name],
            ],
            check=True,
        )
    videos, clips, stats = [], [], {}
    for name, path in paths.items():
        outcome = probe_video(path)
        assert outcome.ok, outcome.detail
        videos.append(raw_video_row(name, f"file://{path}", 1, outcome))
        stats[name] = compute_frame_stats(path)
        assert stats[name].num_frames == outcome.probe.num_frames == 60
        clips.append(_clip(name, 0, 60))
    names = [f.name for f in SCENE_CLIPS if f.name in clips[0]]
    rows = _score([{k: c[k] for k in names} for c in clips], stats, videos, paths)
    by = {r["video_id"]: r for r in rows}
    black, moving = by["black"], by["moving"]
    assert black["reject_reason"] == "black;too_dark;frozen;low_motion;blurry"
    assert (black["black_ratio"], black["frozen_ratio"], black["motion"], black["sharpness"]) == (1.0, 1.0, 0.0, 0.0)
    assert moving["passed"] is True, moving["reject_reason"]
    assert moving["frozen_ratio"] == 0.0 and moving["motion"] > 1.0 and moving["sharpness"] > 1000.0
    assert black["brightness"] < 24.0 and black["text_area"] == 0.0
    # the blurred copy is the later clip_id of the pair: rejected as a duplicate of the sharp one, which is kept
    blur = by["moving_blur"]
    assert (
        blur["reject_reason"] == "duplicate"
        and blur["duplicate_group"] == moving["clip_id"] == moving["duplicate_group"]
    )
    assert black["duplicate_group"] is None and black["near_hashes"] == b""  # flat frames: no fingerprint
    # a marker row, then 16 informative frames of 20 appearance and 16 motion views (the crop views) of 32 bytes
    assert len(moving["near_hashes"]) == (1 + 16 * (20 + 16)) * 32


def test_filtered_clips_run_config_adds_plugin_scorers_after_the_built_ins():
    from videolake.assets.configs import FilteredClipsConfig

    cfg = FilteredClipsConfig(
        thresholds={"max_black_ratio": 0.3},
        extra_scorers=["aesthetic", "motion"],
        scorer_params={"aesthetic": {"min_score": "4.5"}},
    )
    engine = cfg.to_engine()
    assert engine.scorers == (*DEFAULT_SCORERS, "aesthetic") and engine.max_black_ratio == 0.3
    assert engine.scorer_params == {"aesthetic": {"min_score": "4.5"}}
    assert FilteredClipsConfig().to_engine() == QualityConfig()


def test_reading_the_pixels_of_many_clips_opens_their_video_once_per_clip(ffmpeg, tmp_path):
    """ClipView.frames of a video's clips: the container is opened once to index it (frames and coded size
    together, cached), then once per clip to decode; nothing opens it again for its size."""
    from unittest import mock

    import av

    from videolake.platform.captioning.base import FrameConfig
    from videolake.platform.captioning.clip_frames import read_frames

    path = str(tmp_path / "wide.mp4")
    subprocess.run(
        [
            ffmpeg,
            "-nostdin",
            "-v",
            "error",
            "-f",
            "lavfi",
            "-t",
            "4",
            "-i",
            "testsrc2=size=640x360:rate=25",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
            path,
        ],
        check=True,
    )
    opened = []
    real_open = av.open
    config = FrameConfig(sample_fps=1e6, min_frames=2, max_frames=2, max_pixels=160 * 90)
    with mock.patch.object(av, "open", side_effect=lambda *a, **k: opened.append(a[0]) or real_open(*a, **k)):
        shapes = [read_frames(path, start, start + 25, 25.0, config).frames.shape for start in (0, 25, 50, 75)]
    assert shapes == [(2, 90, 160, 3)] * 4  # the coded size from the index decides the scale: 640x360 -> 160x90
    assert len(opened) == 1 + 4


def test_day_figures_count_near_duplicates_and_group_sizes():
    import datetime as dt

    from videolake.platform.lake.schemas import FILTERED_CLIPS, table_spec
    from videolake.platform.lake.table import rows_to_table

    rows = _rows(
        {
            "a": _fingerprint(1),
            "b": _fingerprint(1, 4),
            "c": _fingerprint(1, 9),
            "d": _fingerprint(2),
            "e": _fingerprint(2, 6),
            "f": _fingerprint(3),
        }
    )
    rows = assign_duplicates([{**r, "partition_date": dt.date(2026, 1, 1)} for r in rows])
    figures = table_spec("filtered_clips").figures_of(rows_to_table(rows, FILTERED_CLIPS))
    assert (figures["duplicates"], figures["near_duplicates"], figures["duplicates_within_day"]) == (3, 3, 3)
    assert figures["duplicates_of_earlier_days"] == 0 and figures["semantic_duplicates"] == 0
    assert figures["duplicate_group_sizes"] == {"2": 1, "3": 1}
