"""Processes that open a fresh local instance at the same moment all get a working one (issue 40, item 8: two
`videolake demo` against one new DAGSTER_HOME died with alembic's "Version table 'alembic_version' has more than
one head present").

Each process imports Dagster first, says it is ready, and then waits on a barrier: a file this test holds an
exclusive flock on, which each process asks to share. The test releases it once every process is waiting, so all
of them open the instance (``DagsterInstance.get()``, as the CLI does) together, with no sleep in between. Three
processes rather than two: with Dagster's own storage, three released this way onto an empty DAGSTER_HOME failed in
5 trials of 8 (two of them with exactly that alembic error), two in 0 of 6."""

from __future__ import annotations

import fcntl
import shutil
import sqlite3
import subprocess
import sys

from cli_helpers import REPO, cli_env

PROCESSES = 3

OPEN_INSTANCE = """
import fcntl, sys
import dagster as dg
import videolake.instance.failure_order, videolake.instance.sqlite_init  # imported before the barrier

print("ready", flush=True)
with open(sys.argv[1]) as barrier:
    fcntl.flock(barrier, fcntl.LOCK_SH)
with dg.DagsterInstance.get() as instance:
    instance.get_runs(limit=1)
    print(type(instance._ref.storage).__name__, flush=True)
"""


def test_processes_opening_a_fresh_instance_together_all_succeed(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster.yaml", home / "dagster.yaml")
    script = tmp_path / "open_instance.py"
    script.write_text(OPEN_INSTANCE)
    barrier_path = tmp_path / "barrier"
    env = cli_env(tmp_path)

    with open(barrier_path, "w") as barrier:
        fcntl.flock(barrier, fcntl.LOCK_EX)
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), str(barrier_path)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        try:
            for p in procs:
                assert p.stdout.readline() == "ready\n", p.communicate(timeout=120)[1]
        finally:
            fcntl.flock(barrier, fcntl.LOCK_UN)
        results = [(p.communicate(timeout=300), p.returncode) for p in procs]

    for (out, err), code in results:
        assert code == 0, err
        assert out.strip() == "LockedSqliteStorage"
    # One alembic version per database, as one process alone would have left it.
    for db in ("history/runs.db", "history/runs/index.db", "schedules/schedules.db"):
        with sqlite3.connect(home / db) as conn:
            assert len(conn.execute("SELECT version_num FROM alembic_version").fetchall()) == 1, db
