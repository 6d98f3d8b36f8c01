"""A launched run of the local profile starts one local Ray that its Ray steps join (assets/executor.py).

A small job runs in its own process with videolake's step executor (fork server, one local Ray per run): two steps
that use ``ray_cluster`` and one that does not. Both Ray steps must join the Ray the run worker started (the GCS
address it logged), each from its own step process, and that Ray must be gone when the run is; a run without a Ray
step starts none; and when the run worker is SIGKILLed in the middle of a step, its Ray and the step die with it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parents[1]), env.get("PYTHONPATH", "")])
    return {**env, "VIDEOLAKE_RAY_CPUS": "1", **extra}


def _run(job: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "run_ray_job.py"), job], env=_env(), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _listening(port: int) -> bool:
    return any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in psutil.net_connections())


def test_the_ray_steps_of_a_run_join_the_one_local_ray_the_run_started():
    report = _run("two_ray_steps")
    assert report["success"], report
    started = [re.search(r"started this run's local Ray at (\S+)", m) for m in report["messages"]]
    (address,) = [m.group(1) for m in started if m]
    joined = [re.search(r"joined (\S+) from pid (\d+)", m) for m in report["messages"]]
    joined = [(m.group(1), int(m.group(2))) for m in joined if m]
    assert [a for a, _ in joined] == [address, address], report["messages"]
    assert len({pid for _, pid in joined}) == 2  # two step processes
    assert not _listening(int(address.rsplit(":", 1)[1]))  # the run's Ray stopped with the run


def test_a_run_without_a_ray_step_starts_no_ray():
    report = _run("no_ray_step")
    assert report["success"], report
    assert not any("local Ray" in m for m in report["messages"]), report["messages"]


def test_a_killed_run_worker_takes_its_ray_and_its_step_with_it(tmp_path):
    report = tmp_path / "joined"
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "run_ray_job.py"), "ray_step_that_waits"],
        env=_env(RUN_RAY_TEST_REPORT=str(report)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not report.exists():  # the step joined the run's Ray and waits
            assert worker.poll() is None and time.monotonic() < deadline, "the step never joined the run's Ray"
            time.sleep(0.1)
        address, pid = report.read_text().split()
        port, step = int(address.rsplit(":", 1)[1]), psutil.Process(int(pid))
        assert _listening(port)
        ray_procs = [p for p in psutil.Process(worker.pid).children(recursive=True) if "gcs_server" in p.name()]
        assert ray_procs, "the run worker started no gcs_server"
        worker.kill()
        worker.wait(30)
        gone, alive = psutil.wait_procs([step, *ray_procs], timeout=60)
        assert not alive, f"outlived the run worker: {alive}"
        assert not _listening(port)
    finally:
        if worker.poll() is None:
            worker.kill()
