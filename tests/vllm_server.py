"""vLLM's own OpenAI-compatible API server with a tiny test model on CPU, for the tests that caption through the
``openai`` backend: started on a free loopback port in its own process group, killed by group at the end.

One server serves the modules in FILES: test_openai_backend (the backend against a real server, with an API key)
and the Dagster deployments of the browser and run-recovery tests, whose caption steps send their clips to it
instead of starting a vLLM engine in a Ray actor for every caption step (~17 CPU-s each, one step after another
because of the ``gpu`` pool). The three are one pytest-xdist unit (tests/conftest.py), so one worker runs them back
to back on one server (``shared``): ~20 CPU-s of imports, model build and engine start per server, paid once, not
three times. Before any other module the server is stopped (``stop_shared``). The in-actor engine keeps its own
tests: test_captioning, test_kill_resume, test_pipeline_s3.
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

FILES = ("browser/test_ui.py", "integration/test_openai_backend.py", "integration/test_run_recovery.py")
GROUP = "caption-server"  # the pytest-xdist unit of work that holds FILES
SERVED_NAME = "tiny-vl"  # the model's name at the server (what a client sends)
API_KEY = "test-key-not-a-secret"  # the server wants it, as a deployment's endpoint would
MAX_IMAGES = 8  # images per prompt
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
    model_dir: str  # the model it serves

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


def start(model_dir: str, log_path: Path) -> VllmServer:
    """Start the server (returns at once: ``wait_ready`` before the first request): it serves ``model_dir`` as
    SERVED_NAME behind API_KEY, up to MAX_IMAGES images per prompt (a caption request sends one per sampled frame).
    Its process first builds the tiny model into ``model_dir`` (a no-op when it is complete), so the build's imports
    are the server's own and the caller goes on meanwhile."""
    from videolake.platform.captioning.base import TINY_MODEL_ENGINE_THREADS, vllm_env

    port = free_port()
    env = {**os.environ, **vllm_env(TINY_MODEL_ENGINE_THREADS)}  # the engine's environment, as in a caption actor
    server = "vllm.entrypoints.openai.api_server"
    cmd = [sys.executable, "-c", _BUILD_THEN_SERVE.format(server=server), "--model", model_dir]
    cmd += ["--served-model-name", SERVED_NAME, "--api-key", API_KEY]
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
        json.dumps({"image": MAX_IMAGES, "video": 0}),
        "--uvicorn-log-level",
        "warning",
    ]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return VllmServer(proc=proc, port=port, log_path=log_path, model_dir=model_dir)


_shared: VllmServer | None = None


def tiny_model_path(run_dir: Path) -> Path:
    """The test run's tiny model (the ``tiny_model_dir`` fixture's; built once, whoever asks first:
    platform/runtime/built_once.py)."""
    from videolake.platform.captioning.tiny_model import TINY_MODEL_DIRNAME

    return Path(run_dir) / "models" / TINY_MODEL_DIRNAME


def shared(model_dir: Path, log_path: Path) -> VllmServer:
    """The server of the modules in FILES, serving ``model_dir``, started unless it runs (``wait_ready`` before the
    first request). Its process builds the tiny model there first when no one has (a no-op when it is complete)."""
    global _shared
    if _shared is None or _shared.proc.poll() is not None:
        _shared = start(str(model_dir), log_path)
    return _shared


def stop_shared() -> None:
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None


def deployment_env(server: VllmServer, data_dir: Path) -> dict[str, str]:
    """The environment of a deployment (VIDEOLAKE_DATA_DIR ``data_dir``, no captioning model configured) that
    captions through ``server`` with the ``openai`` backend, the endpoint naming the model SERVED_NAME. The tiny
    model's policy still applies there (its name, its lenient content gates), and a caption step makes sure that
    model is where the policy puts it (resources/test_model.py): a link to the server's model, complete once the
    server is ready (a step that asks earlier waits for the build, platform/runtime/built_once.py)."""
    from videolake.platform.captioning.tiny_model import TINY_MODEL_DIRNAME

    link = Path(data_dir) / "models" / TINY_MODEL_DIRNAME
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(Path(server.model_dir).resolve(), target_is_directory=True)
    return {
        "VIDEOLAKE_CAPTION_BACKEND": "openai",
        "VIDEOLAKE_OPENAI_BASE_URL": server.base_url,
        "VIDEOLAKE_OPENAI_API_KEY": API_KEY,
        "VIDEOLAKE_OPENAI_SERVED_MODEL": SERVED_NAME,
    }
