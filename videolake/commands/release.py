"""`videolake release create|verify|list|export` and `videolake vacuum`: dataset releases of the gated days, and a Delta
vacuum that keeps what releases pin (docs/releases.md).

The lake, the object store and the gate thresholds are the ones the code location uses (VIDEOLAKE_PROFILE, its
environment variables and $VIDEOLAKE_GATES_FILE, as `videolake check` reads them), so a release made here is the
release the Dagster UI shows. `vacuum` is registered in cli.py as ``videolake.commands.release:vacuum``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from videolake.platform.gates import GateConfig
    from videolake.platform.lake.table import Lake
    from videolake.platform.objectstore import ObjectStore


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="release_command", required=True, metavar="ACTION")
    create = sub.add_parser(
        "create",
        help="publish a release of the days [--start, --end] that passed every gate",
        description="Publish release NAME: the days from --start to --end (inclusive) whose "
        "partitions passed every blocking gate of every table; the others are listed in the "
        "manifest and the card with the reason. A name is never reused.",
    )
    create.add_argument("name", help="release name: letters, digits, '.', '_', '-'")
    create.add_argument("--start", required=True, help="first day YYYY-MM-DD")
    create.add_argument("--end", required=True, help="last day YYYY-MM-DD (inclusive)")
    create.add_argument(
        "--bucket",
        action="append",
        metavar="B",
        help="only shards of this bucket (repeatable), e.g. resolution_720/aspect_16_9/frames_64_127",
    )
    create.add_argument("--json", action="store_true", help="print the manifest instead of a summary")
    verify = sub.add_parser(
        "verify",
        help="re-check every shard's sha256, size and sample count",
        description="Read every shard of release NAME back and compare it with the manifest.",
    )
    verify.add_argument("name")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")
    listing = sub.add_parser("list", help="the releases with their days, samples and hours")
    listing.add_argument("--json", action="store_true", help="one JSON object per release")
    export = sub.add_parser(
        "export",
        help="write a release as one self-contained folder (shards, manifest, card, Croissant)",
        description="Write release NAME into DEST (a local folder or s3://bucket/prefix): its shards copied byte for "
        "byte (sha256 checked), a manifest whose shard uris are relative to the folder, the card, and Croissant 1.1 "
        "metadata (croissant.json, validated with mlcroissant). open_release(DEST) reads it with no lake.",
    )
    export.add_argument("name")
    export.add_argument("dest", help="a new local folder, or s3://bucket/prefix (the profile's S3 connection)")
    export.add_argument("--license", help="the dataset's license for croissant.json (SPDX id or URL)")
    export.add_argument(
        "--rai",
        metavar="FILE",
        help="a JSON object of Croissant properties that replace the generated ones, e.g. "
        '{"rai:personalSensitiveInformation": "...", "rai:dataLimitations": [...], "creator": {...}}',
    )
    export.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_vacuum_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--retention-hours",
        type=int,
        default=168,
        help="delete files removed from their table longer ago than this (default 168 = 7 days)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted and kept; delete nothing")
    p.add_argument(
        "--allow-short-retention",
        action="store_true",
        help="allow a retention below the tables' delta.deletedFileRetentionDuration (7 days): a reader "
        "of an older, unpinned version may then lose its files",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="also delete files the Delta log never named (orphans of attempts that never committed)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")


@contextlib.contextmanager
def lake_and_store() -> Iterator[tuple[Lake, ObjectStore, GateConfig]]:
    """(Lake, ObjectStore, GateConfig) of this environment's profile, dg.EnvVar fields resolved as in a run."""
    from videolake.commands._env import prepare_local_instance

    prepare_local_instance()
    import dagster as dg

    from videolake.definitions import gate_overrides, profile, resources_for
    from videolake.platform.gates import load_gate_config

    resources = resources_for(profile())
    config = load_gate_config(overrides=gate_overrides(resources["captioner"]))
    wanted = {k: resources[k] for k in ("lake", "object_store")}
    with dg.build_resources(wanted) as built:
        yield built.lake.get_lake(), built.object_store.get_store(), config


def run(args: argparse.Namespace) -> int:
    from videolake.platform.releases import ReleaseError

    try:
        with lake_and_store() as (lake, store, config):
            return {"create": _create, "verify": _verify, "list": _list, "export": _export}[args.release_command](
                args, lake, store, config
            )
    except ReleaseError as exc:
        print(f"error: {short_error(str(exc))}")
        return 2


NOTHING_RELEASABLE = re.compile(r"^no partition of (?P<span>\S+) can be released \((?P<why>.*)\)$", re.S)
DAY_REASON = re.compile(r"(?:^|; )(\d{4}-\d{2}-\d{2}): ")
MAX_REASONS = 3


def short_error(text: str) -> str:
    """A release error as a person reads it. The engine's error for a range with no releasable day names every
    day with its reason (a month of empty days: 3 KB on one line); here the days are grouped by reason, each group
    as its day count and first and last day, at most ``MAX_REASONS`` groups, with what to do. Other errors are
    short already and pass through."""
    match = NOTHING_RELEASABLE.match(text)
    if match is None:
        return text
    parts = DAY_REASON.split(match["why"])  # ["", day, reason, day, reason, ...]
    by_reason: dict[str, list[str]] = {}
    for day, reason in zip(parts[1::2], parts[2::2]):
        by_reason.setdefault(reason.strip(), []).append(day)
    if not by_reason:
        return text
    groups = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    said = [
        f"{len(days)} day(s) {days[0] if len(days) == 1 else f'between {days[0]} and {days[-1]}'}: {reason}"
        for reason, days in groups[:MAX_REASONS]
    ]
    more = len(groups) - MAX_REASONS
    tail = f"; and {more} other reason(s)" if more > 0 else ""
    span = match["span"]
    first, _, last = span.partition("..")
    return (
        f"no day of {span} can be released: {'; '.join(said)}{tail}. Materialize the days first "
        f"(`videolake run --start {first} --end {last or first}`), or see why a day fails its gates "
        "(`videolake check --partition DAY`)"
    )


def _create(args, lake, store, config) -> int:
    from videolake.platform.releases import create_release, gate_verdicts_from_lake

    release = create_release(
        lake,
        store,
        args.name,
        args.start,
        args.end,
        buckets=args.bucket,
        gate_verdicts=gate_verdicts_from_lake(lake, config),
    )
    if args.json:
        print(json.dumps(release.manifest, indent=2))
        return 0
    t = release.totals
    print(
        f"release {release.name}: {t['samples']} samples, {t['shards']} shards, {t['hours']:.3f} h, "
        f"{len(release.partitions)} day(s): {', '.join(release.partitions)}"
    )
    for e in release.excluded_partitions:
        print(f"  left out {e['partition_date']}: {e['reason']}")
    print(f"  manifest: {release.manifest_uri}")
    print(f"  card:     {release.card_uri}")
    return 0


def _verify(args, lake, store, config) -> int:
    from videolake.platform.releases import verify_release

    result = verify_release(store, args.name, storage_options=lake.storage_options or None)
    if args.json:
        print(
            json.dumps(
                {
                    "name": result.name,
                    "ok": result.ok,
                    "shards": result.shards,
                    "checked": result.checked,
                    "tables": result.tables,
                    "tables_checked": result.tables_checked,
                    "files_read": result.files_read,
                    "problems": [vars(p) for p in result.problems],
                },
                indent=2,
                default=str,
            )
        )
    else:
        for p in result.problems:
            print(f"FAIL  {p}")
        bad = [f"{len(result.bad_shards)} shard(s)"] if result.bad_shards else []
        bad += [f"{len(result.bad_tables)} table(s)"] if result.bad_tables else []
        verdict = "OK" if result.ok else f"{' and '.join(bad) or 'the totals'} with problems"
        print(
            f"release {result.name}: {result.checked} of {result.shards} shard(s) read, {result.tables_checked} of "
            f"{result.tables} pinned table version(s) read ({result.files_read} data file(s)); {verdict}"
        )
    return 0 if result.ok else 1


def _list(args, lake, store, config) -> int:
    from videolake.platform.releases import list_releases

    releases = list_releases(store)
    for r in releases:
        if args.json:
            print(json.dumps(vars(r), default=list))
        else:
            days = f"{r.partitions[0]}..{r.partitions[-1]} ({len(r.partitions)} days)" if r.partitions else "no days"
            buckets = "all buckets" if r.buckets is None else f"{len(r.buckets)} bucket(s)"
            print(
                f"{r.name:24} {r.created_at}  {days}, {r.samples} samples, {r.shards} shards, {r.hours:.3f} h, "
                f"{buckets}"
            )
    if not releases and not args.json:
        print(f"no releases under {store.uri('releases/')}")
    return 0


def _export(args, lake, store, config) -> int:
    from videolake.platform.releases.croissant import CroissantError
    from videolake.platform.releases.export import ExportError, destination, export_release

    overrides = None
    if args.rai:
        try:
            with open(args.rai, encoding="utf-8") as fh:
                overrides = json.load(fh)
        except (OSError, ValueError) as exc:
            raise ExportError(f"--rai {args.rai}: {exc}") from exc
        if not isinstance(overrides, dict):
            raise ExportError(f"--rai {args.rai}: a JSON object of Croissant properties is expected")
    try:
        result = export_release(
            store,
            args.name,
            destination(args.dest, like=store),
            storage_options=lake.storage_options or None,
            license=args.license,
            overrides=overrides,
        )
    except CroissantError as exc:
        raise ExportError(str(exc)) from exc
    if args.json:
        print(json.dumps(vars(result), indent=2, default=list))
        return 0
    print(
        f"release {result.name} exported to {result.dest}: {result.shards} shard(s), {result.samples} samples, "
        f"{result.bytes} bytes (sha256 checked), {len(result.files)} file(s)"
    )
    print(f"  manifest:  {result.manifest_uri}")
    print(f"  croissant: {result.croissant_uri} (mlcroissant: valid, {len(result.warnings)} warning(s))")
    for w in result.warnings:
        print(f"    warning: {w}")
    return 0


def _vacuum_run(args: argparse.Namespace) -> int:
    from videolake.platform.releases import ReleaseError, vacuum_lake
    from videolake.platform.releases.vacuum import as_dict, report_lines

    try:
        with lake_and_store() as (lake, store, _config):
            report = vacuum_lake(
                lake,
                store,
                retention_hours=args.retention_hours,
                dry_run=args.dry_run,
                enforce_retention_duration=not args.allow_short_retention,
                full=args.full,
            )
    except ReleaseError as exc:
        print(f"error: {exc}")
        return 2
    if args.json:
        print(json.dumps(as_dict(report), indent=2))
    else:
        print("\n".join(report_lines(report)))
    return 0


# `videolake vacuum` (cli.py: "videolake.commands.release:vacuum").
vacuum = SimpleNamespace(add_arguments=_add_vacuum_arguments, run=_vacuum_run)
