"""A real, throwaway PostgreSQL server for tests: initdb into a temporary directory, postgres on a free loopback port.

Binaries: Debian's postgresql package (/usr/lib/postgresql/<version>/bin; `make setup` installs it), else initdb /
postgres on PATH. PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
``postgres`` user (created by the Debian package), or ``nobody`` without it, through ``subprocess``'s ``user=``:
the child process is postgres itself, so it is stopped by its own pid. Its directories live under /tmp (pytest's
tmp_path is private to root and the unix socket path must stay short).

Passwords are checked: TCP connections use scram-sha-256 with the password given here (only the local unix socket,
used by nobody in the tests, trusts). Plain module, no pytest fixtures: test modules build fixtures on it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from procs import stop_process


class PostgresNotInstalled(RuntimeError):
    pass


def find_pg_bin() -> Path:
    """The directory holding initdb and postgres, newest Debian version first."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(os.path.realpath(initdb)).parent
    raise PostgresNotInstalled(
        "PostgreSQL server binaries (initdb, postgres) not found: install them with `make setup` "
        "(apt-get install postgresql)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> str | None:
    """The user to run the server as: None when we are not root; postgres (or nobody) when we are."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a `postgres` nor a `nobody` user exists to run PostgreSQL")


class LocalPostgres:
    """One PostgreSQL cluster: ``start()``, ``stop()``, ``create_database(name)``, ``dsn(db)``."""

    def __init__(self, *, user: str = "videolake", password: str = "videolake-pg-secret-51c", port: int | None = None):
        self.bin_dir = find_pg_bin()
        self.user = user
        self.password = password
        self.host = "127.0.0.1"
        self.port = port or _free_port()
        self.run_as = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.log_path = self.root / "postgres.log"
        self.process: subprocess.Popen | None = None
        self._log_file = None

    # ------------------------------------------------------------------ lifecycle
    def _user_kwargs(self) -> dict:
        if self.run_as is None:
            return {}
        pw = pwd.getpwnam(self.run_as)
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _chown(self, path: Path) -> None:
        if self.run_as is not None:
            pw = pwd.getpwnam(self.run_as)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def initdb(self) -> None:
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        for path in (self.root, self.socket_dir):
            self._chown(path)
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        self._chown(pwfile)
        os.chmod(pwfile, 0o600)
        cmd = [
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.user,
            f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",  # a throwaway cluster: skip fsync, saves seconds
        ]
        result = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True, **self._user_kwargs())
        pwfile.unlink()
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")

    def start(self, timeout_s: float = 60.0) -> LocalPostgres:
        if self.process is not None and self.process.poll() is None:
            return self
        if not (self.data_dir / "PG_VERSION").exists():
            self.initdb()
        self._log_file = open(self.log_path, "ab")
        cmd = [
            str(self.bin_dir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-k",
            str(self.socket_dir),
            "-c",
            f"listen_addresses={self.host}",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=50",
            "-c",
            "shared_buffers=32MB",
        ]
        self.process = subprocess.Popen(
            cmd,
            cwd=self.root,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **self._user_kwargs(),
        )
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        import psycopg2

        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"postgres exited early; log:\n{self.log_tail()}")
            try:
                psycopg2.connect(self.dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg2.OperationalError as e:
                last = e
                time.sleep(0.2)
        raise RuntimeError(f"postgres not ready after {timeout_s:.0f}s ({last}); log:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 20.0) -> None:
        """Fast shutdown (SIGINT: roll back and exit), SIGKILL after ``timeout_s``; waits for the process."""
        stop_process(self.process, signal.SIGINT, timeout_s)
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers
    def dsn(self, db: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={self.user} password={self.password} dbname={db}"

    def connect(self, db: str = "postgres"):
        import psycopg2

        return psycopg2.connect(self.dsn(db))

    def create_database(self, name: str) -> str:
        conn = self.connect("postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return name

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def start_postgres(**kwargs) -> LocalPostgres:
    """Start a cluster; the caller ends it with ``close()`` (fixtures: yield, then close)."""
    server = LocalPostgres(**kwargs)
    try:
        return server.start()
    except BaseException:
        server.close()
        raise
