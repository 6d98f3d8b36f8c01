"""What the assets report to the Dagster UI: a short plotted list per table, the rest as JSON/text, rounded numbers,
previews narrow enough for one screen, per-partition values of a range step, run tags, column descriptions."""

import datetime as dt

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from videolake.assets.metadata import PLOTTED, asset_metadata, caption_figures, rounded, table_figures
from videolake.assets.partitions import daily_partitions
from videolake.assets.ui_metadata import (
    PREVIEW_COLUMNS,
    TEXT_CHARS,
    add_partition_metadata,
    record_preview,
    run_tags,
    tag_run,
)
from videolake.platform.captioning.metrics import ActorStats, CaptionMetrics
from videolake.platform.lake.schemas import CLIP_CAPTIONS, RAW_VIDEOS, TABLES, table_spec
from videolake.platform.lake.table import WriteResult, rows_to_table

D, E = "2026-01-05", "2026-01-06"
NOW = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
VID = "3f9a1c2b7d" + "e" * 54  # a 64-hex video id


def numeric(md: dict) -> set[str]:
    return {k for k, v in md.items() if isinstance(v, (dg.IntMetadataValue, dg.FloatMetadataValue))}


def raw_rows() -> pa.Table:
    rows = [
        dict(
            video_id=f"{i}" * 64,
            source_uri=f"s3://b/p/landing/{day}/v{i}.mp4",
            size_bytes=1000 + i,
            width=64,
            height=48,
            fps=25.0,
            duration_s=4.0,
            num_frames=100,
            status="ok",
            ingested_at=NOW,
            partition_date=dt.date.fromisoformat(day),
        )
        for i, day in enumerate([D, D, E])
    ] + [
        dict(
            video_id="9" * 64,
            source_uri=f"s3://b/p/landing/{E}/x.mp4",
            size_bytes=3,
            status="rejected",
            reject_reason="not_a_video: no container signature",
            ingested_at=NOW,
            partition_date=dt.date(2026, 1, 6),
        )
    ]
    return rows_to_table(rows, RAW_VIDEOS)


def caption_rows(caption: str) -> pa.Table:
    rows = [
        dict(
            clip_id=f"{VID}_{s:08d}_{s + 45:08d}",
            video_id=VID,
            source_uri=f"s3://bucket/prefix/landing/{D}/long_name.mp4",
            status="ok",
            caption=caption,
            model="m",
            prompt_version="v1-describe",
            output_tokens=12,
            captioned_at=NOW,
            partition_date=dt.date.fromisoformat(D),
        )
        for s in (0, 45)
    ] + [
        dict(
            clip_id=f"{VID}_00000090_00000135",
            video_id=VID,
            source_uri="s3://bucket/x.mp4",
            status="failed",
            error="engine error: out of memory",
            model="m",
            prompt_version="v1-describe",
            captioned_at=NOW,
            partition_date=dt.date.fromisoformat(E),
        )
    ]
    return rows_to_table(rows, CLIP_CAPTIONS)


def test_rounded_numbers():
    assert rounded(0.7488715524474779) == 0.749
    assert rounded(0.00012345678) == 0.000123
    assert rounded(3.14159) == 3.14 and rounded(1234.5678) == 1234.6 and rounded(-0.5) == -0.5
    assert rounded({"a": [0.333333, 7], "b": True, "c": None}) == {"a": [0.333, 7], "b": True, "c": None}


def test_raw_videos_metadata_plots_a_short_list_and_keeps_the_rest_as_json():
    rows = raw_rows()
    write = WriteResult(table="raw_videos", uri="/lake/raw_videos", version=7, rows=4)
    md = asset_metadata("raw_videos", table_spec("raw_videos").figures_of(rows), [D, E], write, seconds=3.0)
    assert numeric(md) == set(PLOTTED["raw_videos"])  # nothing else is plotted (no delta_version, bytes, seconds)
    assert md["dagster/partition_row_count"].value == 4 and md["videos_rejected"].value == 1
    # Dagster's own labels name the table: its uri and name (the whole table's row count needs the lake)
    assert md["dagster/uri"].value == "/lake/raw_videos" and md["dagster/table_name"].value == "videolake.raw_videos"
    assert "dagster/row_count" not in md
    md = asset_metadata(
        "raw_videos", table_spec("raw_videos").figures_of(rows), [D, E], write, seconds=3.0, table_rows=40
    )
    assert md["dagster/row_count"].value == 40 and md["dagster/partition_row_count"].value == 4
    assert md["reject_rate"].value == 0.25 and md["videos_per_s"].value == 1.33  # 4 videos / 3 s, rounded
    # every figure, plotted or not, is a row of a table with its unit and meaning
    assert table_figures(md["details"]) == {
        "dagster/partition_row_count": 4,
        "videos_ok": 3,
        "videos_rejected": 1,
        "reject_rate": 0.25,
        "copies_of_earlier_days": 0,
        "rejections_by_reason": {"not_a_video": 1},
        "bytes": 3006,
        "frames": 300,
    }
    assert table_figures(md["step"]) == {"videos_per_s": 1.33, "seconds": 3.0, "delta_version": 7, "days_written": 2}
    units = {r.data["figure"]: (r.data["unit"], r.data["meaning"]) for r in md["details"].records}
    assert units["reject_rate"] == ("share 0-1", "videos_rejected / rows")
    assert all(unit_meaning[1] != "(undocumented)" for unit_meaning in units.values()), units
    assert md["partitions"].value == f"{D}...{E}"


def test_caption_metadata_has_no_constants_or_per_actor_plots():
    actors = [
        ActorStats(
            actor_id=f"a{i}",
            captions=10,
            generate_s=2.0,
            load_s=30.123456,
            lifetime_s=40.0,
            captions_per_s=5.0 / (i + 1),
            straggler=i == 1,
        )
        for i in range(2)
    ]
    metrics = CaptionMetrics(
        captions=19,
        failed=1,
        wall_s=41.0,
        captions_per_s=0.4878048,
        prompt_tokens_per_s=100.0,
        output_tokens_per_s=12.3456,
        model_load_s_mean=30.1,
        model_load_s_max=30.2,
        actors=2,
        idle_actors=0,
        accelerator="cpu",
        accelerator_s=80.0,
        goodput=0.04999,
        stragglers=1,
        steady_captions_per_s=2.0,
        per_actor=actors,
    )
    write = WriteResult(table="clip_captions", uri="/lake/clip_captions", version=3, rows=3)
    md = asset_metadata(
        "clip_captions",
        table_spec("clip_captions").figures_of(caption_rows("A dog.")),
        [D, E],
        write,
        seconds=41.0,
        extra={**caption_figures(metrics), "model": "tiny", "prompt_version": "v1-describe"},
    )
    assert numeric(md) == set(PLOTTED["clip_captions"])
    assert (md["captions_per_s"].value, md["goodput"].value, md["stragglers"].value) == (0.488, 0.05, 1)
    assert md["captions_failed"].value == 1 and md["dagster/partition_row_count"].value == 3  # counted from the rows
    assert not [k for k in md if k.startswith("actor_") or k in ("accelerator_is_gpu", "idle_actors", "delta_version")]
    assert table_figures(md["details"]) == {
        "dagster/partition_row_count": 3,
        "captions": 2,
        "captions_failed": 1,
        "failure_rate": 0.333,
        "failures_by_reason": {"engine error": 1},
    }
    details = table_figures(md["step"])  # measured once for the step: the pool, its actors, timings
    undocumented = [r.data["figure"] for r in md["step"].records if r.data["meaning"] == "(undocumented)"]
    assert undocumented == []
    assert details["per_actor"] == [
        {"actor": "a0", "captions": 10, "captions_per_s": 5.0, "load_s": 30.12, "straggler": False},
        {"actor": "a1", "captions": 10, "captions_per_s": 2.5, "load_s": 30.12, "straggler": True},
    ]
    assert details["idle_actors"] == 0 and md["accelerator"].value == "cpu" and details["output_tokens_per_s"] == 12.35
    assert md["model"].value == "tiny" and md["prompt_version"].value == "v1-describe"


def test_day_figures_add_up_to_the_figures_of_all_rows():
    """The workers compute each day's figures; the step adds days up: the same numbers as over all rows."""
    rows = raw_rows()
    days = [rows.filter(pc.equal(rows.column("partition_date").cast(pa.string()), d)) for d in (D, E)]
    raw = table_spec("raw_videos")
    assert raw.merge_figures([raw.figures_of(d) for d in days]) == raw.figures_of(rows)
    captions = caption_rows("A dog.")
    spec = table_spec("clip_captions")
    assert spec.merge_figures(
        [spec.figures_of(captions.slice(0, 1)), spec.figures_of(captions.slice(1))]
    ) == spec.figures_of(captions)


def test_preview_keeps_whole_ids_and_cuts_long_text():
    """A person copies an id from the preview to follow the row back to its source: ids and uris stay whole."""
    long_caption = "A long caption " * 20
    preview = record_preview("clip_captions", caption_rows(long_caption))
    assert [c.name for c in preview.schema.columns] == [
        "status",
        "caption",
        "clip_id",
        "video_id",
        "source_uri",
        "error",
        "output_tokens",
    ]
    first = preview.records[0].data
    assert first["clip_id"] == f"{VID}_00000000_00000045" and first["video_id"] == VID
    assert first["source_uri"] == f"s3://bucket/prefix/landing/{D}/long_name.mp4"
    assert len(first["caption"]) == TEXT_CHARS and first["caption"].endswith("…")
    assert preview.records[2].data["error"] == "engine error: out of memory"
    assert set(PREVIEW_COLUMNS) == set(TABLES)


def test_every_column_of_every_table_has_a_description():
    missing = [(t, f.name) for t, s in TABLES.items() for f in s if not (f.metadata or {}).get(b"description")]
    assert missing == []


def test_range_step_scopes_counts_and_preview_to_each_partition_and_tags_its_run():
    @dg.asset(partitions_def=daily_partitions(), backfill_policy=dg.BackfillPolicy.single_run(), name="raw_videos")
    def fake_raw(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        rows = raw_rows()
        keys = list(context.partition_keys)
        tag_run(context, "raw_videos")
        add_partition_metadata(context, "raw_videos", rows, keys)
        write = WriteResult(table="raw_videos", uri="/lake/raw_videos", version=1, rows=rows.num_rows)
        return dg.MaterializeResult(
            metadata=asset_metadata(
                "raw_videos",
                table_spec("raw_videos").figures_of(rows),
                keys,
                write,
                2.0,
                preview=record_preview("raw_videos", rows),
            )
        )

    with dg.instance_for_test() as instance:
        tags = {"dagster/asset_partition_range_start": D, "dagster/asset_partition_range_end": E}
        result = dg.materialize([fake_raw], instance=instance, tags=tags)
        assert result.success
        mats = {e.partition: e.materialization.metadata for e in result.get_asset_materialization_events()}
        assert {p: md["dagster/partition_row_count"].value for p, md in mats.items()} == {D: 2, E: 2}
        assert {p: md["reject_rate"].value for p, md in mats.items()} == {D: 0.0, E: 0.5}
        assert {p: md["videos_per_s"].value for p, md in mats.items()} == {D: 2.0, E: 2.0}  # step-wide: 4 / 2 s
        assert {p: table_figures(md["details"])["rejections_by_reason"] for p, md in mats.items()} == {
            D: {},
            E: {"not_a_video": 1},
        }
        assert {p: table_figures(md["step"]) for p, md in mats.items()} == dict.fromkeys(
            [D, E], {"videos_per_s": 2.0, "seconds": 2.0, "delta_version": 1, "days_written": 2}
        )
        assert [r.data["source_uri"] for r in mats[E]["preview"].records] == [
            f"s3://b/p/landing/{E}/v2.mp4",
            f"s3://b/p/landing/{E}/x.mp4",
        ]
        run = instance.get_run_by_id(result.run_id)
        assert run.tags["videolake/partitions"] == f"{D}...{E}" and "videolake/gpu" not in run.tags


def test_run_tags_of_a_caption_run_and_of_the_scheduled_job():
    assert run_tags([D], "clip_captions", "abc123", gpu=True) == {
        "videolake/partitions": D,
        "videolake/gpu": "true",
        "videolake/captioner_code_version": "abc123",
    }
    # captioning on CPU actors (the local profile) is not a GPU run
    assert run_tags([D], "clip_captions", "abc123") == {
        "videolake/partitions": D,
        "videolake/captioner_code_version": "abc123",
    }
    assert run_tags([D, E], "scene_clips") == {"videolake/partitions": f"{D}...{E}"}
    from videolake.assets.automation import PIPELINE_JOB, daily_schedule
    from videolake.assets.sensors import landing_sensor
    from videolake.definitions import build_definitions

    # Schedule and sensor runs of the job get the job's run_tags when the daemon creates them: the GPU tag only
    # where the profile's captioner asks for GPUs.
    assert daily_schedule.job_name == landing_sensor.job_name == PIPELINE_JOB
    local = build_definitions("local").resolve_job_def(PIPELINE_JOB)
    assert "videolake/gpu" not in local.run_tags


@pytest.mark.parametrize("table", list(TABLES))
def test_figures_are_computed_from_the_summary_columns_alone(table):
    spec = table_spec(table)
    empty = spec.schema.empty_table().select(list(spec.summary_columns))
    figures = spec.figures_of(empty)
    assert figures["dagster/partition_row_count"] == 0


def test_each_tables_figures_come_from_its_spec_in_declared_order():
    """The one declaration (TableSpec.figures) gives the columns, the order and the exact values."""
    scene = table_spec("scene_clips")
    assert scene.summary_columns == ("video_id", "detect_error", "partition_date")
    clips = pa.table(
        {
            "video_id": ["a", "a", "b"],
            "detect_error": [None, "", "decode failed: x"],
            "partition_date": [dt.date(2026, 1, 5)] * 3,
        }
    )
    assert scene.figures_of(clips) == {"dagster/partition_row_count": 3, "videos": 2, "detect_errors": 1}
    filtered = table_spec("filtered_clips")
    day, before = dt.date(2026, 1, 5), dt.date(2026, 1, 4)
    # c1 keeps a group of two in the day; c3 is a duplicate of a clip kept on the day before (a semantic one).
    rows = pa.table(
        {
            "passed": [True, False, False, True, False],
            "reject_reason": [None, "black;duplicate", "black", None, "duplicate"],
            "duplicate_group": ["c1", "c1", None, None, "c0"],
            "duplicate_kept_date": [day, day, None, None, before],
            "duplicate_kind": [None, "near", None, None, "semantic"],
            "partition_date": [day] * 5,
        }
    )
    figures = filtered.figures_of(rows)
    assert list(figures) == [
        "dagster/partition_row_count",
        "passed",
        "rejected",
        "pass_rate",
        "rejections_by_reason",
        "duplicates",
        "near_duplicates",
        "semantic_duplicates",
        "duplicates_of_earlier_days",
        "duplicates_within_day",
        "duplicate_group_sizes",
    ]
    assert figures == {
        "dagster/partition_row_count": 5,
        "passed": 2,
        "rejected": 3,
        "pass_rate": 0.4,
        "rejections_by_reason": {"black": 2, "duplicate": 2},
        "duplicates": 2,
        "near_duplicates": 1,
        "semantic_duplicates": 1,
        "duplicates_of_earlier_days": 1,
        "duplicates_within_day": 1,
        "duplicate_group_sizes": {"1": 1, "2": 1},
    }
    # a caption error is one reason (its text before ':'), even when the message holds a ';'
    captions = table_spec("clip_captions").figures_of(
        pa.table(
            {
                "status": ["failed", "ok"],
                "error": ["model error: a; b", None],
                "partition_date": [dt.date(2026, 1, 5)] * 2,
            }
        )
    )
    assert captions["failures_by_reason"] == {"model error": 1} and captions["failure_rate"] == 0.5
    assert list(table_spec("raw_videos").figures_of(raw_rows())) == [
        "dagster/partition_row_count",
        "videos_ok",
        "videos_rejected",
        "reject_rate",
        "copies_of_earlier_days",
        "rejections_by_reason",
        "bytes",
        "frames",
    ]


def test_assets_link_to_their_code_in_the_repository(monkeypatch):
    import dagster as dg

    from videolake.definitions import build_definitions

    monkeypatch.setenv("VIDEOLAKE_GIT_URL", "https://github.com/example/videolake")
    graph = build_definitions("local").resolve_asset_graph()
    refs = graph.get(dg.AssetKey("filtered_clips")).metadata["dagster/code_references"].code_references
    (ref,) = refs
    assert ref.url.startswith("https://github.com/example/videolake/tree/main/videolake/assets/cpu_assets.py#L"), ref
    monkeypatch.delenv("VIDEOLAKE_GIT_URL")
    graph = build_definitions("local").resolve_asset_graph()
    (ref,) = graph.get(dg.AssetKey("clip_captions")).metadata["dagster/code_references"].code_references
    assert ref.file_path.endswith("videolake/assets/captions.py") and ref.line_number > 1, ref
