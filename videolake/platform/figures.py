"""Counts and rates of a table's rows, per partition: what the UI shows and plots (see assets/metadata.py).

Pure pyarrow, no Dagster: the stages' finalize tasks compute each day's figures on the Ray workers from the rows
they commit (``table_figures``), and the step only adds up days (``merge_figures``), so no step holds the rows to
report on them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

ROW_COUNT = "dagster/row_count"  # Dagster's own label: the asset page shows it as the row count

# The rates of each table: (rate, numerator, denominator), recomputed when days are added up.
RATES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "raw_videos": (("reject_rate", "videos_rejected", ROW_COUNT),),
    "filtered_clips": (("pass_rate", "passed", ROW_COUNT),),
    "clip_captions": (("failure_rate", "captions_failed", ROW_COUNT),),
}


def reason_counts(values: list[str | None]) -> dict[str, int]:
    """Rejections by reason; multi-reason values (';'-joined) count once per reason, ':'-details dropped."""
    c: Counter[str] = Counter()
    for v in values:
        if v:
            for part in v.split(";"):
                c[part.split(":")[0].strip()] += 1
    return dict(sorted(c.items()))


def _rate(n: int, d: int) -> float:
    return n / d if d else 0.0


def table_figures(table_name: str, rows: pa.Table) -> dict[str, Any]:
    """Counts and rates of ``rows`` (one partition or a whole range; columns: SUMMARY_COLUMNS[table_name])."""
    n = rows.num_rows
    if table_name == "raw_videos":
        status = rows.column("status").to_pylist()
        rejected = status.count("rejected")
        return {
            ROW_COUNT: n,
            "videos_ok": n - rejected,
            "videos_rejected": rejected,
            "reject_rate": _rate(rejected, n),
            "rejections_by_reason": reason_counts(rows.column("reject_reason").to_pylist()),
            "bytes": int(pc.sum(rows.column("size_bytes")).as_py() or 0),
            "frames": int(pc.sum(rows.column("num_frames")).as_py() or 0),
        }
    if table_name == "scene_clips":
        return {
            ROW_COUNT: n,
            "videos": len(set(rows.column("video_id").to_pylist())),
            "detect_errors": sum(1 for e in rows.column("detect_error").to_pylist() if e),
        }
    if table_name == "filtered_clips":
        passed = sum(1 for p in rows.column("passed").to_pylist() if p)
        return {
            ROW_COUNT: n,
            "passed": passed,
            "rejected": n - passed,
            "pass_rate": _rate(passed, n),
            "rejections_by_reason": reason_counts(rows.column("reject_reason").to_pylist()),
        }
    if table_name == "clip_captions":
        status = rows.column("status").to_pylist()
        failed = status.count("failed")
        return {
            ROW_COUNT: n,
            "captions": n - failed,
            "captions_failed": failed,
            "failure_rate": _rate(failed, n),
            "failures_by_reason": reason_counts([e.split(":")[0] if e else None for e in rows.column("error").to_pylist()]),
        }
    raise KeyError(f"no figures for table {table_name!r}")




def merge_figures(table_name: str, days: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of several days as if computed over all their rows: counts added, by-reason dicts merged,
    sets of distinct ids counted per day (videos are per day), rates recomputed."""
    out: dict[str, Any] = {}
    for d in days:
        for k, v in d.items():
            if isinstance(v, dict):
                merged = out.setdefault(k, {})
                for r, n in v.items():
                    merged[r] = merged.get(r, 0) + n
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
            else:
                out[k] = v
    for rate, num, den in RATES.get(table_name, ()):
        if den in out:
            out[rate] = _rate(out.get(num, 0), out[den])
    for k, v in out.items():
        if isinstance(v, dict):
            out[k] = dict(sorted(v.items()))
    return out
