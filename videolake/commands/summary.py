"""The human summary printed after a pipeline run (demo): counts per table, rejections by reason, gates."""

from __future__ import annotations

from collections import Counter


def print_summary(defs, date: str, result, elapsed: float) -> None:
    from videolake.platform.lake import PartitionRange

    lake = defs.resources["lake"].get_lake()
    rng = PartitionRange.of([date])
    raw = lake.read_partitions("raw_videos", rng).to_pylist()
    clips = lake.read_partitions("scene_clips", rng).to_pylist()
    filt = lake.read_partitions("filtered_clips", rng).to_pylist()
    caps = lake.read_partitions("clip_captions", rng).to_pylist() if "clip_captions" in _tables(defs) else []

    ok = [r for r in raw if r["status"] == "ok"]
    print(f"  videos:   {len(raw)} ({len(ok)} ok, {len(raw) - len(ok)} rejected)")
    for reason, n in sorted(Counter(r["reject_reason"].split(":")[0] for r in raw if r["reject_reason"]).items()):
        print(f"            rejected {reason}: {n}")
    print(f"  clips:    {len(clips)}")
    passed = [r for r in filt if r["passed"]]
    print(f"  filtered: {len(passed)} passed, {len(filt) - len(passed)} rejected")
    reasons = Counter(p for r in filt if r["reject_reason"] for p in r["reject_reason"].split(";"))
    for reason, n in sorted(reasons.items()):
        print(f"            rejected {reason}: {n}")
    if caps:
        okc = [c for c in caps if c["status"] == "ok"]
        print(f"  captions: {len(okc)} ok, {len(caps) - len(okc)} failed (model {caps[0]['model']})")
        if okc:
            print(f"            e.g. {okc[0]['clip_id'][:20]}…: {okc[0]['caption'][:100]!r}")
    evals = [e for e in result.get_asset_check_evaluations()] if hasattr(result, "get_asset_check_evaluations") else []
    if evals:
        print("  gates:")
        for e in sorted(evals, key=lambda e: (e.asset_key.to_user_string(), e.check_name)):
            print(f"            {'PASS' if e.passed else 'FAIL'}  {e.asset_key.to_user_string()}.{e.check_name}")
    print(f"  pipeline time: {elapsed:.1f}s")


def _tables(defs) -> set[str]:
    return {k.to_user_string() for k in defs.resolve_all_asset_keys()}
