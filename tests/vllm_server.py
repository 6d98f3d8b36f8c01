"""vLLM's own OpenAI-compatible API server with a tiny test model on CPU, for the tests that caption through the
``openai`` backend: started on a free loopback port in its own process group, killed by group at the end.

Users: test_openai_backend (the backend against a real server), and the deployments of the browser and
run-recovery tests (``start_for_deployment``), whose caption steps send their clips to one server instead of
starting a vLLM engine in a Ray actor for every caption step (~17 CPU-s each, one step after another because of the
``gpu`` pool). The in-actor engine keeps its own tests: test_captioning, test_kill_resume, test_pipeline_s3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from free_port import free_port
from procs_stop import stop_group

READY_TIMEOUT_S = 420
# ``python -c`` this, then the server's arguments: build the tiny model at --model, then run the server as ``-m``.
_BUILD_THEN_SERVE = """
import runpy, sys
from videolake.platform.captioning.tiny_model import build_tiny_qwen_vl
build_tiny_qwen_vl(sys.argv[sys.argv.index("--model") + 1])
sys.argv[0] = "{server}"
runpy.run_module("{server}", run_name="__main__", alter_sys=True)
"""


@dataclass
class VllmServer:
    proc: subprocess.Popen
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> str:
        """Until /health answers 200; returns the /v1 base URL. Raises RuntimeError when the server exits or does
        not answer in time (its log's tail in the message)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return self.base_url
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM server not healthy after {timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL if it does not exit (background processes may ignore
        TERM)."""
        stop_group(self.proc, timeout_s=15)


def start(
    model_dir: str,
    log_path: Path,
    served_name: str | None = None,
    api_key: str | None = None,
    max_images: int = 8,
    build_tiny: bool = False,
) -> VllmServer:
    """Start the server (returns at once: ``wait_ready`` before the first request). ``served_name``: the model name
    clients send (default: ``model_dir``, vLLM's own default); ``max_images``: images per prompt (a caption request
    sends one per sampled frame); ``build_tiny``: the server's process first builds the tiny model into
    ``model_dir`` (a no-op when it is complete), so the build's imports are the server's own and the caller goes on
    meanwhile."""
    from videolake.platform.captioning.base import TINY_MODEL_ENGINE_THREADS, vllm_env

    port = free_port()
    env = {**os.environ, **vllm_env(TINY_MODEL_ENGINE_THREADS)}  # the engine's environment, as in a caption actor
    server = "vllm.entrypoints.openai.api_server"
    if build_tiny:
        cmd = [sys.executable, "-c", _BUILD_THEN_SERVE.format(server=server), "--model", model_dir]
    else:
        cmd = [sys.executable, "-m", server, "--model", model_dir]
    cmd += ["--served-model-name", served_name] if served_name else []
    cmd += ["--api-key", api_key] if api_key else []
    cmd += [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "8",
        "--limit-mm-per-prompt",
        json.dumps({"image": max_images, "video": 0}),
        "--uvicorn-log-level",
        "warning",
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return VllmServer(proc=proc, port=port, log_path=log_path)


def start_for_deployment(data_dir: Path, log_path: Path) -> VllmServer:
    """A server for a deployment with no captioning model configured (VIDEOLAKE_DATA_DIR ``data_dir``): the tiny
    model's policy still applies there (its name, its lenient content gates), so the server serves the model that
    policy would build, built by the server's process where the policy puts it, under that path, the model name the
    backend sends. A caption step that starts before the build ends waits for it (platform/built_once.py) and finds
    it complete."""
    from videolake.platform.captioning.tiny_model import TINY_MODEL_DIRNAME

    path = os.path.join(os.path.abspath(data_dir), "models", TINY_MODEL_DIRNAME)  # resources/test_model.py's rule
    return start(path, log_path, served_name=path, build_tiny=True)


def deployment_env(server: VllmServer) -> dict[str, str]:
    """A deployment's environment for captioning through ``server`` (the ``openai`` backend)."""
    return {"VIDEOLAKE_CAPTION_BACKEND": "openai", "VIDEOLAKE_OPENAI_BASE_URL": server.base_url}
