"""cuts_to_ranges: scenes cover every frame exactly once; long scenes split into near-equal pieces; short kept."""

from __future__ import annotations

import numpy as np

from videolake.platform.scenes.segments import cuts_to_ranges, frame_times


def test_scenes_between_cuts_cover_all_frames():
    assert cuts_to_ranges([30, 75], 120, 25.0, 20.0) == [(0, 30), (30, 75), (75, 120)]


def test_no_cuts_is_one_scene():
    assert cuts_to_ranges([], 50, 25.0, 20.0) == [(0, 50)]


def test_long_scene_split_into_fewest_near_equal_pieces():
    # max 2 s at 25 fps = 50 frames: a 120-frame scene needs 3 pieces of 40.
    assert cuts_to_ranges([], 120, 25.0, 2.0) == [(0, 40), (40, 80), (80, 120)]
    # 101 frames -> 3 pieces differing by at most one frame, each <= 50.
    assert cuts_to_ranges([], 101, 25.0, 2.0) == [(0, 33), (33, 67), (67, 101)]
    # Exactly the maximum stays whole; one frame more splits in two.
    assert cuts_to_ranges([], 50, 25.0, 2.0) == [(0, 50)]
    assert cuts_to_ranges([], 51, 25.0, 2.0) == [(0, 25), (25, 51)]


def test_only_long_scenes_are_split():
    assert cuts_to_ranges([10], 130, 25.0, 2.0) == [(0, 10), (10, 50), (50, 90), (90, 130)]


def test_short_scenes_are_kept_for_the_quality_stage():
    # A 5-frame scene (0.2 s, shorter than the quality stage's min_clip_s) is still a range: the quality stage rejects it as too_short.
    assert cuts_to_ranges([5, 60], 100, 25.0, 20.0) == [(0, 5), (5, 60), (60, 100)]


def test_out_of_range_and_duplicate_cuts_are_ignored():
    assert cuts_to_ranges([0, 40, 40, 100, 120, -3], 100, 25.0, 20.0) == [(0, 40), (40, 100)]


def test_unsorted_cuts():
    assert cuts_to_ranges([70, 20], 90, 30.0, 20.0) == [(0, 20), (20, 70), (70, 90)]


def test_fractional_rate():
    # 29.97 fps, max 1 s -> 29 frames per piece at most: 60 frames -> 3 pieces of 20.
    assert cuts_to_ranges([], 60, 30000 / 1001, 1.0) == [(0, 20), (20, 40), (40, 60)]


def test_empty_video_and_unknown_rate():
    assert cuts_to_ranges([3], 0, 25.0, 20.0) == []
    # Unknown frame rate: no splitting possible, scenes are returned whole.
    assert cuts_to_ranges([40], 100, 0.0, 2.0) == [(0, 40), (40, 100)]


def test_pieces_never_exceed_max_and_cover_everything():
    for n in range(1, 400, 7):
        ranges = cuts_to_ranges([n // 3] if n > 3 else [], n, 24.0, 1.5)
        assert ranges[0][0] == 0 and ranges[-1][1] == n
        assert all(a < b for a, b in ranges)
        assert all(b1 == a2 for (_, b1), (a2, _) in zip(ranges, ranges[1:]))
        assert all(b - a <= 36 for a, b in ranges)


def test_scenes_are_measured_by_their_frames_times_not_a_rate():
    # tree.avi's kind: 68 frames over 29.6 s (empty repeat chunks), a header rate of 15 fps
    times = np.linspace(0.0, 29.6, 69)
    assert cuts_to_ranges([], 68, 15.0, 20.0) == [(0, 68)]  # by the header rate: one 29.6 s clip
    assert cuts_to_ranges([], 68, 15.0, 20.0, times=times) == [(0, 34), (34, 68)]


def test_a_frame_held_longer_than_the_bound_is_a_clip_of_its_own():
    # 20 frames at 10 fps, one frame held 25 s, 20 frames at 10 fps: equal shares of the time cannot fit, the
    # greedy cut does; only the held frame is over the bound
    times = np.array([i / 10 for i in range(20)] + [2.0] + [27 + i / 10 for i in range(21)])
    assert cuts_to_ranges([], 41, 10.0, 20.0, times=times) == [(0, 20), (20, 21), (21, 41)]


def test_a_rate_change_within_a_scene_splits_by_time():
    # 1 s at 30 fps then 3 s at 10 fps: pieces of equal time, not of equal frame counts
    times = np.array([i / 30 for i in range(30)] + [1 + i / 10 for i in range(31)])
    assert cuts_to_ranges([], 60, 30.0, 2.0, times=times) == [(0, 40), (40, 60)]


def test_frame_times_sort_the_timestamps_and_end_at_the_content_end():
    assert frame_times([0.0, 0.08, 0.04, 0.12], 4, 0.5, 25.0).tolist() == [0.0, 0.04, 0.08, 0.12, 0.5]
    assert frame_times([0.0, 0.5, 1.0], 3, None, 25.0).tolist() == [0.0, 0.5, 1.0, 1.5]  # last lasts as the one before
    assert frame_times(None, 3, None, 2.0).tolist() == [0.0, 0.5, 1.0, 1.5]  # no timestamps: the measured rate
    assert frame_times([0.0, 1.0], 3, None, 2.0).tolist() == [0.0, 0.5, 1.0, 1.5]  # not one per frame: ignored
