"""A step process dies with its run worker, whichever way the multiprocess executor starts it (assets/lifetime.py).

A "run worker" (a Python process) starts a "step" with multiprocessing's ``spawn`` (Dagster's default) or
``forkserver`` (videolake's step executor: assets/executor.py) start method. The step binds itself to the run worker
and reports its pid; then the run worker is SIGKILLed, and the step must be gone within seconds. Under the fork
server the step's OS parent is the fork server, not the run worker: the binding must neither kill a step whose run
worker is alive nor leave it running after the run worker died.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

RUN_WORKER = textwrap.dedent(
    """
    import multiprocessing, sys, time

    def step(queue):
        from videolake.assets.lifetime import bind_to_run_worker
        import os
        queue.put((os.getpid(), bind_to_run_worker()))
        time.sleep(600)

    if __name__ == "__main__":
        ctx = multiprocessing.get_context(sys.argv[1])
        queue = ctx.Queue()
        ctx.Process(target=step, args=(queue,), daemon=False).start()
        pid, bound = queue.get(timeout=60)
        print(pid, bound, flush=True)
        time.sleep(600)
    """
)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_bound_step_lives_with_its_run_worker_and_dies_with_it(method, tmp_path):
    script = tmp_path / "run_worker.py"
    script.write_text(RUN_WORKER)
    worker = subprocess.Popen(
        [sys.executable, str(script), method],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        line = worker.stdout.readline()  # the step reported: it bound itself and did not kill itself
        assert line, f"the step never reported (exit status of the run worker: {worker.poll()})"
        pid, bound = line.split()
        step = psutil.Process(int(pid))
        assert bound == "True"
        assert step.is_running() and step.status() != psutil.STATUS_ZOMBIE
        if method == "forkserver":  # the OS parent is the fork server, itself a child of the run worker
            assert step.ppid() != worker.pid and psutil.Process(step.ppid()).ppid() == worker.pid
        else:
            assert step.ppid() == worker.pid
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        gone, alive = psutil.wait_procs([step], timeout=15)
        assert not alive, f"step {pid} outlived its run worker"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
