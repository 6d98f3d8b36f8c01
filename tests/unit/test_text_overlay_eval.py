"""The burned-in text evaluation (videolake.evaluation.text_overlay) on a tiny subset of its clips.

Two real shots of bikes.mp4 (a street, frames 0-59; the green metal fence, 137-187), each clean and with the
subtitle burned in by FFmpeg, scored by the ``text`` rule and by ``text_overlay`` at its cheapest setting (2 frames,
detection at the frame's size): the exact verdicts the evaluation reports, and the figures it draws from them.
"""

from __future__ import annotations

import pytest

from videolake.evaluation import corpus
from videolake.evaluation import text_overlay as ev

OCR = "text_overlay:frames=2,det_min_side=0"
CONFIGS = ("text", OCR)


@pytest.fixture(scope="module")
def result(real_footage, tmp_path_factory) -> dict:
    bikes = real_footage(["bikes.mp4"])["bikes.mp4"]
    shots = tuple(s for s in ev.SHOTS if s.name in ("bikes_0", "bikes_fence"))
    dest = tmp_path_factory.mktemp("text_overlay_eval")
    return ev.evaluate(dest, shots=shots, overlays=("subtitle",), configs=CONFIGS, corpus_dest=bikes.parent.parent)


def test_exact_verdicts(result):
    got = [(c.shot, c.kind, c.flagged["text"], c.flagged[OCR]) for c in result["clips"]]
    assert got == [
        ("bikes_0", "clean", False, False),
        ("bikes_0", "subtitle", False, True),  # the OCR finds the subtitle, the edge-density rule does not
        ("bikes_fence", "clean", True, False),  # the fence: the text rule's false positive, not the OCR's
        ("bikes_fence", "subtitle", True, True),
    ]
    areas = [c.score[OCR] for c in result["clips"]]
    assert areas[0] == areas[2] == 0.0
    assert 0.01 < areas[1] < 0.1 and 0.01 < areas[3] < 0.1  # one line of text: a few percent of the frame
    assert all(c.cpu_s[OCR] > 0 for c in result["clips"])


def test_figures(result):
    s = result["summary"]
    assert s["text"]["recall"] == {"subtitle": (1, 2)} and s["text"]["false_positives"] == (1, 2)
    assert s[OCR]["recall_all"] == (2, 2) and s[OCR]["false_positives"] == (0, 2)
    assert s[OCR]["real_text"] == (0, 0)
    assert ev.qualifying(s) == [OCR]
    table = ev.markdown(s, ("subtitle",)).splitlines()
    assert len(table) == 4 and table[2].startswith("| `text` | 1/2 (0.50) | 1/2 | 1/2 (0.50) |")
    assert table[3].startswith(f"| `{OCR}` | 2/2 (1.00) | 2/2 | 0/2 (0.00) | 0.776 |")


def test_upper_bound_and_configs():
    # None flagged of n: the bound is 1 - 0.05^(1/n); 59 clean clips are the fewest that show a rate <= 0.05.
    assert ev.upper_bound(0, 59) == pytest.approx(1 - 0.05 ** (1 / 59), abs=1e-9)
    assert ev.upper_bound(0, 59) < 0.05 < ev.upper_bound(0, 58)
    assert ev.upper_bound(1, 13) == pytest.approx(0.3163, abs=1e-4)
    config = ev.quality_config(OCR)
    assert config.scorers == ("text_overlay",)
    assert config.scorer_params == {"text_overlay": {"frames": "2", "det_min_side": "0"}}
    assert ev.quality_config("text").scorers == ("text",) and ev.quality_config("text").scorer_params == {}
    with pytest.raises(ValueError):
        ev.quality_config("ocr")


def test_shot_list():
    names = [s.name for s in ev.SHOTS]
    assert len(names) == len(set(names))
    clean = [s for s in ev.SHOTS if s.label == "clean"]
    assert sum(s.documented for s in clean) == 13 and len(clean) - 13 >= 30
    assert len(clean) >= 59  # enough to show a false-positive rate <= 0.05 when none is flagged
    overlaid = [s for s in clean if s.overlaid]
    assert len(overlaid) == 43 and all(s.overlaid for s in clean if s.documented)
    assert {s.video for s in overlaid} == {s.video for s in clean}  # every source file carries overlays
    truth = corpus.load_truth()["videos"]
    for s in ev.SHOTS:
        assert s.label in ("clean", "text") and 0 <= s.start < s.end and s.video in corpus.SOURCES | corpus.DAY_SOURCES
        if s.video in truth:
            assert s.end <= truth[s.video]["num_frames"], s
            inside = [c for c, _ in truth[s.video]["cut_ranges"] if s.start < c < s.end]
            # The first measurement's ranges crossed cuts (bikes 0-59, 137-187, 190-249); the shots added do not.
            assert s.documented or inside == [], s
