"""The ingest stage (raw_videos): one unit per landing object, hashed (content-addressed id) and probed; a file that
cannot be read, or is not a video, is a rejected row with its reason. Byte-identical files of one day are one row
that names the others (``merge_duplicates``)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from typing import Any

import pyarrow as pa

from videolake.platform.lake.schemas import table_spec
from videolake.platform.lake.table import PartitionRange
from videolake.platform.objectstore import ObjectInfo, ObjectStore
from videolake.platform.runtime.progress import StageReporter
from videolake.platform.runtime.units import PartitionStep, stage_version, unit_key
from videolake.platform.stages.common import (
    INGEST_ERROR,
    STATUS_REJECTED,
    StageRun,
    _config_dict,
    run_stage,
)

log = logging.getLogger(__name__)


def landing_prefix(landing: str, day: str) -> str:
    return f"{landing.strip('/')}/{day}/"


def list_landing(store: ObjectStore, landing: str, days: list[str]) -> dict[str, list[ObjectInfo]]:
    """The entries to ingest per partition day: one raw_videos row each (a rejection when ``problem`` is set).

    The rules (docs/landing.md, "What lands"), applied to ``store.list(<landing>/<day>/)``, which never raises for
    one odd entry:
    - Sub-folders are ingested: ``<day>/cam1/a.mp4`` is a video of that day like ``<day>/a.mp4``.
    - Hidden names are skipped: any path segment below the day folder that starts with '.' (``.DS_Store``,
      ``.upload-tmp/...``, editors' and uploaders' partial files). They are logged with their count.
    - Folders are not videos: the day folder's own marker, and a sub-folder with entries under it, give no row
      (their contents do). An empty sub-folder (local, or an S3 folder marker with nothing under it) becomes a
      ``not_a_regular_file`` entry, so a folder where a file was expected (``x.mp4/``) is visible as a rejection.
    - Every other entry is returned, flagged entries included (links, FIFOs, unreadable or non-UTF-8 names...):
      ``ingest_one`` turns them into rejected rows without opening them.
    """
    from dataclasses import replace

    from videolake.platform.objectstore.base import NOT_A_REGULAR_FILE

    out = {}
    for day in days:
        prefix = landing_prefix(landing, day)
        entries = sorted(store.list(prefix), key=lambda o: o.key)
        keep, hidden = [], 0
        for i, o in enumerate(entries):
            rel = o.key[len(prefix) :] if o.key.startswith(prefix) else ""
            if any(part.startswith(".") for part in rel.split("/")):
                hidden += 1
                continue
            if o.is_folder and o.problem is None:
                # Sorted keys: whatever lies under a folder key follows it directly.
                if not rel or (i + 1 < len(entries) and entries[i + 1].key.startswith(o.key)):
                    continue  # the day folder itself, or a folder whose contents are listed
                o = replace(o, problem=NOT_A_REGULAR_FILE, detail="an empty folder (nothing to ingest)")
            keep.append(o)
        if hidden:
            log.info(
                "landing %s: skipped %d hidden entr%s (names starting with '.')",
                prefix,
                hidden,
                "y" if hidden == 1 else "ies",
            )
        out[day] = keep
    return out


# ---------------------------------------------------------------------------------------------------- ingest


def ingest_one(obj: ObjectInfo, *, store: ObjectStore, probe_config: Any) -> dict:
    """Hash and probe one landing object; returns a RAW_VIDEOS row (without partition_date / ingested_at).

    Never raises for the object itself: a flagged entry (``obj.problem``) becomes a rejected row without being
    opened; an object that is gone when read is ``vanished``, one that cannot be read ``permission_denied``, one
    that became a link, FIFO or folder since the listing ``not_a_regular_file`` (checked with lstat before opening,
    so a link is never followed), an S3 object in an archive storage class ``archived``. Store-wide failures (an
    outage after the store's retries, bad credentials) still raise: they are not this object's fault.
    """
    import stat

    from videolake.platform.objectstore.base import (
        ARCHIVED,
        NOT_A_REGULAR_FILE,
        PERMISSION_DENIED,
        VANISHED,
        ObjectArchivedError,
        sha256_file,
    )
    from videolake.platform.video.probe import probe_video, raw_video_row, rejected_row

    if obj.problem is not None:
        return rejected_row(obj.uri, obj.size, obj.problem, obj.detail or obj.problem)
    if obj.is_folder:
        return rejected_row(obj.uri, obj.size, NOT_A_REGULAR_FILE, "a folder, not a file")
    try:
        with store.open_local(obj.key) as path:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                return rejected_row(
                    obj.uri, obj.size, NOT_A_REGULAR_FILE, f"{what} when read (it was a file when listed)"
                )
            video_id = sha256_file(path)
            outcome = probe_video(path, probe_config)
    except FileNotFoundError as exc:
        return rejected_row(obj.uri, obj.size, VANISHED, f"listed, then gone before it was read ({exc})")
    except PermissionError as exc:
        return rejected_row(obj.uri, obj.size, PERMISSION_DENIED, f"cannot read the file: {exc.strerror or exc}")
    except (IsADirectoryError, NotADirectoryError) as exc:
        return rejected_row(obj.uri, obj.size, NOT_A_REGULAR_FILE, f"a folder when read: {exc}")
    except ObjectArchivedError as exc:
        return rejected_row(obj.uri, obj.size, ARCHIVED, str(exc))
    return raw_video_row(video_id, obj.uri, st.st_size, outcome)


def ingest_error_row(payload: dict, error: str) -> list[dict]:
    """The raw_videos row of an object that could not even be hashed: keyed by the object, so it stays unique."""
    import hashlib

    return [
        {
            "video_id": "err-" + hashlib.sha256(payload["uri"].encode()).hexdigest(),
            "source_uri": payload["uri"],
            "size_bytes": int(payload.get("size") or 0),
            "status": STATUS_REJECTED,
            "reject_reason": INGEST_ERROR,
            "reject_detail": error[:500],
            "duplicate_uris": [],
        }
    ]


def merge_duplicates(day_rows: pa.Table) -> pa.Table:
    """One row per distinct content in a day: identical bytes landed twice are one video (video_id is the hash).

    The first source (by URI) is kept and the others are listed in ``duplicate_uris``, so nothing is dropped
    silently. Runs once per partition at finalize (it needs every row of the day).
    """
    if day_rows.num_rows == 0:
        return day_rows
    day_rows = day_rows.sort_by([("video_id", "ascending"), ("source_uri", "ascending")])
    ids = day_rows.column("video_id").to_pylist()
    uris = day_rows.column("source_uri").to_pylist()
    keep: list[int] = []
    dups: dict[int, list[str]] = {}
    first: dict[str, int] = {}
    for i, (vid, uri) in enumerate(zip(ids, uris)):
        if vid in first:
            dups.setdefault(first[vid], []).append(uri)
        else:
            first[vid] = i
            keep.append(i)
    out = day_rows.take(keep)
    if dups:
        merged = [sorted(dups.get(i, [])) for i in keep]
        idx = out.column_names.index("duplicate_uris")
        out = out.set_column(
            idx, out.schema.field("duplicate_uris"), pa.array(merged, out.schema.field("duplicate_uris").type)
        )
    return out


def raw_videos_units(objects_by_day: dict[str, list[ObjectInfo]], store: ObjectStore) -> list[dict]:
    """One unit per landing object."""
    units = []
    for day, objs in sorted(objects_by_day.items()):
        for o in objs:
            payload = {
                "key": o.key,
                "uri": o.uri,
                "size": o.size,
                **{k: v for k, v in vars(o).items() if k not in ("key", "uri", "size")},
            }
            # Name, size and listing problem: a re-landed object with other bytes under the same name and size is
            # not detected (stores give no cheap content version here); a changed size or a fixed problem is.
            units.append(
                {
                    "unit_key": unit_key("raw", o.uri, o.size, o.problem),
                    "partition_date": day,
                    "payload": json.dumps(payload, default=str),
                }
            )
    return units


def _ingest_payload(payload: dict, *, store: ObjectStore, probe_config: Any) -> list[dict]:
    obj = ObjectInfo(**{k: v for k, v in payload.items() if k in ObjectInfo.__dataclass_fields__})
    row = ingest_one(obj, store=store, probe_config=probe_config)
    row.setdefault("duplicate_uris", [])
    row["ingested_at"] = dt.datetime.now(dt.UTC)
    return [row]


def _ingest_error(payload: dict, error: str) -> list[dict]:
    rows = ingest_error_row(payload, error)
    rows[0]["ingested_at"] = dt.datetime.now(dt.UTC)
    return rows


def ingest_partitions(
    lake: Any,
    store: ObjectStore,
    objects_by_day: dict[str, list[ObjectInfo]],
    probe_config: Any,
    partitions: Any,
    *,
    progress: StageReporter | None = None,
    decided_by: str = "",
) -> StageRun:
    """raw_videos for the run's partitions: one unit per landing object, one row per distinct content per day; then
    copies of videos landed on an earlier day are marked, in the run's days and in the later days they affect
    (``dedup.exact.reconcile_copies``, one optimistic transaction whose commit records ``decided_by``, the run's
    id); ``run.extra["days_reevaluated"]`` lists the days outside the run whose rows changed."""
    from functools import partial

    from videolake.platform.dedup.exact import reconcile_copies

    version = stage_version("raw_videos-3", _config_dict(probe_config))
    units = raw_videos_units(objects_by_day, store)
    spec = table_spec("raw_videos")
    step = PartitionStep(reduce=merge_duplicates, summarize=spec.figures_of)
    run = run_stage(
        lake,
        "raw_videos",
        version,
        partitions,
        units,
        partial(_ingest_payload, store=store, probe_config=probe_config),
        _ingest_error,
        step,
        progress,
    )
    reconciled = reconcile_copies(lake, partitions, decided_by=decided_by)
    for day in reconciled.changed_days:
        if day in run.per_partition:  # its figures were counted before its copies were marked
            run.per_partition[day] = spec.figures_of(lake.read_partitions("raw_videos", PartitionRange.of([day])))
    run.extra["days_reevaluated"] = reconciled.outside_run
    return run
