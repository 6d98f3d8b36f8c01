"""The `videolake` command. Subcommands live in videolake/commands/<name>.py and are imported only when run,
so `videolake scenes FILE` starts without loading dagster, ray or vllm."""

from __future__ import annotations

import argparse
import importlib
import sys

DESCRIPTION = "videolake: raw video in object storage -> captioned training clips (Dagster, Ray, Delta Lake, vLLM)."

# name -> (module or module:attribute, one-line help). Each has add_arguments(parser) and run(args) -> int, and
# imports nothing heavy at module level.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("videolake.commands.demo", "make sample data, materialize a partition through Dagster, print a summary"),
    "synth": ("videolake.commands.synth", "generate synthetic test videos with ground-truth JSON"),
    "scenes": ("videolake.commands.scenes", "print the scene cuts of one video as JSON"),
    "bench": ("videolake.commands.bench", "benchmarks: cpu stage vs ffmpeg decode, caption stage vs raw vLLM"),
    "check": ("videolake.commands.check", "re-run the quality gates of a partition against the stored tables"),
    "doctor": (
        "videolake.commands.doctor",
        "preflight: ffmpeg, packages, storage, model, Dagster instance, stale runs",
    ),
    "release": ("videolake.commands.release", "dataset releases of the gated days: create, verify, list"),
    "vacuum": ("videolake.commands.release:vacuum", "Delta vacuum of every table, keeping the files releases pin"),
    "lineage": (
        "videolake.commands.lineage",
        "the chain of a sample key, clip_id, video_id or source object through "
        "every table, with versions, and the clip's frames",
    ),
    "run": (
        "videolake.commands.run",
        "materialize the landing days of a date range on the Dagster instance, day by day, with progress",
    ),
    "rows": ("videolake.commands.rows", "a day's rows of a table, filtered by status or reason, as a table or JSON"),
    "captions": ("videolake.commands.captions", "caption tracks: compare two tracks (statistics, QA flags, a judge)"),
}

# The commands that build the profile's resources: a VIDEOLAKE_PROFILE naming no profile is refused before they
# start, in one line. The demo keeps its own report of a broken environment (commands/demo.py).
PROFILE_COMMANDS = frozenset({"check", "release", "vacuum", "lineage", "run", "rows", "captions"})
# The commands that read no VIDEOLAKE_* setting and start without dagster: the environment check (which imports
# videolake.resources, and so dagster) is not run for them.
LIGHT_COMMANDS = frozenset({"scenes", "synth"})


def _command(spec: str):
    """The object with add_arguments/run that ``spec`` names: a module, or ``module:attribute``."""
    module, _, attr = spec.partition(":")
    mod = importlib.import_module(module)
    return getattr(mod, attr) if attr else mod


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="videolake", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Only the chosen subcommand's module is imported (each parser is built on demand).
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            _command(module).add_arguments(p)
    args = parser.parse_args(argv)
    if args.command not in LIGHT_COMMANDS:
        from videolake.resources.environment import profile_error, warn_unknown_variables

        warn_unknown_variables()  # a misspelled VIDEOLAKE_* setting is named on stderr, never silently ignored
        if args.command in PROFILE_COMMANDS and (error := profile_error()):
            print(f"error: {error}", file=sys.stderr)
            return 2
    return int(_command(COMMANDS[args.command][0]).run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
