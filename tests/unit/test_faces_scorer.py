"""The ``faces`` scorer (videolake.platform.filters.scorers.faces): MTCNN face counts on hand-labelled real footage.

Every clip is a whole file of the real-footage corpus (videolake.evaluation.corpus). The labels were established by
LOOKING at eight frames spread evenly over each clip (extracted as PNGs and viewed), not by running the detector:

- carphone.mp4: a man talking in a car, his face filling much of the 176x144 frame in every frame: 1 face.
- movie_hello.mp4: a screen recording with a webcam inset of one man (face ~60x80 px of 1280x720): 1 face.
- phone_dog.mp4: a white dog lying on a tiled floor: 0 faces (a dog's face is not a person's).
- cockatoo.mp4: a cockatoo close to the camera: 0.
- tree.avi: a tree through a window; a hand enters at the end: 0.
- cup.mp4: a hand holding a black cup against a white wall: 0.
- box.mp4: a hand moving a printed box over a table, arms only: 0. MTCNN gives 0.98 to a 18x21 px ornament on the
  box's corner in frame 60 at full size (viewed enlarged: a printed flourish, no face a person sees); the
  ``min_face_px`` rule drops it (test_box_ornament_is_not_a_face).
- vtest.avi: pedestrians seen from a first floor, faces a few pixels: 0 faces a person can make out.
"""

from __future__ import annotations

import numpy as np
import pytest

import videolake.platform.filters.scorers.faces  # noqa: F401 - registers the scorer (the lead adds it to the built-ins)
from videolake.platform.filters.quality import SCORERS, FrameRequest, QualityConfig, score_video_clips
from videolake.platform.filters.scorers.faces import FacesConfig, detect_faces, face_detector, kept_faces
from videolake.platform.params import ParamError
from videolake.platform.video.clip_pixels import VideoPixels
from videolake.platform.video.clips import frame_index
from videolake.platform.video.frames import FrameStats

LABELS = {
    "carphone.mp4": 1,
    "movie_hello.mp4": 1,
    "phone_dog.mp4": 0,
    "cockatoo.mp4": 0,
    "tree.avi": 0,
    "cup.mp4": 0,
    "box.mp4": 0,
    "vtest.avi": 0,
}
WITH_FACES = {name for name, n in LABELS.items() if n}


@pytest.fixture(scope="module")
def videos() -> dict[str, tuple[str, object, dict]]:
    """name -> (path, frame statistics, the whole-file clip). The scorer reads pixels only, so the statistics are
    zeros of the file's frame count and size (``frames.compute_frame_stats`` would decode every frame for nothing)."""
    import av

    from videolake.evaluation import corpus

    out = {}
    for name, path in corpus.fetch(names=list(LABELS)).items():
        n = frame_index(str(path)).num_frames
        with av.open(str(path)) as container:
            width, height = container.streams.video[0].width, container.streams.video[0].height
        zeros = np.zeros(n, np.float32)
        stats = FrameStats(np.zeros(n), zeros, zeros, zeros, zeros, np.zeros(n, np.uint64), width, height)
        clip = {
            "clip_id": name,
            "video_id": name,
            "clip_index": 0,
            "start_frame": 0,
            "end_frame": stats.num_frames,
            "duration_s": 2.0,
        }
        out[name] = (str(path), stats, clip)
    return out


def _row(videos, name: str, **params) -> dict:
    path, stats, clip = videos[name]
    config = QualityConfig(scorers=("faces",), scorer_params={"faces": params})
    (row,) = score_video_clips([clip], stats, None, config, pixels=VideoPixels(path, [clip]))
    return row


@pytest.fixture(scope="module")
def kept(videos) -> dict[str, dict]:
    return {name: _row(videos, name) for name in LABELS}


def test_face_counts_match_the_labels(kept):
    assert {name: row["scores"]["face_count"] for name, row in kept.items()} == LABELS
    # keep (the default policy) scores only
    assert all(row["passed"] and row["reject_reason"] is None for row in kept.values())
    # the close-up fills ~13% of its frame, the webcam inset's face under 1%; no face: 0
    assert 0.08 < kept["carphone.mp4"]["scores"]["face_area"] < 0.25
    assert 0.003 < kept["movie_hello.mp4"]["scores"]["face_area"] < 0.02
    assert all(kept[n]["scores"]["face_area"] == 0.0 for n in LABELS if n not in WITH_FACES)


def test_reject_any_rejects_the_clips_with_faces(videos):
    for name in ("carphone.mp4", "movie_hello.mp4", "phone_dog.mp4", "box.mp4"):
        row = _row(videos, name, policy="reject_any")
        assert row["reject_reason"] == ("faces" if name in WITH_FACES else None), name
        assert row["passed"] is (name not in WITH_FACES)


def test_reject_large_rejects_only_the_close_up(videos):
    assert _row(videos, "carphone.mp4", policy="reject_large")["reject_reason"] == "large_face"
    assert _row(videos, "movie_hello.mp4", policy="reject_large")["reject_reason"] is None
    # a smaller bound than the inset's face rejects it too
    assert _row(videos, "movie_hello.mp4", policy="reject_large", max_face_area="0.002")["reject_reason"] == (
        "large_face"
    )


def test_box_ornament_is_not_a_face(videos):
    """Frame 60 (decode order) of box.mp4 at its full 640x480: MTCNN's confident box on the printed ornament is
    under 20 px. (Decode order: this file's timestamps are out of order around there.)"""
    import itertools

    import av

    with av.open(videos["box.mp4"][0]) as container:
        frame = next(itertools.islice(container.decode(video=0), 60, None)).to_ndarray(format="rgb24")
    (faces,) = detect_faces(face_detector(), [frame])
    confident = [f for f in faces if f.prob >= FacesConfig().min_confidence]
    assert len(confident) == 1 and confident[0].short_side < FacesConfig().min_face_px
    x0, y0, _, _ = confident[0].box
    assert 320 < x0 < 340 and 65 < y0 < 85
    assert kept_faces(faces, FacesConfig().min_confidence, FacesConfig().min_face_px) == []


def test_settings_and_resources():
    scorer_cls = SCORERS.get("faces")
    assert scorer_cls.Config is FacesConfig and set(scorer_cls.rules) == {"faces", "large_face"}
    config = QualityConfig(scorers=("faces",))
    scorer = scorer_cls(config)
    # frames of text_overlay's size (the score stage's one pass serves every request)
    assert scorer.frames_wanted() == FrameRequest(4, 640 * 360)
    assert scorer.unit_resources().num_gpus == 0
    gpu = scorer_cls(QualityConfig(scorers=("faces",), scorer_params={"faces": {"device": "cuda"}}))
    assert gpu.unit_resources().num_gpus == 1
    with pytest.raises(ParamError):
        scorer_cls(QualityConfig(scorers=("faces",), scorer_params={"faces": {"policy": "reject_all"}}))
