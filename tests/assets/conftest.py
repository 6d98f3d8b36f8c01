"""Landing data for the asset tests: synthetic videos with known cuts plus every reject kind, for two dates."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from videolake.synth import SPECIAL_KINDS, Segment, Transition, VideoSpec, render, render_special

DAY1, DAY2 = "2026-03-01", "2026-03-02"


def _videos() -> list[VideoSpec]:
    return [
        VideoSpec(
            name="cuts3",
            width=320,
            height=240,
            fps="30",
            codec="h264",
            segments=(Segment("testsrc2", 45), Segment("color:red", 40), Segment("mandelbrot", 50)),
            transitions=(Transition("cut"), Transition("cut")),
        ),
        VideoSpec(
            name="nocut",
            width=320,
            height=240,
            fps="30000/1001",
            codec="h264",
            segments=(Segment("smptehdbars", 60),),
            transitions=(),
            audio=True,
        ),
    ]


@pytest.fixture(scope="session")
def landing(tmp_path_factory) -> dict:
    """{root, truths: {day: {filename: truth}}}: store root with landing/<day>/ folders."""
    root = tmp_path_factory.mktemp("store")
    work = tmp_path_factory.mktemp("synth")
    truths: dict[str, dict[str, dict]] = {DAY1: {}, DAY2: {}}
    day1 = root / "landing" / DAY1
    day2 = root / "landing" / DAY2
    day1.mkdir(parents=True)
    day2.mkdir(parents=True)
    for spec in _videos():
        path, truth = render(spec, work)
        shutil.copy(path, day1 / path.name)
        truths[DAY1][path.name] = truth
    for kind in SPECIAL_KINDS:
        path, truth = render_special(kind, work)
        shutil.copy(path, day1 / path.name)
        truths[DAY1][path.name] = truth
    # Day 2: one video, and the same bytes landed twice under another name (one row, duplicate_uris records it).
    path, truth = render(
        VideoSpec(
            name="day2",
            width=320,
            height=240,
            fps="25",
            codec="h264",
            segments=(Segment("gradients", 40), Segment("color:blue", 40)),
            transitions=(Transition("cut"),),
        ),
        work,
    )
    shutil.copy(path, day2 / path.name)
    shutil.copy(path, day2 / ("copy_of_" + path.name))
    truths[DAY2][path.name] = truth
    return {"root": Path(root), "truths": truths}


@pytest.fixture(scope="module")
def module_ray(request):
    """The local Ray of the module's materializations (tests/assets/module_ray.py): the suite's shared one for the
    modules in tests/shared_ray.py's FILES, else one started for the module and stopped after its last test. No
    module inherits a Ray with another module's options."""
    import shared_ray

    with shared_ray.module_ray(request.path):
        yield
