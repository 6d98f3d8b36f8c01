"""Listing-level oddities of a landing folder on the local store: one odd entry never fails the day.

Every oddity becomes exactly one rejected raw_videos row with its reason (or is skipped by a documented rule), links
are never followed (the Python-level opens are audited: only the regular videos are opened), and every regular
video of the day is still ingested. The same rules on a real S3 server: tests/integration/test_landing_s3.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from videolake.platform.lake.schemas import RAW_VIDEOS
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table
from videolake.platform.objectstore import LocalObjectStore
from videolake.platform.stages.ingest import ingest_one, list_landing
from videolake.platform.video.probe import ProbeConfig

DAY = "2024-03-01"
SOURCES = ("testsrc2", "mandelbrot", "smptehdbars", "rgbtestsrc", "gradients", "cellauto")


@pytest.fixture(scope="module")
def videos(ffmpeg, tmp_path_factory) -> list[Path]:
    """Six distinct 1.5 s 160x120 h264 videos (distinct bytes: one row each)."""
    d = tmp_path_factory.mktemp("odd-src")
    out = []
    for i, src in enumerate(SOURCES):
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
        out.append(p)
    return out


@pytest.fixture
def root():
    """A store root every user can traverse (the permission test reads it as an unprivileged user)."""
    d = Path(tempfile.mkdtemp(prefix="videolake-odd-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    for dirpath, dirnames, _ in os.walk(d):
        for name in dirnames:
            if not os.path.islink(os.path.join(dirpath, name)):
                os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(d)


def _rows(store: LocalObjectStore, day: str = DAY, before_read=None) -> dict[str, dict]:
    """{path below the day folder: raw_videos row} for every entry list_landing returns."""
    entries = list_landing(store, "landing", [day])[day]
    if before_read is not None:
        before_read()
    prefix = f"landing/{day}/"
    rows = {}
    for o in entries:
        row = ingest_one(o, store=store, probe_config=ProbeConfig())
        assert store.key_from_uri(row["source_uri"]) == o.key  # every URI round-trips to its key
        rows[o.key[len(prefix) :] if o.key.startswith(prefix) else o.key] = row
    return rows


def _verdicts(rows: dict[str, dict]) -> dict[str, str]:
    return {name: r["reject_reason"] or "ok" for name, r in rows.items()}


def test_every_oddity_is_a_reason_and_the_rest_of_the_day_is_ingested(root, videos):
    day = root / "landing" / DAY
    day.mkdir(parents=True)
    outside = root / "outside"
    outside.mkdir()
    os.mkfifo(outside / "pipe")  # a link target that would block anyone who opened it
    shutil.copy(videos[0], outside / "elsewhere.mp4")
    shutil.copy(videos[0], day / "plain.mp4")
    shutil.copy(videos[1], day / "a b #1 %41 é 漢字 +&=.mp4")  # spaces, '#', '%', unicode, reserved characters
    (day / "cam1" / "deeper").mkdir(parents=True)
    shutil.copy(videos[2], day / "cam1" / "nested.mp4")  # sub-folders are ingested
    shutil.copy(videos[3], day / "cam1" / "deeper" / "deep.mp4")
    (day / "cam1" / "empty").mkdir()  # an empty sub-folder
    (day / "x.mp4").mkdir()  # an empty folder named like a video
    (day / "y.mp4").mkdir()  # a folder named like a video, holding one: its content is the video
    shutil.copy(videos[4], day / "y.mp4" / "inner.mp4")
    os.symlink(outside / "elsewhere.mp4", day / "link_out.mp4")  # link out of the store
    os.symlink(outside / "pipe", day / "link_fifo.mp4")  # following it would hang the test
    os.symlink(day / "plain.mp4", day / "link_in.mp4")  # link to a video inside the store
    os.symlink("plain.mp4", day / "link_relative.mp4")
    os.symlink(root / "nowhere.mp4", day / "dangling.mp4")
    os.symlink(outside, day / "link_dir")  # a link to a folder: not descended
    os.mkfifo(day / "fifo.mp4")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(day / "socket.mp4"))
    device = True
    try:
        os.mknod(day / "device.mp4", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:  # no CAP_MKNOD in this container: the other kinds still run
        device = False
    (day / "zero.mp4").write_bytes(b"")  # a 0-byte placeholder
    (day / "notes.json").write_text('{"camera": 1}')  # a sidecar file is a file: rejected, visible
    shutil.copy(videos[5], os.fsencode(day) + b"/bad\xff.mp4")  # not valid UTF-8
    (day / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # hidden names are skipped
    (day / ".upload").mkdir()
    shutil.copy(videos[0], day / ".upload" / "partial.mp4")
    (day / "cam1" / ".thumbs").mkdir()

    opened: list[str] = []
    recording = [True]

    def audit(event: str, args: tuple) -> None:  # Python-level opens (builtins.open, os.open) under the root
        if recording[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.fsdecode(args[0])
            if path.startswith(str(root)):
                opened.append(path)

    store = LocalObjectStore(str(root))
    sys.addaudithook(audit)  # (a hook cannot be removed: it stops recording below)
    try:
        rows = _rows(store)
    finally:
        recording[0] = False
        sock.close()
    audited = list(opened)
    expected = {
        "plain.mp4": "ok",
        "a b #1 %41 é 漢字 +&=.mp4": "ok",
        "cam1/nested.mp4": "ok",
        "cam1/deeper/deep.mp4": "ok",
        "y.mp4/inner.mp4": "ok",
        "cam1/empty/": "not_a_regular_file",
        "x.mp4/": "not_a_regular_file",
        "link_out.mp4": "not_a_regular_file",
        "link_fifo.mp4": "not_a_regular_file",
        "link_in.mp4": "not_a_regular_file",
        "link_relative.mp4": "not_a_regular_file",
        "dangling.mp4": "not_a_regular_file",
        "link_dir": "not_a_regular_file",
        "fifo.mp4": "not_a_regular_file",
        "socket.mp4": "not_a_regular_file",
        "zero.mp4": "empty_file",
        "notes.json": "not_a_video",
        "bad\udcff.mp4": "invalid_name",
    }
    if device:
        expected["device.mp4"] = "not_a_regular_file"
    assert _verdicts(rows) == expected
    details = {name: r["reject_detail"] for name, r in rows.items()}
    assert details["link_out.mp4"] == details["dangling.mp4"] == "a symbolic link (links are never followed)"
    assert details["fifo.mp4"] == "a FIFO (named pipe)" and details["socket.mp4"] == "a socket"
    assert details["x.mp4/"] == details["cam1/empty/"] == "an empty folder (nothing to ingest)"
    assert details["bad\udcff.mp4"] == "the name is not valid UTF-8 (rename it)"
    if device:
        assert details["device.mp4"] == "a character device"
    # URIs: percent-encoded (RFC 8089), the raw bytes of a non-UTF-8 name included; ids are unique
    assert rows["bad\udcff.mp4"]["source_uri"] == (day / "bad").as_uri() + "%FF.mp4"
    assert rows["a b #1 %41 é 漢字 +&=.mp4"]["source_uri"].endswith(
        "/a%20b%20%231%20%2541%20%C3%A9%20%E6%BC%A2%E5%AD%97%20%2B%26%3D.mp4"
    )
    assert rows["x.mp4/"]["source_uri"] == (day / "x.mp4").as_uri() + "/"
    assert len({r["video_id"] for r in rows.values()}) == len(rows)
    # the videos were read, nothing else: links, their targets, FIFOs, sockets and rejected names never opened
    ok_paths = {str(day / name) for name, v in expected.items() if v == "ok"} | {
        str(day / "zero.mp4"),
        str(day / "notes.json"),
    }
    assert set(audited) == ok_paths
    # the rows are storable as they are: one Delta partition with every row
    lake = Lake(str(root / "lake"))
    now = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)
    table = rows_to_table(
        [{**r, "partition_date": dt.date.fromisoformat(DAY), "ingested_at": now} for r in rows.values()], RAW_VIDEOS
    )
    assert lake.write_partitions("raw_videos", table, PartitionRange.of([DAY])).rows == len(expected)
    stored = lake.read_partitions("raw_videos", PartitionRange.of([DAY])).to_pylist()
    assert sorted(r["source_uri"] for r in stored) == sorted(r["source_uri"] for r in rows.values())


def test_deleted_or_swapped_between_listing_and_reading(root, videos):
    day = root / "landing" / DAY
    day.mkdir(parents=True)
    for i, name in enumerate(("stays.mp4", "gone.mp4", "swapped.mp4", "became_dir.mp4", "became_fifo.mp4")):
        shutil.copy(videos[i], day / name)

    def meddle() -> None:
        (day / "gone.mp4").unlink()
        (day / "swapped.mp4").unlink()
        os.symlink(day / "stays.mp4", day / "swapped.mp4")
        (day / "became_dir.mp4").unlink()
        (day / "became_dir.mp4").mkdir()
        (day / "became_fifo.mp4").unlink()
        os.mkfifo(day / "became_fifo.mp4")

    rows = _rows(LocalObjectStore(str(root)), before_read=meddle)
    assert _verdicts(rows) == {
        "stays.mp4": "ok",
        "gone.mp4": "vanished",
        "swapped.mp4": "not_a_regular_file",
        "became_dir.mp4": "not_a_regular_file",
        "became_fifo.mp4": "not_a_regular_file",
    }
    assert rows["gone.mp4"]["reject_detail"].startswith("listed, then gone before it was read")
    assert rows["swapped.mp4"]["reject_detail"] == "a symbolic link when read (it was a file when listed)"
    assert rows["became_fifo.mp4"]["reject_detail"] == "not a regular file when read (it was a file when listed)"


def test_a_day_folder_that_is_a_link_is_one_rejected_row(root, videos):
    (root / "landing").mkdir()
    real = root / "real-day"
    real.mkdir()
    shutil.copy(videos[0], real / "v.mp4")
    os.symlink(real, root / "landing" / DAY)
    rows = _rows(LocalObjectStore(str(root)))
    assert _verdicts(rows) == {"": "not_a_regular_file"}
    assert rows[""]["source_uri"] == (root / "landing" / DAY).as_uri() + "/"
    assert rows[""]["reject_detail"] == "the folder is a symbolic link (links are never followed)"


def test_missing_and_empty_day_folders_list_nothing(root):
    store = LocalObjectStore(str(root))
    assert list_landing(store, "landing", [DAY]) == {DAY: []}
    (root / "landing" / DAY).mkdir(parents=True)
    (root / "landing" / DAY / ".hidden").write_text("x")
    assert list_landing(store, "landing", [DAY]) == {DAY: []}
    # a sibling that shares the day as a name prefix (e.g. synth truths in <day>.truth/) is not part of the day
    (root / "landing" / f"{DAY}.truth").mkdir()
    (root / "landing" / f"{DAY}.truth" / "a.json").write_text("{}")
    assert list_landing(store, "landing", [DAY]) == {DAY: []}


_AS_UNPRIVILEGED = """
import json, sys
from videolake.platform.stages.ingest import ingest_one, list_landing
from videolake.platform.objectstore import LocalObjectStore
from videolake.platform.video.probe import ProbeConfig
store = LocalObjectStore(sys.argv[1])
prefix = "landing/%s/" % sys.argv[2]
rows = {o.key[len(prefix):]: ingest_one(o, store=store, probe_config=ProbeConfig())
        for o in list_landing(store, "landing", [sys.argv[2]])[sys.argv[2]]}
print(json.dumps({k: [r["reject_reason"] or "ok", r["reject_detail"]] for k, r in rows.items()}))
"""


def test_unreadable_files_and_folders_are_permission_denied(root, videos):
    """A mode-000 file and an unlistable sub-folder, read by a process that file permissions apply to (as root: one
    without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH, which would read everything)."""
    day = root / "landing" / DAY
    (day / "locked").mkdir(parents=True)
    shutil.copy(videos[0], day / "readable.mp4")
    shutil.copy(videos[1], day / "unreadable.mp4")
    shutil.copy(videos[2], day / "locked" / "inside.mp4")
    for p in (day, day.parent, day / "readable.mp4"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(day / "unreadable.mp4", 0o000)
    os.chmod(day / "locked", 0o000)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-c", _AS_UNPRIVILEGED, str(root), DAY]
    if os.geteuid() == 0:  # root without the capabilities that bypass file permissions (util-linux setpriv)
        cmd = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *cmd]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: v[0] for k, v in got.items()} == {
        "readable.mp4": "ok",
        "unreadable.mp4": "permission_denied",
        "locked/": "permission_denied",
    }
    assert got["unreadable.mp4"][1] == "the file is not readable by this process"
    assert got["locked/"][1] == "cannot list the folder: Permission denied"


def test_s3_keys_that_cannot_be_addressed_as_paths():
    """What SeaweedFS normalises away (so tests/integration cannot make it) but AWS S3 keeps as written."""
    from videolake.platform.objectstore.s3 import key_problem

    assert key_problem("landing/d/a.mp4", 10) == (None, None)
    assert key_problem("landing/d/sub/", 0) == (None, None)  # a plain folder marker: the landing rules decide
    assert key_problem("landing/d/sub/", 5) == (
        "not_a_regular_file",
        "a folder marker object (its key ends in '/') holding 5 bytes",
    )
    for key in ("landing/d//a.mp4", "landing/d/./a.mp4", "landing/d/../a.mp4"):
        assert key_problem(key, 10) == ("invalid_name", "the key has an empty, '.' or '..' path segment"), key


def test_s3_archived_object_is_a_rejection_not_a_failed_step():
    """A GET of a GLACIER object that is not restored answers InvalidObjectState: that object is ``archived``, the
    rest of the day goes on. The S3 client below is a stand-in (no server here has archive storage classes); the
    store's own error translation and retry classification run for real."""
    from botocore.exceptions import ClientError

    from videolake.platform.objectstore import ObjectArchivedError, ObjectInfo
    from videolake.platform.objectstore.s3 import S3ObjectStore

    class ArchiveOnlyClient:
        def download_file(self, bucket, key, path, Config=None):  # noqa: N803 (boto3's argument name)
            raise ClientError(
                {
                    "Error": {
                        "Code": "InvalidObjectState",
                        "Message": "The operation is not valid for the object's storage class",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 403},
                },
                "GetObject",
            )

    store = S3ObjectStore("bucket", "p", access_key_id="k", secret_access_key="s", retry_window_s=1)
    store._client_obj = ArchiveOnlyClient()
    with pytest.raises(ObjectArchivedError, match=r"s3://bucket/p/landing/d/cold.mp4 is in an archive storage class"):
        store.download("landing/d/cold.mp4", "/tmp/videolake-never-written.mp4")
    obj = ObjectInfo(key="landing/d/cold.mp4", size=7, uri=store.uri("landing/d/cold.mp4"))
    row = ingest_one(obj, store=store, probe_config=ProbeConfig())
    assert (row["status"], row["reject_reason"], row["size_bytes"]) == ("rejected", "archived", 7)
    assert row["reject_detail"].startswith("s3://bucket/p/landing/d/cold.mp4 is in an archive storage class")


def test_special_character_names_flow_past_ingest(root, videos):
    """The percent-encoded URI of a name with spaces, '#', '%' and unicode is read back by the later stages: scene
    split (store.key_from_uri) and caption frames (the default file:// opener), from the source and from a clip file."""
    from videolake.platform.captioning.base import FrameConfig
    from videolake.platform.captioning.clip_frames import extract_clip
    from videolake.platform.stages.split import SplitConfig, split_one

    day = root / "landing" / DAY
    day.mkdir(parents=True)
    shutil.copy(videos[0], day / "a b #1 %41 é.mp4")
    store = LocalObjectStore(str(root))
    (entry,) = list_landing(store, "landing", [DAY])[DAY]
    video = ingest_one(entry, store=store, probe_config=ProbeConfig())
    assert (video["status"], video["num_frames"]) == ("ok", 36)
    (clip,) = split_one(video, store=store, config=SplitConfig(clip_mode="files"))
    assert (clip["start_frame"], clip["end_frame"], clip["source_uri"]) == (0, 36, video["source_uri"])
    row = {**clip, "fps": video["fps"]}
    assert extract_clip(row, FrameConfig(min_frames=2, max_frames=2)).frames.shape == (2, 120, 160, 3)
    from_source = extract_clip({**row, "clip_uri": None}, FrameConfig(min_frames=2, max_frames=2))
    assert from_source.frames.shape == (2, 120, 160, 3)
