"""Every video of the real-footage corpus (the scene evaluation's: Debian and PyPI packages, fetched at test time,
never committed) probes ok: complete real files are never rejected.

Among them ``tree.avi``: Cinepak, 320x240, 444 AVI index entries of which most are empty "repeat the previous
frame" chunks, 68 coded frames, played for 29.6 s by ffmpeg and every player. It was rejected as ``truncated``
while truncation was judged by comparing coded frames with the index count; it is judged by stream time now.
"""

from __future__ import annotations

import pytest

from videolake.evaluation import corpus
from videolake.platform.video.probe import probe_video


@pytest.fixture(scope="module")
def real(real_footage):
    return real_footage()


@pytest.mark.slow
def test_every_corpus_video_probes_ok(real):
    assert set(real) == set(corpus.SOURCES)  # the whole corpus, not a chosen part of it
    rejected = {}
    for name, path in sorted(real.items()):
        out = probe_video(str(path))
        if not out.ok:
            rejected[name] = f"{out.reject_reason}: {out.detail}"
    assert rejected == {}


def test_an_avi_of_mostly_empty_repeat_chunks_is_ok_with_its_whole_duration(real):
    out = probe_video(str(real["tree.avi"]))
    assert out.ok, out.detail
    assert (out.probe.codec, out.probe.num_frames, round(out.probe.duration_s, 1)) == ("cinepak", 68, 29.6)
