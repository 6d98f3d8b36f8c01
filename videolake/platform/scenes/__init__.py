"""Scene detection behind one interface (``SceneDetector``) with a registry of implementations by name."""

from videolake.platform.scenes.base import DETECTORS, SceneDetector, SceneResult, get_detector

__all__ = ["DETECTORS", "SceneDetector", "SceneResult", "get_detector"]
