"""The fork server of a launched run hands its step processes the modules they need (assets/step_preload.py).

A "run worker" starts a "step" the way videolake's step executor does (multiprocessing's fork server, with
``executor.FORKSERVER_PRELOAD``). The step reports, before it imports anything itself, which of the modules every
step process of a run uses it inherited from the fork server, and whether Ray, torch or vLLM came along (they must
not: a step imports them only when its stage has work) or a thread did (a fork copies no thread but the caller).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# What each step process imported again after the fork before the preload (measured: ~0.6 CPU-s of every step).
STEP_MODULES = (
    "dagster._core.storage.event_log.sqlite",
    "dagster._core.storage.runs.sqlite",
    "alembic",
    "dagster._utils.test.definitions",
    "videolake.assets.cpu_assets",
    "videolake.assets.captions",
    "videolake.assets.checks",
    "videolake.resources.local",
    "dagster_ray",
)
HEAVY = ("ray", "torch", "vllm")

RUN_WORKER = textwrap.dedent(
    """
    import json, multiprocessing, sys

    def step(queue, names, heavy):
        import threading
        queue.put({
            "inherited": [m for m in names if m in sys.modules],
            "heavy": [m for m in heavy if m in sys.modules],
            "threads": threading.active_count(),
        })

    if __name__ == "__main__":
        from videolake.assets.executor import FORKSERVER_PRELOAD

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
        queue = ctx.Queue()
        names, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
        ctx.Process(target=step, args=(queue, names, heavy)).start()
        print(json.dumps(queue.get(timeout=120)))
    """
)


@pytest.mark.slow  # a fork server that imports Dagster, Great Expectations and the code location: ~4 CPU-s
def test_a_step_inherits_what_every_step_imports_and_nothing_heavy(tmp_path):
    script = tmp_path / "run_worker.py"
    script.write_text(RUN_WORKER)
    out = subprocess.run(
        [sys.executable, "-W", "ignore", str(script), json.dumps(STEP_MODULES), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(set(STEP_MODULES) - set(report["inherited"])) == []
    assert report["heavy"] == [] and report["threads"] == 1
