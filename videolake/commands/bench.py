"""`videolake bench {cpu,caption}`: throughput ratios against a baseline measured in the same process."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["cpu", "caption"], help="cpu: CPU stage vs ffmpeg decode; caption: stage vs raw vLLM")
    p.add_argument("--seconds", type=int, default=20, help="cpu: length of each synthetic file")
    p.add_argument("--repeats", type=int, default=2, help="cpu: measurements per side (best kept)")
    p.add_argument("--files", nargs="*", help="cpu: benchmark these files instead of synthetic 360p/1080p ones")
    p.add_argument("--clips", type=int, default=64, help="caption: clips to caption")
    p.add_argument("--model", help="caption: model dir (default: the cached tiny test model)")


def run(args: argparse.Namespace) -> int:
    if args.what == "cpu":
        from videolake.platform.bench_cpu import bench_cpu, format_rows

        print(format_rows(bench_cpu(seconds=args.seconds, repeats=args.repeats, files=args.files)))
        return 0
    from videolake.platform.captioning.bench import main as caption_main

    return int(caption_main(clips=args.clips, model=args.model) or 0)
