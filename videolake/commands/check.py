"""`videolake check --partition DATE`: re-run the quality gates of a partition against the stored tables, without
re-materializing (after a hand edit of a table, or a threshold change in the gates file)."""

from __future__ import annotations

import argparse
import json

from videolake.platform.lake.schemas import TABLE_NAMES, table_spec


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--partition", required=True, help="partition date YYYY-MM-DD")
    p.add_argument("--table", choices=TABLE_NAMES, action="append", help="only these tables (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON object per gate instead of a table")


def run(args: argparse.Namespace) -> int:
    from videolake.commands._env import prepare_local_instance

    prepare_local_instance()
    from videolake.definitions import build_definitions, gate_overrides
    from videolake.platform.gates import check_partition, load_gate_config

    defs = build_definitions()
    resources = defs.resources
    assert resources is not None  # build_definitions always binds them
    lake = resources["lake"].get_lake()
    config = load_gate_config(overrides=gate_overrides(resources["captioner"]))
    blocking = 0
    for table in args.table or TABLE_NAMES:
        if not lake.exists(table) and not args.table and table_spec(table).optional:
            continue  # an optional table never materialized (clip_embeddings without a model): nothing to say
        if not lake.exists(table):
            print(f"{table}: no table yet (skipped)")
            continue
        for r in check_partition(lake, table, args.partition, config):
            if args.json:
                print(json.dumps({"partition": args.partition, **r.to_metadata()}, default=str))
            else:
                verdict = "PASS" if r.passed else ("FAIL" if r.blocks else "WARN")
                print(f"{verdict:4}  {table}.{r.gate}: {r.description}")
            blocking += int(r.blocks)
    if not args.json:
        print(f"{blocking} blocking gate(s) failed for partition {args.partition}")
    return 1 if blocking else 0
