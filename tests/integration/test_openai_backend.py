"""The ``openai`` backend against a real OpenAI-compatible server: vLLM's own API server with the tiny model on CPU,
the suite's (tests/vllm_server.py: on a free loopback port, with an API key, shared with the deployment tests).

Retries are exercised against the same server through a small forwarding proxy that answers 503 to the first
chat requests: the backend must back off, retry and then get the real server's answer.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import vllm_server as vllm_server_helper

from videolake.benchmarks.caption import tiny_bench_config
from videolake.platform.captioning import CaptionerConfig, EndpointConfig, caption_clips, get_captioner
from videolake.platform.captioning.base import clip_seed
from videolake.platform.captioning.clip_frames import extract_frames

pytestmark = pytest.mark.slow

API_KEY, SERVED_NAME = vllm_server_helper.API_KEY, vllm_server_helper.SERVED_NAME
BASE_ENV, KEY_ENV = "VIDEOLAKE_TEST_OPENAI_BASE_URL", "VIDEOLAKE_TEST_OPENAI_API_KEY"


@pytest.fixture(scope="module")
def vllm_server(caption_server, tiny_model_dir) -> str:
    """The suite's ``python -m vllm.entrypoints.openai.api_server`` on CPU (tests/vllm_server.py), serving the
    tiny model as SERVED_NAME behind API_KEY: its /v1 base URL once /health answers."""
    assert Path(caption_server.model_dir).resolve() == Path(tiny_model_dir).resolve()
    try:
        return caption_server.wait_ready()
    except RuntimeError as e:
        pytest.fail(str(e))


class _Flaky503Proxy(http.server.ThreadingHTTPServer):
    """Forwards to ``upstream``; the first ``failures`` POSTs get 503 with Retry-After: 0."""

    def __init__(self, upstream: str, failures: int) -> None:
        self.upstream, self.failures, self.posts, self.lock = upstream, failures, 0, threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: _Flaky503Proxy

    def log_message(self, *args) -> None:  # quiet
        pass

    def _forward(self, body: bytes | None) -> None:
        req = urllib.request.Request(
            self.server.upstream + self.path,
            data=body,
            method=self.command,
            headers={k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")},
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                status, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, data = e.code, e.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.posts += 1
            fail = self.server.posts <= self.server.failures
        if fail:
            data = b'{"error": "overloaded"}'
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._forward(body)


def _config(tiny_model_dir: str, **endpoint) -> CaptionerConfig:
    ep = EndpointConfig(
        base_url_env=BASE_ENV,
        api_key_env=KEY_ENV,
        served_model_name=SERVED_NAME,
        max_concurrency=2,
        timeout_s=120,
        max_retries=3,
        backoff_s=0.05,
        **endpoint,
    )
    return tiny_bench_config(
        tiny_model_dir, backend="openai", input_mode="images", endpoint=ep, model_name="tiny-qwen2.5-vl-random"
    )


@pytest.fixture
def endpoint_env(monkeypatch, vllm_server):
    monkeypatch.setenv(BASE_ENV, vllm_server)
    monkeypatch.setenv(KEY_ENV, API_KEY)
    return monkeypatch


def _batch(clip_partition, config: CaptionerConfig):
    cols = {c: clip_partition.column(c).to_numpy(zero_copy_only=False) for c in clip_partition.column_names}
    return extract_frames(cols, frame_config=config.frames, input_mode=config.input_mode)


def test_openai_backend_captions_through_a_real_vllm_server(endpoint_env, tiny_model_dir, clip_partition, clip_ids):
    config = _config(tiny_model_dir)
    backend = get_captioner(config)
    backend.setup()
    try:
        out = backend(_batch(clip_partition, config))
    finally:
        backend.teardown()
    rows = {cid: i for i, cid in enumerate(out["clip_id"])}
    for cid in clip_ids["good"]:
        i = rows[cid]
        assert out["status"][i] == "ok", out["error"][i]
        assert out["caption"][i].strip() and out["error"][i] is None
        assert out["prompt_tokens"][i] > 0 and 0 < out["output_tokens"][i] <= 16
        assert out["num_frames"][i] == 4 and out["latency_s"][i] > 0
    # 4 images of the same size + the same text: the server counts the same prompt length for every clip
    assert len({int(out["prompt_tokens"][rows[c]]) for c in clip_ids["good"]}) == 1
    for cid in clip_ids["bad"]:
        assert out["status"][rows[cid]] == "failed"
        assert out["error"][rows[cid]].startswith("frame extraction failed: ")
    assert set(out["model"]) == {"tiny-qwen2.5-vl-random"} and set(out["prompt_version"]) == {"v1-describe"}
    # provenance: the engine as the server reports it (vLLM's API server: owned_by "vllm", GET /version)
    import vllm

    assert set(out["engine"]) == {"openai:vllm"} and set(out["engine_version"]) == {vllm.__version__}
    assert set(out["prompt_sha256"]) == {config.prompt_template().sha256()}
    assert {json.loads(s)["seed"] for s in out["sampling"]} == {
        clip_seed(config.sampling.seed, c) for c in out["clip_id"]
    }


def _through_proxy(endpoint_env, vllm_server, tiny_model_dir, batch, failures: int):
    """Caption ``batch`` via a forwarding proxy that fails the first ``failures`` POSTs; returns (rows, POSTs seen)."""
    proxy = _Flaky503Proxy(vllm_server, failures=failures)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint_env.setenv(BASE_ENV, f"http://127.0.0.1:{proxy.server_address[1]}")
        backend = get_captioner(_config(tiny_model_dir))
        backend.setup()
        try:
            return backend(batch), proxy.posts
        finally:
            backend.teardown()
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_wrong_api_key_fails_each_clip_once_with_the_servers_reason(
    endpoint_env, vllm_server, tiny_model_dir, clip_partition
):
    endpoint_env.setenv(KEY_ENV, "wrong-key")
    batch = _batch(clip_partition.slice(0, 2), _config(tiny_model_dir))
    out, posts = _through_proxy(endpoint_env, vllm_server, tiny_model_dir, batch, failures=0)
    assert list(out["status"]) == ["failed", "failed"]
    for err in out["error"]:
        assert err.startswith("endpoint error: HTTP 401")
    assert posts == 2  # not retried: a 401 will not get better


def test_503s_are_retried_with_backoff_then_succeed(endpoint_env, vllm_server, tiny_model_dir, clip_partition):
    batch = _batch(clip_partition.slice(0, 2), _config(tiny_model_dir))
    out, posts = _through_proxy(endpoint_env, vllm_server, tiny_model_dir, batch, failures=3)
    assert list(out["status"]) == ["ok", "ok"], list(out["error"])
    assert posts == 2 + 3  # two clips, three 503s absorbed by retries


def test_missing_base_url_is_a_setup_error(monkeypatch, tiny_model_dir):
    monkeypatch.delenv(BASE_ENV, raising=False)
    with pytest.raises(RuntimeError, match=BASE_ENV):
        get_captioner(_config(tiny_model_dir)).setup()


def test_openai_backend_in_ray_actors_gets_the_endpoint_env(
    endpoint_env, ray_local, tiny_model_dir, clip_partition, clip_ids
):
    """Through the whole stage: the endpoint variables reach the actors via runtime_env, not the driver's env."""
    table, metrics = caption_clips(clip_partition, _config(tiny_model_dir))
    assert table.column("clip_id").to_pylist() == clip_ids["all"]
    status = dict(zip(table.column("clip_id").to_pylist(), table.column("status").to_pylist()))
    assert [c for c in clip_ids["all"] if status[c] == "ok"] == clip_ids["good"]
    assert metrics.captions == 4 and metrics.failed == 2 and metrics.actors == 1
    assert metrics.output_tokens_per_s > 0


def test_structured_prompt_sends_a_json_schema(endpoint_env, tiny_model_dir, clip_partition):
    """v1-json: the server constrains decoding to the schema; random weights rarely finish the object inside 16
    tokens, so a row is ok only with valid JSON and failed with the parse error otherwise - never ok with junk."""
    config = _config(tiny_model_dir).replace(prompt_version="v1-json")
    backend = get_captioner(config)
    backend.setup()
    try:
        batch = _batch(clip_partition.slice(0, 2), config)
        body = backend.request_body({"clip_id": "x", "frames": batch["frames"][0]})
        assert body["response_format"]["type"] == "json_schema"
        schema = body["response_format"]["json_schema"]["schema"]
        assert schema["required"] == ["caption", "objects", "motion", "camera"]
        assert len([p for p in body["messages"][-1]["content"] if p["type"] == "image_url"]) == 4
        out = backend(batch)
    finally:
        backend.teardown()
    for status, caption, err in zip(out["status"], out["caption"], out["error"]):
        if status == "ok":
            assert isinstance(json.loads(caption), dict)
        else:
            assert err.startswith("invalid JSON output") and "finish_reason=length" in err
            assert caption is None
    assert np.all(out["output_tokens"] > 0)


def test_a_rerun_captions_again_the_clips_that_failed_transiently_and_reuses_the_rest(
    endpoint_env, vllm_server, ray_local, tiny_model_dir, clip_partition, clip_ids, tmp_path
):
    """The whole caption stage twice on one lake: in the first run the endpoint answers 503 to every request (the
    backend's retries run out: transient), in the second it answers. The second run captions exactly the clips
    that failed transiently; the clips that cannot decode (permanent) are reused, not sent again."""
    from videolake.platform.captioning.stage import caption_partitions
    from videolake.platform.lake.table import Lake, PartitionRange

    lake = Lake(str(tmp_path / "lake"))
    days = PartitionRange.of([clip_partition.column("partition_date")[0].as_py().isoformat()])
    config = _config(tiny_model_dir)
    proxy = _Flaky503Proxy(vllm_server, failures=10**9)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    endpoint_env.setenv(BASE_ENV, f"http://127.0.0.1:{proxy.server_address[1]}")

    def rows():
        t = lake.read_partitions("clip_captions", days)
        return {r["clip_id"]: (r["status"], r["failure_class"]) for r in t.to_pylist()}

    try:
        first = caption_partitions(lake, days, config, inputs=clip_partition)
        got = rows()
        assert {c: got[c] for c in clip_ids["good"]} == {c: ("failed", "transient") for c in clip_ids["good"]}
        assert {c: got[c] for c in clip_ids["bad"]} == {c: ("failed", "permanent") for c in clip_ids["bad"]}
        assert (first.clips_retried, first.clips_reused) == (0, 0)
        assert proxy.posts == len(clip_ids["good"]) * (config.endpoint.max_retries + 1)

        proxy.failures, proxy.posts = 0, 0  # the endpoint is back
        second = caption_partitions(lake, days, config, inputs=clip_partition)
        got = rows()
        assert {c: got[c] for c in clip_ids["good"]} == {c: ("ok", None) for c in clip_ids["good"]}
        assert {c: got[c] for c in clip_ids["bad"]} == {c: ("failed", "permanent") for c in clip_ids["bad"]}
        assert len(got) == len(clip_ids["all"])  # one row per clip: the transient rows were replaced
        assert (second.clips_retried, second.clips_reused, second.clips_computed) == (4, 2, 4)
        assert second.progress.units_retried >= 1
        assert proxy.posts == len(clip_ids["good"])  # only the retried clips reached the endpoint

        third = caption_partitions(lake, days, config, inputs=clip_partition)
        assert (third.clips_retried, third.clips_reused, third.clips_computed) == (0, 6, 0)
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_a_refused_request_is_a_permanent_failure_and_is_not_sent_again(
    endpoint_env, vllm_server, tiny_model_dir, clip_partition
):
    endpoint_env.setenv(KEY_ENV, "wrong-key")
    batch = _batch(clip_partition.slice(0, 2), _config(tiny_model_dir))
    out, _ = _through_proxy(endpoint_env, vllm_server, tiny_model_dir, batch, failures=0)
    assert list(out["failure_class"]) == ["permanent", "permanent"]
    out, _ = _through_proxy(endpoint_env, vllm_server, tiny_model_dir, batch, failures=10**9)
    assert list(out["failure_class"]) == ["transient", "transient"]  # 503 until the retries ran out
