"""The `videolake` command. Subcommands live in videolake/commands/<name>.py and are imported only when run,
so `videolake scenes FILE` starts without loading dagster, ray or vllm."""

from __future__ import annotations

import argparse
import importlib
import sys

DESCRIPTION = "videolake: raw video in object storage -> captioned training clips (Dagster, Ray, Delta Lake, vLLM)."

# name -> (module, one-line help). Each module has add_arguments(parser) and run(args) -> int, and imports
# nothing heavy at module level.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("videolake.commands.demo", "make sample data, materialize a partition through Dagster, print a summary"),
    "synth": ("videolake.commands.synth", "generate synthetic test videos with ground-truth JSON"),
    "scenes": ("videolake.commands.scenes", "print the scene cuts of one video as JSON"),
    "bench": ("videolake.commands.bench", "benchmarks: cpu stage vs ffmpeg decode, caption stage vs raw vLLM"),
    "check": ("videolake.commands.check", "re-run the quality gates of a partition against the stored tables"),
    "doctor": ("videolake.commands.doctor", "preflight: ffmpeg, packages, storage, model, Dagster instance, stale runs"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="videolake", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Only the chosen subcommand's module is imported (each parser is built on demand).
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).add_arguments(p)
    args = parser.parse_args(argv)
    return int(importlib.import_module(COMMANDS[args.command][0]).run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
