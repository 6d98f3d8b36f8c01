"""TransNetV2 scene detection for many videos on Ray Data: CPU decode tasks stream windows into a GPU actor pool.

    from_items(videos) -> flat_map(decode_windows)            CPU tasks: decode to 48x27, windows of 100 frames
                       -> map_batches(TransNetV2Predictor)     actor pool, num_gpus per actor: windows of SEVERAL
                                                               videos per network call (windows_per_batch)
                       -> groupby(video_id).map_groups(assemble_video)   per-video probabilities -> cuts
                       -> one row per input video: video_id, path, cuts, fps, num_frames, error, stats_uri

The decode pass also gives each video's frame statistics (``frames.FrameStats``, what the quality stage scores
clips with). With a ``stats_sink`` the decode task itself stores them (a worker writes, the driver never holds
them) and the row carries the URI the sink returned, so filtered_clips does not decode the video again.

Why this shape: the network is ~1,000x faster on a GPU than on this project's CPUs, but only when it sees >= 32
windows per call; a single video of a few seconds has 2-4 windows. Batching windows across videos fills the GPU
while the decode tasks (cheap: 48x27 output) run on CPU workers. Rows are small (a window is 389 KB of uint8),
so Ray Data's streaming executor back-pressures the decoders when the actors fall behind.

Every input video yields exactly one output row: a video that cannot be decoded gets ``error`` set (and no cuts),
never a missing row. Ray must be initialised by the caller (Dagster's RayResource or a test); ``ray`` is imported
inside the functions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from videolake.platform.params import param
from videolake.platform.scenes.transnet import (
    HEIGHT,
    STEP,
    WIDTH,
    WINDOW,
    TransNetConfig,
    TransNetV2Model,
    black_frames,
    iter_small_frames,
    iter_windows,
    merge_fades,
    predictions_to_cuts,
)

log = logging.getLogger(__name__)

_EMPTY_WINDOW = np.zeros((WINDOW, HEIGHT, WIDTH, 3), np.uint8)


@dataclass(frozen=True)
class RayDetectConfig:
    """How the Ray Data pipeline is sized (the detector's own parameters are a ``TransNetConfig``)."""

    num_actors: int = param(1, "predictor actors (one model replica each; one per GPU on a GPU cluster)", min=1)
    num_gpus_per_actor: float = param(
        0.0, "GPUs per predictor actor (1 on GPU workers, 0 on a CPU-only cluster)", min=0.0
    )
    num_cpus_per_actor: float = param(
        0.5, "CPUs per predictor actor (fractional: whole CPUs starve the decoders on small nodes)", min=0.0
    )
    decode_num_cpus: float = param(1.0, "CPUs per decode task (one video each)", min=0.0)


def decode_windows(
    row: Mapping[str, Any],
    threads: int = 1,
    open_source: Callable[[str], Any] | None = None,
    stats_sink: Callable[[str, Any], str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Ray Data ``flat_map``: one video row (video_id, path) -> its window rows, then one ``meta`` row.

    ``path`` is a local path, or any URI when ``open_source(uri)`` is given: a context manager yielding a local
    path (e.g. ``lambda uri: store.open_local(store.key_from_uri(uri))`` for the object store).

    Window rows: kind="window", window=w (predicting frames [50w, 50w + 50)), frames (100, 27, 48, 3) uint8.
    The meta row (kind="meta", window=-1) carries fps, num_frames and error ("" when the video decoded), and
    stats_uri: what ``stats_sink(video_id, frame_stats)`` returned for the video's frame statistics ("" without a
    sink, or when storing them failed: the quality stage then decodes the video itself).
    """
    video_id, path = str(row["video_id"]), str(row["path"])
    base = {"video_id": video_id, "path": path}
    fps = 0.0
    count = 0
    error = ""
    stats_uri = ""

    def keep_stats(stats: Any) -> None:
        nonlocal stats_uri
        assert stats_sink is not None  # only passed on with a sink (below)
        try:
            stats_uri = stats_sink(video_id, stats)
        except Exception as exc:  # noqa: BLE001 - statistics are an optimisation: a failed store (any
            # backend error) must not cost the video its cuts
            log.warning("%s: frame statistics not stored: %s", video_id, exc)

    def frames():
        nonlocal fps, count
        for frame, rate in iter_small_frames(path, threads, keep_stats if stats_sink is not None else None):
            fps = rate
            if frame is None:
                return
            count += 1
            yield frame

    w = 0
    local = contextlib.nullcontext(path) if open_source is None else None
    try:
        if local is None:
            assert open_source is not None
            local = open_source(path)
        with local as local_path:
            path = str(local_path)
            for window in iter_windows(frames()):
                yield {
                    **base,
                    "kind": "window",
                    "window": w,
                    "frames": window,
                    "fps": 0.0,
                    "num_frames": 0,
                    "error": "",
                    "stats_uri": "",
                }
                w += 1
    except (ValueError, OSError, KeyError) as exc:  # unreadable/undecodable: the meta row carries the reason
        error = str(exc) or type(exc).__name__
    yield {
        **base,
        "kind": "meta",
        "window": -1,
        "frames": _EMPTY_WINDOW,
        "fps": float(fps),
        "num_frames": int(count) if not error else 0,
        "error": error,
        "stats_uri": "" if error else stats_uri,
    }


class TransNetV2Predictor:
    """Ray Data callable class (the GPU-worker contract): declared resources, model loaded once in the constructor
    (= setup), ``__call__`` runs one network call over the batch's windows, whichever videos they come from.

    Batch in: numpy dict with video_id, path, kind, window, frames, fps, num_frames, error (from decode_windows).
    Batch out: the same rows without ``frames``, plus ``probs`` (50 float32 per row; zeros for meta rows) and
    ``black`` (50 bools: the window's predicted frames that are black, for the fade rule).
    """

    def __init__(self, config: TransNetConfig | Mapping[str, Any] | None = None) -> None:
        from videolake.platform.params import parse_params

        cfg = config if isinstance(config, TransNetConfig) else parse_params(TransNetConfig, config or {}, "transnetv2")
        self.config = cfg
        self.model = TransNetV2Model(cfg.device, cfg.precision, cfg.torch_threads)
        self.calls = 0

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        kinds = np.asarray(batch["kind"])
        frames = batch["frames"]
        probs = np.zeros((len(kinds), STEP), np.float32)
        black = np.zeros((len(kinds), STEP), bool)
        idx = np.flatnonzero(kinds == "window")
        for i in idx:
            black[i] = black_frames(frames[i][25 : 25 + STEP])
        size = self.config.windows_per_batch
        for start in range(0, len(idx), size):
            sel = idx[start : start + size]
            probs[sel] = self.model.predict_windows(np.stack([frames[i] for i in sel]))
            self.calls += 1
        out = {k: v for k, v in batch.items() if k != "frames"}
        out["probs"] = probs
        out["black"] = black
        return out


def assemble_video(
    group: dict[str, np.ndarray], threshold: float, min_scene_len: int, black_hold_s: float = 1.0
) -> dict[str, np.ndarray]:
    """Ray Data ``map_groups`` (numpy): all rows of one video -> one row with its cuts."""
    kinds = np.asarray(group["kind"])
    meta = np.flatnonzero(kinds == "meta")
    video_id = str(group["video_id"][0])
    path = str(group["path"][0])
    stats_uri = ""
    if len(meta) != 1:
        error, fps, n = f"expected one meta row for {video_id}, got {len(meta)}", 0.0, 0
    else:
        m = int(meta[0])
        error, fps, n = str(group["error"][m]), float(group["fps"][m]), int(group["num_frames"][m])
        stats_uri = str(group["stats_uri"][m])
    cuts: list[int] = []
    if not error:
        win = np.flatnonzero(kinds == "window")
        order = win[np.argsort(np.asarray(group["window"])[win])]
        windows = np.asarray(group["window"])[order]
        if len(order) != (n + STEP - 1) // STEP or not np.array_equal(windows, np.arange(len(order))):
            error = f"windows missing for {video_id}: got {len(order)} for {n} frames"
        else:
            pred = np.asarray(group["probs"])[order].reshape(-1)[:n]
            black = np.asarray(group["black"])[order].reshape(-1)[:n].astype(bool)
            hold = max(min_scene_len, int(round(black_hold_s * (fps if fps > 0 else 25.0))))
            cuts = merge_fades(predictions_to_cuts(pred, threshold, min_scene_len), black, hold, min_scene_len)
    return {
        "video_id": np.array([video_id]),
        "path": np.array([path]),
        "cuts": np.array([np.array(cuts, np.int64)], dtype=object),
        "fps": np.array([fps], np.float64),
        "num_frames": np.array([n if not error else 0], np.int64),
        "error": np.array([error]),
        "stats_uri": np.array(["" if error else stats_uri]),
    }


def scene_dataset(
    videos: Iterable[tuple[str, str]],
    config: TransNetConfig = TransNetConfig(),
    ray_config: RayDetectConfig = RayDetectConfig(),
    open_source: Callable[[str], Any] | None = None,
    stats_sink: Callable[[str, Any], str] | None = None,
):
    """The lazy Ray Dataset of the pipeline above over (video_id, path or URI) pairs (nothing runs until consumed);
    ``open_source`` (pickled to the decode tasks) maps a URI to a context manager yielding a local path;
    ``stats_sink`` (pickled too) stores a video's frame statistics and returns their URI."""
    import ray.data

    items = [{"video_id": str(v), "path": str(p)} for v, p in videos]
    if not items:
        raise ValueError("no videos given")
    ds: ray.data.Dataset = ray.data.from_items(items, override_num_blocks=len(items))
    ds = ds.flat_map(
        decode_windows,
        fn_kwargs={"threads": config.threads, "open_source": open_source, "stats_sink": stats_sink},
        num_cpus=ray_config.decode_num_cpus,
    )
    ds = ds.map_batches(
        TransNetV2Predictor,
        fn_constructor_kwargs={"config": config},
        compute=ray.data.ActorPoolStrategy(size=ray_config.num_actors),
        batch_size=config.windows_per_batch,
        batch_format="numpy",
        num_cpus=ray_config.num_cpus_per_actor,
        num_gpus=ray_config.num_gpus_per_actor or None,
    )
    return ds.groupby("video_id").map_groups(
        assemble_video,  # type: ignore[arg-type]  # fn_kwargs gives the rest; Ray's type wants a 1-argument fn
        fn_kwargs={
            "threshold": config.threshold,
            "min_scene_len": config.min_scene_len,
            "black_hold_s": config.black_hold_s,
        },
        batch_format="numpy",
    )


def detect_scenes_ray(
    videos: Iterable[tuple[str, str]],
    config: TransNetConfig = TransNetConfig(),
    ray_config: RayDetectConfig = RayDetectConfig(),
    open_source: Callable[[str], Any] | None = None,
    stats_sink: Callable[[str, Any], str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run the pipeline and collect: video_id -> {path, cuts, fps, num_frames, error, stats_uri} (one entry per
    input; stats_uri is None without a sink)."""
    videos = list(videos)
    ids = [str(v) for v, _ in videos]
    if len(set(ids)) != len(ids):
        raise ValueError("video ids must be unique")
    out: dict[str, dict[str, Any]] = {}
    for row in scene_dataset(videos, config, ray_config, open_source, stats_sink).iter_rows():
        out[str(row["video_id"])] = {
            "path": str(row["path"]),
            "cuts": [int(c) for c in row["cuts"]],
            "fps": float(row["fps"]),
            "num_frames": int(row["num_frames"]),
            "error": str(row["error"]),
            "stats_uri": str(row["stats_uri"]) or None,
        }
    for vid, path in videos:  # a video whose row did not come back is reported, never dropped
        out.setdefault(
            str(vid),
            {
                "path": str(path),
                "cuts": [],
                "fps": 0.0,
                "num_frames": 0,
                "error": "no result came back from the pipeline",
                "stats_uri": None,
            },
        )
    return {v: out[v] for v in ids}


def ray_config_for_cluster(resources: Mapping[str, float] | None = None) -> RayDetectConfig:
    """Size the pool from the cluster: one actor per GPU (1 GPU each) when there are GPUs, else one CPU actor."""
    if resources is None:
        import ray

        resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if gpus > 0:
        return RayDetectConfig(num_actors=gpus, num_gpus_per_actor=1.0, num_cpus_per_actor=1.0, decode_num_cpus=1.0)
    return RayDetectConfig(num_actors=1, num_gpus_per_actor=0.0, num_cpus_per_actor=0.5, decode_num_cpus=0.5)


GPU_SCALE_UP_WAIT_S = 600.0  # how long to wait for an autoscaled GPU worker (a GPU node and image pull take minutes)


def wait_for_gpus(
    scalable_gpus: int,
    wait_s: float = GPU_SCALE_UP_WAIT_S,
    *,
    cluster_resources: Callable[[], Mapping[str, float]] | None = None,
    request: Callable[[list[dict[str, float]]], None] | None = None,
    poll_s: float = 2.0,
) -> Mapping[str, float]:
    """The cluster's resources once it has a GPU: when it has none but can scale up to ``scalable_gpus`` (a KubeRay
    GPU worker group that starts empty), ask Ray's autoscaler for them and wait up to ``wait_s``.

    Why: the route is taken only when the cluster HAS GPUs, and an autoscaler adds GPU pods only for work that asks
    for them, so an empty GPU group would never be used. The caller clears the request (``request([])``) when its
    work is done, so the autoscaler can remove the idle pods. Returns the last resources seen (without "GPU" when
    none came in time: the caller then detects on CPUs).
    """
    import time

    if cluster_resources is None or request is None:
        import ray
        from ray.autoscaler.sdk import request_resources

        cluster_resources = cluster_resources or ray.cluster_resources
        request = request or (lambda bundles: request_resources(bundles=bundles))
    resources = cluster_resources()
    if float(resources.get("GPU", 0)) > 0 or scalable_gpus <= 0:
        return resources
    log.info("scene detection: asking the autoscaler for %d GPU worker(s), waiting up to %.0fs", scalable_gpus, wait_s)
    request([{"GPU": 1.0}] * scalable_gpus)
    deadline = time.monotonic() + wait_s
    while float(resources.get("GPU", 0)) <= 0 and time.monotonic() < deadline:
        time.sleep(poll_s)
        resources = cluster_resources()
    if float(resources.get("GPU", 0)) <= 0:
        log.warning("no GPU worker came up within %.0fs: TransNetV2 runs on the CPUs", wait_s)
    return resources


def detect_on_cluster_gpus(
    videos: list[tuple[str, str]],
    params: Mapping[str, Any],
    open_source: Callable[[str], Any] | None = None,
    resources: Mapping[str, float] | None = None,
    scalable_gpus: int = 0,
    stats_sink: Callable[[str, Any], str] | None = None,
) -> dict[str, dict[str, Any]] | None:
    """TransNetV2 over ``videos`` on the connected Ray cluster's GPUs, or None when it has none.

    The route the scene stage takes for ``detector="transnetv2"``: on this project's CPUs the network does ~30 new
    frames/s, on one H200 ~36,000, but only with >= 32 windows per call, so the windows of many videos are batched
    per GPU call (``scene_dataset``). On a CPU-only cluster the caller runs the detector per video instead.
    ``scalable_gpus``: GPUs the cluster's autoscaler can add (``wait_for_gpus``); they are asked for, used, and
    released at the end.
    """
    from videolake.platform.params import parse_params

    if not videos:
        return None
    requested = False
    if resources is None:
        import ray

        resources = ray.cluster_resources()
        if float(resources.get("GPU", 0)) <= 0 and scalable_gpus > 0:
            resources, requested = wait_for_gpus(scalable_gpus), True
    try:
        if float(resources.get("GPU", 0)) <= 0:
            return None
        config = parse_params(TransNetConfig, dict(params), "transnetv2")
        ray_config = ray_config_for_cluster(resources)
        log.info("scene detection: TransNetV2 on %d GPU actor(s) for %d video(s)", ray_config.num_actors, len(videos))
        return detect_scenes_ray(videos, config, ray_config, open_source, stats_sink)
    finally:
        if requested:
            from ray.autoscaler.sdk import request_resources

            request_resources(bundles=[])  # the GPU pods may go once idle


__all__ = [
    "RayDetectConfig",
    "TransNetV2Predictor",
    "assemble_video",
    "decode_windows",
    "detect_on_cluster_gpus",
    "detect_scenes_ray",
    "ray_config_for_cluster",
    "scene_dataset",
    "wait_for_gpus",
]
