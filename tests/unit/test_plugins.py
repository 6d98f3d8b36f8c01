"""Plugins: an installed package adds a scene detector or a caption backend through an entry point, touching no
videolake file. The "installed package" here is real as far as Python's packaging goes: a module plus a
``*.dist-info`` directory with ``entry_points.txt`` on ``sys.path`` (what pip leaves behind), found by
``importlib.metadata`` in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from videolake.platform.registry import Registry
from videolake.platform.synth import Segment, Transition, VideoSpec, render

REPO = Path(__file__).resolve().parents[2]

DETECTOR_PLUGIN = '''
"""A plugin detector: a cut every ``every`` frames (counts frames with the engine's decoder)."""
import os
from dataclasses import dataclass

from videolake.platform.frames import SampledDecoder
from videolake.platform.scenes.base import DETECTORS, SceneDetector, SceneResult
from videolake.platform.scenes.params import param

open(os.environ["PLUGIN_MARKER"], "a").write("imported\\n")


@dataclass(frozen=True)
class EveryConfig:
    every: int = param(10, "frames between cuts", min=1)


@DETECTORS.register("every")
class EveryDetector(SceneDetector):
    Config = EveryConfig

    def detect(self, path):
        with SampledDecoder(path) as dec:
            for _ in dec.chunks():
                pass
            n, fps = dec.num_frames, dec.info.fps
        return SceneResult(cuts=list(range(self.config.every, n, self.config.every)), fps=fps, num_frames=n)
'''

BACKEND_PLUGIN = '''
"""A plugin caption backend, named by the entry point (the class is registered under the entry point's name)."""
from videolake.platform.captioning.standin_backend import StandInCaptioner


class EchoCaptioner(StandInCaptioner):
    pass
'''


def _install(site: Path, dist: str, module: str, source: str, entry_points: str) -> None:
    """What pip leaves for a package: its module and a dist-info with METADATA and entry_points.txt."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    _install(site, "videolake_every", "videolake_every", DETECTOR_PLUGIN,
             "[videolake.scene_detectors]\nevery = videolake_every\n")
    _install(site, "videolake_echo", "videolake_echo", BACKEND_PLUGIN,
             "[videolake.caption_backends]\necho = videolake_echo:EchoCaptioner\n")
    _install(site, "videolake_broken", "videolake_broken", "raise ImportError('needs libfoo')\n",
             "[videolake.scene_detectors]\nbroken = videolake_broken\n")
    return site


@pytest.fixture(scope="module")
def video(tmp_path_factory, ffmpeg) -> tuple[str, dict]:
    spec = VideoSpec("plug", 160, 120, "25", "h264", (Segment("testsrc2", 25), Segment("mandelbrot", 20)),
                     (Transition("cut"),))
    path, truth = render(spec, tmp_path_factory.mktemp("plugvideo"))
    return str(path), truth


def _python(site: Path, marker: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)]), "PLUGIN_MARKER": str(marker)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def test_an_installed_detector_plugin_runs_from_the_cli_with_typed_params(site, video, tmp_path):
    path, truth = video
    marker = tmp_path / "marker"
    proc = _python(site, marker, "-m", "videolake.cli", "scenes", path, "--detector", "every", "--param", "every=12")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"cuts": [12, 24, 36], "fps": 25.0, "num_frames": 45} and truth["num_frames"] == 45
    proc = _python(site, marker, "-m", "videolake.cli", "scenes", path, "--detector", "every", "--param", "every=x")
    assert proc.returncode == 2 and "'every' must be an integer, got 'x'" in proc.stderr


def test_the_default_detector_never_imports_plugins(site, video, tmp_path):
    path, truth = video
    marker = tmp_path / "marker"
    proc = _python(site, marker, "-m", "videolake.cli", "scenes", path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["cuts"] == truth["cuts"] == [25]
    assert not marker.exists()  # a built-in name is found without reading entry points


def test_a_broken_plugin_is_named_when_asked_for_and_breaks_nothing_else(site, video, tmp_path):
    path, _ = video
    marker = tmp_path / "marker"
    proc = _python(site, marker, "-m", "videolake.cli", "scenes", path, "--detector", "broken")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "scene detector plugin 'broken' is installed but did not load: ImportError: needs libfoo" in proc.stderr
    proc = _python(site, marker, "-m", "videolake.cli", "scenes", path, "--detector", "nope")
    assert proc.returncode == 2
    assert "unknown scene detector 'nope'; known: adaptive, content, every, luma, transnetv2" in proc.stderr


def test_a_caption_backend_plugin_is_registered_under_its_entry_point_name(site, tmp_path):
    code = ("from videolake.platform.captioning.base import CAPTIONERS, captioner_class\n"
            "cls = captioner_class('echo')\n"
            "print(cls.__module__, cls.__name__, cls.registered_name, 'standin' in CAPTIONERS)\n")
    proc = _python(site, tmp_path / "marker", "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["videolake_echo", "EchoCaptioner", "echo", "True"]


def test_registry_errors_name_what_is_known_and_refuse_a_second_class_for_a_name():
    reg: Registry[object] = Registry("widget", builtins=("json",), entry_point_group="videolake.no_such_group")
    reg.register("a")(type("A", (), {}))
    assert reg.names() == ["a"] and "a" in reg and "b" not in reg
    with pytest.raises(KeyError, match="unknown widget 'b'; known: a"):
        reg.get("b")
    with pytest.raises(ValueError, match="widget 'a' is already registered by A"):
        reg.register("a")(type("B", (), {}))
