"""Plugins: an installed package adds a scene detector, a quality scorer or a caption backend through an entry point,
touching no videolake file. The "installed package" here is real as far as Python's packaging goes: a module plus a
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
from videolake.synth import Segment, Transition, VideoSpec, render

REPO = Path(__file__).resolve().parents[2]

DETECTOR_PLUGIN = '''
"""A plugin detector: a cut every ``every`` frames (counts frames with the engine's decoder)."""
import os
from dataclasses import dataclass

from videolake.platform.video.frames import SampledDecoder
from videolake.platform.scenes.base import DETECTORS, SceneDetector, SceneResult
from videolake.platform.params import param

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


from dataclasses import dataclass

from videolake.platform.captioning.base import CaptionResult
from videolake.platform.params import param


@dataclass(frozen=True)
class EchoConfig:
    text: str = param("echo", help="the caption every clip gets")
    repeat: int = param(1, help="times the text is repeated", min=1)


class EchoCaptioner(StandInCaptioner):
    Config = EchoConfig

    def caption(self, items):
        return [CaptionResult(caption=" ".join([self.params.text] * self.params.repeat)) for _ in items]
'''


SCORER_PLUGIN = '''
"""A plugin filter that looks at pixels: how much redder than green a clip is (mean R - G of 4 frames)."""
import os
from dataclasses import dataclass

from videolake.platform.params import param
from videolake.platform.filters.quality import SCORERS, Scorer


@dataclass(frozen=True)
class RednessConfig:
    max_red: float = param(100.0, "clips redder than this (mean R - G, 0..255) are rejected too_red", min=0)


@SCORERS.register("redness")
class RednessScorer(Scorer):
    Config = RednessConfig
    columns = ("redness",)
    rules = ("too_red",)

    def setup(self):
        with open(os.environ["PLUGIN_MARKER"], "a") as f:
            f.write(f"setup {os.getpid()}\\n")

    def score(self, clip):
        rgb = clip.frames(count=4, max_pixels=64 * 64).astype("float64")
        red = float((rgb[..., 0] - rgb[..., 1]).mean())
        return {"redness": red}, (["too_red"] if red > self.params.max_red else [])
'''

# Scores a day on a fresh local Ray whose workers see the installed plugin; prints the rows and the unit counts.
SCORE_DAY = """
import json, sys
from videolake.platform.stages.ingest import ingest_partitions, list_landing
from videolake.platform.stages.score import score_partitions
from videolake.platform.stages.split import SplitConfig, split_partitions
from videolake.platform.lake.table import Lake, PartitionRange
from videolake.platform.objectstore.local import LocalObjectStore
from videolake.platform.video.probe import ProbeConfig
from videolake.platform.filters.quality import DEFAULT_SCORERS, QualityConfig

# One process scores the day once per max_red given, one JSON line each (one interpreter and one Ray for all).
root, day, max_reds = sys.argv[1], sys.argv[2], sys.argv[3:]
store, lake, days = LocalObjectStore(root + "/store"), Lake(root + "/lake"), PartitionRange.of([day])
if not lake.exists("scene_clips"):
    ingest_partitions(lake, store, list_landing(store, "landing", [day]), ProbeConfig(), days)
    split_partitions(lake, store, days, SplitConfig())
for max_red in max_reds:
    config = QualityConfig(scorers=(*DEFAULT_SCORERS, "redness"), scorer_params={"redness": {"max_red": max_red}})
    run = score_partitions(lake, store, days, config)
    rows = lake.read_partitions("filtered_clips", days, columns=["clip_id", "scores", "reject_reason"]).to_pylist()
    clips = lake.read_partitions("scene_clips", days, columns=["clip_id", "source_uri", "start_frame", "end_frame"])
    print(json.dumps({"rows": rows, "clips": clips.to_pylist(), "units": run.progress.as_metadata()}), flush=True)
"""


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
    _install(
        site,
        "videolake_every",
        "videolake_every",
        DETECTOR_PLUGIN,
        "[videolake.scene_detectors]\nevery = videolake_every\n",
    )
    _install(
        site,
        "videolake_echo",
        "videolake_echo",
        BACKEND_PLUGIN,
        "[videolake.caption_backends]\necho = videolake_echo:EchoCaptioner\n",
    )
    _install(
        site,
        "videolake_redness",
        "videolake_redness",
        SCORER_PLUGIN,
        "[videolake.quality_scorers]\nredness = videolake_redness\n",
    )
    _install(
        site,
        "videolake_broken",
        "videolake_broken",
        "raise ImportError('needs libfoo')\n",
        "[videolake.scene_detectors]\nbroken = videolake_broken\n",
    )
    return site


@pytest.fixture(scope="module")
def video(tmp_path_factory, ffmpeg) -> tuple[str, dict]:
    spec = VideoSpec(
        "plug", 160, 120, "25", "h264", (Segment("testsrc2", 25), Segment("mandelbrot", 20)), (Transition("cut"),)
    )
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
    assert (
        json.loads(proc.stdout) == {"cuts": [12, 24, 36], "fps": 25.0, "num_frames": 45} and truth["num_frames"] == 45
    )
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
    code = (
        "from videolake.platform.captioning.base import CAPTIONERS, captioner_class\n"
        "cls = captioner_class('echo')\n"
        "print(cls.__module__, cls.__name__, cls.registered_name, 'standin' in CAPTIONERS)\n"
    )
    proc = _python(site, tmp_path / "marker", "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["videolake_echo", "EchoCaptioner", "echo", "True"]


def test_a_caption_backend_plugin_takes_typed_parameters_and_a_bad_one_fails_before_any_actor(site, tmp_path):
    """backend_params reach the plugin typed by its Config (text from run config parsed); a bad one fails the caption
    stage at once, naming the backend and the parameter, before Ray or an actor starts."""
    code = (
        "import datetime as dt, numpy as np\n"
        "from videolake.platform.captioning.base import CaptionerConfig, get_captioner\n"
        "from videolake.platform.captioning.stage import caption_partitions\n"
        "from videolake.platform.lake.table import PartitionRange\n"
        "from videolake.platform.params import ParamError\n"
        "cfg = CaptionerConfig(model='none', backend='echo', input_mode='none',\n"
        "                      backend_params={'text': 'hi', 'repeat': '2'})\n"
        "b = get_captioner(cfg)\n"
        "rows = b({'clip_id': np.array(['c1']), 'video_id': np.array(['v']), 'source_uri': np.array(['s']),\n"
        "          'frame_error': np.array(['']), 'num_frames': np.array([0])})\n"
        "print(repr(b.params), rows['caption'].tolist())\n"
        "try:\n"
        "    caption_partitions(None, PartitionRange.of(['2026-01-05']), cfg.replace(backend_params={'repeat': '0'}))\n"
        "except ParamError as exc:\n"
        "    print('refused:', exc)\n"
        "import sys; print('ray' in sys.modules)\n"
    )
    proc = _python(site, tmp_path / "marker", "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "EchoConfig(text='hi', repeat=2) ['hi hi']"
    assert lines[1] == "refused: caption backend 'echo': parameter 'repeat' must be >= 1, got 0"
    assert lines[2] == "False"  # refused before Ray was imported, let alone an actor started


def test_registry_errors_name_what_is_known_and_refuse_a_second_class_for_a_name():
    reg: Registry[object] = Registry("widget", builtins=("json",), entry_point_group="videolake.no_such_group")
    reg.register("a")(type("A", (), {}))
    assert reg.names() == ["a"] and "a" in reg and "b" not in reg
    with pytest.raises(KeyError, match="unknown widget 'b'; known: a"):
        reg.get("b")
    with pytest.raises(ValueError, match="widget 'a' is already registered by A"):
        reg.register("a")(type("B", (), {}))


def _solid(path: Path, *colors: str) -> None:
    """2 s of each solid colour, cut hard from one to the next (24 fps, 160x120)."""
    inputs = [a for c in colors for a in ("-f", "lavfi", "-i", f"color=c={c}:size=160x120:rate=24:duration=2")]
    graph = "".join(f"[{i}:v]" for i in range(len(colors))) + f"concat=n={len(colors)}:v=1[v]"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            *inputs,
            "-filter_complex",
            graph,
            "-map",
            "[v]",
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            str(path),
        ],
        check=True,
    )


def _mean_red(uri: str, start: int, end: int) -> float:
    """Mean R - G over every frame of [start, end), decoded independently of videolake (PyAV, full size)."""
    import av
    import numpy as np

    with av.open(uri.removeprefix("file://")) as c:
        frames = [
            f.to_ndarray(format="rgb24").astype("float64") for i, f in enumerate(c.decode(video=0)) if start <= i < end
        ]
    rgb = np.stack(frames)
    return float((rgb[..., 0] - rgb[..., 1]).mean())


@pytest.mark.slow
def test_a_scorer_plugin_sees_pixels_stores_its_score_and_rule_and_its_params_version_the_stage(site, tmp_path, ffmpeg):
    day = "2026-05-01"
    landing = tmp_path / "day" / "store" / "landing" / day
    landing.mkdir(parents=True)
    _solid(landing / "red_then_blue.mp4", "red", "blue")
    _solid(landing / "green.mp4", "green")
    marker = tmp_path / "marker"

    # max_red 100, then 255: its typed parameter is part of the stage version, so the second recomputes every video
    proc = _python(site, marker, "-c", SCORE_DAY, str(tmp_path / "day"), day, "100", "255")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out, again = (json.loads(line) for line in proc.stdout.strip().splitlines()[-2:])
    clips = {c["clip_id"]: c for c in out["clips"]}
    rows = {r["clip_id"]: r for r in out["rows"]}
    assert sorted(rows) == sorted(clips) and len(rows) == 3  # the red|blue video is cut at the colour change
    assert sorted((c["start_frame"], c["end_frame"]) for c in clips.values()) == [(0, 48), (0, 48), (48, 96)]
    for cid, row in rows.items():
        c = clips[cid]
        ((name, value),) = row["scores"]
        # the plugin's pixels are the clip's own frames: its score equals R - G measured by another decoder
        assert name == "redness" and value == pytest.approx(
            _mean_red(c["source_uri"], c["start_frame"], c["end_frame"]), abs=1.5
        )
        red = "red_then_blue" in c["source_uri"] and c["start_frame"] == 0
        assert value > 150 if red else value < 5
        # a rule the built-ins do not know comes after theirs in reject_reason
        reasons = row["reject_reason"].split(";")
        assert ("too_red" in reasons) == red and (not red or reasons[-1] == "too_red")
    assert out["units"]["units_computed"] == 2
    assert "setup" in marker.read_text()  # the Ray workers set the plugin up (it wrote the marker there)

    # another max_red recomputes every video, and no clip is red
    assert again["units"]["units_reused"] == 0 and again["units"]["units_computed"] == 2
    assert not [r for r in again["rows"] if "too_red" in (r["reject_reason"] or "")]
    assert sorted(r["clip_id"] for r in again["rows"]) == sorted(rows)

    proc = _python(site, marker, "-c", SCORE_DAY, str(tmp_path / "day"), day, "lots")
    assert (
        proc.returncode != 0
        and "quality scorer 'redness': parameter 'max_red' must be a number, got 'lots'" in proc.stderr
    )
