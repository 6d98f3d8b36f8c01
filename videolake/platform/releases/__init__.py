"""Dataset releases: named, immutable sets of training shards cut from the gated days of the lake.

    from videolake.platform.releases import create_release, verify_release, vacuum_lake
    release = create_release(lake, store, "v1", "2026-01-01", "2026-01-31", buckets=None)
    assert verify_release(store, "v1").ok

- ``manifest``: where a release lives (``releases/<NAME>/``), its format, names, listing, ``referenced_shard_uris``;
- ``create``: ``create_release`` (the gated days, the pinned table versions, the shard list, the manifest last);
- ``card``: the dataset card (README.md) and its figures; ``plots``: its PNGs (matplotlib Agg, PIL);
- ``verify``: every shard read back against the manifest (sha256, bytes, samples) and every pinned table version
  read again;
- ``vacuum``: Delta's vacuum, minus the files of the table versions any release pins;
- ``shardio``: reading a shard by its uri (ranged, streamed).

No dagster here (videolake/assets/releases.py is the Dagster side); matplotlib, PIL and PyAV load on first use.
User docs: docs/releases.md.
"""

from videolake.platform.releases.create import GateVerdicts, Release, create_release, gate_verdicts_from_lake
from videolake.platform.releases.manifest import (
    FORMAT,
    RELEASE_TABLES,
    ReleaseError,
    ReleaseExistsError,
    ReleaseNotFoundError,
    ReleaseSummary,
    list_releases,
    read_manifest,
    referenced_shard_uris,
    release_key,
    release_names,
    validate_name,
)
from videolake.platform.releases.vacuum import TableVacuum, VacuumReport, pinned_versions, vacuum_lake
from videolake.platform.releases.verify import ShardProblem, VerifyResult, verify_release

__all__ = [
    "FORMAT",
    "RELEASE_TABLES",
    "GateVerdicts",
    "Release",
    "ReleaseError",
    "ReleaseExistsError",
    "ReleaseNotFoundError",
    "ReleaseSummary",
    "ShardProblem",
    "TableVacuum",
    "VacuumReport",
    "VerifyResult",
    "create_release",
    "gate_verdicts_from_lake",
    "list_releases",
    "pinned_versions",
    "read_manifest",
    "referenced_shard_uris",
    "release_key",
    "release_names",
    "validate_name",
    "vacuum_lake",
    "verify_release",
]
