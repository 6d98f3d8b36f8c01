"""The scene-detector contract.

A detector decodes a video once and returns the cut frames: the first frame index (0-based, decode order) of each
new scene, excluding 0. For a gradual transition (dissolve, fade, wipe) it reports exactly one frame inside it.
Detectors that decode every frame also return ``FrameStats`` so quality scoring needs no second decode.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from videolake.platform.params import ParamError, describe, parse_params
from videolake.platform.registry import Registry
from videolake.platform.runtime.unit_resources import UnitResources
from videolake.platform.video.frames import FrameStats


@dataclass(frozen=True)
class SceneResult:
    cuts: list[int]
    fps: float
    num_frames: int
    stats: FrameStats | None = None

    def to_json(self) -> str:
        """The stable ``videolake scenes`` output format."""
        return json.dumps(
            {"cuts": [int(c) for c in self.cuts], "fps": float(self.fps), "num_frames": int(self.num_frames)}
        )


class SceneDetector(ABC):
    """Subclasses declare a frozen dataclass ``Config`` (fields made with ``params.param``: typed and described)
    and register with ``@DETECTORS.register(name)``.

    ``Detector(**params)`` parses and validates the parameters against ``Config``: an unknown name, a wrong type or
    an out-of-range value raises ``ParamError`` (a ``ValueError``) naming the detector and the field.
    """

    Config: ClassVar[type]
    registered_name: ClassVar[str]

    def __init__(self, config: Any | None = None, **overrides: Any) -> None:
        owner = f"scene detector {getattr(self, 'registered_name', type(self).__name__)!r}"
        if config is not None and not isinstance(config, self.Config):
            raise ParamError(f"{owner}: config must be a {self.Config.__name__}, got {type(config).__name__}")
        self.config = parse_params(self.Config, overrides, owner, base=config if config is not None else self.Config())

    @property
    def name(self) -> str:
        return self.registered_name

    def params_json(self) -> str:
        """The detector's parameters as canonical JSON (stored in scene_clips.detector_params)."""
        return json.dumps(asdict(self.config), sort_keys=True)

    def resources(self) -> UnitResources:
        """What one video's detection needs from the cluster (scene_clips schedules each unit's task with it).
        Default: one CPU, the decode thread. A detector with a model or threads of its own says so here."""
        return UnitResources()

    @abstractmethod
    def detect(self, path: str) -> SceneResult:
        """Decode ``path`` and return its cuts. Raises ``ValueError`` with a reason for an undecodable file."""


# Built-ins import their heavy library (scenedetect, torch) inside ``detect``, so loading them stays cheap: the CLI's
# `scenes` must start fast. Installed plugins add theirs through the entry-point group (videolake.platform.registry).
DETECTORS: Registry[SceneDetector] = Registry(
    "scene detector",
    builtins=(
        "videolake.platform.scenes.luma",
        "videolake.platform.scenes.pyscenedetect",
        "videolake.platform.scenes.transnet",
    ),
    entry_point_group="videolake.scene_detectors",
)


def get_detector(name: str, **params: Any) -> SceneDetector:
    """The registered detector ``name`` with ``params`` (typed per detector; ``ParamError`` when they do not fit)."""
    return DETECTORS.get(name)(**params)


def detector_params(name: str) -> list[dict[str, Any]]:
    """The parameters detector ``name`` accepts: name, type, default, help (and min/max/choices)."""
    return describe(DETECTORS.get(name).Config)
