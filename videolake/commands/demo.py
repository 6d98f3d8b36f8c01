"""`videolake demo`: synthesize landing videos for one date, run the whole pipeline for that partition through
Dagster on the local instance, and print what happened."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time


def add_arguments(p: argparse.ArgumentParser) -> None:
    yesterday = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)).isoformat()
    p.add_argument("--date", default=yesterday, help="partition date YYYY-MM-DD (default: yesterday, UTC)")
    p.add_argument("--count", type=int, default=8, help="synthetic videos to land (plus the reject cases)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-specials", action="store_true", help="omit the files the pipeline must reject/filter")


def land_sample_data(store_root: str, landing: str, date: str, count: int, seed: int, specials: bool) -> int:
    """Synthesize videos straight into <store>/<landing>/<date>/ (skipped when that folder already has videos)."""
    from pathlib import Path

    from videolake.platform.synth import generate

    out = Path(store_root) / landing / date
    existing = [p for p in out.glob("*") if p.suffix != ".json"] if out.exists() else []
    if existing:
        print(f"landing folder {out} already has {len(existing)} files: reusing them")
        return len(existing)
    # Ground-truth JSONs go beside the landing folder, not into it: they are not videos.
    truth_dir = Path(store_root).parent / "synth-truth" / date
    tmp = truth_dir / "videos"
    paths = generate(tmp, count=count, seed=seed, include_specials=specials, max_duration_s=20.0,
                     progress=lambda msg: print(f"  synth: {msg}", flush=True))
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in paths:
        p = Path(p)
        p.replace(out / p.name)
        n += 1
    return n


def run(args: argparse.Namespace) -> int:
    from videolake.commands._env import prepare_local_instance

    home = prepare_local_instance()
    import os

    t0 = time.monotonic()
    data_dir = os.environ["VIDEOLAKE_DATA_DIR"]
    store_root = os.path.join(data_dir, "store")
    print(f"[1/3] landing sample videos for {args.date} under {store_root}/landing/{args.date}/", flush=True)
    n = land_sample_data(store_root, "landing", args.date, args.count, args.seed, not args.no_specials)
    print(f"      {n} files landed ({time.monotonic() - t0:.1f}s)", flush=True)

    import dagster as dg

    from videolake.definitions import defs

    print(f"[2/3] materializing partition {args.date} on the Dagster instance at {home} (logs below)", flush=True)
    instance = dg.DagsterInstance.get()
    job = defs.resolve_job_def("videolake_daily")
    t1 = time.monotonic()
    result = job.execute_in_process(partition_key=args.date, instance=instance, raise_on_error=False)
    elapsed = time.monotonic() - t1

    print("[3/3] summary", flush=True)
    from videolake.commands.summary import print_summary

    print_summary(defs, args.date, result, elapsed)
    print(f"\nrun {result.run_id} {'succeeded' if result.success else 'FAILED'} in {time.monotonic() - t0:.1f}s total")
    print("Browse the assets, checks and lineage in the Dagster UI:  make ui   (then open http://127.0.0.1:3000)")
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace()))
