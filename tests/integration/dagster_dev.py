"""`dagster dev` (webserver, daemon, one code server) over a throw-away instance with the repository's dagster.yaml,
for the integration tests that drive runs the way the UI does: GraphQL launches, the run queue, the daemon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from dagster_home import write_instance_yaml
from free_port import free_port

REPO = Path(__file__).resolve().parents[2]
SERVER_TIMEOUT_S = 300


class Deployment:
    """`dagster dev` in its own process group, over ``home`` (DAGSTER_HOME) and ``data`` (VIDEOLAKE_DATA_DIR)."""

    def __init__(self, root: Path, start: str, monitor_poll_s: int | None = None) -> None:
        self.home, self.data = root / "home", root / "data"
        self.home.mkdir()
        self.start_day = start  # VIDEOLAKE_PARTITIONS_START
        # The repository's dagster.yaml; run monitoring's poll interval replaced when given.
        write_instance_yaml(self.home, poll_interval_seconds=monitor_poll_s)
        self.port = free_port()
        self.log_path = root / "dagster-dev.log"
        self.proc: subprocess.Popen | None = None
        self.extra_env: dict[str, str] = {}
        self.extra_path: list[str] = []  # folders put on the processes' PYTHONPATH (e.g. a sitecustomize)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIDEOLAKE_", "DAGSTER_", "RAY_ADDRESS"))}
        env.update(
            {
                "DAGSTER_HOME": str(self.home),
                "VIDEOLAKE_DATA_DIR": str(self.data),
                "VIDEOLAKE_PROFILE": "local",
                "VIDEOLAKE_PARTITIONS_START": self.start_day,
                "VIDEOLAKE_RAY_CPUS": "2",
                "GX_ANALYTICS_ENABLED": "false",
                "RAY_USAGE_STATS_ENABLED": "0",
                "DAGSTER_DISABLE_TELEMETRY": "true",
                "TOKENIZERS_PARALLELISM": "false",
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "HF_HUB_OFFLINE": "1",
                "PYTHONPATH": os.pathsep.join(
                    [str(REPO), *self.extra_path, *filter(None, [os.environ.get("PYTHONPATH")])]
                ),
                **self.extra_env,
            }
        )
        return env

    def start(self) -> None:
        import dagster as dg

        with dg.DagsterInstance.from_config(str(self.home)) as instance:  # create the sqlite storage once
            instance.get_runs(limit=1)
        cmd = [str(Path(sys.executable).parent / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(self.port)]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=self.env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        query = json.dumps(
            {
                "query": "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus "
                "locationOrLoadError { __typename } } } } }"
            }
        ).encode()
        deadline = time.monotonic() + SERVER_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"dagster dev exited:\n{self.tail()}"
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{self.port}/graphql", data=query, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(req, timeout=10) as r:
                    entries = json.loads(r.read())["data"]["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    kinds = {e["locationOrLoadError"]["__typename"] for e in entries}
                    assert kinds == {"RepositoryLocation"}, f"code location failed to load:\n{self.tail()}"
                    return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(1)
        raise AssertionError(f"dagster dev did not come up in {SERVER_TIMEOUT_S}s:\n{self.tail()}")

    def tail(self, n: int = 80) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        import psutil

        if self.proc is None:
            return
        try:
            tree = [self.proc.pid] + [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.Error:
            tree = [self.proc.pid]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in tree:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        """The webserver's GraphQL API (what the UI calls); raises on a GraphQL error."""
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            out = json.loads(r.read())
        if out.get("errors"):
            raise AssertionError(f"GraphQL errors: {out['errors']}\n{self.tail()}")
        return out["data"]


def wait_for(predicate, timeout_s: float, what: str, dep: Deployment, poll_s: float = 0.5):
    """``predicate()``'s first true value, polled every ``poll_s``; fails with the deployment's log after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}\n{dep.tail()}")
