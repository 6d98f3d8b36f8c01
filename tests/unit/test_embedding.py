"""Clip embeddings (torch_clip on a tiny random-weight CLIP, real decoded frames) and semantic deduplication."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys

import numpy as np
import pytest

from videolake.platform.embedding import EMBEDDERS, EmbedderConfig, embedding_version, get_embedder, model_label
from videolake.platform.embedding.semantic import (
    SemanticDedupConfig,
    cluster_labels,
    components,
    duplicate_pairs,
    kmeans,
    similarity_summary,
)
from videolake.platform.embedding.tiny_model import COMPLETE_MARKER, build_tiny_clip
from videolake.platform.params import ParamError

EMPTY = np.zeros((0, 0, 0, 3), dtype=np.uint8)


# -- fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    return build_tiny_clip(tmp_path_factory.mktemp("models") / "tiny-clip")


@pytest.fixture(scope="module")
def frames(tmp_path_factory, ffmpeg) -> dict[str, np.ndarray]:
    """4 frames of each of two 1-second 160x120 videos (testsrc2, mandelbrot), decoded by the captioner's extractor."""
    from videolake.platform.captioning.clip_frames import extract_clip

    out = {}
    config = EmbedderConfig(model="unused").frame_config()
    for name in ("testsrc2", "mandelbrot"):
        path = tmp_path_factory.mktemp("videos") / f"{name}.mp4"
        subprocess.run(
            [
                ffmpeg,
                "-v",
                "error",
                "-y",
                "-f",
                "lavfi",
                "-i",
                f"{name}=size=160x120:rate=10",
                "-t",
                "1",
                "-pix_fmt",
                "yuv420p",
                str(path),
            ],
            check=True,
        )
        row = {"source_uri": str(path), "start_frame": 0, "end_frame": 10, "fps": 10.0, "clip_uri": None}
        out[name] = extract_clip(row, config, even=True).frames
    return out


def _batch(rows: list[tuple[str, np.ndarray, str]]) -> dict[str, np.ndarray]:
    frames = np.empty(len(rows), dtype=object)
    for i, (_, f, _) in enumerate(rows):
        frames[i] = f
    return {
        "clip_id": np.array([r[0] for r in rows], dtype=object),
        "frames": frames,
        "frame_error": np.array([r[2] for r in rows], dtype=object),
    }


def _embed(model_dir, rows, **config) -> dict[str, np.ndarray]:
    embedder = get_embedder(EmbedderConfig(model=str(model_dir), **config))
    try:
        return embedder(_batch(rows))
    finally:
        embedder.teardown()


# -- the tiny model -----------------------------------------------------------------------------------------------


def test_tiny_clip_is_idempotent_deterministic_and_rebuilds_incomplete(tiny_clip, tmp_path):
    marker = tiny_clip / COMPLETE_MARKER
    assert marker.is_file()
    assert (tiny_clip / "config.json").is_file() and (tiny_clip / "preprocessor_config.json").is_file()
    before = marker.stat().st_mtime_ns
    assert build_tiny_clip(tiny_clip) == tiny_clip and marker.stat().st_mtime_ns == before  # not rebuilt

    incomplete = tmp_path / "tiny-clip"
    incomplete.mkdir()
    (incomplete / "junk.bin").write_bytes(b"half a model")
    assert build_tiny_clip(incomplete) == incomplete.resolve()
    assert not (incomplete / "junk.bin").exists() and (incomplete / COMPLETE_MARKER).is_file()

    def digest(d):
        return hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()

    assert digest(incomplete) == digest(tiny_clip)  # seeded: the same weights
    assert model_label(incomplete) == model_label(tiny_clip)  # the label hashes config, not the directory's path
    assert model_label(tiny_clip).startswith("tiny-clip@") and len(model_label(tiny_clip)) == len("tiny-clip@") + 8


# -- the torch_clip backend ---------------------------------------------------------------------------------------


def test_embeds_real_frames(tiny_clip, frames):
    a, b = frames["testsrc2"], frames["mandelbrot"]
    assert a.shape == (4, 120, 160, 3) and a.dtype == np.uint8
    out = _embed(tiny_clip, [("a", a, ""), ("b", b, ""), ("a_copy", a.copy(), "")], device="cpu")
    assert list(out["clip_id"]) == ["a", "b", "a_copy"]
    assert list(out["status"]) == ["ok"] * 3 and list(out["error"]) == [None] * 3
    assert list(out["dim"]) == [16, 16, 16]
    assert list(out["model"]) == [model_label(tiny_clip)] * 3
    e = np.stack(list(out["embedding"]))
    assert e.dtype == np.float32 and e.shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-6)
    assert float(e[0] @ e[2]) == pytest.approx(1.0, abs=1e-6)  # identical frames
    assert float(e[0] @ e[1]) < 0.999  # another picture (random weights: not far, but not equal)


def test_clip_vector_is_the_normalised_mean_of_its_frame_vectors(tiny_clip, frames):
    a = frames["testsrc2"]
    out = _embed(tiny_clip, [("clip", a, "")] + [(f"f{i}", a[i : i + 1], "") for i in range(len(a))], device="cpu")
    e = np.stack(list(out["embedding"])).astype(np.float64)
    mean = e[1:].mean(axis=0)
    np.testing.assert_allclose(e[0], mean / np.linalg.norm(mean), atol=1e-5)


def test_deterministic_across_loads_and_batching(tiny_clip, frames):
    rows = [("a", frames["testsrc2"], ""), ("b", frames["mandelbrot"], "")]
    first = np.stack(list(_embed(tiny_clip, rows)["embedding"]))
    second = np.stack(list(_embed(tiny_clip, rows, params={"frames_per_forward": "3"})["embedding"]))
    alone = np.stack([_embed(tiny_clip, [r])["embedding"][0] for r in rows])
    np.testing.assert_allclose(second, first, atol=1e-6)
    np.testing.assert_allclose(alone, first, atol=1e-6)


def test_frames_per_clip_samples_evenly(tiny_clip, frames):
    eight = np.concatenate([frames["testsrc2"], frames["mandelbrot"]])  # 8 frames
    out = _embed(tiny_clip, [("eight", eight, ""), ("picked", eight[[1, 3, 5, 7]], "")], frames_per_clip=4)
    e = list(out["embedding"])
    np.testing.assert_allclose(e[0], e[1], atol=1e-6)


def test_failed_rows_are_rows_with_their_reason(tiny_clip, frames):
    a = frames["testsrc2"]
    out = _embed(
        tiny_clip,
        [
            ("ok1", a, ""),
            ("bad", EMPTY, "ValueError: cannot open video"),
            ("nothing", EMPTY, ""),
            ("ok2", frames["mandelbrot"], ""),
        ],
    )
    assert list(out["status"]) == ["ok", "failed", "failed", "ok"]
    assert out["error"][1] == "frame extraction failed: ValueError: cannot open video"
    assert out["error"][2].startswith("no frames:")
    assert list(out["failure_class"]) == [None, "permanent", "permanent", None]
    assert [len(v) for v in out["embedding"]] == [16, 0, 0, 16] and list(out["dim"]) == [16, 0, 0, 16]
    assert out["embedding"][1].dtype == np.float32


def test_a_model_error_fails_only_its_clip(tiny_clip, frames):
    embedder = get_embedder(EmbedderConfig(model=str(tiny_clip)))
    embedder.setup()
    real = embedder.embed

    def embed(clips):
        if any(c.shape[0] == 1 for c in clips):
            raise RuntimeError("poison clip")
        return real(clips)

    embedder.embed = embed
    out = embedder(
        _batch([("a", frames["testsrc2"], ""), ("poison", frames["testsrc2"][:1], ""), ("b", frames["mandelbrot"], "")])
    )
    assert list(out["status"]) == ["ok", "failed", "ok"]
    assert out["error"][1] == "model error: RuntimeError: poison clip"
    assert list(out["dim"]) == [16, 0, 16]


def test_config_registry_and_resources(tiny_clip):
    cls = EMBEDDERS.get("torch_clip")
    assert cls.registered_name == "torch_clip"
    config = EmbedderConfig(model=str(tiny_clip))
    assert cls.replica_resources(config).num_gpus == 0
    assert cls.replica_resources(EmbedderConfig(model=str(tiny_clip), device="cuda")).num_gpus == 1
    with pytest.raises(ValueError, match="device"):
        EmbedderConfig(model="m", device="tpu")
    with pytest.raises(ParamError, match="unknown parameter 'pool'"):
        get_embedder(EmbedderConfig(model=str(tiny_clip), params={"pool": "max"}))
    with pytest.raises(ParamError, match="dtype"):
        get_embedder(EmbedderConfig(model=str(tiny_clip), params={"dtype": "int8"}))
    parsed = get_embedder(EmbedderConfig(model=str(tiny_clip), params={"frames_per_forward": "7"})).params
    assert parsed.frames_per_forward == 7
    # the version follows what changes the vectors, not the batch size
    assert embedding_version(config) == embedding_version(EmbedderConfig(model=str(tiny_clip), batch_size=2))
    assert embedding_version(config) != embedding_version(EmbedderConfig(model=str(tiny_clip), frames_per_clip=8))
    assert EmbedderConfig(model="m", model_name="clip@abc").model_label == "clip@abc"


def test_the_package_imports_no_heavy_modules():
    code = (
        "import sys, videolake.platform.embedding, videolake.platform.embedding.semantic, "
        "videolake.platform.embedding.tiny_model; "
        "print([m for m in ('torch', 'transformers', 'dagster', 'ray') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


# -- k-means ------------------------------------------------------------------------------------------------------


def _blobs(seed: int = 0, per: int = 10, d: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = np.eye(d)[:3] * 10
    x = np.concatenate([c + rng.normal(scale=0.1, size=(per, d)) for c in centres])
    return x, np.repeat(np.arange(3), per)


def test_kmeans_is_deterministic_and_finds_separated_blobs():
    x, truth = _blobs()
    c1, l1 = kmeans(x, 3, iterations=20, seed=7)
    c2, l2 = kmeans(x, 3, iterations=20, seed=7)
    assert np.array_equal(l1, l2) and np.array_equal(c1, c2)

    # the same partition as the blobs (cluster numbers may differ)
    def parts(labels):
        return {frozenset(np.flatnonzero(labels == k).tolist()) for k in set(labels.tolist())}

    assert parts(l1) == parts(truth)


def test_kmeans_with_fewer_distinct_points_than_k():
    x = np.array([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 2)
    centroids, labels = kmeans(x, 4, seed=0)
    assert len(centroids) == 2
    assert len(set(labels[:3])) == 1 and len(set(labels[3:])) == 1 and labels[0] != labels[3]


# -- semantic dedup -----------------------------------------------------------------------------------------------


def _planted(d: int = 32, n_far: int = 30, seed: int = 0):
    """Far-apart random unit vectors with planted near-duplicates, built from orthonormal directions so that the
    similarities are exact: group A = {0, 1} at cos 0.999; group B = {2, 3, 4}: 3 and 4 at cos 0.999 to 2 (and
    0.998001 to each other); chain C = {5, 6, 7}: 5-6 and 6-7 at cos 0.995, 5-7 at 0.98005 (grouped only through 6)."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    basis = q.T  # orthonormal rows
    s999 = math.sqrt(1 - 0.999**2)
    theta = math.acos(0.995)
    x = np.empty((8 + n_far, d))
    x[0] = basis[0]
    x[1] = 0.999 * basis[0] + s999 * basis[1]
    x[2] = basis[2]
    x[3] = 0.999 * basis[2] + s999 * basis[3]
    x[4] = 0.999 * basis[2] + s999 * basis[4]
    for i, k in enumerate((0, 1, 2)):
        x[5 + i] = math.cos(k * theta) * basis[5] + math.sin(k * theta) * basis[6]
    rng = np.random.default_rng(seed + 1)
    far = rng.normal(size=(n_far, d))
    x[8:] = far / np.linalg.norm(far, axis=1, keepdims=True)
    return x.astype(np.float32)


def test_eps_zero_groups_only_equal_vectors():
    x = _planted()
    nudged = x[9].copy()
    nudged[0] = np.nextafter(nudged[0], np.float32(2))  # one float32 step away
    x = np.concatenate([x, x[8:9], 2 * x[8:9], nudged[None]])  # 38 = 8 copied, 39 = 8 scaled by 2, 40 ~ 9
    n = len(x)
    labels = np.zeros(n, dtype=np.int64)
    assert duplicate_pairs(x, labels, 0.0).tolist() == [[8, 38], [8, 39], [38, 39]]
    assert [9, 40] in duplicate_pairs(x, labels, 1e-6).tolist()


def test_components_are_connected_groups():
    assert components(6, np.array([[0, 3], [3, 5], [1, 2]])) == [[0, 3, 5], [1, 2]]
    assert components(3, np.zeros((0, 2), dtype=np.int64)) == []


def test_similarity_summary_counts():
    e = np.eye(8)
    c96 = (0.96, math.sqrt(1 - 0.96**2))
    c92 = (0.92, math.sqrt(1 - 0.92**2))
    x = np.stack(
        [
            e[1],
            e[1],  # equal: max similarity 1.0 each
            e[2],
            c96[0] * e[2] + c96[1] * e[3],  # 0.96 each
            e[4],  # nothing near: 0.0
            e[5],
            c92[0] * e[5] + c92[1] * e[6],  # 0.92 each
            e[7],  # alone in cluster 1
        ]
    )
    labels = np.array([0] * 7 + [1])
    s = similarity_summary(x, labels, bins=20)
    assert (s["items"], s["clusters"], s["largest_cluster"], s["singletons"]) == (8, 2, 7, 1)
    m = s["max_similarity"]
    assert m["p50"] == pytest.approx(0.96) and m["p90"] == pytest.approx(1.0) and m["max"] == 1.0
    edges = m["histogram"]["edges"]
    assert edges[0] == 0.0 and edges[-1] == 1.0 and len(edges) == 21
    expected_counts = [0] * 20
    expected_counts[0], expected_counts[18], expected_counts[19] = 1, 2, 4
    assert m["histogram"]["counts"] == expected_counts
    assert [(b["eps"], b["pairs"], b["groups"], b["duplicates"]) for b in s["by_eps"]] == [
        (0.001, 1, 1, 1),
        (0.01, 1, 1, 1),
        (0.05, 2, 2, 2),
        (0.1, 3, 3, 3),
    ]


def test_similarity_summary_agrees_with_the_pairs_and_their_groups():
    x = _planted()
    config = SemanticDedupConfig(n_clusters=3)
    labels = cluster_labels(x, config)
    by_eps = {b["eps"]: b for b in similarity_summary(x, labels)["by_eps"]}
    groups = components(len(x), duplicate_pairs(x, labels, 0.01))
    removed = sum(len(g) - 1 for g in groups)
    assert by_eps[0.01]["duplicates"] == removed == 5 and by_eps[0.01]["pairs"] == 6 and by_eps[0.01]["groups"] == 3
