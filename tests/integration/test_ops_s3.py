"""Operations against a real S3 server (SeaweedFS on loopback, see s3_server.py): the landing-day rule on S3 (a
folder exists when any object has the prefix, a folder marker included), the schedule and the sensor on it, and
`videolake doctor` reaching the bucket with the configured credentials (and failing clearly, without the secret,
when they are wrong)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
from s3_server import SeaweedS3

from videolake.assets.automation import daily_schedule
from videolake.assets.landing import landing_folder_exists
from videolake.assets.sensors import landing_sensor
from videolake.platform.objectstore.s3 import S3ObjectStore
from videolake.resources import ObjectStoreResource, S3Resource

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MARKER_DAY, EMPTY_DAY, FULL_DAY = "2026-02-10", "2026-02-11", "2026-02-12"


@pytest.fixture(scope="module")
def prefix(seaweed) -> str:
    """A prefix with: a folder-marker object only for MARKER_DAY, nothing for EMPTY_DAY, a video for FULL_DAY."""
    prefix = f"ops-{uuid.uuid4().hex[:8]}"
    store = _store(seaweed, prefix)
    store._client().put_object(Bucket=seaweed.bucket, Key=f"{prefix}/landing/{MARKER_DAY}/", Body=b"")
    store.put_bytes(f"landing/{FULL_DAY}/a.mp4", b"\x00" * 64)
    return prefix


def _store(server: SeaweedS3, prefix: str) -> S3ObjectStore:
    return S3ObjectStore(
        server.bucket,
        prefix,
        endpoint_url=server.endpoint_url,
        region=server.region,
        access_key_id=server.access_key,
        secret_access_key=server.secret_key,
    )


def _resource(server: SeaweedS3, prefix: str) -> ObjectStoreResource:
    return ObjectStoreResource(
        kind="s3",
        bucket=server.bucket,
        prefix=prefix,
        s3=S3Resource(
            endpoint_url=server.endpoint_url,
            region=server.region,
            access_key_id=server.access_key,
            secret_access_key=server.secret_key,
        ),
    )


def test_a_folder_marker_makes_a_day_exist_and_no_object_means_no_folder(seaweed, prefix):
    store = _store(seaweed, prefix)
    assert [landing_folder_exists(store, "landing", d) for d in (MARKER_DAY, EMPTY_DAY, FULL_DAY)] == [
        True,
        False,
        True,
    ]


def test_schedule_on_s3_runs_a_marked_day_and_skips_a_missing_one(seaweed, prefix):
    resources = {"object_store": _resource(seaweed, prefix)}

    def tick(day: str):
        at = dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC) + dt.timedelta(days=1, minutes=30)
        with dg.build_schedule_context(scheduled_execution_time=at, resources=resources) as ctx:
            return daily_schedule(ctx)

    assert tick(MARKER_DAY).partition_key == MARKER_DAY
    skipped = tick(EMPTY_DAY)
    assert isinstance(skipped, dg.SkipReason)
    assert skipped.skip_message == (
        f"no landing data for {EMPTY_DAY}: s3://{seaweed.bucket}/{prefix}/landing/{EMPTY_DAY}/ does not exist"
    )


def test_sensor_on_s3_requests_only_days_that_have_objects(seaweed, prefix):
    with dg.build_sensor_context(resources={"object_store": _resource(seaweed, prefix)}) as ctx:
        result = landing_sensor(ctx)
    # the sensor requests days with landed objects: a folder marker alone is not one (the schedule, which runs a
    # day whose folder exists, does run MARKER_DAY: its empty folder then warns through landing_not_empty)
    assert sorted(r.partition_key for r in result.run_requests) == [FULL_DAY]


def _doctor(server: SeaweedS3, prefix: str, tmp_path, secret: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIDEOLAKE_", "DAGSTER_", "AWS_"))}
    env.update(
        {
            "VIDEOLAKE_PROFILE": "prod",
            "VIDEOLAKE_S3_BUCKET": server.bucket,
            "VIDEOLAKE_S3_PREFIX": prefix,
            "VIDEOLAKE_S3_ENDPOINT_URL": server.endpoint_url,
            "VIDEOLAKE_S3_REGION": server.region,
            "VIDEOLAKE_RAY_IMAGE": "example/videolake:0",
            "AWS_ACCESS_KEY_ID": server.access_key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "DAGSTER_HOME": str(tmp_path / "home"),
            "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "videolake.cli", "doctor", "--only", "object_store", "--only", "lake"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_doctor_reaches_the_bucket_with_the_configured_credentials(seaweed, prefix, tmp_path):
    out = _doctor(seaweed, prefix, tmp_path, seaweed.secret_key)
    assert out.returncode == 0, out.stdout + out.stderr
    where = f"at {seaweed.endpoint_url}: bucket lists"
    assert out.stdout.splitlines() == [
        f"ok    object_store  s3://{seaweed.bucket}/{prefix} {where}",
        f"ok    lake          s3://{seaweed.bucket}/{prefix}/tables {where}",
        "2 of 2 checks ok",
    ]


def test_doctor_with_a_wrong_secret_says_so_without_printing_it(seaweed, prefix, tmp_path):
    wrong = "wrong-secret-" + uuid.uuid4().hex
    out = _doctor(seaweed, prefix, tmp_path, wrong)
    assert out.returncode == 1
    rejected = (
        f"S3 rejected the credentials for bucket '{seaweed.bucket}' at endpoint {seaweed.endpoint_url} "
        "(SignatureDoesNotMatch) while trying to list the bucket: check the access key id and secret"
    )
    assert out.stdout.splitlines() == [
        f"FAIL  object_store  {rejected}",
        f"FAIL  lake          {rejected}",
        "0 of 2 checks ok; failed: object_store, lake",
    ]
    assert wrong not in out.stdout + out.stderr
