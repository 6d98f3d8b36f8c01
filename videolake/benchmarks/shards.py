"""`videolake bench shards`: samples/s of the training-shards stage vs FFmpeg transcoding the same clips.

Both sides encode the same clips with the same settings (x264 preset and CRF, one thread per clip, scaled to the
same size, yuv420p, faststart) on the same cores: the stage on a local Ray with one CPU per core (units stream
through Ray Data, samples are written, then packed into shards and committed), FFmpeg as one ``ffmpeg -ss S -i
SRC -frames:v N`` process per clip, as many at a time as there are cores. Ray's start, and its workers' start with
their first import of the stage's modules (~5 s on 2 cores), are outside the timing: a fixed cost per step, not per
clip (``videolake bench ray`` measures it). Each side runs twice, in the order FFmpeg, stage, stage, FFmpeg.
ratio = stage samples/s ÷ FFmpeg samples/s.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DAY = "2026-01-01"


def _sources(work: Path, videos: int, seconds: int, size: str) -> list[Path]:
    out = []
    for i in range(videos):
        p = work / f"src{i}.mp4"
        subprocess.run(
            [
                "ffmpeg",
                "-nostdin",
                "-v",
                "error",
                "-y",
                "-f",
                "lavfi",
                "-i",
                f"testsrc2=size={size}:rate=30,hue=h={i * 40}",
                "-t",
                str(seconds),
                "-c:v",
                "libx264",
                "-preset",
                "veryfast",
                "-g",
                "60",
                "-pix_fmt",
                "yuv420p",
                str(p),
            ],
            check=True,
        )
        out.append(p)
    return out


def _tables(lake, store, sources: list[Path], clip_frames: int, seconds: int) -> list[dict]:
    """The four upstream tables of one day, every clip passed and captioned; returns the clips."""
    import pyarrow as pa

    from videolake.platform.lake.schemas import CLIP_CAPTIONS, FILTERED_CLIPS, RAW_VIDEOS, SCENE_CLIPS, clip_id
    from videolake.platform.lake.table import PartitionRange, rows_to_table

    day = dt.date.fromisoformat(DAY)
    now = dt.datetime.now(dt.UTC)
    raw, scenes, filtered, captions, clips = [], [], [], [], []
    for i, src in enumerate(sources):
        vid = f"{i:064x}"
        uri = store.put_file(f"landing/{DAY}/{src.name}", str(src))
        n = seconds * 30
        raw.append(
            {
                "video_id": vid,
                "source_uri": uri,
                "size_bytes": src.stat().st_size,
                "width": 0,
                "height": 0,
                "fps": 30.0,
                "duration_s": float(seconds),
                "num_frames": n,
                "status": "ok",
                "ingested_at": now,
                "partition_date": day,
            }
        )
        for k, start in enumerate(range(0, n - clip_frames + 1, clip_frames)):
            cid = clip_id(vid, start, start + clip_frames)
            c = {
                "clip_id": cid,
                "video_id": vid,
                "source_uri": uri,
                "clip_index": k,
                "start_frame": start,
                "end_frame": start + clip_frames,
                "start_s": start / 30,
                "end_s": (start + clip_frames) / 30,
                "duration_s": clip_frames / 30,
                "detector": "bench",
                "detector_params": "{}",
                "partition_date": day,
            }
            scenes.append(c)
            filtered.append(
                {"clip_id": cid, "video_id": vid, "duration_s": clip_frames / 30, "passed": True, "partition_date": day}
            )
            captions.append(
                {
                    "clip_id": cid,
                    "video_id": vid,
                    "source_uri": uri,
                    "status": "ok",
                    "caption": f"a test pattern, clip {k} of video {i}",
                    "model": "bench",
                    "prompt_version": "v1",
                    "captioned_at": now,
                    "partition_date": day,
                }
            )
            clips.append({"src": str(src), **c})
    rng = PartitionRange.of([DAY])
    for table, rows, schema in (
        ("raw_videos", raw, RAW_VIDEOS),
        ("scene_clips", scenes, SCENE_CLIPS),
        ("filtered_clips", filtered, FILTERED_CLIPS),
        ("clip_captions", captions, CLIP_CAPTIONS),
    ):
        lake.write_partitions(table, rows_to_table(rows, schema) if rows else pa.table({}), rng)
    return clips


def _ffmpeg_clip(clip: dict, size: tuple[int, int], config, out: Path) -> None:
    n = clip["end_frame"] - clip["start_frame"]
    subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-ss",
            f"{clip['start_frame'] / 30:.6f}",
            "-i",
            clip["src"],
            "-frames:v",
            str(n),
            "-an",
            "-vf",
            f"scale={size[0]}:{size[1]}:flags=bicubic",
            "-c:v",
            "libx264",
            "-preset",
            config.preset,
            "-crf",
            str(config.crf),
            "-threads",
            str(config.threads),
            "-pix_fmt",
            "yuv420p",
            "-movflags",
            "+faststart",
            "-fflags",
            "+bitexact",
            str(out),
        ],
        check=True,
    )


def _warm_import(row: dict) -> dict:
    import av  # noqa: F401
    import deltalake  # noqa: F401

    import videolake.platform.shards.encode  # noqa: F401
    import videolake.platform.stages.shard  # noqa: F401

    return {"pid": os.getpid()}


def _warm_ray(cores: int) -> float:
    """Run one Ray Data pipeline of one task per core that imports the stage's modules: it starts the workers
    and Ray Data's own actors, which the stage's pipeline then reuses. Returns its seconds (printed, not counted)."""
    import ray.data

    t0 = time.perf_counter()
    ray.data.from_items([{"i": i} for i in range(cores)], override_num_blocks=cores).map(_warm_import).materialize()
    return time.perf_counter() - t0


def bench_shards(
    videos: int = 8,
    seconds: int = 16,
    clip_frames: int = 60,
    size: str = "1280x720",
    max_short_side: int = 360,
    cores: int | None = None,
) -> dict:
    import ray

    from videolake.platform.lake.table import Lake, PartitionRange
    from videolake.platform.objectstore.local import LocalObjectStore
    from videolake.platform.shards.config import ShardConfig
    from videolake.platform.shards.encode import target_size
    from videolake.platform.stages.shard import shard_partitions

    cores = cores or os.cpu_count() or 1
    config = ShardConfig(max_short_side=max_short_side)
    w, h = (int(x) for x in size.split("x"))
    out_size = target_size(w, h, max_short_side)
    with tempfile.TemporaryDirectory(prefix="videolake-bench-shards-") as tmp:
        work = Path(tmp)
        sources = _sources(work, videos, seconds, size)
        # Two lakes of the same day: the stage runs twice from nothing (a second run in one lake reuses everything).
        lakes = []
        for k in (1, 2):
            store = LocalObjectStore(str(work / f"store{k}"))
            lake = Lake(str(work / f"lake{k}"))
            clips = _tables(lake, store, sources, clip_frames, seconds)
            lakes.append((lake, store))
        (work / "ff").mkdir()

        def ffmpeg_run() -> float:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(cores) as pool:
                list(pool.map(lambda c: _ffmpeg_clip(c, out_size, config, work / "ff" / f"{c['clip_id']}.mp4"), clips))
            return time.perf_counter() - t0

        def stage_run(lake, store) -> float:
            t0 = time.perf_counter()
            run = shard_partitions(lake, store, PartitionRange.of([DAY]), config)
            took = time.perf_counter() - t0
            samples = sum(d.get("samples", 0) for d in run.per_partition.values())
            if samples != len(clips):
                raise RuntimeError(f"the stage wrote {samples} samples for {len(clips)} clips")
            return took

        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
        try:
            warm_s = _warm_ray(cores)
            # A B B A: a drift of the machine's speed during the run weighs on both sides alike.
            ffmpeg_s = ffmpeg_run()
            stage_s = stage_run(*lakes[0]) + stage_run(*lakes[1])
            ffmpeg_s += ffmpeg_run()
        finally:
            ray.shutdown()
    runs = 2 * len(clips)
    result = {
        "bench": "shards",
        "clips": len(clips),
        "frames_per_clip": clip_frames,
        "source": size,
        "encoded": f"{out_size[0]}x{out_size[1]}",
        "cores": cores,
        "stage_s": round(stage_s, 2),
        "ffmpeg_s": round(ffmpeg_s, 2),
        "ray_warm_s": round(warm_s, 2),
        "stage_samples_per_s": round(runs / stage_s, 2),
        "ffmpeg_samples_per_s": round(runs / ffmpeg_s, 2),
        "ratio": round(ffmpeg_s / stage_s, 3),
    }
    print(f"training shards: {len(clips)} clips of {clip_frames} frames, {size} -> {result['encoded']}, {cores} cores")
    print(
        f"  stage  {result['stage_samples_per_s']:8.2f} samples/s ({stage_s:.1f} s for two runs: encode, write, pack, commit)"
    )
    print(
        f"  ffmpeg {result['ffmpeg_samples_per_s']:8.2f} samples/s ({ffmpeg_s:.1f} s for two runs: one process per clip)"
    )
    print(f"  (not counted: Ray Data's first pipeline, its workers started and the stage imported: {warm_s:.1f} s)")
    print(f"  ratio  {result['ratio']:.3f}  (stage / ffmpeg, same clips and settings)")
    print(json.dumps(result))
    return result
