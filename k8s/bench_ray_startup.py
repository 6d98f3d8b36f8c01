"""What a Dagster step pays to get a Ray cluster, measured with the real Ray on this machine.

The prod profile has to choose between one RayCluster per step and one shared by a run's steps (dagster-ray's
cluster sharing). Sharing saves, per later step, the start of a cluster minus the connect to an existing one. No
Kubernetes runs here, so this measures the Ray parts of both paths, each in a fresh process as a step runs:

- ``import ray``: the baseline every step pays on either path;
- ``LocalRay`` (the local profile): ``ray.init`` of a local Ray, one task, ``ray.shutdown``;
- the Ray side of a new KubeRay cluster: ``ray start --head`` (what the head container runs once its pod started)
  and ``ray start --address`` (what each worker container runs), until each reports "Ray runtime started";
- a step connecting to a running cluster: ``ray.init("ray://head:10001")`` (Ray Client, what dagster-ray's
  KubeRayCluster does), one task, disconnect; the shared path pays only this.

The Kubernetes parts (pod scheduling, image pull, readiness probes, node provisioning) cannot be measured here; the
docs/kubernetes.md ("One RayCluster per step") adds documented figures for them.

Run: ``.venv/bin/python k8s/bench_ray_startup.py [--repeat 3]``. The last line is one JSON object. Every Ray process
it starts runs in its own session with its own --temp-dir and is killed by process group at the end (no ``ray stop``:
that would stop every Ray of the user on the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PY = sys.executable
RAY = os.path.join(os.path.dirname(PY), "ray")
# Token authentication as KubeRay sets it up (authOptions mode token): every process of the cluster and every
# client holds the same token.
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}

IMPORT_ONLY = """
import json, time
t0 = time.perf_counter()
import ray
print(json.dumps({"import_s": time.perf_counter() - t0}))
"""

LOCAL_RAY_STEP = """
import json, time
t0 = time.perf_counter()
import ray
t1 = time.perf_counter()
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=%(temp)r)
ray.get(ray.remote(lambda: 1).remote())
t2 = time.perf_counter()
ray.shutdown()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "init_task_s": t2 - t1, "shutdown_s": t3 - t2}))
"""

CLIENT_STEP = """
import json, time
t0 = time.perf_counter()
import ray
t1 = time.perf_counter()
ray.init("ray://127.0.0.1:%(port)d", log_to_driver=False)
ray.get(ray.remote(lambda: 1).remote())
t2 = time.perf_counter()
ray.shutdown()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "connect_task_s": t2 - t1, "disconnect_s": t3 - t2}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_script(code: str, timeout: float = 300, attempts: int = 1, failures: list | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; its last stdout line is JSON. A failed attempt is retried (up to
    ``attempts``) and its error kept in ``failures``: on a loaded machine the Ray Client server can time out."""
    for attempt in range(attempts):
        out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=timeout, env=ENV)
        if out.returncode == 0:
            return json.loads(out.stdout.strip().splitlines()[-1])
        error = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        if failures is not None:
            failures.append(error)
        if attempt == attempts - 1:
            raise RuntimeError(f"step process failed ({out.returncode}):\n{out.stderr[-3000:]}")
    raise AssertionError("unreachable")


class RayNode:
    """``ray start ... --block`` in its own session: timed until it reports the runtime started, killed by group."""

    def __init__(self, args: list[str]) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats", *args], env=ENV,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.log: list[str] = []

    def wait_started(self, timeout: float = 180) -> float:
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.log.append(line)
            if "Ray runtime started" in line:
                return time.perf_counter() - self.t0
            if time.monotonic() > deadline:
                break
        raise RuntimeError("ray start did not report a started runtime:\n" + "".join(self.log[-40:]))

    def kill(self) -> None:
        pgid = self.proc.pid  # start_new_session: the group id is the leader's pid
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(pgid):
                return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def med(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per measurement (median reported)")
    args = parser.parse_args(argv)
    n = args.repeat
    temp = tempfile.mkdtemp(prefix="rb-", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    try:
        return _measure(n, temp)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _measure(n: int, temp: str) -> dict:
    load_start = os.getloadavg()[0]
    imports = [run_script(IMPORT_ONLY)["import_s"] for _ in range(n)]
    local = [run_script(LOCAL_RAY_STEP % {"temp": os.path.join(temp, "local")}) for _ in range(n)]
    print(f"import ray                  {med(imports):6.2f} s (median of {n} fresh processes)")
    print(f"LocalRay step: init+task    {med([r['init_task_s'] for r in local]):6.2f} s, "
          f"shutdown {med([r['shutdown_s'] for r in local]):.2f} s")

    heads, workers, clients, client_failures = [], [], [], []
    for i in range(n):
        gcs, client, nodes = free_port(), free_port(), []
        try:
            head = RayNode(["--head", f"--port={gcs}", f"--ray-client-server-port={client}", "--num-cpus=0",
                            "--include-dashboard=false", f"--temp-dir={os.path.join(temp, f'c{i}')}"])
            nodes.append(head)
            heads.append(head.wait_started())
            worker = RayNode([f"--address=127.0.0.1:{gcs}", "--num-cpus=2"])
            nodes.append(worker)
            workers.append(worker.wait_started())
            clients.append(run_script(CLIENT_STEP % {"port": client}, attempts=3, failures=client_failures))
        finally:
            for node in reversed(nodes):
                node.kill()
    connect = [r["connect_task_s"] + r["disconnect_s"] for r in clients]
    print(f"ray start --head            {med(heads):6.2f} s (until 'Ray runtime started')")
    print(f"ray start --address worker  {med(workers):6.2f} s")
    print(f"Ray Client connect+task+bye {med(connect):6.2f} s (a step on an existing cluster; "
          f"{len(client_failures)} failed attempts retried: {sorted(set(client_failures))})")
    own = [h + w + c for h, w, c in zip(heads, workers, connect)]
    print(f"Ray part of a step's own cluster ÷ connect to a shared one: {med(own) / med(connect):.2f}")
    result = {
        "import_ray_s": med(imports),
        "local_ray_init_task_s": med([r["init_task_s"] for r in local]),
        "local_ray_shutdown_s": med([r["shutdown_s"] for r in local]),
        "head_start_s": med(heads),
        "worker_start_s": med(workers),
        "client_connect_task_disconnect_s": med(connect),
        "own_over_shared_ray_part": round(med(own) / med(connect), 2),
        "client_failed_attempts": len(client_failures),
        "repeat": n,
        "cpus": os.cpu_count(),
        "load_1min": [round(load_start, 2), round(os.getloadavg()[0], 2)],  # at start, at end
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
