"""`videolake captions compare --track A --track B --start D --end D [--judge-model PATH] [--report FILE]`: two
caption tracks of clip_captions side by side over a range of days (platform/captioning/compare.py): statistics per
track, QA flags per caption, optionally a blind judge's verdict per clip. The rows go to the lake's
``caption_comparisons`` table (the pair's rows of those days are replaced); the markdown report goes to FILE, or to
stdout without --report.

The lake is the profile's (VIDEOLAKE_PROFILE and its environment, as `videolake rows` reads it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from videolake.platform.lake.table import Lake


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="captions_command", required=True, metavar="ACTION")
    cmp = sub.add_parser(
        "compare",
        help="compare two caption tracks over a range of days: statistics, QA flags, an optional blind judge",
        description="Compare the clip_captions of two tracks over the days --start to --end (inclusive): per clip "
        "both captions, per track length and vocabulary statistics, QA flags, and with --judge-model a blind "
        "pairwise verdict per clip. Writes the caption_comparisons table and a markdown report.",
    )
    cmp.add_argument(
        "--track", action="append", required=True, metavar="NAME", help="a caption track; give exactly two: A then B"
    )
    cmp.add_argument("--start", required=True, help="first day YYYY-MM-DD")
    cmp.add_argument("--end", required=True, help="last day YYYY-MM-DD (inclusive)")
    cmp.add_argument("--judge-model", default=None, metavar="PATH", help="judge model (checkpoint dir); none: no judge")
    cmp.add_argument(
        "--judge-backend", default="vllm", choices=("vllm", "openai"), help="caption backend running the judge"
    )
    cmp.add_argument("--judge-seed", type=int, default=0, help="seed of the per-clip caption order (default 0)")
    cmp.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a QA threshold of CompareConfig (repeatable), e.g. length_k=2.5, ngram_repeats=4",
    )
    cmp.add_argument("--report", default=None, metavar="FILE", help="write the markdown report here (default: stdout)")
    cmp.add_argument("--no-write", action="store_true", help="do not write the caption_comparisons table")
    cmp.add_argument("--json", action="store_true", help="print the summary as JSON (with --report)")


@contextlib.contextmanager
def profile_lake() -> Iterator[Lake]:
    """The lake of this environment's profile, its dg.EnvVar fields resolved as in a run."""
    from videolake.commands._env import prepare_local_instance

    prepare_local_instance()
    import dagster as dg

    from videolake.definitions import profile, resources_for

    with dg.build_resources({"lake": resources_for(profile())["lake"]}) as built:
        yield built.lake.get_lake()


def parse_pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--param {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    from videolake.platform.captioning.compare import CompareConfig, day_range, render_report, run_comparison
    from videolake.platform.captioning.judge import JudgeConfig
    from videolake.platform.params import ParamError, parse_params

    if len(args.track) != 2:
        print(f"error: give exactly two --track options (A then B), got {len(args.track)}", file=sys.stderr)
        return 2
    try:
        config = parse_params(CompareConfig, parse_pairs(args.param), "captions compare")
    except (ValueError, ParamError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    judge = (
        JudgeConfig(model=args.judge_model, backend=args.judge_backend, seed=args.judge_seed)
        if args.judge_model
        else None
    )
    with profile_lake() as lake:
        try:
            days = day_range(args.start, args.end)
            comparison, version = run_comparison(
                lake, args.track[0], args.track[1], days, config, judge=judge, write=not args.no_write
            )
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    summary = {**comparison.summary(), "table_version": version}
    report = render_report(comparison)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(report)
        if args.json:
            print(json.dumps(summary, default=str))
        else:
            print(one_line(summary) + f"; report: {args.report}")
    else:
        print(report)
    return 0


def one_line(summary: dict) -> str:
    a, b = summary["track_a"], summary["track_b"]
    text = (
        f"{a} vs {b}, {summary['start']}..{summary['end']}: {summary['clips']} clips, {summary['both_ok']} with both "
        f"captions ok; mean words {summary['stats'][a]['mean_words']:.2f} vs {summary['stats'][b]['mean_words']:.2f}"
    )
    if summary.get("judge"):
        text += "; judge " + ", ".join(f"{k} {v}" for k, v in summary["judge"].items())
    return text
