"""Gates of training_shards, checked against clip_captions of the same partition and against the shards themselves.

- one_sample_per_eligible_clip: the rows are exactly the ok captions (clip_captions has one row per passed clip);
- shards_match_table: every shard the rows name exists, its sha256 is the rows' shard_sha256, and its sample keys
  are exactly the rows' clip ids (in key order) and as many as shard_samples;
- mp4_frame_counts: every mp4 of the checked shards decodes to the row's num_frames frames;
- failure_rate: clips that did not encode.

The shard checks need the bytes, which a table does not hold: ``evidence`` reads them (``shards.verify``) before the
gates are evaluated; ``check_partition`` calls it with the lake's storage options.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from videolake.platform.gates.config import TrainingShardsGates
from videolake.platform.gates.core import Frame, Gate
from videolake.platform.gates.relations import id_reconciliation, no, to_pandas
from videolake.platform.gates.shared import exactly_once_gate, rate_gate

SHARDS = "_shards"  # evidence frames (not tables of the lake)
SAMPLES = "_samples"


def evidence(tbl: pa.Table, cfg: TrainingShardsGates, storage_options: dict[str, str] | None) -> dict[str, Any]:
    """Per shard: exists, sha256 and keys as found; per sample of the decoded shards: frames as decoded."""
    import pandas as pd

    from videolake.platform.shards.verify import check_shard

    rows = [
        r
        for r in tbl.select(["clip_id", "shard_uri", "shard_sha256", "shard_samples", "num_frames"]).to_pylist()
        if r["shard_uri"]
    ]
    by_shard: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: r["clip_id"]):
        by_shard.setdefault(r["shard_uri"], []).append(r)
    order = sorted(by_shard, key=lambda u: (by_shard[u][0]["shard_sha256"] or "", u))
    decoded = set(order if cfg.decode_shards <= 0 else order[: cfg.decode_shards])
    shard_rows, sample_rows = [], []
    for uri in order:
        members = by_shard[uri]
        check, frames = check_shard(uri, storage_options, decode=uri in decoded)
        expected_keys = tuple(m["clip_id"] for m in members)
        shard_rows.append(
            {
                "shard_uri": uri,
                "missing": not check.exists,
                "sha256_mismatch": check.exists and any(m["shard_sha256"] != check.sha256 for m in members),
                "keys_mismatch": check.exists and check.keys != expected_keys,
                "count_mismatch": check.exists and any(m["shard_samples"] != len(check.keys) for m in members),
            }
        )
        if uri in decoded:
            for m in members:
                sample_rows.append(
                    {"clip_id": m["clip_id"], "frames_mismatch": frames.get(m["clip_id"], -1) != m["num_frames"]}
                )
    cols = ["missing", "sha256_mismatch", "keys_mismatch", "count_mismatch"]
    shards = pd.DataFrame(shard_rows, columns=["shard_uri", *cols]).astype({c: bool for c in cols})
    samples = pd.DataFrame(sample_rows, columns=["clip_id", "frames_mismatch"]).astype({"frames_mismatch": bool})
    return {SHARDS: shards, SAMPLES: samples, "decoded_shards": len(decoded), "shards": len(order)}


def build(
    tbl: pa.Table, context: dict[str, pa.Table], cfg: TrainingShardsGates, found: dict[str, Any] | None = None
) -> tuple[list[Gate], dict[str, Frame]]:
    if found is None:
        found = evidence(tbl, cfg, None)
    df = to_pandas(tbl, ["clip_id", "status", "shard_uri", "source_uri"])
    df["is_failed"] = (df["status"] == "failed").astype("float64")
    captions = context["clip_captions"]
    # the samples carry one caption track's captions (ShardConfig.caption_track, on every row): that track's ok
    # captions are the eligible clips (rows written before tracks existed: the default track)
    tracks = {t or "default" for t in tbl.column("caption_track").to_pylist()} or {"default"}
    eligible = [
        c
        for c, s, t in zip(
            captions.column("clip_id").to_pylist(),
            captions.column("status").to_pylist(),
            captions.column("caption_track").to_pylist(),
        )
        if s == "ok" and t in tracks
    ]
    ids = id_reconciliation(eligible, df["clip_id"].tolist(), "clip_id")
    frames = {
        "rows": Frame(df, "clip_id"),
        "ids": Frame(ids, "clip_id"),
        "shards": Frame(found[SHARDS], "shard_uri"),
        "samples": Frame(found[SAMPLES], "clip_id"),
    }
    gates = [
        exactly_once_gate(
            "one_sample_per_eligible_clip",
            "every ok caption of clip_captions has exactly one row, and no other clip",
            "clip_id",
            missing="{n} captioned clip(s) without a row",
            extra="{n} row(s) for clips without an ok caption",
            duplicated="{n} clip(s) with more than one row",
            extra_measured={"eligible_clips": len(set(eligible)), "rows": len(df)},
        ),
        Gate(
            "shards_match_table",
            "every shard exists with the rows' sha256, keys and sample count",
            (
                no(
                    "missing",
                    label="missing_shards",
                    explain="{n} shard(s) named by the table do not exist",
                    frame="shards",
                ),
                no(
                    "sha256_mismatch",
                    label="sha256_mismatch",
                    explain="{n} shard(s) whose sha256 is not the table's",
                    frame="shards",
                ),
                no(
                    "keys_mismatch",
                    label="keys_mismatch",
                    explain="{n} shard(s) whose sample keys are not the table's clip ids",
                    frame="shards",
                ),
                no(
                    "count_mismatch",
                    label="count_mismatch",
                    explain="{n} shard(s) whose sample count is not shard_samples",
                    frame="shards",
                ),
            ),
            extra_measured={"shards": found["shards"]},
        ),
        Gate(
            "mp4_frame_counts",
            "every mp4 of the decoded shards has num_frames frames",
            (
                no(
                    "frames_mismatch",
                    label="frame_count_mismatch",
                    explain="{n} mp4(s) that do not decode to num_frames frames",
                    frame="samples",
                ),
            ),
            thresholds={"decode_shards": cfg.decode_shards},
            extra_measured={"decoded_shards": found["decoded_shards"], "decoded_samples": len(found[SAMPLES])},
        ),
        rate_gate(
            "failure_rate",
            "is_failed",
            df,
            max_value=cfg.max_failure_rate,
            min_rows=cfg.min_rows_for_rate,
            counted="failed",
            id_column="source_uri",  # the objects to leave out of the day (troubleshooting.md)
        ),
    ]
    return gates, frames
