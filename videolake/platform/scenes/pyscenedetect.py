"""``adaptive`` and ``content``: PySceneDetect 0.7.2's AdaptiveDetector / ContentDetector behind our contract.

Kept as reference detectors (the accuracy harness compares ``luma`` against them) and for users who want the
well-known tool's behaviour. Decoding uses the PyAV backend: its OpenCV backend mis-numbers frames on variable
frame rate files. Cut frames are mapped back to decoded-frame indices through the presentation time of every frame
in the file (one demux pass, no decoding), so they are frame-exact even when timestamps are irregular.
``scenedetect`` (and cv2) are imported inside ``detect``: importing this module costs nothing.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass

from videolake.platform.params import param
from videolake.platform.scenes.base import DETECTORS, SceneDetector, SceneResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AdaptiveConfig:
    adaptive_threshold: float = param(
        3.0, "ratio of a frame's content score to the average of its neighbours' needed for a cut", min=0.0
    )
    min_scene_len: int = param(15, "minimum scene length in frames: no cut closer than this to the previous one", min=1)
    window_width: int = param(2, "frames on each side whose scores form the rolling average", min=1)
    min_content_val: float = param(15.0, "minimum raw content score (ContentDetector scale, 0..255) for a cut", min=0.0)
    luma_only: bool = param(False, "score on luma only (ignore hue and saturation)")
    auto_downscale: bool = param(True, "downscale frames before scoring (SceneManager.auto_downscale), as its CLI does")


@dataclass(frozen=True)
class ContentConfig:
    threshold: float = param(
        27.0, "content score (weighted HSV difference of consecutive frames, 0..255) for a cut", min=0.0
    )
    min_scene_len: int = param(15, "minimum scene length in frames (also the flash filter's window)", min=1)
    filter_mode: str = param(
        "merge",
        "flash filter: merge joins cuts closer than min_scene_len, suppress drops the later",
        choices=("merge", "suppress"),
    )
    luma_only: bool = param(False, "score on luma only (ignore hue and saturation)")
    auto_downscale: bool = param(True, "downscale frames before scoring (SceneManager.auto_downscale)")


def _frame_times(path: str) -> list[float]:
    """Sorted presentation times (s) of the first video stream's packets (one per frame): frame index -> time."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.time_base is not None  # a demuxed stream always has one
        tb = float(stream.time_base)
        return sorted(p.pts * tb for p in container.demux(stream) if p.pts is not None and p.size)


def _run(path: str, detector, auto_downscale: bool) -> SceneResult:
    from scenedetect import SceneManager, open_video

    try:
        video = open_video(str(path), backend="pyav")
    except Exception as exc:  # PySceneDetect wraps FFmpeg errors in several exception types
        raise ValueError(f"cannot open {path}: {exc}") from exc
    manager = SceneManager()
    manager.auto_downscale = auto_downscale
    manager.add_detector(detector)
    try:
        manager.detect_scenes(video=video, show_progress=False)
    except Exception as exc:
        raise ValueError(f"cannot decode {path}: {exc}") from exc
    if int(video.frame_number) <= 0:
        raise ValueError(f"cannot decode {path}: no decodable video frame")
    cut_times = [scene[0].seconds for scene in manager.get_scene_list()[1:]]
    # PySceneDetect numbers frames by time x nominal rate (on a variable frame rate file that is not the decoded
    # frame index, and its frame count is not the number of frames): each cut becomes the frame whose presentation
    # time is nearest to the cut's time, counted among the file's own frame timestamps.
    times = _frame_times(path)
    num_frames = len(times) or int(video.frame_number)
    origin = times[0] if times else 0.0
    cuts = []
    for t in cut_times:
        if times:
            target = origin + float(t)
            i = bisect.bisect_left(times, target)
            if i == len(times) or (i > 0 and target - times[i - 1] < times[i] - target):
                i -= 1
        else:
            i = int(round(float(t) * float(video.frame_rate)))
        if 0 < i < num_frames:
            cuts.append(i)
    fps = float(video.frame_rate) if video.frame_rate else 0.0
    return SceneResult(cuts=sorted(set(cuts)), fps=fps, num_frames=num_frames, stats=None)


@DETECTORS.register("adaptive")
class AdaptivePySceneDetect(SceneDetector):
    """PySceneDetect AdaptiveDetector: consecutive-frame HSV score divided by its rolling neighbourhood average."""

    Config = AdaptiveConfig

    def detect(self, path: str) -> SceneResult:
        from scenedetect import AdaptiveDetector

        c: AdaptiveConfig = self.config
        det = AdaptiveDetector(
            adaptive_threshold=c.adaptive_threshold,
            min_scene_len=c.min_scene_len,
            window_width=c.window_width,
            min_content_val=c.min_content_val,
            luma_only=c.luma_only,
        )
        return _run(path, det, c.auto_downscale)


@DETECTORS.register("content")
class ContentPySceneDetect(SceneDetector):
    """PySceneDetect ContentDetector: consecutive-frame HSV score against a fixed threshold, with a flash filter."""

    Config = ContentConfig

    def detect(self, path: str) -> SceneResult:
        from scenedetect import ContentDetector
        from scenedetect.detector import FlashFilter

        c: ContentConfig = self.config
        modes = {"merge": FlashFilter.Mode.MERGE, "suppress": FlashFilter.Mode.SUPPRESS}
        det = ContentDetector(
            threshold=c.threshold,
            min_scene_len=c.min_scene_len,
            luma_only=c.luma_only,
            filter_mode=modes[c.filter_mode],
        )
        return _run(path, det, c.auto_downscale)
