"""S3ObjectStore and Delta-on-S3 against a real SeaweedFS S3 server on free loopback ports (see s3_server.py)."""

from __future__ import annotations

import collections
import datetime as dt
import hashlib
import logging
import multiprocessing
import os
import random
import threading
import time
import traceback
import uuid

import pytest
from s3_server import SeaweedS3, pick_free_ports

from videolake.platform.lake.storage import (
    retry_on_commit_conflict,
    storage_options_for_s3,
)
from videolake.platform.objectstore import OBJECT_STORES, ObjectStoreError
from videolake.platform.objectstore.s3 import S3ObjectStore

pytestmark = pytest.mark.slow

MiB = 1 << 20


# ---------------------------------------------------------------------------------------------------------- fixtures
def make_store(server: SeaweedS3, **overrides) -> S3ObjectStore:
    kwargs = dict(
        endpoint_url=server.endpoint_url,
        access_key_id=server.access_key,
        secret_access_key=server.secret_key,
        region=server.region,
        prefix=f"t-{uuid.uuid4().hex[:8]}",  # each test in its own prefix of the shared bucket
        multipart_threshold=5 * MiB,
        multipart_chunksize=5 * MiB,
    )
    kwargs.update(overrides)
    return S3ObjectStore(server.bucket, **kwargs)


@pytest.fixture
def store(seaweed) -> S3ObjectStore:
    return make_store(seaweed)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_random(path, size: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(size)
    path.write_bytes(data)
    return data


# ---------------------------------------------------------------------------------------------------------- basics
def test_registered_as_s3():
    assert OBJECT_STORES.get("s3") is S3ObjectStore


def test_round_trip(store, tmp_path):
    uri = store.put_bytes("landing/2024-01-01/a.mp4", b"video-a")
    assert uri == f"s3://{store.bucket}/{store.prefix}/landing/2024-01-01/a.mp4"
    assert store.key_from_uri(uri) == "landing/2024-01-01/a.mp4"
    with pytest.raises(ValueError):
        store.key_from_uri("s3://other-bucket/landing/a.mp4")
    store.put_bytes("landing/2024-01-01/b.mp4", b"video-bb")
    store.put_bytes("landing/2024-01-02/c.mp4", b"video-ccc")
    assert store.get_bytes("landing/2024-01-01/a.mp4") == b"video-a"
    assert store.exists("landing/2024-01-01/b.mp4") is True
    assert store.exists("landing/2024-01-01/zzz.mp4") is False

    listed = store.list("landing/2024-01-01/")
    assert [(o.key, o.size) for o in listed] == [("landing/2024-01-01/a.mp4", 7), ("landing/2024-01-01/b.mp4", 8)]
    assert [o.key for o in store.list("landing/")] == [
        "landing/2024-01-01/a.mp4",
        "landing/2024-01-01/b.mp4",
        "landing/2024-01-02/c.mp4",
    ]
    assert store.list("nothing/") == []

    dest = tmp_path / "sub" / "c.mp4"
    store.download("landing/2024-01-02/c.mp4", str(dest))
    assert dest.read_bytes() == b"video-ccc"
    assert sorted(os.listdir(dest.parent)) == ["c.mp4"]  # no temporary file left behind
    with store.open_local("landing/2024-01-01/a.mp4") as local:
        assert open(local, "rb").read() == b"video-a"
    assert not os.path.exists(local)

    with pytest.raises(FileNotFoundError, match="no object s3://"):
        store.get_bytes("landing/missing.mp4")
    with pytest.raises(FileNotFoundError):
        store.download("landing/missing.mp4", str(tmp_path / "missing.mp4"))
    assert not (tmp_path / "missing.mp4").exists()


def test_put_if_absent_never_rewrites(store, tmp_path):
    first, second = tmp_path / "first.bin", tmp_path / "second.bin"
    first.write_bytes(b"first content")
    second.write_bytes(b"other content")
    key = "clips/ab/abcdef.mp4"
    assert store.put_if_absent(key, str(first)) == store.uri(key)
    assert store.put_if_absent(key, str(second)) == store.uri(key)
    assert store.get_bytes(key) == b"first content"
    assert [o.key for o in store.list("clips/")] == [key]


def test_list_follows_pagination(seaweed):
    store = make_store(seaweed, list_page_size=2)
    for i in range(5):
        store.put_bytes(f"many/{i:02d}.txt", str(i).encode())
    calls = []
    store._client().meta.events.register("after-call.s3.ListObjectsV2", lambda **kw: calls.append(1))
    keys = [o.key for o in store.list("many/")]
    assert keys == [f"many/{i:02d}.txt" for i in range(5)]
    assert len(calls) == 3  # 2 + 2 + 1 keys


def test_multipart_upload_reads_back_identical(store, tmp_path):
    src = tmp_path / "big.bin"
    data = write_random(src, 12 * MiB + 123, seed=1)
    key = "clips/big.bin"
    store.put_file(key, str(src))
    head = store._client().head_object(Bucket=store.bucket, Key=f"{store.prefix}/{key}")
    assert head["ContentLength"] == 12 * MiB + 123
    assert head["ETag"].strip('"').endswith("-3")  # S3 marks multipart objects "<md5>-<parts>": 5 + 5 + 2.x MiB
    assert sha256(store.get_bytes(key)) == sha256(data)
    dest = tmp_path / "back.bin"
    store.download(key, str(dest))
    assert sha256(dest.read_bytes()) == sha256(data)
    # below the threshold: a single PUT (no part suffix)
    small = tmp_path / "small.bin"
    write_random(small, 1 * MiB, seed=2)
    store.put_file("clips/small.bin", str(small))
    head = store._client().head_object(Bucket=store.bucket, Key=f"{store.prefix}/clips/small.bin")
    assert "-" not in head["ETag"].strip('"')


# ---------------------------------------------------------------------------------------------------------- errors
def test_wrong_secret_gives_clear_error_without_the_secret(seaweed, caplog):
    secret = "wrong-secret-Zq81xK"
    store = make_store(seaweed, secret_access_key=secret, retry_window_s=5)
    assert secret not in repr(store) and secret not in str(store)
    caplog.set_level(logging.DEBUG, logger="videolake")
    started = time.monotonic()
    for op in (
        store.check,
        lambda: store.put_bytes("x.txt", b"1"),
        lambda: store.get_bytes("x.txt"),
        lambda: store.list(""),
    ):
        with pytest.raises(ObjectStoreError) as err:
            op()
        message = str(err.value)
        assert "S3 rejected the credentials" in message
        assert "SignatureDoesNotMatch" in message
        assert f"bucket '{seaweed.bucket}'" in message and seaweed.endpoint_url in message
        assert secret not in message
        assert secret not in "".join(traceback.format_exception(err.value))
        assert secret not in repr(err.value.__context__)
    assert time.monotonic() - started < 5  # a credential error is not retried
    assert secret not in caplog.text


def test_unknown_access_key(seaweed):
    store = make_store(seaweed, access_key_id="NOSUCHKEY", secret_access_key="whatever-secret-1")
    with pytest.raises(ObjectStoreError, match=r"S3 rejected the credentials .* \(InvalidAccessKeyId\)") as err:
        store.check()
    assert "whatever-secret-1" not in str(err.value)


def test_missing_bucket(seaweed):
    store = S3ObjectStore(
        "no-such-bucket",
        endpoint_url=seaweed.endpoint_url,
        access_key_id=seaweed.access_key,
        secret_access_key=seaweed.secret_key,
    )
    with pytest.raises(ObjectStoreError, match="S3 bucket 'no-such-bucket' does not exist at endpoint .*NoSuchBucket"):
        store.check()
    with pytest.raises(ObjectStoreError, match="does not exist"):
        store.put_bytes("a.txt", b"1")
    assert "no-such-bucket" not in [b["Name"] for b in seaweed.client().list_buckets()["Buckets"]]


def test_retry_window_is_bounded():
    (port,) = pick_free_ports(1)  # nothing listens there
    store = S3ObjectStore(
        "b",
        endpoint_url=f"http://127.0.0.1:{port}",
        access_key_id="k",
        secret_access_key="s",
        retry_window_s=2.0,
        max_attempts=1,
        connect_timeout_s=1,
    )
    started = time.monotonic()
    with pytest.raises(ObjectStoreError, match=r"still failing after \d+ tries over 2s .*EndpointConnectionError"):
        store.put_bytes("a.txt", b"1")
    elapsed = time.monotonic() - started
    assert 2.0 <= elapsed < 15.0, elapsed


def test_transient_outage_is_retried_without_loss_or_duplicates(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="videolake.platform.objectstore.s3")
    with SeaweedS3(tmp_path / "outage") as server:
        # botocore retries once per try (its own backoff grows to 20 s); the store's window does the rest
        store = make_store(server, retry_window_s=90, backoff_max_s=1.0, max_attempts=2)
        store.put_bytes("before.txt", b"written before the outage")
        big = tmp_path / "clip.bin"
        big_data = write_random(big, 11 * MiB, seed=3)  # multipart: 5 + 5 + 1 MiB
        small_data = b"small object written during the outage"

        server.stop()
        results: dict[str, object] = {}

        def upload(name, fn):
            try:
                results[name] = fn()
            except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
                results[name] = exc

        threads = [
            threading.Thread(target=upload, args=("file", lambda: store.put_file("clips/clip.bin", str(big)))),
            threading.Thread(target=upload, args=("bytes", lambda: store.put_bytes("small.txt", small_data))),
        ]
        for t in threads:
            t.start()

        # both uploads fail against the stopped server and keep retrying: await two retries of each (not a fixed
        # sleep), then they must still be running
        def retries_of(kind: str) -> int:
            return sum(
                1
                for r in list(caplog.records)
                if r.getMessage().startswith(f"S3 {kind} ") and "retry" in r.getMessage()
            )

        deadline = time.monotonic() + 60
        while min(retries_of("upload"), retries_of("write")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert min(retries_of("upload"), retries_of("write")) >= 2, [r.getMessage() for r in caplog.records]
        assert all(t.is_alive() for t in threads), f"uploads finished while the server was down: {results}"
        server.start()
        for t in threads:
            t.join(timeout=90)
        assert not any(t.is_alive() for t in threads)

        assert results == {"file": store.uri("clips/clip.bin"), "bytes": store.uri("small.txt")}
        retried = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
        assert any(m.startswith("S3 upload ") for m in retried), retried  # both went through the retry loop
        assert any(m.startswith("S3 write ") for m in retried), retried
        assert server.secret_key not in caplog.text
        assert sha256(store.get_bytes("clips/clip.bin")) == sha256(big_data)
        assert store.get_bytes("small.txt") == small_data
        assert store.get_bytes("before.txt") == b"written before the outage"
        listed = [(o.key, o.size) for o in store.list("")]
        assert listed == [("before.txt", 25), ("clips/clip.bin", 11 * MiB), ("small.txt", len(small_data))]
        # nothing half-done left in the bucket either: no multipart upload still open
        uploads = server.client().list_multipart_uploads(Bucket=server.bucket, Prefix=store.prefix).get("Uploads", [])
        open_for_clip = [u for u in uploads if u["Key"].endswith("clips/clip.bin")]
        assert len(open_for_clip) <= 1  # an upload started before the outage cannot be aborted while it is down


# ---------------------------------------------------------------------------------------------------------- delta
def test_storage_options_for_s3_compatible_endpoint():
    opts = storage_options_for_s3(
        endpoint_url="http://127.0.0.1:9000/", access_key_id="AK", secret_access_key="SK", region="eu-west-1"
    )
    assert opts == {
        "AWS_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK",
        "AWS_CONDITIONAL_PUT": "etag",
    }
    aws = storage_options_for_s3(region="us-west-2", session_token="TOKEN", access_key_id="AK", secret_access_key="SK")
    assert "AWS_ENDPOINT_URL" not in aws and "AWS_ALLOW_HTTP" not in aws
    assert aws["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true" and aws["AWS_SESSION_TOKEN"] == "TOKEN"
    assert storage_options_for_s3()["AWS_REGION"] == "us-east-1"  # credentials left to delta-rs' own chain
    with pytest.raises(ValueError):
        storage_options_for_s3(access_key_id="AK")
    with pytest.raises(ValueError):
        storage_options_for_s3(endpoint_url="127.0.0.1:9000")


def _partition_rows(day: int, generation: int, n: int = 5):
    import pyarrow as pa

    return pa.table(
        {
            "partition_date": pa.array([dt.date(2024, 1, day)] * n, pa.date32()),
            "row_id": [f"d{day:02d}-r{k}" for k in range(n)],
            "generation": pa.array([generation] * n, pa.int32()),
        }
    )


def _delta_writer(uri: str, options: dict, days: list[int], generations: int, conflicts, start) -> None:
    """One writer process: re-materializes its own partitions several times (overwrite with a predicate that covers
    exactly those partitions, as the assets do) and appends one extra partition; the table may not exist yet."""
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    def counted(write):
        def run():
            try:
                return write()
            except CommitFailedError:
                with conflicts.get_lock():
                    conflicts.value += 1
                raise

        return retry_on_commit_conflict(run, what=f"writer {days}")

    start.wait(timeout=120)  # both processes have imported deltalake: from here on their commits overlap
    for generation in range(generations):
        for day in days:
            predicate = f"partition_date >= '2024-01-{day:02d}' AND partition_date < '2024-01-{day + 1:02d}'"
            counted(
                lambda day=day, generation=generation, predicate=predicate: write_deltalake(
                    uri,
                    _partition_rows(day, generation),
                    mode="overwrite",
                    predicate=predicate,
                    partition_by=["partition_date"],
                    storage_options=options,
                )
            )
    counted(
        lambda: write_deltalake(
            uri,
            _partition_rows(days[0] + 20, 99, n=3),
            mode="append",
            partition_by=["partition_date"],
            storage_options=options,
        )
    )


def test_delta_concurrent_writers_on_s3(store):
    from deltalake import DeltaTable

    options = store.delta_storage_options()
    uri = store.uri("tables/scene_clips")
    ctx = multiprocessing.get_context("spawn")
    conflicts = ctx.Value("i", 0)
    start = ctx.Barrier(2)
    plan = {0: [1, 2], 1: [3, 4]}
    # Both writers start on a table that does not exist yet: the creation race is part of the test.
    procs = [
        ctx.Process(target=_delta_writer, args=(uri, options, days, 3, conflicts, start)) for days in plan.values()
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0]

    table = DeltaTable(uri, storage_options=options)
    rows = table.to_pyarrow_table()
    ids = rows.column("row_id").to_pylist()
    counts = collections.Counter(ids)
    assert max(counts.values()) == 1, [k for k, v in counts.items() if v > 1]
    expected = {f"d{d:02d}-r{k}" for d in (1, 2, 3, 4) for k in range(5)}
    expected |= {f"d{d:02d}-r{k}" for d in (21, 23) for k in range(3)}
    assert set(ids) == expected
    by_day = collections.defaultdict(set)
    for day, gen in zip(rows.column("partition_date").to_pylist(), rows.column("generation").to_pylist()):
        by_day[day.day].add(gen)
    assert dict(by_day) == {1: {2}, 2: {2}, 3: {2}, 4: {2}, 21: {99}, 23: {99}}
    # 2 writers x (3 generations x 2 days + 1 append) commits, versions 0..13, none lost and none doubled
    assert table.version() == 2 * (3 * 2 + 1) - 1
    assert uri.startswith(f"s3://{store.bucket}/{store.prefix}/tables/")
    print(f"delta on S3: 14 commits from 2 processes, {conflicts.value} commit conflicts retried")


def test_retry_on_commit_conflict_reruns_the_whole_write():
    from deltalake.exceptions import CommitFailedError

    calls = []

    def write():
        calls.append(1)
        if len(calls) < 3:
            raise CommitFailedError("Commit failed: a concurrent transaction deleted data this operation read.")
        return "version 7"

    assert retry_on_commit_conflict(write, base_delay_s=0.01) == "version 7"
    assert len(calls) == 3

    def always_conflicts():
        calls.append(1)
        raise CommitFailedError("Metadata changed since last commit")

    calls.clear()
    with pytest.raises(CommitFailedError):
        retry_on_commit_conflict(always_conflicts, attempts=4, base_delay_s=0.01)
    assert len(calls) == 4

    def other_error():
        calls.append(1)
        raise ValueError("schema mismatch is not a conflict")

    calls.clear()
    with pytest.raises(ValueError):
        retry_on_commit_conflict(other_error, base_delay_s=0.01)
    assert len(calls) == 1
