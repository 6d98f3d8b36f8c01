"""`videolake bench loader`: decoded frames/s through ``videolake.dataset.open_release`` vs FFmpeg decoding the
same mp4 files.

A release is made from the shards ``videolake bench shards`` makes (synthetic 720p videos, clips scaled to 360p).
The loader reads it through a DataLoader with one worker per core and every frame of each clip asked for
(``num_frames`` = the clip length), so both sides decode every frame to RGB; FFmpeg decodes each sample's mp4,
taken out of the shards, with ``-threads 1 -pix_fmt rgb24 -f null``, one process per core at a time.
ratio = loader frames/s ÷ FFmpeg frames/s.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def bench_loader(videos: int = 8, seconds: int = 16, clip_frames: int = 60, cores: int | None = None) -> dict:
    import ray

    from videolake.benchmarks.shards import DAY, _sources, _tables
    from videolake.dataset import open_release
    from videolake.platform.lake import Lake, PartitionRange
    from videolake.platform.objectstore.local import LocalObjectStore
    from videolake.platform.releases.create import create_release
    from videolake.platform.shards.config import ShardConfig
    from videolake.platform.shards.tarfile_det import read_samples
    from videolake.platform.shards.verify import read_uri
    from videolake.platform.stages.shard import shard_partitions

    cores = cores or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="videolake-bench-loader-") as tmp:
        work = Path(tmp)
        store = LocalObjectStore(str(work / "store"))
        lake = Lake(str(work / "lake"))
        clips = _tables(lake, store, _sources(work, videos, seconds, "1280x720"), clip_frames, seconds)
        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
        try:
            # Small shards: the loader deals whole shards to its workers, so a release of a few shards would measure
            # one busy worker (a real release has thousands).
            shard_partitions(lake, store, PartitionRange.of([DAY]), ShardConfig(max_short_side=360,
                                                                               max_shard_samples=4))
        finally:
            ray.shutdown()
        create_release(lake, store, "bench", DAY, DAY, gate_verdicts=lambda table, day: [])
        manifest = json.loads(store.get_bytes("releases/bench/manifest.json"))
        mp4s = []
        for shard in manifest["shards"]:
            for key, files in read_samples(read_uri(shard["uri"])):
                path = work / f"{key}.mp4"
                path.write_bytes(files["mp4"])
                mp4s.append(path)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(cores) as pool:
            list(pool.map(lambda p: subprocess.run(
                ["ffmpeg", "-nostdin", "-v", "error", "-threads", "1", "-i", str(p), "-pix_fmt", "rgb24", "-f", "null",
                 "-"], check=True), mp4s))
        ffmpeg_s = time.perf_counter() - t0

        ds = open_release(store.uri("releases/bench"), num_frames=clip_frames, shuffle_seed=None)
        t0 = time.perf_counter()
        frames = samples = 0
        for sample in ds.loader(num_workers=cores):
            frames += int(sample["frames"].shape[0])
            samples += 1
        loader_s = time.perf_counter() - t0
    total = len(clips) * clip_frames
    if samples != len(clips) or frames != total:
        raise RuntimeError(f"the loader gave {samples} samples / {frames} frames, expected {len(clips)} / {total}")
    result = {
        "bench": "loader", "samples": samples, "frames": frames, "encoded": "640x360", "workers": cores,
        "loader_s": round(loader_s, 2), "ffmpeg_s": round(ffmpeg_s, 2),
        "loader_frames_per_s": round(frames / loader_s, 1), "ffmpeg_frames_per_s": round(frames / ffmpeg_s, 1),
        "ratio": round(ffmpeg_s / loader_s, 3), "release_shards": len(manifest["shards"]),
    }
    print(f"loader: {samples} samples x {clip_frames} frames (640x360), {cores} DataLoader workers")
    print(f"  open_release {result['loader_frames_per_s']:8.1f} frames/s ({loader_s:.1f} s, worker start included)")
    print(f"  ffmpeg       {result['ffmpeg_frames_per_s']:8.1f} frames/s ({ffmpeg_s:.1f} s: one process per mp4)")
    print(f"  ratio  {result['ratio']:.3f}  (loader / ffmpeg, same mp4 files, every frame to RGB)")
    print(json.dumps(result))
    return result
