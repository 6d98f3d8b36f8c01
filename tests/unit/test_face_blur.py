"""Face blur in the training shards (videolake.platform.shards.face_blur, ShardConfig.blur_faces), on real footage.

carphone.mp4 (a man talking in a car, his face in every frame: labelled by looking, tests/unit/test_faces_scorer.py)
is encoded by the shard stage's own encoder (``encode.encode_clips``, what ``stages.shard.shard_one`` calls per
video) with blur on and off; the written mp4s are decoded and the same detector (MTCNN) is run on every frame. Without
blur it finds the face in every frame of the encoded clip; with blur, nothing where the face was.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pyarrow as pa
import pytest

from videolake.platform.filters.scorers.faces import FacesConfig, detect_faces, face_detector, kept_faces
from videolake.platform.shards.config import ShardConfig
from videolake.platform.shards.encode import encode_clips
from videolake.platform.shards.face_blur import GRID, BlurSettings, FaceBlurrer, blur_boxes

FRAMES = (0, 30)  # the first second of carphone.mp4
MIN_CONFIDENCE = FacesConfig().min_confidence


@pytest.fixture(scope="module")
def carphone() -> tuple[str, float]:
    import av

    from videolake.evaluation import corpus

    path = str(corpus.fetch(names=["carphone.mp4"])["carphone.mp4"])
    with av.open(path) as container:
        rate = float(container.streams.video[0].average_rate)
    return path, rate


def _encode(carphone, **settings) -> bytes:
    path, rate = carphone
    (encoded,) = encode_clips(path, [FRAMES], rate, ShardConfig(**settings))
    assert not isinstance(encoded, Exception), encoded
    assert encoded.num_frames == FRAMES[1] - FRAMES[0]
    return encoded.data


def _decode(mp4: bytes) -> list[np.ndarray]:
    import av

    fd, tmp = tempfile.mkstemp(suffix=".mp4")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(mp4)
        with av.open(tmp) as container:
            return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    finally:
        os.remove(tmp)


@pytest.fixture(scope="module")
def encoded(carphone) -> dict[str, bytes]:
    return {"plain": _encode(carphone), "blurred": _encode(carphone, blur_faces=True)}


def _overlaps(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def test_blurred_mp4_hides_the_face_the_plain_one_shows(encoded):
    detector = face_detector()
    plain, blurred = _decode(encoded["plain"]), _decode(encoded["blurred"])
    assert len(plain) == len(blurred) == FRAMES[1] - FRAMES[0]
    before = detect_faces(detector, plain)
    after = detect_faces(detector, blurred)
    # without blur: the one face, found in every frame of the encoded clip (so this test can fail)
    assert [len(kept_faces(fs, MIN_CONFIDENCE, 20)) for fs in before] == [1] * len(plain)
    # with blur: no face in any frame, and nothing near the faces found before scores a face
    assert [len(kept_faces(fs, MIN_CONFIDENCE, 0)) for fs in after] == [0] * len(blurred)
    near = [f.prob for fs_b, fs_a in zip(before, after) for f in fs_a for g in fs_b if _overlaps(f.box, g.box)]
    assert max(near, default=0.0) < MIN_CONFIDENCE
    # the blur is local: away from the face (the window, top right) the frames agree up to the encoder's noise
    window = (slice(0, 40), slice(140, 176))
    assert np.abs(plain[15][window].astype(int) - blurred[15][window].astype(int)).mean() < 3


def test_blurred_samples_are_deterministic(carphone, encoded):
    """A shard's name is a digest of its bytes: the same clip and settings must give the same mp4."""
    assert _encode(carphone, blur_faces=True) == encoded["blurred"]
    assert encoded["blurred"] != encoded["plain"]


def test_blurrer_holds_frames_until_the_next_detection():
    frames = [np.full((64, 96, 3), i, np.uint8) for i in range(12)]  # no face: every frame comes back as it was
    blurrer = FaceBlurrer(BlurSettings(detect_every=5))
    ready = [len(blurrer.push(f)) for f in frames]
    assert ready == [1, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 0]
    rest = blurrer.flush()
    assert len(rest) == 1 and blurrer.flush() == []
    assert blurrer.detections == 4  # frames 0, 5, 10 and the last
    out = FaceBlurrer(BlurSettings(detect_every=5))
    got = [g for f in frames for g in out.push(f)] + out.flush()
    assert [int(g[0, 0, 0]) for g in got] == list(range(12))


def test_blur_boxes_changes_only_the_boxes():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    out = blur_boxes(rgb, [(16, 24, 64, 80)])
    inside = np.zeros((120, 160), bool)
    inside[24:80, 16:64] = True
    outside = ~inside
    assert np.array_equal(out[outside], rgb[outside])
    # the noise inside is averaged away: its spread drops from ~74 to a few levels
    assert out[inside].std() < 10 < rgb[inside].std()
    assert GRID == 8


def test_blur_is_in_the_stage_version_and_the_card():
    from videolake.platform.releases.card import faces_section
    from videolake.platform.stages.shard import shard_version

    assert shard_version(ShardConfig(blur_faces=True)) != shard_version(ShardConfig())
    assert ShardConfig().blur_settings() is None
    assert ShardConfig(blur_faces=True, blur_detect_every=3).blur_settings().detect_every == 3
    blurred = "\n".join(faces_section(pa.table({"faces_blurred": [True, True]})))
    assert "Faces were blurred in every sample" in blurred and "| blurred | 2 |" in blurred
    mixed = "\n".join(faces_section(pa.table({"faces_blurred": pa.array([True, None], pa.bool_())})))
    assert "some samples only" in mixed and "| unknown | 1 |" in mixed
    plain = "\n".join(faces_section(pa.table({"faces_blurred": [False]})))
    assert "Faces were not blurred" in plain
