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

from videolake.platform.frames import FrameStats
from videolake.platform.registry import Registry


@dataclass(frozen=True)
class SceneResult:
    cuts: list[int]
    fps: float
    num_frames: int
    stats: FrameStats | None = None

    def to_json(self) -> str:
        """The stable ``videolake scenes`` output format."""
        return json.dumps({"cuts": [int(c) for c in self.cuts], "fps": float(self.fps), "num_frames": int(self.num_frames)})


class SceneDetector(ABC):
    """Subclasses declare a frozen dataclass ``Config`` and register with ``@DETECTORS.register(name)``."""

    Config: ClassVar[type]
    registered_name: ClassVar[str]

    def __init__(self, config: Any | None = None, **overrides: Any) -> None:
        base = config if config is not None else self.Config()
        self.config = type(base)(**{**asdict(base), **overrides}) if overrides else base

    @property
    def name(self) -> str:
        return self.registered_name

    def params_json(self) -> str:
        """The detector's parameters as canonical JSON (stored in scene_clips.detector_params)."""
        return json.dumps(asdict(self.config), sort_keys=True)

    @abstractmethod
    def detect(self, path: str) -> SceneResult:
        """Decode ``path`` and return its cuts. Raises ``ValueError`` with a reason for an undecodable file."""


DETECTORS: Registry[SceneDetector] = Registry("scene detector")


def get_detector(name: str, **params: Any) -> SceneDetector:
    # Import the implementations so they register themselves (kept lazy: the CLI's `scenes` must start fast).
    from videolake.platform.scenes import luma, pyscenedetect  # noqa: F401

    return DETECTORS.get(name)(**params)
