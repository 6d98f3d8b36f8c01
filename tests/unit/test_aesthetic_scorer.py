"""The ``aesthetic`` scorer (videolake.platform.filters.scorers.aesthetic) and model directories (scorers.model_dir).

A tiny image-scoring graph (flatten, a 4-unit ReLU layer, a sigmoid head scaled to 0..10) with fixed random weights
is written as ONNX by hand (the ``onnx`` package is not a dependency: the protobuf fields are encoded below), with a
``videolake-model.json`` beside it, under tmp. The scorer, pointed at that directory, at a ``file://`` URI, and at an
``s3://`` prefix on a real S3 server (SeaweedFS), must give exactly the scores numpy gives for the same graph on the
same frames of real footage (bikes.mp4), preprocessed as the json says. Bad and missing directories give errors that
say what is wrong.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import videolake.platform.filters.scorers.aesthetic  # noqa: F401 - registers the scorer (the lead adds it to the list)
from videolake.platform.filters.quality import QualityConfig, check_scorers, score_video_clips
from videolake.platform.filters.scorers import model_dir
from videolake.platform.filters.scorers.model_dir import MODEL_FILE, SPEC_FILE, ModelDirError, load_model_dir, read_spec
from videolake.platform.params import ParamError
from videolake.platform.video.clip_pixels import VideoPixels
from videolake.platform.video.frames import compute_frame_stats

# ------------------------------------------------------------------------------------------------ ONNX by hand


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _len(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, text: str) -> bytes:
    return _len(field, text.encode())


FLOAT = 1  # TensorProto.FLOAT


def _tensor(name: str, array: np.ndarray) -> bytes:  # TensorProto: dims 1, data_type 2, name 8, raw_data 9
    dims = b"".join(_int(1, d) for d in array.shape)
    return dims + _int(2, FLOAT) + _str(8, name) + _len(9, np.ascontiguousarray(array, "<f4").tobytes())


def _value_info(name: str, dims: list[int | str]) -> bytes:  # ValueInfoProto -> TypeProto.Tensor -> shape
    shape = b"".join(_len(1, _int(1, d) if isinstance(d, int) else _str(2, d)) for d in dims)
    return _str(1, name) + _len(2, _len(1, _int(1, FLOAT) + _len(2, shape)))


def _node(op: str, inputs: list[str], outputs: list[str]) -> bytes:  # NodeProto: input 1, output 2, op_type 4
    return b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs) + _str(4, op)


def tiny_graph(weights: dict[str, np.ndarray], input_dims: list[int | str], batch: int | str = "n") -> bytes:
    """ModelProto of score = 10 * sigmoid(relu(flatten(x) @ w1 + b1) @ w2 + b2), shape [batch, 1]."""
    nodes = [
        _node("Flatten", ["pixels"], ["flat"]),
        _node("MatMul", ["flat", "w1"], ["h"]),
        _node("Add", ["h", "b1"], ["hb"]),
        _node("Relu", ["hb"], ["r"]),
        _node("MatMul", ["r", "w2"], ["o"]),
        _node("Add", ["o", "b2"], ["ob"]),
        _node("Sigmoid", ["ob"], ["s"]),
        _node("Mul", ["s", "ten"], ["score"]),
    ]
    inits = {**weights, "ten": np.array([10.0], np.float32)}
    graph = (
        b"".join(_len(1, n) for n in nodes)
        + _str(2, "tiny_aesthetic")
        + b"".join(_len(5, _tensor(k, v)) for k, v in inits.items())
        + _len(11, _value_info("pixels", [batch, *input_dims]))
        + _len(12, _value_info("score", [batch, 1]))
    )
    # ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (OperatorSetIdProto version 2)
    return _int(1, 8) + _str(2, "videolake-test") + _len(7, graph) + _len(8, _int(2, 13))


def by_hand(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    h = np.maximum(x.reshape(len(x), -1).astype(np.float64) @ w["w1"] + w["b1"], 0.0)
    return 10.0 / (1.0 + np.exp(-(h @ w["w2"] + w["b2"])))[:, 0]


# ------------------------------------------------------------------------------------------------ model directories

HEIGHT, WIDTH = 12, 16
MEAN, STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]  # CLIP's
SPEC = {
    "input_size": [HEIGHT, WIDTH],
    "mean": MEAN,
    "std": STD,
    "layout": "NCHW",
    "output_name": "score",
    "output": {"meaning": "aesthetic rating (a test graph with random weights)", "range": [0, 10]},
    "license": "CC0-1.0",
    "source": "tests/unit/test_aesthetic_scorer.py",
}


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = 3 * HEIGHT * WIDTH
    return {
        "w1": rng.normal(0, 0.05, (n, 4)).astype(np.float32),
        "b1": rng.normal(0, 0.1, 4).astype(np.float32),
        "w2": rng.normal(0, 0.5, (4, 1)).astype(np.float32),
        "b2": np.array([0.3], np.float32),
    }


def write_model(path: Path, spec: dict, weights: dict, input_dims: list, batch: int | str = "n") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / MODEL_FILE).write_bytes(tiny_graph(weights, input_dims, batch))
    (path / SPEC_FILE).write_text(json.dumps(spec, indent=1))
    return path


@pytest.fixture(autouse=True)
def _fresh_resolution():
    model_dir.forget()  # each test resolves its locations itself
    yield
    model_dir.forget()


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return _weights(7)


@pytest.fixture(scope="module")
def nchw_dir(tmp_path_factory, weights) -> Path:
    return write_model(tmp_path_factory.mktemp("models") / "aesthetic", SPEC, weights, [3, HEIGHT, WIDTH])


@pytest.fixture(scope="module")
def bikes() -> str:
    from videolake.evaluation.corpus import fetch

    return str(fetch(names=["bikes.mp4"])["bikes.mp4"])


CLIPS = [
    {"clip_id": f"b{s}", "video_id": "bikes", "start_frame": s, "end_frame": e, "duration_s": 2.0, "clip_index": i}
    for i, (s, e) in enumerate([(0, 60), (137, 188), (200, 203)])
]


@pytest.fixture(scope="module")
def bikes_stats(bikes):
    return compute_frame_stats(bikes)


def _score(bikes, stats, params: dict) -> list[dict]:
    config = QualityConfig(scorers=("aesthetic",), scorer_params={"aesthetic": params})
    return score_video_clips(CLIPS, stats, None, config, pixels=VideoPixels(bikes, CLIPS, requests=[(4, 640 * 360)]))


def _reference_prep(frames: np.ndarray, spec: dict) -> np.ndarray:
    """The json's preprocessing written out again: resize (centre crop or stretch), channels, scale, mean/std,
    layout."""
    height, width = spec["input_size"]
    out = []
    for f in frames:
        img = Image.fromarray(f)
        if spec.get("resize", "center_crop") == "stretch":
            img = img.resize((width, height), Image.Resampling.BICUBIC)
        else:
            s = max(height / img.height, width / img.width)
            w, h = round(img.width * s), round(img.height * s)
            img = img.resize((w, h), Image.Resampling.BICUBIC)
            x, y = (w - width) // 2, (h - height) // 2
            img = img.crop((x, y, x + width, y + height))
        a = np.asarray(img, np.float64)
        if spec.get("channels") == "BGR":
            a = a[..., ::-1]
        a = (a / 255.0 - np.array(spec["mean"])) / np.array(spec["std"])
        out.append(a.transpose(2, 0, 1) if spec.get("layout", "NCHW") == "NCHW" else a)
    return np.stack(out)


def _expected(bikes, spec, weights) -> list[float]:
    pixels = VideoPixels(bikes, CLIPS)
    return [float(by_hand(_reference_prep(pixels(c, 4, 640 * 360), spec), weights).mean()) for c in CLIPS]


# ------------------------------------------------------------------------------------------------ the scorer


def test_scores_are_the_graph_on_the_clips_frames(bikes, bikes_stats, nchw_dir, weights):
    expected = _expected(bikes, SPEC, weights)
    assert len(set(np.round(expected, 4))) == 3  # the clips score apart: a mix-up would show
    rows = _score(bikes, bikes_stats, {"model": str(nchw_dir)})
    got = [r["scores"]["aesthetic_score"] for r in rows]
    assert got == pytest.approx(expected, abs=1e-4)
    assert [r["reject_reason"] for r in rows] == [None, None, None]  # min_score 0: nothing rejected
    # file:// is the same directory, used in place
    rows = _score(bikes, bikes_stats, {"model": nchw_dir.as_uri()})
    assert [r["scores"]["aesthetic_score"] for r in rows] == pytest.approx(expected, abs=1e-4)


def test_low_aesthetic_rule_and_score_only(bikes, bikes_stats, nchw_dir, weights):
    expected = _expected(bikes, SPEC, weights)
    low, mid = sorted(expected)[:2]
    cut = (low + mid) / 2  # the lowest clip is rejected, the others pass
    rows = _score(bikes, bikes_stats, {"model": str(nchw_dir), "min_score": str(cut)})
    assert [r["reject_reason"] for r in rows] == ["low_aesthetic" if e < cut else None for e in expected]
    assert sum(r["reject_reason"] == "low_aesthetic" for r in rows) == 1
    rows = _score(bikes, bikes_stats, {"model": str(nchw_dir), "min_score": str(cut), "score_only": "true"})
    assert [r["reject_reason"] for r in rows] == [None, None, None]


def test_other_layouts_channels_resize_and_a_batch_of_one(bikes, bikes_stats, tmp_path, weights):
    spec = {**SPEC, "layout": "NHWC", "channels": "BGR", "resize": "stretch", "input_size": [HEIGHT, WIDTH]}
    spec.pop("output_name")  # the graph's first output
    path = write_model(tmp_path / "nhwc", spec, weights, [HEIGHT, WIDTH, 3], batch=1)
    rows = _score(bikes, bikes_stats, {"model": str(path)})
    got = [r["scores"]["aesthetic_score"] for r in rows]
    assert got == pytest.approx(_expected(bikes, spec, weights), abs=1e-4)
    assert got != pytest.approx(_expected(bikes, SPEC, weights), abs=1e-3)  # the settings matter


def test_model_is_required():
    with pytest.raises(ParamError, match="'model' is required"):
        check_scorers(QualityConfig(scorers=("aesthetic",)))


# ------------------------------------------------------------------------------------------------ errors


def _broken(tmp_path: Path, nchw_dir: Path, name: str) -> Path:
    path = tmp_path / name
    shutil.copytree(nchw_dir, path)
    return path


def test_missing_and_bad_directories_say_what_is_wrong(tmp_path, nchw_dir):
    with pytest.raises(ModelDirError, match="does not exist"):
        load_model_dir(str(tmp_path / "nowhere"))
    no_model = _broken(tmp_path, nchw_dir, "no_model")
    (no_model / MODEL_FILE).unlink()
    with pytest.raises(ModelDirError, match="has no model.onnx"):
        load_model_dir(str(no_model))
    no_spec = _broken(tmp_path, nchw_dir, "no_spec")
    (no_spec / SPEC_FILE).unlink()
    with pytest.raises(ModelDirError, match="has no videolake-model.json"):
        load_model_dir(str(no_spec))
    bad = _broken(tmp_path, nchw_dir, "bad_json")
    (bad / SPEC_FILE).write_text('{"input_size": [12, 16],')
    with pytest.raises(ModelDirError, match="videolake-model.json is not valid JSON"):
        load_model_dir(str(bad))
    cases = {
        "license": ("field 'license' is required", lambda s: s.pop("license")),
        "layout": (r"'layout' must be one of \['NCHW', 'NHWC'\]", lambda s: s.update(layout="CHW")),
        "mean": ("'mean' must be a list of 3 numbers", lambda s: s.update(mean=[0.5, 0.5])),
        "std": ("'std' must be positive", lambda s: s.update(std=[0.2, 0.0, 0.2])),
        "range": ("low < high", lambda s: s.update(output={"meaning": "x", "range": [10, 0]})),
        "typo": (r"unknown fields \['lisence'\]", lambda s: s.update(lisence="MIT")),
    }
    for name, (message, change) in cases.items():
        spec = json.loads(json.dumps(SPEC))
        change(spec)
        path = _broken(tmp_path, nchw_dir, name)
        (path / SPEC_FILE).write_text(json.dumps(spec))
        with pytest.raises(ModelDirError, match=message):
            read_spec(str(path))
    with pytest.raises(ModelDirError, match="use a directory, file://... or s3://"):
        load_model_dir("gs://bucket/models/aesthetic")


def test_a_graph_that_does_not_match_its_json(bikes, bikes_stats, tmp_path, nchw_dir):
    path = _broken(tmp_path, nchw_dir, "wrong_output")
    (path / SPEC_FILE).write_text(json.dumps({**SPEC, "output_name": "logits"}))
    with pytest.raises(ModelDirError, match="has no output 'logits'"):
        _score(bikes, bikes_stats, {"model": str(path)})


# ------------------------------------------------------------------------------------------------ an S3 prefix


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    """A real S3 server (SeaweedFS, as the integration tests' fixture: tests/integration/s3_server.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    try:
        from s3_server import start_seaweed
    finally:
        sys.path.pop(0)
    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    try:
        yield server
    finally:
        server.close()


@pytest.mark.slow  # ~5 s: starts an S3 server
def test_an_s3_prefix_is_copied_once_and_scores_the_same(
    bikes, bikes_stats, nchw_dir, weights, seaweed, tmp_path, monkeypatch
):
    from videolake.platform.objectstore import S3ObjectStore

    store = S3ObjectStore(
        seaweed.bucket,
        endpoint_url=seaweed.endpoint_url,
        region=seaweed.region,
        access_key_id=seaweed.access_key,
        secret_access_key=seaweed.secret_key,
    )
    prefix = f"{uuid.uuid4().hex[:8]}/models/aesthetic"
    for name in (MODEL_FILE, SPEC_FILE):
        store.put_file(f"{prefix}/{name}", str(nchw_dir / name))
    # The worker's own connection, as the Ray pods have it (k8s/): endpoint, region, credentials from the environment.
    monkeypatch.setenv("VIDEOLAKE_S3_ENDPOINT_URL", seaweed.endpoint_url)
    monkeypatch.setenv("VIDEOLAKE_S3_REGION", seaweed.region)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    monkeypatch.setenv("VIDEOLAKE_MODEL_CACHE", str(tmp_path / "cache"))
    uri = f"s3://{seaweed.bucket}/{prefix}/"
    rows = _score(bikes, bikes_stats, {"model": uri})
    assert [r["scores"]["aesthetic_score"] for r in rows] == pytest.approx(_expected(bikes, SPEC, weights), abs=1e-4)
    model = load_model_dir(uri)
    assert Path(model.path).parent == tmp_path / "cache"
    assert (Path(model.path) / MODEL_FILE).read_bytes() == (nchw_dir / MODEL_FILE).read_bytes()
    copied = (Path(model.path) / MODEL_FILE).stat().st_mtime_ns
    model_dir.forget()  # a new process: the verified copy is used, not copied again
    assert load_model_dir(uri).path == model.path
    assert (Path(model.path) / MODEL_FILE).stat().st_mtime_ns == copied
    with pytest.raises(ModelDirError, match="no model files under"):
        load_model_dir(f"s3://{seaweed.bucket}/{prefix}-missing/")
