"""Semantic duplicates (issue: duplicates a training set must not keep): with an embedding model configured, the
code location has the clip_embeddings asset (real Ray, real Delta, the real torch_clip backend on a tiny
random-weight CLIP built offline) and its gates, filtered_clips depends on it, and two clips whose embeddings are
within eps are one group, the later clip rejected as a `semantic` duplicate naming the kept one. Without a model
neither the asset nor its gates exist."""

from __future__ import annotations

import subprocess
from pathlib import Path

import dagster as dg
import pytest
from landing_days import land, local_resources
from module_ray import joining_local_ray

from videolake.assets.checks import build_gate_checks
from videolake.assets.cpu_assets import build_cpu_assets
from videolake.assets.embeddings import build_clip_embeddings
from videolake.assets.metadata import table_figures
from videolake.assets.partitions import daily_partitions
from videolake.platform.lake.table import PartitionRange
from videolake.resources.embedder import EmbedderResource
from videolake.synth import Segment, VideoSpec, render

pytestmark = pytest.mark.usefixtures("module_ray")  # one Ray for the module's runs (module_ray.py)

DAY = "2026-06-11"
# Lenient quality rules and no near-duplicate fingerprint: only the semantic rule decides here.
LENIENT = {
    "min_clip_s": 0.1,
    "max_black_ratio": 1.0,
    "min_brightness": 0.0,
    "max_brightness": 255.0,
    "max_frozen_ratio": 1.0,
    "min_motion": 0.0,
    "max_motion": 255.0,
    "min_sharpness": 0.0,
    "max_text_area": 1.0,
    "min_width": 16,
    "min_height": 16,
    "dup_max_distance": -1,
    "semantic_eps": 1e-6,
}
RUN_CONFIG = {"ops": {"filtered_clips": {"config": {"thresholds": LENIENT}}}}


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory) -> str:
    from videolake.platform.embedding.tiny_model import build_tiny_clip

    return str(build_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip"))


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("semantic-src")
    out = {}
    for name, source in (("x", "mandelbrot"), ("y", "testsrc2")):
        out[name], _ = render(
            VideoSpec(
                name=name,
                width=320,
                height=240,
                fps="25",
                codec="h264",
                segments=(Segment(source, 40),),
                transitions=(),
            ),
            work,
        )
    # The same pictures in another container: other bytes (not an exact copy), equal decoded frames.
    out["x_remux"] = work / "x_remux.mkv"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(out["x"]), "-c", "copy", str(out["x_remux"])], check=True)
    return out


def test_without_a_model_there_is_no_embeddings_asset(monkeypatch):
    from videolake.definitions import build_definitions

    monkeypatch.delenv("VIDEOLAKE_EMBED_MODEL", raising=False)
    graph = build_definitions("local").resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert "clip_embeddings" not in keys and "filtered_clips" in keys
    assert {k.to_user_string() for k in graph.get(dg.AssetKey("filtered_clips")).parent_keys} == {"scene_clips"}
    assert not [k for k in graph.asset_check_keys if k.asset_key.to_user_string() == "clip_embeddings"]


def test_with_a_model_filtered_clips_reads_the_embeddings(monkeypatch, tiny_clip):
    from videolake.definitions import build_definitions
    from videolake.platform.gates.config import gate_names

    monkeypatch.setenv("VIDEOLAKE_EMBED_MODEL", tiny_clip)
    graph = build_definitions("local").resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get(dg.AssetKey("filtered_clips")).parent_keys} == {
        "scene_clips",
        "clip_embeddings",
    }
    assert {k.to_user_string() for k in graph.get(dg.AssetKey("clip_embeddings")).parent_keys} == {"scene_clips"}
    checks = {k.name for k in graph.asset_check_keys if k.asset_key.to_user_string() == "clip_embeddings"}
    assert checks == set(gate_names("clip_embeddings"))


def test_clips_with_equal_embeddings_are_semantic_duplicates(videos, tiny_clip, tmp_path):
    root = tmp_path / "store"
    land(root, DAY, {"x.mp4": videos["x"], "x_remux.mkv": videos["x_remux"], "y.mp4": videos["y"]})
    embedder = EmbedderResource(model=tiny_clip, backend="torch_clip", device="cpu")
    partitions = daily_partitions()
    raw, scenes, filtered, _shards = build_cpu_assets(partitions, ("clip_embeddings",))
    embeddings = build_clip_embeddings(embedder, partitions)
    # ray_cluster and caption_ray: both join the module's Ray (module_ray.py)
    res = {**local_resources(root, tmp_path / "lake"), "embedder": embedder, "caption_ray": joining_local_ray()}
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [raw, scenes, embeddings, filtered, build_gate_checks("clip_embeddings", None, partitions)],
        partition_key=DAY,
        resources=res,
        instance=instance,
        run_config=RUN_CONFIG,
    )
    assert result.success

    lake = res["lake"].get_lake()
    day = PartitionRange.of([DAY])
    names = {r["video_id"]: Path(r["source_uri"]).name for r in lake.read_partitions("raw_videos", day).to_pylist()}
    clips = {r["clip_id"]: names[r["video_id"]] for r in lake.read_partitions("scene_clips", day).to_pylist()}
    assert sorted(clips.values()) == ["x.mp4", "x_remux.mkv", "y.mp4"]  # one scene each
    vectors = lake.read_partitions("clip_embeddings", day).to_pylist()
    assert sorted(r["clip_id"] for r in vectors) == sorted(clips)  # one row per clip
    assert all(r["status"] == "ok" and r["dim"] == 16 and len(r["embedding"]) == 16 for r in vectors)
    by_name = {clips[r["clip_id"]]: r["embedding"] for r in vectors}
    assert by_name["x.mp4"] == by_name["x_remux.mkv"] != by_name["y.mp4"]

    # the kept clip of the pair is the earlier by (partition_date, clip_id); the other names it
    rows = {clips[r["clip_id"]]: r for r in lake.read_partitions("filtered_clips", day).to_pylist()}
    pair = sorted(cid for cid, name in clips.items() if name.startswith("x"))
    kept, dropped = (clips[pair[0]], clips[pair[1]])
    assert (rows[kept]["passed"], rows[kept]["duplicate_group"], rows[kept]["duplicate_kind"]) == (True, pair[0], None)
    assert (
        rows[dropped]["passed"],
        rows[dropped]["duplicate_group"],
        rows[dropped]["duplicate_kind"],
        rows[dropped]["reject_reason"],
    ) == (False, pair[0], "semantic", "duplicate")
    assert (rows["y.mp4"]["passed"], rows["y.mp4"]["duplicate_group"]) == (True, None)

    # every gate of the embeddings passed; the step reports the similarity distribution to choose eps from
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations == {"one_row_per_clip": True, "vectors_well_formed": True, "failure_rate": True}
    (mat,) = [m for m in result.asset_materializations_for_node("clip_embeddings")]
    similarity = table_figures(mat.metadata["step"])["similarity"][DAY]
    assert similarity is not None and similarity["items"] == 3
    assert similarity["max_similarity"]["max"] == pytest.approx(1.0)
    (tightest,) = [e for e in similarity["by_eps"] if e["eps"] == 0.001]
    assert tightest["duplicates"] >= 1


def test_a_copy_landed_on_a_later_day_is_a_semantic_duplicate_in_any_order(videos, tiny_clip, tmp_path):
    # The later day is materialized first (nothing earlier to compare with: its clips pass), then the earlier day:
    # filtered_clips indexes the earlier day's vectors, finds the later day through the cluster index, judges it
    # again and records a materialization of it. The verdicts are those of the two days materialized in date order.
    later = "2026-06-12"
    root = tmp_path / "store"
    land(root, DAY, {"x.mp4": videos["x"]})
    land(root, later, {"x_remux.mkv": videos["x_remux"], "y.mp4": videos["y"]})
    embedder = EmbedderResource(model=tiny_clip, backend="torch_clip", device="cpu")
    partitions = daily_partitions()
    raw, scenes, filtered, _shards = build_cpu_assets(partitions, ("clip_embeddings",))
    embeddings = build_clip_embeddings(embedder, partitions)
    # ray_cluster and caption_ray: both join the module's Ray (module_ray.py)
    res = {**local_resources(root, tmp_path / "lake"), "embedder": embedder, "caption_ray": joining_local_ray()}
    instance = dg.DagsterInstance.ephemeral()
    lake = res["lake"].get_lake()

    def verdicts() -> dict[str, tuple]:
        both = PartitionRange.of([DAY, later])
        names = {
            r["video_id"]: Path(r["source_uri"]).name for r in lake.read_partitions("raw_videos", both).to_pylist()
        }
        clips = {r["clip_id"]: names[r["video_id"]] for r in lake.read_partitions("scene_clips", both).to_pylist()}
        return {
            clips[r["clip_id"]]: (
                r["partition_date"].isoformat(),
                r["passed"],
                clips.get(r["duplicate_group"]),
                r["duplicate_kept_date"] and r["duplicate_kept_date"].isoformat(),
                r["duplicate_kind"],
            )
            for r in lake.read_partitions("filtered_clips", both).to_pylist()
        }

    results = {}
    for key in (later, DAY):
        results[key] = dg.materialize(
            [raw, scenes, embeddings, filtered],
            partition_key=key,
            resources=res,
            instance=instance,
            run_config=RUN_CONFIG,
        )
        assert results[key].success
        if key == later:
            assert verdicts()["x_remux.mkv"] == (later, True, None, None, None)
    assert verdicts() == {
        "x.mp4": (DAY, True, "x.mp4", DAY, None),
        "x_remux.mkv": (later, False, "x.mp4", DAY, "semantic"),
        "y.mp4": (later, True, None, None, None),
    }
    # the earlier day's run re-judged the later day and recorded it (its downstream shows stale)
    mats = results[DAY].asset_materializations_for_node("filtered_clips")
    assert sorted(m.partition for m in mats) == [DAY, later]
    step = table_figures(next(m for m in mats if m.partition == DAY).metadata["step"])
    assert step["days_reevaluated"] == [later] and step["semantic_pairs"] >= 1
