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


# The Ray that module_ray started and that is still up: its GCS address, or None.
_SHARED_RAY: dict[str, str | None] = {"gcs": None}


def _uses_module_ray(item) -> bool:
    return "module_ray" in getattr(item, "fixturenames", ())


@pytest.fixture(scope="module")
def module_ray(request):
    """One local Ray for the test module (tests/assets/module_ray.py), up from the module's first test to its last.

    Consecutive modules that all use it share it (pytest_collection_modifyitems below runs them one after another):
    the Ray stays up when the next test also requests it, and is stopped before any test that does not, so such a test
    never finds a Ray it did not ask for. Every module passes the same RAY_OPTIONS. One start instead of seven saves
    ~6 s each, and the workers that imported the stages are reused. A module that stopped it gets a new one.
    """
    import ray
    from module_ray import RAY_OPTIONS

    ours = ray.is_initialized() and _SHARED_RAY["gcs"] == ray.get_runtime_context().gcs_address
    if not ours:
        if ray.is_initialized():  # left by something else: other options
            ray.shutdown()
        ray.init(address="local", **RAY_OPTIONS)  # a new one, never a cluster $RAY_ADDRESS or `ray start` names
        _SHARED_RAY["gcs"] = ray.get_runtime_context().gcs_address
    yield
    items = request.session.items
    last = max(i for i, item in enumerate(items) if item.module is request.module)
    keep = last + 1 < len(items) and _uses_module_ray(items[last + 1]) and not _xdist_worker(request.config)
    if not keep:
        ray.shutdown()
        _SHARED_RAY["gcs"] = None


def _xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")  # a worker runs only some files: what comes next is not known here


def pytest_collection_modifyitems(config, items):
    """Run the asset modules that use module_ray one after another (at the place of the first), so they share one
    Ray; every other module keeps its place and order."""
    if _xdist_worker(config):
        return
    modules = list(dict.fromkeys(getattr(item, "module", None) for item in items))
    users = {
        m
        for m in modules
        if m is not None and any(_uses_module_ray(i) for i in items if getattr(i, "module", None) is m)
    }
    if len(users) < 2:
        return
    first = next(m for m in modules if m in users)
    order = []
    for m in modules:
        if m is first:
            order.extend(u for u in modules if u in users)
        elif m not in users:
            order.append(m)
    rank = {m: r for r, m in enumerate(order)}
    items.sort(key=lambda item: rank[getattr(item, "module", None)])
