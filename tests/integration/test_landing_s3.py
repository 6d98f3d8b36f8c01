"""Landing oddities of a real S3 bucket (SeaweedFS): folder markers, keys with spaces/unicode/'%'/'#', a 0-byte
placeholder, hidden keys, a sidecar file, an object deleted between listing and reading. Each becomes exactly one
row with its reason (or is skipped by a documented rule) and the rest of the day is ingested.

What SeaweedFS cannot produce is covered in tests/unit/test_landing_oddities.py: it normalises 'a//b' keys to
'a/b', refuses 'a/./b', and drops the bytes of a folder marker that carries data.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import uuid

import pytest

from videolake.platform.lake.schemas import RAW_VIDEOS
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table
from videolake.platform.objectstore.s3 import S3ObjectStore
from videolake.platform.stages.ingest import ingest_one, list_landing
from videolake.platform.video.probe import ProbeConfig

pytestmark = pytest.mark.slow

DAY = "2024-03-01"
SPECIAL = "a b #1 %41 é 漢字 +&=?.mp4"


@pytest.fixture
def store(seaweed) -> S3ObjectStore:
    return S3ObjectStore(
        seaweed.bucket,
        f"odd-{uuid.uuid4().hex[:8]}",
        endpoint_url=seaweed.endpoint_url,
        region=seaweed.region,
        access_key_id=seaweed.access_key,
        secret_access_key=seaweed.secret_key,
    )


@pytest.fixture(scope="module")
def videos(ffmpeg, tmp_path_factory) -> list[bytes]:
    d = tmp_path_factory.mktemp("odd-s3-src")
    out = []
    for i, src in enumerate(("testsrc2", "mandelbrot", "smptehdbars", "rgbtestsrc")):
        p = d / f"v{i}.mp4"
        subprocess.run(
            [
                ffmpeg,
                "-nostdin",
                "-v",
                "error",
                "-y",
                "-f",
                "lavfi",
                "-i",
                f"{src}=size=160x120:rate=24",
                "-frames:v",
                "36",
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-pix_fmt",
                "yuv420p",
                str(p),
            ],
            check=True,
        )
        out.append(p.read_bytes())
    return out


def _put(store: S3ObjectStore, key: str, body: bytes) -> None:
    """A raw PutObject, as any uploader or the S3 console would (markers included)."""
    store._client().put_object(Bucket=store.bucket, Key=f"{store.prefix}/{key}", Body=body)


def test_bucket_oddities_become_rows_and_the_rest_of_the_day_is_ingested(store, videos):
    day = f"landing/{DAY}/"
    objects = {
        "": b"",  # the day folder's own marker ("Create folder" in a console)
        "plain.mp4": videos[0],
        SPECIAL: videos[1],
        "cam1/": b"",  # a marker of a folder with content
        "cam1/nested.mp4": videos[2],
        "empty/": b"",  # a marker of an empty folder
        "x.mp4/": b"",  # a folder named like a video
        "zero.mp4": b"",  # a 0-byte placeholder
        "notes.json": b'{"camera": 1}',  # a sidecar: a file like any other
        ".hidden.mp4": videos[0],
        ".upload/partial.mp4": videos[0],
        "gone.mp4": videos[3],
    }
    for rel, body in objects.items():
        _put(store, day + rel, body)
    _put(store, f"landing/{DAY}.truth/plain.json", b"{}")  # a sibling sharing the day as a name prefix

    entries = list_landing(store, "landing", [DAY])[DAY]
    store.delete(day + "gone.mp4")  # deleted between listing and reading
    rows = {}
    for o in entries:
        row = ingest_one(o, store=store, probe_config=ProbeConfig())
        assert store.key_from_uri(row["source_uri"]) == o.key
        rows[o.key[len(day) :]] = row
    assert {k: r["reject_reason"] or "ok" for k, r in rows.items()} == {
        "plain.mp4": "ok",
        SPECIAL: "ok",
        "cam1/nested.mp4": "ok",
        "empty/": "not_a_regular_file",
        "x.mp4/": "not_a_regular_file",
        "zero.mp4": "empty_file",
        "notes.json": "not_a_video",
        "gone.mp4": "vanished",
    }
    assert rows[SPECIAL]["source_uri"] == f"s3://{store.bucket}/{store.prefix}/{day}{SPECIAL}"
    assert rows[SPECIAL]["num_frames"] == 36 and rows[SPECIAL]["size_bytes"] == len(videos[1])
    assert rows["x.mp4/"]["reject_detail"] == "an empty folder (nothing to ingest)"
    assert rows["gone.mp4"]["reject_detail"].startswith("listed, then gone before it was read (no object s3://")
    assert len({r["video_id"] for r in rows.values()}) == len(rows)


def test_special_character_keys_round_trip(store, tmp_path):
    keys = [SPECIAL, "100% done.mp4", "#hash.mp4", "q?x=1&y=2.mp4", "plus+sign.mp4", "ünïcödé/ß.mp4", "%2F.mp4"]
    for i, rel in enumerate(keys):
        uri = store.put_bytes(f"landing/{DAY}/{rel}", f"body-{i}".encode())
        assert store.key_from_uri(uri) == f"landing/{DAY}/{rel}"
    listed = {o.key: o for o in store.list(f"landing/{DAY}/")}
    assert sorted(listed) == sorted(f"landing/{DAY}/{k}" for k in keys)
    for i, rel in enumerate(keys):
        o = listed[f"landing/{DAY}/{rel}"]
        assert (o.problem, o.size) == (None, len(f"body-{i}"))
        assert store.get_bytes(store.key_from_uri(o.uri)) == f"body-{i}".encode()
        with store.open_local(o.key) as path:
            assert open(path, "rb").read() == f"body-{i}".encode()


def test_rows_of_a_bucket_day_are_storable(store, videos, tmp_path):
    _put(store, f"landing/{DAY}/{SPECIAL}", videos[1])
    _put(store, f"landing/{DAY}/x.mp4/", b"")
    rows = [ingest_one(o, store=store, probe_config=ProbeConfig()) for o in list_landing(store, "landing", [DAY])[DAY]]
    now = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)
    table = rows_to_table([{**r, "partition_date": dt.date(2024, 3, 1), "ingested_at": now} for r in rows], RAW_VIDEOS)
    lake = Lake(str(tmp_path / "lake"))
    assert lake.write_partitions("raw_videos", table, PartitionRange.of([DAY])).rows == 2
    got = lake.read_partitions("raw_videos", PartitionRange.of([DAY])).to_pylist()
    assert sorted((r["status"], r["reject_reason"]) for r in got) == [("ok", None), ("rejected", "not_a_regular_file")]
