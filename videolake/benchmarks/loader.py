"""`videolake bench loader`: decoded frames/s through ``videolake.dataset.open_release`` vs FFmpeg decoding the
same mp4 files.

A release is made from the shards ``videolake bench shards`` makes (synthetic 720p videos, clips scaled to 360p).
The loader reads it through a DataLoader with one worker per core; FFmpeg decodes each sample's mp4, taken out of
the shards, with ``-threads 1 ... -f null``, one process per core at a time. Two reads:

- sampled (the ratio): a training read, 16 frames a clip spread over it. The decoder decodes every frame up to the
  last sampled one (the frames between depend on each other); 16 are converted to RGB and handed over. Counted:
  the frames decoded, against FFmpeg decoding the whole files.
- every_frame: every frame of every clip converted to RGB and handed to the training process (41 MB a clip at
  640x360 through shared memory), against FFmpeg converting every frame to rgb24.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def bench_loader(videos: int = 8, seconds: int = 16, clip_frames: int = 60, cores: int | None = None) -> dict:
    import ray

    from videolake.benchmarks.shards import DAY, _sources, _tables
    from videolake.dataset import open_release
    from videolake.platform.lake.table import Lake, PartitionRange
    from videolake.platform.objectstore.local import LocalObjectStore
    from videolake.platform.releases.create import create_release
    from videolake.platform.shards.config import ShardConfig
    from videolake.platform.shards.tarfile_det import read_samples
    from videolake.platform.shards.verify import read_uri
    from videolake.platform.stages.shard import shard_partitions
    from videolake.platform.video.clips import sample_indices

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
            shard_partitions(
                lake, store, PartitionRange.of([DAY]), ShardConfig(max_short_side=360, max_shard_samples=4)
            )
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

        def ffmpeg_pass(rgb: bool) -> float:
            fmt = ["-pix_fmt", "rgb24"] if rgb else []
            t0 = time.perf_counter()
            with ThreadPoolExecutor(cores) as pool:
                list(
                    pool.map(
                        lambda p: subprocess.run(
                            [
                                "ffmpeg",
                                "-nostdin",
                                "-v",
                                "error",
                                "-threads",
                                "1",
                                "-i",
                                str(p),
                                *fmt,
                                "-f",
                                "null",
                                "-",
                            ],
                            check=True,
                        ),
                        mp4s,
                    )
                )
            return time.perf_counter() - t0

        def loader_pass(num_frames: int) -> tuple[float, int, int]:
            ds = open_release(store.uri("releases/bench"), num_frames=num_frames, shuffle_seed=None)
            t0 = time.perf_counter()
            delivered = decoded = 0
            for sample in ds.loader(num_workers=cores):
                delivered += int(sample["frames"].shape[0])
                n = int(sample["meta"]["num_frames"])
                decoded += sample_indices(0, n, num_frames)[-1] + 1  # the decoder stops after the last sampled frame
            return time.perf_counter() - t0, delivered, decoded

        rows = {}
        # A training read: 16 frames a clip, spread over it (every frame up to the last one is decoded; only the 16
        # are converted to RGB and handed over) vs FFmpeg decoding the whole files.
        ff_s = ffmpeg_pass(rgb=False)
        ld_s, delivered, decoded = loader_pass(16)
        rows["sampled"] = (ld_s, ff_s, decoded, delivered)
        # Every frame of every clip to RGB and handed to the training process vs FFmpeg converting every frame.
        ff_s = ffmpeg_pass(rgb=True)
        ld_s, delivered, decoded = loader_pass(clip_frames)
        rows["every_frame"] = (ld_s, ff_s, decoded, delivered)
    total = len(clips) * clip_frames
    if rows["every_frame"][3] != total:
        raise RuntimeError(f"the loader gave {rows['every_frame'][3]} frames, expected {total}")
    result: dict[str, Any] = {
        "bench": "loader",
        "samples": len(clips),
        "frames": total,
        "encoded": "640x360",
        "workers": cores,
        "release_shards": len(manifest["shards"]),
    }
    print(
        f"loader: {len(clips)} samples x {clip_frames} frames (640x360) in {len(manifest['shards'])} shards, "
        f"{cores} DataLoader workers (their start included) vs FFmpeg, one process per mp4, {cores} at a time"
    )
    for name, (ld_s, ff_s, decoded, delivered) in rows.items():
        ratio = (decoded / ld_s) / (total / ff_s)
        result[name] = {
            "loader_s": round(ld_s, 2),
            "ffmpeg_s": round(ff_s, 2),
            "decoded_frames": decoded,
            "delivered_frames": delivered,
            "loader_decoded_frames_per_s": round(decoded / ld_s, 1),
            "ffmpeg_frames_per_s": round(total / ff_s, 1),
            "ratio": round(ratio, 3),
        }
        what = (
            "16 frames a clip to RGB (FFmpeg: decode only)"
            if name == "sampled"
            else "every frame to RGB (FFmpeg: every frame to rgb24)"
        )
        print(
            f"  {what}: open_release {decoded / ld_s:8.1f} decoded frames/s ({delivered} handed over), "
            f"ffmpeg {total / ff_s:8.1f} frames/s, ratio {ratio:.3f}"
        )
    result["ratio"] = result["sampled"]["ratio"]
    print(json.dumps(result))
    return result
