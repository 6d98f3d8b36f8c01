"""The gate checks in Dagster runs, through ``dg.materialize``: one evaluation per (gate, partition) attached to the
materialization it judged, blocking of downstream assets, single-run backfill steps that record exactly what the
same days record one at a time, warn severity, thresholds from $VIDEOLAKE_GATES_FILE; and the check status the
Dagster UI reads (the instance's per-partition check state and latest execution records).

The four assets here are stand-ins with the real keys and partitions that write hand-planted rows to a real Delta
lake (tmp dir) through the real LakeResource; the checks are the real ones (videolake.assets.checks) with real GX.
"""

import datetime as dt

import dagster as dg
import pytest

from videolake.assets.checks import GATED_TABLES as ALL_GATED
from videolake.assets.checks import build_all_gate_checks
from videolake.assets.partitions import daily_partitions
from videolake.platform.gates import LENIENT_CAPTION_CONTENT, gate_names
from videolake.platform.lake.schemas import TABLES, clip_id
from videolake.platform.lake.table import PartitionRange, rows_to_table
from videolake.resources import LakeResource

D, E = "2026-01-05", "2026-01-06"
NOW = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)


def partition_rows(
    day: str, *, overlap: bool = False, repetitive_caption: bool = False, junk: int = 0
) -> dict[str, list[dict]]:
    """One partition of all four tables: 2 ok videos x 3 clips + 1 rejected video; 5 of 6 clips pass.

    ``overlap``: the second clip of the first video starts 10 frames before the first one ends.
    ``junk``: that many more rejected (not_a_video) rows, e.g. 3 -> 4 of 6 rejected, above the 0.5 reject rate.
    """
    date = dt.date.fromisoformat(day)
    tag = day[-2:]
    vids = [f"a{tag}", f"b{tag}"]
    raw = [
        dict(
            video_id=v,
            source_uri=f"s3://in/{v}.mp4",
            size_bytes=1000,
            width=64,
            height=48,
            fps=25.0,
            duration_s=4.0,
            num_frames=100,
            status="ok",
            ingested_at=NOW,
            partition_date=date,
        )
        for v in vids
    ] + [
        dict(
            video_id=f"{c}{tag}",
            source_uri=f"s3://in/{c}{tag}.mp4",
            size_bytes=3,
            status="rejected",
            reject_reason="not_a_video" if c != "c" else "undecodable",
            ingested_at=NOW,
            partition_date=date,
        )
        for c in ["c", *"jklmnop"[:junk]]
    ]
    clips = []
    for v in vids:
        cuts = [(0, 50), (40, 70), (70, 100)] if (overlap and v == vids[0]) else [(0, 30), (30, 70), (70, 100)]
        for i, (s, e) in enumerate(cuts):
            clips.append(
                dict(
                    clip_id=clip_id(v, s, e),
                    video_id=v,
                    source_uri=f"s3://in/{v}.mp4",
                    clip_index=i,
                    start_frame=s,
                    end_frame=e,
                    start_s=s / 25,
                    end_s=e / 25,
                    duration_s=(e - s) / 25,
                    detector="luma",
                    detector_params="{}",
                    partition_date=date,
                )
            )
    scores = [
        dict(
            clip_id=c["clip_id"],
            video_id=c["video_id"],
            duration_s=c["duration_s"],
            motion=10.0,
            sharpness=50.0,
            brightness=100.0,
            black_ratio=0.0,
            frozen_ratio=0.0,
            text_area=0.0,
            passed=i != 0,
            reject_reason=None if i != 0 else "black",
            partition_date=date,
        )
        for i, c in enumerate(clips)
    ]
    words = ["red car on a road", "two kids play ball", "a chef cuts onions", "waves on the beach", "a cyclist in town"]
    captions = [
        dict(
            clip_id=s["clip_id"],
            caption_track="default",
            video_id=s["video_id"],
            source_uri="s3://in/x.mp4",
            status="ok",
            caption=("zq zq zq zq zq zq" if repetitive_caption and k == 0 else f"A video of {words[k]}."),
            model="tiny-qwen",
            prompt_version="v1-describe",
            captioned_at=NOW,
            partition_date=date,
        )
        for k, s in enumerate(x for x in scores if x["passed"])
    ]
    return {"raw_videos": raw, "scene_clips": clips, "filtered_clips": scores, "clip_captions": captions}


# The tables with stand-in assets: the four whose gates judge rows alone. training_shards' gates read the shards
# themselves, so they are tested over real shards (tests/assets/test_training_shards.py).
GATED_TABLES = ALL_GATED[:4]


def stand_in(table: str, data: dict[str, dict[str, list[dict]]], deps: list[str]) -> dg.AssetsDefinition:
    @dg.asset(
        name=table,
        partitions_def=daily_partitions(),
        deps=deps,
        backfill_policy=dg.BackfillPolicy.single_run(),
        group_name="videolake",
    )
    def _asset(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
        keys = list(context.partition_keys)
        rows = [r for k in keys for r in data[k][table]]
        res = lake.get_lake().write_partitions(table, rows_to_table(rows, TABLES[table]), PartitionRange.of(keys))
        return dg.MaterializeResult(metadata={"rows": res.rows})

    return _asset


def pipeline(data, overrides=None) -> list:
    """The four stand-in assets and the real gate checks of the four tables."""
    assets = [stand_in(t, data, [GATED_TABLES[i - 1]] if i else []) for i, t in enumerate(GATED_TABLES)]
    return [*assets, *build_all_gate_checks(GATED_TABLES, overrides=overrides)]


def run(tmp_path, instance, data, *, partition: str | None = None, rng: tuple[str, str] | None = None, overrides=None):
    """materialize() the whole pipeline for one partition, or for a range in ONE run (a single-run backfill step)."""
    tags = {"dagster/asset_partition_range_start": rng[0], "dagster/asset_partition_range_end": rng[1]} if rng else None
    return dg.materialize(
        pipeline(data, overrides),
        partition_key=partition,
        tags=tags,
        instance=instance,
        raise_on_error=False,
        resources={"lake": LakeResource(root=str(tmp_path / "lake"))},
    )


def materialized(result) -> list[str]:
    return sorted({e.asset_key.path[-1] for e in result.get_asset_materialization_events()})


def evaluations(result) -> dict[tuple[str, str, str | None], dg.AssetCheckEvaluation]:
    evals = result.get_asset_check_evaluations()
    keyed = {(e.asset_key.path[-1], e.check_name, e.partition): e for e in evals}
    assert len(keyed) == len(evals), "one evaluation per (check, partition)"
    return keyed


def check_status(instance, table: str, gate: str) -> dict[str, list[str]]:
    """{status: sorted partition keys} of one check: the state the UI's Partitions tab, check list and asset graph
    node show (GraphQL AssetCheck.partitionStatuses is built from it)."""
    key = dg.AssetCheckKey(dg.AssetKey(table), gate)
    state = instance.event_log_storage.get_asset_check_state([(key, daily_partitions())])[key]
    out = {}
    for status, subset in state.subsets.items():
        keys = sorted(subset.value.get_partition_keys())
        if keys:
            out[status.value] = keys
    return out


def recorded(result) -> set:
    """Everything a user reads of each evaluation, without run-specific ids."""
    return {
        (
            t,
            g,
            p,
            e.passed,
            e.severity.value,
            e.description,
            tuple(sorted((k, repr(v.value)) for k, v in e.metadata.items())),
        )
        for (t, g, p), e in evaluations(result).items()
    }


@pytest.fixture(autouse=True)
def no_gates_file(monkeypatch):
    monkeypatch.delenv("VIDEOLAKE_GATES_FILE", raising=False)  # defaults unless a test sets one


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def test_good_partition_passes_every_gate_with_metadata_on_its_materialization(tmp_path, instance):
    result = run(tmp_path, instance, {D: partition_rows(D)}, partition=D)
    assert result.success
    assert materialized(result) == sorted(GATED_TABLES)
    evals = evaluations(result)
    assert set(evals) == {(t, g, D) for t in GATED_TABLES for g in gate_names(t)}  # 24 gates, each for D
    assert [k for k, e in evals.items() if not e.passed] == []
    mats = {e.asset_key.path[-1]: e for e in result.get_asset_materialization_events()}
    for (table, _gate, _), e in evals.items():
        target = e.target_materialization_data  # the materialization of D the gate judged
        assert target is not None and target.run_id == result.run_id, (table, _gate)
        record = instance.fetch_materializations(dg.AssetRecordsFilter(dg.AssetKey(table), asset_partitions=[D]), 1)
        assert target.storage_id == record.records[0].storage_id and mats[table].partition == D
    overlap = evals[("scene_clips", "clips_ordered_non_overlapping", D)]
    assert overlap.metadata["overlapping"].value == 0 and overlap.metadata["failing_ids"].value == "none"
    rate = evals[("filtered_clips", "pass_rate", D)]
    assert rate.metadata["pass_rate"].value == 0.833 and rate.metadata["rows"].value == 6  # rounded: 5/6
    assert rate.metadata["thresholds"].value == "min_pass_rate: 0.05, max_pass_rate: 0.999, min_rows_for_rate: 10"
    assert rate.metadata["severity"].value == "error"
    # What the UI shows for D: every gate passed; nothing else recorded.
    for t in GATED_TABLES:
        for g in gate_names(t):
            assert check_status(instance, t, g) == {"SUCCEEDED": [D]}, (t, g)


def test_overlapping_clips_fail_the_check_skip_downstream_and_fail_the_run(tmp_path, instance):
    result = run(tmp_path, instance, {E: partition_rows(E, overlap=True)}, partition=E)
    assert result.success is False
    assert materialized(result) == ["raw_videos", "scene_clips"]  # filtered_clips, clip_captions never ran
    failed = evaluations(result)[("scene_clips", "clips_ordered_non_overlapping", E)]
    assert failed.passed is False and failed.severity == dg.AssetCheckSeverity.ERROR and failed.blocking
    assert failed.metadata["overlapping"].value == 1 and failed.metadata["out_of_order"].value == 0
    assert failed.metadata["failing_ids"].value == clip_id("a06", 40, 70)
    assert "1 clip(s) starting before an earlier clip of the video ends" in failed.description
    assert not any(k[0] in ("filtered_clips", "clip_captions") for k in evaluations(result))
    rng = PartitionRange.of([E])
    lake = LakeResource(root=str(tmp_path / "lake")).get_lake()
    assert lake.read_partitions("filtered_clips", rng).num_rows == 0
    assert lake.read_partitions("clip_captions", rng).num_rows == 0
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert [e.step_key for e in failures] == ["scene_clips_gates"]
    logs = [e.message for e in instance.all_logs(result.run_id) if e.step_key == "scene_clips_gates"]
    assert any(
        "This run stops here: filtered_clips, clip_captions, training_shards and their gates are not run" in m
        for m in logs
    )


def test_check_reads_only_its_own_partition(tmp_path, instance):
    data = {D: partition_rows(D), E: partition_rows(E, overlap=True)}
    assert run(tmp_path, instance, data, partition=E).success is False  # E's bad rows are now in the Delta tables
    result = run(tmp_path, instance, data, partition=D)
    assert result.success
    evals = evaluations(result)
    assert {k[2] for k in evals} == {D}
    assert evals[("scene_clips", "clip_id_unique", D)].metadata["duplicated"].value == 0
    assert evals[("filtered_clips", "scored_exactly_once", D)].metadata["scene_clips"].value == 6  # D's 6, not 12


def test_single_run_backfill_records_each_partition_like_one_day_runs(tmp_path):
    """A blocking raw_videos gate fails on E only. Per gate and per day, the range run records exactly what two
    one-day runs record, and the check state the UI reads shows raw_videos failed on E and passed on D. The
    downstream gates never ran: Dagster resolves a gate planned in a failed run as EXECUTION_FAILED (there is no
    "skipped" for a failed run). Unlike one-day runs, the failure on E also stops D's downstream assets: a
    single-run step materializes its whole range or nothing."""
    data = {D: partition_rows(D), E: partition_rows(E, junk=3)}  # rejected: D 1 of 3 (below 5 rows), E 4 of 6
    with dg.instance_for_test() as ranged, dg.instance_for_test() as daily:
        result = run(tmp_path / "r", ranged, data, rng=(D, E))
        assert result.success is False
        assert materialized(result) == ["raw_videos"]  # the failed gate blocked scene_clips for the whole range
        evals = evaluations(result)
        assert set(evals) == {("raw_videos", g, p) for g in gate_names("raw_videos") for p in (D, E)}  # no summary
        assert [k for k, e in evals.items() if not e.passed] == [("raw_videos", "reject_rate", E)]
        failed = evals[("raw_videos", "reject_rate", E)]
        assert (failed.metadata["reject_rate"].value, failed.metadata["rows"].value) == (0.667, 6)
        assert failed.metadata["rejected"].value == 4
        assert failed.metadata["thresholds"].value == "max_reject_rate: 0.5, min_rows_for_rate: 5"
        assert (
            failed.description
            == "raw_videos.reject_rate failed: reject rate 0.6667 > max 0.5 (e.g. c06, j06, k06, l06)"
        )
        assert failed.metadata["failing_ids"].value == "c06, j06, k06, l06"  # the rejected videos
        assert evals[("raw_videos", "reject_rate", D)].metadata["reject_rate"].value == 0.333

        one_day = {p: run(tmp_path / "d", daily, data, partition=p) for p in (D, E)}
        assert {p: r.success for p, r in one_day.items()} == {D: True, E: False}
        assert recorded(result) == {x for r in one_day.values() for x in recorded(r) if x[0] == "raw_videos"}

        for inst in (ranged, daily):
            assert check_status(inst, "raw_videos", "reject_rate") == {"SUCCEEDED": [D], "FAILED": [E]}
            assert check_status(inst, "raw_videos", "video_id_unique") == {"SUCCEEDED": [D, E]}
        for g in gate_names("scene_clips"):
            assert check_status(ranged, "scene_clips", g) == {"EXECUTION_FAILED": [D, E]}, g
            assert check_status(daily, "scene_clips", g) == {"SUCCEEDED": [D], "EXECUTION_FAILED": [E]}, g

        # The check's latest execution (its detail pane) is the newest record: E's, the failed one, on E's
        # materialization from this run.
        key = dg.AssetCheckKey(dg.AssetKey("raw_videos"), "reject_rate")
        latest = ranged.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
        assert (latest.partition, latest.status.value, latest.evaluation.passed) == (E, "FAILED", False)
        assert latest.evaluation.target_materialization_data.run_id == result.run_id


def test_warn_severity_reports_without_blocking(tmp_path, instance):
    data = {D: partition_rows(D, repetitive_caption=True)}
    result = run(tmp_path, instance, data, partition=D, overrides=LENIENT_CAPTION_CONTENT)
    assert result.success
    assert materialized(result) == sorted(GATED_TABLES)
    rep = evaluations(result)[("clip_captions", "no_repetition", D)]
    assert (rep.passed, rep.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert rep.metadata["repetitive"].value == 1 and rep.metadata["severity"].value == "warn"
    assert check_status(instance, "clip_captions", "no_repetition") == {"FAILED": [D]}


def test_thresholds_come_from_the_gates_file_at_run_time(tmp_path, instance, monkeypatch):
    gates_file = tmp_path / "gates.yaml"
    gates_file.write_text("scene_clips:\n  gates:\n    clips_ordered_non_overlapping: {severity: warn}\n")
    monkeypatch.setenv("VIDEOLAKE_GATES_FILE", str(gates_file))
    result = run(tmp_path, instance, {E: partition_rows(E, overlap=True)}, partition=E)
    assert result.success  # the same overlap now only warns
    assert materialized(result) == sorted(GATED_TABLES)
    ev = evaluations(result)[("scene_clips", "clips_ordered_non_overlapping", E)]
    assert (ev.passed, ev.severity) == (False, dg.AssetCheckSeverity.WARN)
