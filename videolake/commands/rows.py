"""`videolake rows TABLE --date D [--status S] [--reason TEXT] [--columns ...] [--json]`: a day's rows of one table,
the rejected and failed ones with why and from which source object, as an aligned table or JSON lines.

The summary of a run counts rejections by reason; this names them. Every table gets the same view columns, derived
from what its schema has, so a new table (or a new status column) needs nothing here:

- ``status``: the row's own ``status`` column (raw_videos: ok | rejected | duplicate; captions, shards and
  embeddings: ok | failed); filtered_clips: ok | rejected from ``passed``; scene_clips: failed when it has a
  ``detect_error``, else ok;
- ``reason``: ``reject_reason``, else the error (``error``, ``detect_error``); an exact copy in raw_videos:
  ``duplicate`` (it has no reject_reason);
- ``detail``: ``reject_detail``; raw_videos' exact copy: the object and day it copies; a filtered_clips duplicate:
  the clip its group kept, that clip's day and the kind of match; otherwise the row's ``failure_class``;
- ``source``: the row's ``source_uri``, else its video's, from raw_videos of the same day (clips come from the day's
  videos), as a local path where it is a file.

``--status`` and ``--reason`` (a case-insensitive substring of the reason) filter; ``--columns`` picks any schema or
view columns (``all``: every column); ``--groups`` lists filtered_clips' duplicate groups instead of rows, each with
its kept clip. Problem rows come first, grouped by reason. The lake is the profile's, read at its latest version.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from videolake.platform.lake.schemas import TABLE_NAMES

if TYPE_CHECKING:
    from videolake.platform.lake.table import Lake

VIEW_COLUMNS = ("status", "reason", "detail", "source")
MAX_CELL = 120  # characters of a text cell (ids are never cut); --json gives every value whole


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", choices=TABLE_NAMES, help="the table")
    p.add_argument("--date", required=True, help="partition date YYYY-MM-DD")
    p.add_argument(
        "--status",
        action="append",
        metavar="S",
        help="only rows of this status (repeatable): ok, rejected, duplicate, failed; 'not-ok' for all but ok",
    )
    p.add_argument("--reason", default=None, help="only rows whose reason contains this text (case-insensitive)")
    p.add_argument(
        "--columns",
        default=None,
        help="comma-separated columns, of the table or the view (status, reason, detail, source); 'all' for every "
        "column; default: the key, status, reason, detail, source",
    )
    p.add_argument("--limit", type=int, default=None, help="at most this many rows")
    p.add_argument(
        "--groups",
        action="store_true",
        help="filtered_clips: the day's duplicate groups, each with its kept clip (its day and kind) and its members",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per row instead of a table")


def status_of(table: str, row: dict[str, Any]) -> str:
    if row.get("status") is not None:
        return str(row["status"])
    if "passed" in row:
        return "ok" if row["passed"] else "rejected"
    if "detect_error" in row:
        return "failed" if row["detect_error"] else "ok"
    return "ok"


def reason_of(row: dict[str, Any]) -> str | None:
    for column in ("reject_reason", "error", "detect_error"):
        if row.get(column):
            return str(row[column])
    if row.get("status") == "duplicate":
        return "duplicate"
    return None


def detail_of(row: dict[str, Any]) -> str | None:
    from videolake.commands.summary import _local

    if row.get("reject_detail"):
        return str(row["reject_detail"])
    if row.get("status") == "duplicate" and row.get("duplicate_of_uri"):
        return f"copy of {_local(row['duplicate_of_uri'])} landed {row.get('duplicate_of_date')}"
    if row.get("duplicate_group") and row.get("duplicate_group") != row.get("clip_id"):
        kind = f", {row['duplicate_kind']}" if row.get("duplicate_kind") else ""
        return f"group kept {row['duplicate_group']} ({row.get('duplicate_kept_date')}{kind})"
    if row.get("duplicate_group") and row.get("duplicate_group") == row.get("clip_id"):
        return "kept clip of a duplicate group"
    if row.get("failure_class") and status_of("", row) != "ok":
        return str(row["failure_class"])
    return None


def view_rows(table: str, rows: list[dict[str, Any]], sources: dict[str, str]) -> list[dict[str, Any]]:
    """``rows`` with the view columns added (``sources``: video_id -> source_uri of the day's raw_videos)."""
    from videolake.commands.summary import _local

    out = []
    for row in rows:
        source = row.get("source_uri") or sources.get(row.get("video_id") or "")
        out.append(
            {
                **row,
                "status": status_of(table, row),
                "reason": reason_of(row),
                "detail": detail_of(row),
                "source": _local(source) if source else None,
            }
        )
    return out


def matches(row: dict[str, Any], statuses: list[str] | None, reason: str | None) -> bool:
    if statuses:
        wanted = set(statuses)
        if not (row["status"] in wanted or ("not-ok" in wanted and row["status"] != "ok")):
            return False
    return reason is None or reason.lower() in (row["reason"] or "").lower()


def columns_for(table: str, schema_names: list[str], wanted: str | None) -> list[str]:
    """The columns to show, or ValueError naming the unknown ones."""
    from videolake.platform.lake.schemas import table_spec

    if wanted is None:
        return [*table_spec(table).key_columns, *VIEW_COLUMNS]
    if wanted.strip() == "all":
        return [*schema_names, *(c for c in VIEW_COLUMNS if c not in schema_names)]
    names = [c.strip() for c in wanted.split(",") if c.strip()]
    known = [*schema_names, *(c for c in VIEW_COLUMNS if c not in schema_names)]
    unknown = [c for c in names if c not in known]
    if unknown or not names:
        raise ValueError(f"unknown column(s) {', '.join(unknown) or repr(wanted)} of {table}: {', '.join(known)}")
    return names


def _cell(value: Any, column: str = "") -> str:
    """A value as a table cell: floats to 4 significant digits, long text cut in the middle (it keeps what it is and
    how it ends: a path's file name), an id whole (it is what a user copies into `videolake lineage`)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = str(value).replace("\n", " ")
    if len(text) <= MAX_CELL or column.endswith("_id") or column == "duplicate_group":
        return text
    head = MAX_CELL // 2 - 1
    return text[:head] + "…" + text[-(MAX_CELL - head - 1) :]


def table_lines(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    """An aligned text table: a header, then one line per row (the last column is not padded)."""
    cells = [[_cell(r.get(c), c) for c in columns] for r in rows]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    return [line(list(columns)), *(line(v) for v in cells)]


def duplicate_groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The duplicate groups among the view rows of filtered_clips: per kept clip (``duplicate_group``, on every
    member), its day, the kind of match and the members (the kept clip itself first where it is of this day)."""
    groups: dict[str, dict[str, Any]] = {}
    for r in rows:
        kept = r.get("duplicate_group")
        if not kept:
            continue
        g = groups.setdefault(kept, {"kept": kept, "kept_date": None, "kind": None, "kept_source": None, "members": []})
        g["kept_date"] = g["kept_date"] or r.get("duplicate_kept_date")
        g["kind"] = g["kind"] or r.get("duplicate_kind")
        if r["clip_id"] == kept:
            g["kept_source"] = r["source"]
        member = {"clip_id": r["clip_id"], "status": r["status"], "reason": r["reason"], "source": r["source"]}
        g["members"].append(member)
    for g in groups.values():
        g["kept_date"] = None if g["kept_date"] is None else str(g["kept_date"])
        g["members"].sort(key=lambda m: (m["clip_id"] != g["kept"], m["clip_id"]))
    return [groups[k] for k in sorted(groups)]


def group_lines(groups: list[dict[str, Any]]) -> list[str]:
    lines = []
    for g in groups:
        kind = f", {g['kind']}" if g["kind"] else ""
        where = f"  {g['kept_source']}" if g["kept_source"] else ""
        lines.append(f"kept {g['kept']} ({g['kept_date'] or 'this day'}{kind}){where}")
        rows = [{**m, "role": "kept" if m["clip_id"] == g["kept"] else "dropped"} for m in g["members"]]
        lines += [f"  {line}" for line in table_lines(rows, ["clip_id", "role", "status", "reason", "source"])[1:]]
    return lines


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return value


def run(args: argparse.Namespace) -> int:
    import datetime as dt

    try:
        dt.date.fromisoformat(args.date)
    except ValueError:
        print(f"error: --date is YYYY-MM-DD, got {args.date!r}")
        return 2
    from videolake.commands.release import lake_and_store

    with lake_and_store() as (lake, _store, _config):
        if not lake.exists(args.table):
            print(f"error: {args.table} has no table yet (materialize it first: `videolake run --start {args.date}`)")
            return 1
        rows, schema_names, sources = _read_day(lake, args.table, args.date)
    try:
        columns = columns_for(args.table, schema_names, args.columns)
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    viewed = view_rows(args.table, rows, sources)
    if args.groups:
        return _print_groups(args, viewed, schema_names)
    return _print_rows(args, viewed, columns)


def _read_day(lake: Lake, table: str, date: str) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    """The day's rows of ``table``, its column names and video_id -> source_uri for rows without their own."""
    from videolake.platform.lake.table import PartitionRange

    rng = PartitionRange.of([date])
    tbl = lake.read_partitions(table, rng)
    rows, schema_names = tbl.to_pylist(), tbl.column_names
    sources: dict[str, str] = {}
    # a row without its own source_uri (filtered_clips; rows written before the column was) gets its video's
    if any(r.get("video_id") and not r.get("source_uri") for r in rows) and lake.exists("raw_videos"):
        raw = lake.read_partitions("raw_videos", rng, columns=["video_id", "source_uri"]).to_pylist()
        sources = {r["video_id"]: r["source_uri"] for r in raw}
    return rows, schema_names, sources


def _print_groups(args: argparse.Namespace, viewed: list[dict[str, Any]], schema_names: list[str]) -> int:
    """``--groups``: print the day's duplicate groups of the matching rows (JSON lines or text); the exit code."""
    if "duplicate_group" not in schema_names:
        print(f"error: {args.table} has no duplicate groups (--groups is for filtered_clips)")
        return 2
    groups = duplicate_groups([r for r in viewed if matches(r, args.status, args.reason)])
    if args.json:
        for g in groups:
            print(json.dumps(g, default=str))
    else:
        if groups:
            print("\n".join(group_lines(groups)))
        print(f"{args.table} {args.date}: {len(groups)} duplicate group(s)")
    return 0


def _print_rows(args: argparse.Namespace, viewed: list[dict[str, Any]], columns: list[str]) -> int:
    """Print the matching rows, problems first (JSON lines, or a table and a count by status); the exit code."""
    from collections import Counter

    shown = [r for r in viewed if matches(r, args.status, args.reason)]
    key = lambda r: (r["status"] == "ok", str(r.get("reason") or ""), str(r.get(columns[0]) or ""))  # noqa: E731
    shown.sort(key=key)  # problems first, grouped by reason
    if args.limit is not None:
        shown = shown[: args.limit]
    if args.json:
        for r in shown:
            print(json.dumps({c: _json_value(r.get(c)) for c in columns}, default=str))
        return 0
    counts = Counter(r["status"] for r in viewed)
    by_status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    if shown:
        print("\n".join(table_lines(shown, columns)))
    print(
        f"{args.table} {args.date}: {len(shown)} of {len(viewed)} row(s) shown" + (f" ({by_status})" if viewed else "")
    )
    return 0
