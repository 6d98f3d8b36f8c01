"""Caption tracks without a model: the (day, track) commit on a real Delta table (re-runs and two tracks committing
at once), an older table migrated, structured outputs as fields, the gates per track, the tracks' YAML and assets.

The same with the real vLLM engine (two tracks, a second pass, shards and a release of one track):
tests/integration/test_caption_tracks.py.
"""

from __future__ import annotations

import datetime as dt
import json
import threading

import numpy as np
import pyarrow as pa
import pytest

from videolake.platform.captioning.base import CaptionerBackend, CaptionerConfig, CaptionResult
from videolake.platform.captioning.stage import _TYPED, TABLE, migrate_untracked, track_rows
from videolake.platform.lake.schemas import CLIP_CAPTIONS, PARTITION_COLUMN
from videolake.platform.lake.table import DataFile, Lake, PartitionRange, conform
from videolake.platform.runtime.units import file_stats

DAY = dt.date(2024, 3, 1)
RNG = PartitionRange.of([DAY.isoformat()])
CLIPS = [f"v_{i:08d}_{i + 10:08d}" for i in range(0, 50, 10)]  # 5 clips


def _rows(track: str, caption: str, clips=CLIPS) -> pa.Table:
    n = len(clips)
    return conform(
        pa.table(
            {
                "clip_id": clips,
                "caption_track": [track] * n,
                "video_id": ["v"] * n,
                "source_uri": ["file:///v.mp4"] * n,
                "status": ["ok"] * n,
                "caption": [f"{caption} {c}" for c in clips],
                "model": ["m"] * n,
                "prompt_version": ["v1-describe"] * n,
                "captioned_at": pa.array([dt.datetime(2024, 3, 1, tzinfo=dt.UTC)] * n, pa.timestamp("us", tz="UTC")),
                PARTITION_COLUMN: pa.array([DAY] * n, pa.date32()),
            }
        ),
        CLIP_CAPTIONS,
    )


def _write(lake: Lake, rows: pa.Table, name: str) -> DataFile:
    files = lake.files()
    data = rows.drop_columns([PARTITION_COLUMN])
    rel = f"{PARTITION_COLUMN}={DAY.isoformat()}/part-{name}.parquet"
    size = files.write_parquet(files.path(TABLE, rel), data)
    return DataFile(path=rel, size=size, partition_date=DAY.isoformat(), rows=data.num_rows, stats=file_stats(data))


def _commit(lake: Lake, track: str, caption: str, name: str):
    return lake.commit_slice(TABLE, [_write(lake, _rows(track, caption), name)], RNG, "caption_track", track)


def _files(lake: Lake, track: str) -> list[str]:
    return sorted(p for p, _, _ in lake.slice_files(TABLE, {DAY.isoformat()}, "caption_track", track))


def test_a_commit_replaces_only_its_own_track_of_the_day(tmp_path):
    lake = Lake(str(tmp_path))
    _commit(lake, "default", "first", "a1")
    _commit(lake, "seed7", "other", "b1")
    assert lake.row_count(TABLE, RNG) == 10
    b_before = track_rows(lake, RNG, "seed7").to_pylist()
    version = _commit(lake, "default", "second", "a2").version
    assert _files(lake, "default") == [f"{PARTITION_COLUMN}={DAY}/part-a2.parquet"]
    assert _files(lake, "seed7") == [f"{PARTITION_COLUMN}={DAY}/part-b1.parquet"]
    assert track_rows(lake, RNG, "seed7").to_pylist() == b_before
    assert sorted(track_rows(lake, RNG, "default").column("caption").to_pylist()) == [f"second {c}" for c in CLIPS]
    assert lake.row_count(TABLE, RNG) == 10 and lake.version(TABLE) == version
    # an empty commit of a track empties that track only
    lake.commit_slice(TABLE, [], RNG, "caption_track", "seed7")
    assert _files(lake, "seed7") == [] and lake.row_count(TABLE, RNG) == 5


def test_two_tracks_committing_the_same_day_at_once_both_keep_their_rows(tmp_path):
    lake = Lake(str(tmp_path))
    _commit(lake, "default", "seed", "start")  # the table exists before the race
    rounds, tracks = 6, ("default", "seed7", "json")
    errors: list[BaseException] = []

    def writer(track: str) -> None:
        try:
            for i in range(rounds):
                barrier.wait()
                _commit(lake, track, f"{track} round {i}", f"{track}-{i}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    barrier = threading.Barrier(len(tracks))
    threads = [threading.Thread(target=writer, args=(t,)) for t in tracks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    table = lake.read_partitions(TABLE, RNG)
    assert table.num_rows == len(tracks) * len(CLIPS)
    for track in tracks:
        assert _files(lake, track) == [f"{PARTITION_COLUMN}={DAY}/part-{track}-{rounds - 1}.parquet"]
        captions = sorted(track_rows(lake, RNG, track).column("caption").to_pylist())
        assert captions == [f"{track} round {rounds - 1} {c}" for c in CLIPS]


def test_a_table_from_before_tracks_becomes_the_default_track(tmp_path):
    from deltalake import write_deltalake

    lake = Lake(str(tmp_path))
    old_schema = pa.schema(
        [f for f in CLIP_CAPTIONS if f.name in {"clip_id", "video_id", "source_uri", "status", "caption", "model"}]
        + [f for f in CLIP_CAPTIONS if f.name in {"prompt_version", "captioned_at", PARTITION_COLUMN}]
    )
    old = _rows("default", "old").select(old_schema.names).cast(old_schema)
    write_deltalake(lake.table_uri(TABLE), old, partition_by=[PARTITION_COLUMN])
    assert migrate_untracked(lake) is True
    assert migrate_untracked(lake) is False  # once
    assert track_rows(lake, RNG, "default").column("caption").to_pylist() == [f"old {c}" for c in CLIPS]
    _commit(lake, "seed7", "new", "b1")
    assert lake.row_count(TABLE, RNG) == 10


class _Fixed(CaptionerBackend):
    """Returns the texts it is given, in order: a structured track's outputs without a model."""

    registered_name = "fixed-test"
    texts: list[str] = []

    def load(self) -> None:
        pass

    def caption(self, items):
        return [CaptionResult(caption=t, output_tokens=3) for t in self.texts[: len(items)]]


def test_a_structured_track_keeps_its_fields_and_its_caption_field_is_the_caption():
    config = CaptionerConfig(model="m", track="json", prompt_version="v1-json", input_mode="none")
    backend = _Fixed(config)
    backend.texts = [
        json.dumps({"caption": "A red car drives by.", "objects": ["car", "road"], "motion": "fast", "camera": "pan"}),
        json.dumps({"caption": "  ", "objects": [], "motion": "static", "camera": "static"}),
        "not json",
    ]
    n = 3
    batch = {
        "clip_id": np.array(["c1", "c2", "c3"], dtype=object),
        "video_id": np.array(["v"] * n, dtype=object),
        "source_uri": np.array(["file:///v.mp4"] * n, dtype=object),
        "frame_error": np.array([""] * n, dtype=object),
        "num_frames": np.zeros(n, np.int32),
    }
    rows = backend(batch)
    # as the caption actor types a piece
    table = pa.table({k: pa.array(list(v) if k in _TYPED else v, _TYPED.get(k)) for k, v in rows.items()})
    got = table.to_pylist()
    assert [r["status"] for r in got] == ["ok", "failed", "failed"]
    assert got[0]["caption"] == "A red car drives by." and got[0]["caption_track"] == "json"
    assert dict(got[0]["caption_fields"]) == {
        "caption": "A red car drives by.",
        "objects": '["car", "road"]',
        "motion": "fast",
        "camera": "pan",
    }
    assert got[1]["error"] == "invalid JSON output: no non-blank caption field" and got[1]["caption_fields"] is None
    assert got[2]["error"].startswith("invalid JSON output") and got[2]["caption"] is None
    assert {r["engine"] for r in got} == {"fixed-test"}
    assert all(r["prompt_sha256"] == config.prompt_template().sha256() for r in got)
    assert all(r["frame_timestamps_s"] == [] for r in got)
    # the fields are a column a filter can use
    assert conform(table.append_column(PARTITION_COLUMN, pa.array([DAY] * n, pa.date32())), CLIP_CAPTIONS)


def test_the_gates_judge_every_track_and_each_asset_its_own(tmp_path):
    from videolake.platform.gates import check_partition

    lake = Lake(str(tmp_path))
    n = len(CLIPS)
    lake.write_partitions(
        "filtered_clips",
        pa.table(
            {
                "clip_id": CLIPS,
                "video_id": ["v"] * n,
                "duration_s": [1.0] * n,
                "passed": [True] * n,
                PARTITION_COLUMN: pa.array([DAY] * n, pa.date32()),
            }
        ),
        RNG,
    )
    _commit(lake, "default", "a caption of the clip", "a1")
    lake.commit_slice(
        TABLE, [_write(lake, _rows("seed7", "another caption", CLIPS[:4]), "b1")], RNG, "caption_track", "seed7"
    )

    def once(track):
        return next(r for r in check_partition(lake, TABLE, DAY.isoformat(), track=track) if r.gate.startswith("one_"))

    assert once("default").passed and once("default").measured["rows"] == 5
    missing = once("seed7")  # the seed7 asset's gate: its own rows, one clip without a caption
    assert not missing.passed and missing.failing_ids == (CLIPS[4],) and missing.measured["missing"] == 1
    both = once(None)  # every track at once: the ids name the track
    assert not both.passed and both.failing_ids == (f"{CLIPS[4]}@seed7",) and both.measured["tracks"] == 2


def test_tracks_are_declared_in_yaml_and_become_assets_with_their_gates(tmp_path, monkeypatch):
    from videolake.assets.captions import TRACKS_GROUP, build_caption_tracks
    from videolake.assets.checks import build_gate_checks
    from videolake.resources.captioner import CaptionerResource, load_caption_tracks

    path = tmp_path / "tracks.yaml"
    path.write_text(
        "tracks:\n"
        "  seed7: {seed: 7}\n"
        "  json: {prompt_version: v1-json, max_tokens: 256}\n"
        "  enhanced: {source_track: seed7, input_mode: text, prompt_version: v1-enhance}\n"
    )
    tracks = load_caption_tracks(str(path))
    assert tracks["seed7"] == {"seed": 7} and sorted(tracks) == ["enhanced", "json", "seed7"]
    captioner = CaptionerResource(model="/models/m")
    assets = {a.key.to_user_string(): a for a in build_caption_tracks(captioner, None, tracks)}
    assert sorted(assets) == ["clip_captions", "clip_captions__enhanced", "clip_captions__json", "clip_captions__seed7"]
    assert assets["clip_captions"].group_names_by_key[assets["clip_captions"].key] == "videolake"
    seed7 = assets["clip_captions__seed7"]
    assert seed7.group_names_by_key[seed7.key] == TRACKS_GROUP
    versions = {k: a.code_versions_by_key[a.key] for k, a in assets.items()}
    assert len(set(versions.values())) == 4  # each track's settings are its own code version
    deps = {k: {d.to_user_string() for d in a.asset_deps[a.key]} for k, a in assets.items()}
    assert deps["clip_captions__seed7"] == {"filtered_clips"}
    assert deps["clip_captions__enhanced"] == {"filtered_clips", "clip_captions__seed7"}
    checks = build_gate_checks("clip_captions", track="json")
    assert {k.asset_key.to_user_string() for k in checks.check_keys} == {"clip_captions__json"}

    for bad, why in (
        ("tracks:\n  default: {seed: 1}\n", "own settings"),
        ("tracks:\n  Bad-Name: {seed: 1}\n", "lower-case"),
        ("tracks:\n  x: {sed: 1}\n", "unknown settings"),
        ("tracks:\n  x: {source_track: nowhere, input_mode: text}\n", "not a declared track"),
    ):
        path.write_text(bad)
        with pytest.raises(ValueError, match=why):
            load_caption_tracks(str(path))
    monkeypatch.delenv("VIDEOLAKE_CAPTION_TRACKS", raising=False)
    assert load_caption_tracks() == {}
