"""The gate checks in Dagster runs: per-partition results with metadata, blocking of downstream assets, one
partition per check, single-run backfill steps, warn severity, thresholds from $VIDEOLAKE_GATES_FILE.

The four assets here are stand-ins with the real keys and partitions that write hand-planted rows to a real Delta
lake (tmp dir) through the real LakeResource; the checks are the real ones (videolake.assets.checks) with real GX.
"""

import datetime as dt

import dagster as dg
import pytest

from videolake.assets.checks import GATED_TABLES, build_all_gate_checks
from videolake.assets.partitions import daily_partitions
from videolake.platform.gates import LENIENT_CAPTION_CONTENT, gate_names
from videolake.platform.lake import PartitionRange, rows_to_table
from videolake.platform.schemas import TABLES, clip_id
from videolake.resources import LakeResource

D, E = "2026-01-05", "2026-01-06"
NOW = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)


def partition_rows(day: str, *, overlap: bool = False, repetitive_caption: bool = False) -> dict[str, list[dict]]:
    """One partition of all four tables: 2 ok videos x 3 clips + 1 rejected video; 5 of 6 clips pass.

    ``overlap``: the second clip of the first video starts 10 frames before the first one ends.
    """
    date = dt.date.fromisoformat(day)
    tag = day[-2:]
    vids = [f"a{tag}", f"b{tag}"]
    raw = [
        dict(video_id=v, source_uri=f"s3://in/{v}.mp4", size_bytes=1000, width=64, height=48, fps=25.0, duration_s=4.0,
             num_frames=100, status="ok", ingested_at=NOW, partition_date=date)
        for v in vids
    ] + [dict(video_id=f"c{tag}", source_uri="s3://in/c.mp4", size_bytes=3, status="rejected", reject_reason="undecodable",
              ingested_at=NOW, partition_date=date)]
    clips = []
    for v in vids:
        cuts = [(0, 50), (40, 70), (70, 100)] if (overlap and v == vids[0]) else [(0, 30), (30, 70), (70, 100)]
        for i, (s, e) in enumerate(cuts):
            clips.append(dict(clip_id=clip_id(v, s, e), video_id=v, source_uri=f"s3://in/{v}.mp4", clip_index=i, start_frame=s,
                              end_frame=e, start_s=s / 25, end_s=e / 25, duration_s=(e - s) / 25, detector="luma",
                              detector_params="{}", partition_date=date))
    scores = [
        dict(clip_id=c["clip_id"], video_id=c["video_id"], duration_s=c["duration_s"], motion=10.0, sharpness=50.0,
             brightness=100.0, black_ratio=0.0, frozen_ratio=0.0, text_area=0.0, passed=i != 0,
             reject_reason=None if i != 0 else "black", partition_date=date)
        for i, c in enumerate(clips)
    ]
    words = ["red car on a road", "two kids play ball", "a chef cuts onions", "waves on the beach", "a cyclist in town"]
    captions = [
        dict(clip_id=s["clip_id"], video_id=s["video_id"], source_uri="s3://in/x.mp4", status="ok",
             caption=("zq zq zq zq zq zq" if repetitive_caption and k == 0 else f"A video of {words[k]}."),
             model="tiny-qwen", prompt_version="v1-describe", captioned_at=NOW, partition_date=date)
        for k, s in enumerate(x for x in scores if x["passed"])
    ]
    return {"raw_videos": raw, "scene_clips": clips, "filtered_clips": scores, "clip_captions": captions}


def stand_in(table: str, data: dict[str, dict[str, list[dict]]], deps: list[str]) -> dg.AssetsDefinition:
    @dg.asset(name=table, partitions_def=daily_partitions, deps=deps, backfill_policy=dg.BackfillPolicy.single_run(), group_name="videolake")
    def _asset(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
        keys = list(context.partition_keys)
        rows = [r for k in keys for r in data[k][table]]
        res = lake.get_lake().write_partitions(table, rows_to_table(rows, TABLES[table]), PartitionRange.of(keys))
        return dg.MaterializeResult(metadata={"rows": res.rows})

    return _asset


def make_defs(tmp_path, data, overrides=None) -> tuple[dg.JobDefinition, LakeResource]:
    assets = [stand_in(t, data, [GATED_TABLES[i - 1]] if i else []) for i, t in enumerate(GATED_TABLES)]
    lake = LakeResource(root=str(tmp_path / "lake"))
    job = dg.define_asset_job("pipeline", selection=dg.AssetSelection.all(), partitions_def=daily_partitions)
    defs = dg.Definitions(assets=assets, asset_checks=build_all_gate_checks(overrides=overrides), jobs=[job], resources={"lake": lake})
    return defs.resolve_job_def("pipeline"), lake


def run(job, instance, partition: str | None = None, rng: tuple[str, str] | None = None):
    if rng:
        tags = {"dagster/asset_partition_range_start": rng[0], "dagster/asset_partition_range_end": rng[1]}
        return job.execute_in_process(instance=instance, raise_on_error=False, tags=tags)
    return job.execute_in_process(partition_key=partition, instance=instance, raise_on_error=False)


def materialized(result) -> list[str]:
    return sorted({e.asset_key.path[-1] for e in result.get_asset_materialization_events()})


def evaluations(result) -> dict[tuple[str, str, str | None], dg.AssetCheckEvaluation]:
    return {(e.asset_key.path[-1], e.check_name, e.partition): e for e in result.get_asset_check_evaluations()}


@pytest.fixture(autouse=True)
def no_gates_file(monkeypatch):
    monkeypatch.delenv("VIDEOLAKE_GATES_FILE", raising=False)  # defaults unless a test sets one


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def test_good_partition_passes_every_gate_with_metadata(tmp_path, instance):
    job, _ = make_defs(tmp_path, {D: partition_rows(D)})
    result = run(job, instance, D)
    assert result.success
    assert materialized(result) == sorted(GATED_TABLES)
    evals = evaluations(result)
    expected = {(t, g, D) for t in GATED_TABLES for g in gate_names(t)}
    assert set(evals) == expected  # 24 gates, each recorded for partition D
    assert [k for k, e in evals.items() if not e.passed] == []
    overlap = evals[("scene_clips", "clips_ordered_non_overlapping", D)]
    assert overlap.metadata["overlapping"].value == 0 and overlap.metadata["failing_ids"].value == []
    rate = evals[("filtered_clips", "pass_rate", D)]
    assert rate.metadata["pass_rate"].value == pytest.approx(5 / 6) and rate.metadata["rows"].value == 6
    assert rate.metadata["thresholds"].value == {"min_pass_rate": 0.05, "max_pass_rate": 0.999, "min_rows_for_rate": 10}


def test_overlapping_clips_fail_the_check_skip_downstream_and_fail_the_run(tmp_path, instance):
    job, lake = make_defs(tmp_path, {E: partition_rows(E, overlap=True)})
    result = run(job, instance, E)
    assert result.success is False
    assert materialized(result) == ["raw_videos", "scene_clips"]  # filtered_clips, clip_captions never ran
    failed = evaluations(result)[("scene_clips", "clips_ordered_non_overlapping", E)]
    assert failed.passed is False and failed.severity == dg.AssetCheckSeverity.ERROR
    assert failed.metadata["overlapping"].value == 1 and failed.metadata["out_of_order"].value == 0
    assert failed.metadata["failing_ids"].value == [clip_id("a06", 40, 70)]
    assert "1 clip(s) starting before an earlier clip of the video ends" in failed.description
    assert not any(k[0] in ("filtered_clips", "clip_captions") for k in evaluations(result))
    rng = PartitionRange.of([E])
    assert lake.get_lake().read_partitions("filtered_clips", rng).num_rows == 0
    assert lake.get_lake().read_partitions("clip_captions", rng).num_rows == 0
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert [e.step_key for e in failures] == ["scene_clips_gates"]


def test_check_reads_only_its_own_partition(tmp_path, instance):
    data = {D: partition_rows(D), E: partition_rows(E, overlap=True)}
    job, _ = make_defs(tmp_path, data)
    assert run(job, instance, E).success is False  # E's bad rows are now in the same Delta tables
    result = run(job, instance, D)
    assert result.success
    evals = evaluations(result)
    assert {k[2] for k in evals} == {D}
    assert evals[("scene_clips", "clip_id_unique", D)].metadata["duplicated"].value == 0
    assert evals[("filtered_clips", "scored_exactly_once", D)].metadata["scene_clips"].value == 6  # D's 6, not 12


def test_single_run_backfill_records_each_partition_and_blocks(tmp_path, instance):
    job, _ = make_defs(tmp_path, {D: partition_rows(D), E: partition_rows(E, overlap=True)})
    result = run(job, instance, rng=(D, E))
    assert result.success is False
    assert materialized(result) == ["raw_videos", "scene_clips"]
    evals = evaluations(result)
    gate = ("scene_clips", "clips_ordered_non_overlapping")
    assert evals[(*gate, D)].passed is True
    assert evals[(*gate, E)].passed is False and evals[(*gate, E)].metadata["overlapping"].value == 1
    agg = evals[(*gate, None)]  # the step's result, which is what blocks
    assert agg.passed is False and agg.metadata["failed_partitions"].value == [E]
    assert evals[("raw_videos", "video_id_unique", None)].passed is True


def test_warn_severity_reports_without_blocking(tmp_path, instance):
    job, _ = make_defs(tmp_path, {D: partition_rows(D, repetitive_caption=True)}, overrides=LENIENT_CAPTION_CONTENT)
    result = run(job, instance, D)
    assert result.success
    assert materialized(result) == sorted(GATED_TABLES)
    rep = evaluations(result)[("clip_captions", "no_repetition", D)]
    assert (rep.passed, rep.severity) == (False, dg.AssetCheckSeverity.WARN)
    assert rep.metadata["repetitive"].value == 1 and rep.metadata["gate_severity"].value == "warn"


def test_thresholds_come_from_the_gates_file_at_run_time(tmp_path, instance, monkeypatch):
    gates_file = tmp_path / "gates.yaml"
    gates_file.write_text("scene_clips:\n  gates:\n    clips_ordered_non_overlapping: {severity: warn}\n")
    monkeypatch.setenv("VIDEOLAKE_GATES_FILE", str(gates_file))
    job, _ = make_defs(tmp_path, {E: partition_rows(E, overlap=True)})
    result = run(job, instance, E)
    assert result.success  # the same overlap now only warns
    assert materialized(result) == sorted(GATED_TABLES)
    ev = evaluations(result)[("scene_clips", "clips_ordered_non_overlapping", E)]
    assert (ev.passed, ev.severity) == (False, dg.AssetCheckSeverity.WARN)
