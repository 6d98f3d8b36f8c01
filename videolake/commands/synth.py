"""`videolake synth OUT`: write synthetic test videos into OUT and their `<stem>.json` ground truths beside OUT.

The truth (cuts, gradual transitions, flashes, expected verdict) is exact by construction; see
videolake/synth/. For a given --seed the files are byte-identical on every run and on every x86-64
machine with the same FFmpeg build (the encoder and muxer settings in videolake/synth/ffmpeg.py). OUT
receives media files only (truths go to --truth-dir, default the sibling folder `<OUT>.truth`), so OUT can be a
landing folder: `videolake synth data/store/landing/2024-03-01` lands a day to try the pipeline on, with no .json
to be rejected as not_a_video.
"""

from __future__ import annotations

import argparse
import sys
import time


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="output folder for the media files (created); may be a landing day folder")
    p.add_argument(
        "--truth-dir",
        default=None,
        metavar="DIR",
        help="folder for the <stem>.json ground truths (default: the sibling folder OUT.truth; "
        "give OUT itself for truths beside the videos, the layout the scene evaluator reads)",
    )
    p.add_argument("--count", type=int, default=12, help="varied videos to render (default 12)")
    p.add_argument(
        "--variants",
        type=int,
        default=0,
        metavar="K",
        help="perturbed copies of each decodable video: speed, scale, crop, codec (default 0)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for every random choice (default 0)")
    p.add_argument(
        "--no-specials",
        action="store_true",
        help="omit the 7 special files (black, frozen, short, truncated, zero_bytes, not_video, audio_only)",
    )
    p.add_argument(
        "--max-duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="cap on any one video's length (default 20; the long template runs to 150 s when allowed)",
    )


def run(args: argparse.Namespace) -> int:
    from videolake import synth

    if args.count < 0 or args.variants < 0:
        print("videolake synth: --count and --variants must be >= 0", file=sys.stderr)
        return 2
    try:
        synth.ffmpeg_bin()
        synth.ffprobe_bin()
    except RuntimeError as exc:
        print(f"videolake synth: {exc}", file=sys.stderr)
        return 2
    max_duration = synth.DEFAULT_MAX_DURATION_S if args.max_duration is None else args.max_duration
    if max_duration <= 0:
        print("videolake synth: --max-duration must be > 0", file=sys.stderr)
        return 2
    truth_dir = args.truth_dir if args.truth_dir is not None else synth.default_truth_dir(args.out)
    start = time.monotonic()
    paths = synth.generate(
        args.out,
        count=args.count,
        variants=args.variants,
        seed=args.seed,
        include_specials=not args.no_specials,
        max_duration_s=max_duration,
        progress=lambda line: print(line, flush=True),
        truth_dir=truth_dir,
    )
    print(
        f"wrote {len(paths)} files to {args.out} and {len(paths)} truth JSONs to {truth_dir} "
        f"in {time.monotonic() - start:.1f} s"
    )
    return 0
