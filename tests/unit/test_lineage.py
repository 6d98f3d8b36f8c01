"""`videolake lineage ID` (issue: operating it as a Dagster team would, item 8): from a sample key, a clip_id, a
video_id or a source object to every table's rows, with the Delta version each was read at, and the clip's frames.

The lake is written here row by row (real Delta tables, a real video in a local store); the command runs as a user
runs it, in a subprocess over the local profile."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys

import pytest

from videolake.platform.lake.lineage import trace
from videolake.platform.lake.schemas import TABLES, clip_id
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table
from videolake.synth import Segment, VideoSpec, render

DAY, LATER = "2026-05-04", "2026-05-05"
NOW = dt.datetime(2026, 5, 5, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    data = tmp_path_factory.mktemp("lineage-data")
    path, _ = render(
        VideoSpec(
            name="v", width=160, height=120, fps="25", codec="h264", segments=(Segment("testsrc2", 50),), transitions=()
        ),
        data / "render",
    )
    landed = data / "store" / "landing" / DAY / "v.mp4"
    landed.parent.mkdir(parents=True)
    landed.write_bytes(path.read_bytes())
    vid = hashlib.sha256(landed.read_bytes()).hexdigest()
    other = "f" * 64
    src = f"file://{landed}"
    clips = [clip_id(vid, 0, 25), clip_id(vid, 25, 50)]
    lake = Lake(str(data / "lake"))
    day = dt.date.fromisoformat(DAY)

    def write(table, rows, days=(DAY,)):
        lake.write_partitions(table, rows_to_table(rows, TABLES[table]), PartitionRange.of(list(days)))

    write(
        "raw_videos",
        [
            {
                "video_id": vid,
                "source_uri": src,
                "size_bytes": 1,
                "status": "ok",
                "fps": 25.0,
                "num_frames": 50,
                "width": 160,
                "height": 120,
                "ingested_at": NOW,
                "partition_date": day,
            },
            {
                "video_id": other,
                "source_uri": "file:///elsewhere/o.mp4",
                "size_bytes": 1,
                "status": "ok",
                "ingested_at": NOW,
                "partition_date": day,
            },
        ],
    )
    write(
        "scene_clips",
        [
            {
                "clip_id": c,
                "video_id": vid,
                "source_uri": src,
                "clip_index": i,
                "start_frame": s,
                "end_frame": e,
                "start_s": s / 25,
                "end_s": e / 25,
                "duration_s": 1.0,
                "detector": "luma",
                "detector_params": "{}",
                "partition_date": day,
            }
            for i, (c, (s, e)) in enumerate(zip(clips, [(0, 25), (25, 50)]))
        ]
        + [
            {
                "clip_id": clip_id(other, 0, 10),
                "video_id": other,
                "source_uri": "file:///elsewhere/o.mp4",
                "clip_index": 0,
                "start_frame": 0,
                "end_frame": 10,
                "start_s": 0.0,
                "end_s": 0.4,
                "duration_s": 0.4,
                "detector": "luma",
                "detector_params": "{}",
                "partition_date": day,
            }
        ],
    )
    write(
        "filtered_clips",
        [
            {"clip_id": clips[0], "video_id": vid, "duration_s": 1.0, "passed": True, "partition_date": day},
            {
                "clip_id": clips[1],
                "video_id": vid,
                "duration_s": 1.0,
                "passed": False,
                "reject_reason": "duplicate",
                "duplicate_group": clips[0],
                "duplicate_kind": "near",
                "partition_date": day,
            },
        ],
    )
    write(
        "filtered_clips",
        [  # a second commit: the table's version moves on
            {
                "clip_id": clips[0],
                "video_id": vid,
                "duration_s": 1.0,
                "passed": True,
                "duplicate_group": clips[0],
                "partition_date": day,
            },
            {
                "clip_id": clips[1],
                "video_id": vid,
                "duration_s": 1.0,
                "passed": False,
                "reject_reason": "duplicate",
                "duplicate_group": clips[0],
                "duplicate_kind": "near",
                "partition_date": day,
            },
        ],
    )
    write(
        "clip_captions",
        [
            {
                "clip_id": clips[0],
                "caption_track": "default",
                "video_id": vid,
                "source_uri": src,
                "status": "ok",
                "caption": "A test card.",
                "model": "m",
                "prompt_version": "v1",
                "captioned_at": NOW,
                "partition_date": day,
            }
        ],
    )
    write(
        "training_shards",
        [
            {
                "clip_id": clips[0],
                "video_id": vid,
                "source_uri": src,
                "status": "ok",
                "shard_uri": f"file://{data}/store/shards/{DAY}/b/000000.tar",
                "bucket": "b",
                "partition_date": day,
            }
        ],
    )
    return {"data": data, "lake": lake, "vid": vid, "clips": clips, "src": src}


def test_every_kind_of_id_resolves_to_the_same_chain(world):
    lake, vid, clips, src = world["lake"], world["vid"], world["clips"], world["src"]
    by_key = trace(lake, clips[0])  # a training sample's key is its clip_id
    assert (by_key.kind, by_key.video_id, by_key.clip_ids) == ("clip", vid, [clips[0]])
    assert [r["source_uri"] for r in by_key.rows["raw_videos"]] == [src]
    assert [r["clip_id"] for r in by_key.rows["scene_clips"]] == [clips[0]]
    assert [(r["passed"], r["duplicate_group"]) for r in by_key.rows["filtered_clips"]] == [(True, clips[0])]
    assert [r["caption"] for r in by_key.rows["clip_captions"]] == ["A test card."]
    assert [r["bucket"] for r in by_key.rows["training_shards"]] == ["b"]
    assert by_key.rows["clip_embeddings"] == []  # no such table here
    assert by_key.versions == {
        "raw_videos": 0,
        "scene_clips": 0,
        "clip_embeddings": None,
        "filtered_clips": 1,
        "clip_captions": 0,
        "training_shards": 0,
    }
    for query in (vid, src):  # a video, or the object it came from: every clip of it
        chain = trace(lake, query)
        assert (chain.video_id, chain.clip_ids) == (vid, sorted(clips)), query
        assert [r["clip_id"] for r in chain.rows["filtered_clips"]] == sorted(clips)
        assert [r["duplicate_kind"] for r in chain.rows["filtered_clips"]] == [None, "near"]
    assert not trace(lake, "file:///nowhere.mp4").found
    assert not trace(lake, "0" * 64).found


@pytest.mark.slow
def test_the_command_prints_the_chain_and_writes_the_clips_contact_sheet(world, tmp_path):
    import os

    from PIL import Image

    env = {
        **os.environ,
        "VIDEOLAKE_DATA_DIR": str(world["data"]),
        "VIDEOLAKE_PROFILE": "local",
        "DAGSTER_HOME": str(tmp_path / "home"),
    }
    sheet = tmp_path / "sheet.png"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "videolake.cli",
            "lineage",
            world["clips"][0],
            "--json",
            "--sheet",
            str(sheet),
            "--frames",
            "4",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (got["video_id"], got["clip_ids"], got["contact_sheet"]) == (world["vid"], [world["clips"][0]], str(sheet))
    assert got["rows"]["raw_videos"][0]["source_uri"] == world["src"]
    assert Image.open(sheet).size[0] == 4 * 200 + 5 * 4  # four frames in a row
    text = subprocess.run(
        [sys.executable, "-m", "videolake.cli", "lineage", world["src"], "--no-sheet"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert text.returncode == 0, text.stderr[-3000:]
    lines = text.stdout.splitlines()
    assert lines[0] == f"{world['src']} (source)"
    assert lines[1] == f"  source object  {world['src']}"
    assert [ln.split()[1] for ln in lines if ln.startswith("  clip ")] == sorted(world["clips"])
    assert any(ln.startswith("    filtered_clips   v1  passed=False  reject_reason=duplicate") for ln in lines), lines
    missing = subprocess.run(
        [sys.executable, "-m", "videolake.cli", "lineage", "0" * 64],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert missing.returncode == 1 and "no video in raw_videos" in missing.stdout


def test_a_days_contact_sheet_shows_its_captioned_clips(world):
    """The clip_captions asset's per-partition contact sheet (platform/captioning/contact_sheet.py)."""
    import io

    from PIL import Image

    from videolake.platform.captioning.contact_sheet import TILE_WIDTH, contact_sheet_jpeg, day_samples
    from videolake.platform.objectstore.local import LocalObjectStore

    samples = day_samples(world["lake"], DAY)
    assert [(s["clip_id"], s["caption"], s["start_frame"], s["end_frame"], s["fps"]) for s in samples] == [
        (world["clips"][0], "A test card.", 0, 25, 25.0)
    ]  # the one ok caption of the day
    assert day_samples(world["lake"], LATER) == []
    store = LocalObjectStore(str(world["data"] / "store"))
    sheet = Image.open(io.BytesIO(contact_sheet_jpeg(store, samples)))
    assert sheet.format == "JPEG" and sheet.size[0] == 3 * TILE_WIDTH + 4 * 4  # three columns
    gone = [{**samples[0], "source_uri": samples[0]["source_uri"] + ".missing"}]
    assert contact_sheet_jpeg(store, gone) is None  # a clip without a frame is left out, never an error
