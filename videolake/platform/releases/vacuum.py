"""``vacuum_lake``: Delta's vacuum of every table, except the files the table versions pinned by a release use.

Why not ``DeltaTable.vacuum(dry_run=False)``: it deletes every file the latest version no longer references once
its retention has passed, including the files of a version a release pinned. A release names its table versions
so its rows can be read again (time travel) and traced from a sample back to its video: vacuuming those files
would leave the release's lineage pointing at nothing. So the candidates come from delta-rs (``vacuum(dry_run=
True)``: the files removed longer than ``retention_hours`` ago, and with ``full`` the files the log never named),
the files of every pinned version are subtracted (``DeltaTable(uri, version=v).file_uris()``), and the rest is
deleted here through ``LakeFiles`` (local or S3, the lake's own storage options). A pinned version the Delta log
no longer has (log retention) is protected by the release's ``files.json`` instead; without either the vacuum
refuses to run, before deleting anything (a file is never deleted on a guess).

A new release pins the tables' latest versions, whose files are all live, and a create in progress registers
those versions in a pending pin (``manifest.pending_pins``) before its final check, so a vacuum running at the same
time never deletes what the new release needs: ``pinned_versions`` reads the pending pins (first: a create removes
its pin only after its manifest exists) with the manifests; a pin older than ``manifest.PENDING_EXPIRY`` without a
manifest is a crashed create's and is ignored. The create writes its ``files.json`` before its pin, so the
fallback above holds for a pending name too. (delta-rs 1.x also has ``vacuum(keep_versions=...)``; the plan is
computed here so a dry run reports exactly what is kept for which release, and the rule does not depend on the
delta-rs version.)
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from videolake.platform.lake.schemas import DERIVED_TABLES, INDEX_TABLES, TABLE_NAMES
from videolake.platform.objectstore.base import ObjectStore
from videolake.platform.releases.create import relative_path
from videolake.platform.releases.manifest import (
    FILES,
    RELEASE_TABLES,
    ReleaseError,
    manifests,
    pending_pins,
    release_key,
)

if TYPE_CHECKING:
    from videolake.platform.lake.table import Lake

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableVacuum:
    table: str
    version: int  # the table's latest version
    pinned: dict[int, tuple[str, ...]]  # version -> the releases that pin it
    candidates: tuple[str, ...]  # what delta-rs's vacuum would delete (paths relative to the table)
    kept: tuple[str, ...]  # candidates a pinned version references: kept
    deleted: tuple[str, ...]  # candidates deleted (a dry run: that would be deleted)


@dataclass(frozen=True)
class VacuumReport:
    retention_hours: int
    dry_run: bool
    tables: tuple[TableVacuum, ...] = field(default_factory=tuple)

    @property
    def deleted(self) -> int:
        return sum(len(t.deleted) for t in self.tables)

    @property
    def kept(self) -> int:
        return sum(len(t.kept) for t in self.tables)


def _same_uri(a: str, b: str) -> bool:
    def norm(u: str) -> str:
        return u.removeprefix("file://").rstrip("/")

    return norm(a) == norm(b)


def pinned_versions(lake: Lake, store: ObjectStore) -> dict[str, dict[int, list[str]]]:
    """table -> {version: [release names]} over every release of this lake and every create in progress (its
    pending pin, under the name it is creating); releases of tables at other uris are not this lake's and are
    skipped."""
    pins: dict[str, dict[int, list[str]]] = {}
    sources = [(p.name, p.tables) for p in pending_pins(store)]  # before the manifests: see referenced_shard_uris
    sources += [(m["name"], m.get("tables", {})) for m in manifests(store)]
    for name, tables in sources:
        for table, ref in tables.items():
            if ref.get("version") is None:
                continue
            if not _same_uri(ref.get("uri", ""), lake.table_uri(table)):
                log.info("release %s pins %s at %s, not this lake's table: skipped", name, table, ref.get("uri"))
                continue
            names = pins.setdefault(table, {}).setdefault(int(ref["version"]), [])
            if name not in names:
                names.append(name)
    return pins


def _version_files(lake: Lake, store: ObjectStore, table: str, version: int, releases: list[str]) -> set[str]:
    """The files a pinned version references: from the Delta log, else from the releases' files.json."""
    from deltalake import DeltaTable

    uri = lake.table_uri(table)
    try:
        dtbl = DeltaTable(uri, version=version, storage_options=lake.storage_options or None)
        return {relative_path(uri, u) for u in dtbl.file_uris()}
    except Exception as exc:  # noqa: BLE001 (the log no longer has the version: fall back to the release's list)
        reason = f"{type(exc).__name__}: {exc}"
    files: set[str] = set()
    for name in releases:
        key = release_key(name, FILES)
        if not store.exists(key):
            raise ReleaseError(
                f"cannot vacuum {table}: version {version}, pinned by release {name}, is not in the "
                f"Delta log ({reason}) and the release has no {FILES}; nothing was deleted"
            )
        listed = json.loads(store.get_bytes(key).decode("utf-8")).get(table, {})
        files |= {unquote(f) for f in listed.get("files", [])}
    log.warning(
        "%s version %d is not in the Delta log (%s): keeping the files its releases list", table, version, reason
    )
    return files


def plan_table(
    lake: Lake,
    store: ObjectStore,
    table: str,
    pins: dict[int, list[str]],
    retention_hours: int,
    *,
    enforce_retention_duration: bool = True,
    full: bool = False,
) -> TableVacuum:
    """What a vacuum of ``table`` deletes and keeps (nothing is deleted here)."""
    from deltalake import DeltaTable

    dtbl = DeltaTable(lake.table_uri(table), storage_options=lake.storage_options or None)
    try:
        listed = dtbl.vacuum(
            retention_hours=retention_hours,
            dry_run=True,
            enforce_retention_duration=enforce_retention_duration,
            full=full,
        )
    except Exception as exc:
        if "retention" not in str(exc).lower():
            raise
        raise ReleaseError(
            f"{table}: {exc}. A shorter retention needs enforce_retention_duration=False "
            "(`videolake vacuum --allow-short-retention`); nothing was deleted"
        ) from exc
    # delta-rs lists a removed file until a vacuum commit records it gone; this one deletes files without such a
    # commit, so it lists the table's files once and keeps the candidates that still exist.
    files = lake.files()
    base = files.path(table).rstrip("/") + "/"
    present = {e.path[len(base) :] for e in files.list(files.path(table)) if e.path.startswith(base)}
    candidates = sorted(c for c in (unquote(c) for c in listed) if c in present)
    protected: set[str] = set()
    for version, names in sorted(pins.items()):
        protected |= _version_files(lake, store, table, version, names)
    kept = tuple(c for c in candidates if c in protected)
    gone = tuple(c for c in candidates if c not in protected)
    return TableVacuum(
        table=table,
        version=dtbl.version(),
        pinned={v: tuple(n) for v, n in sorted(pins.items())},
        candidates=tuple(candidates),
        kept=kept,
        deleted=gone,
    )


def vacuum_lake(
    lake: Lake,
    store: ObjectStore,
    retention_hours: int = 168,
    dry_run: bool = False,
    *,
    enforce_retention_duration: bool = True,
    full: bool = False,
) -> VacuumReport:
    """Vacuum every table of ``lake`` but keep the files of the versions any release in ``store`` pins.

    ``enforce_retention_duration``: refuse a retention below the table's ``delta.deletedFileRetentionDuration``
    (7 days by default), as delta-rs does; False allows it (files an old reader may still read go). ``full``: also
    delete files the log never named (orphans of attempts that never committed) older than the retention.
    Every table is planned before the first file is deleted, so a refusal deletes nothing."""
    pins = pinned_versions(lake, store)
    tables = [
        t for t in dict.fromkeys((*TABLE_NAMES, *RELEASE_TABLES, *INDEX_TABLES, *DERIVED_TABLES)) if lake.exists(t)
    ]
    plans = [
        plan_table(
            lake,
            store,
            t,
            pins.get(t, {}),
            int(retention_hours),
            enforce_retention_duration=enforce_retention_duration,
            full=full,
        )
        for t in tables
    ]
    if not dry_run:
        files = lake.files()
        for plan in plans:
            for rel in plan.deleted:
                files.delete(files.path(plan.table, rel))
    for plan in plans:
        log.info(
            "vacuum %s: %d candidate(s), %d kept for releases, %d %s",
            plan.table,
            len(plan.candidates),
            len(plan.kept),
            len(plan.deleted),
            "to delete (dry run)" if dry_run else "deleted",
        )
    return VacuumReport(retention_hours=int(retention_hours), dry_run=dry_run, tables=tuple(plans))


def report_lines(report: VacuumReport) -> list[str]:
    """The report as text, one line per table and per file."""
    verb = "to delete (dry run)" if report.dry_run else "deleted"
    out: list[str] = []
    for t in report.tables:
        pins = ", ".join(f"v{v} ({', '.join(n)})" for v, n in t.pinned.items()) or "none"
        out.append(
            f"{t.table} (version {t.version}; pinned: {pins}): {len(t.candidates)} candidate(s), "
            f"{len(t.kept)} kept for releases, {len(t.deleted)} {verb}"
        )
        out += [f"  keep    {p}" for p in t.kept] + [f"  delete  {p}" for p in t.deleted]
    out.append(
        f"{report.deleted} file(s) {verb}, {report.kept} kept for releases (retention {report.retention_hours} h)"
    )
    return out


def as_dict(report: VacuumReport) -> dict[str, Any]:
    """JSON-able form of the report."""
    return {
        "retention_hours": report.retention_hours,
        "dry_run": report.dry_run,
        "tables": [
            {
                "table": t.table,
                "version": t.version,
                "pinned": {str(v): list(n) for v, n in t.pinned.items()},
                "candidates": list(t.candidates),
                "kept": list(t.kept),
                "deleted": list(t.deleted),
            }
            for t in report.tables
        ],
    }
