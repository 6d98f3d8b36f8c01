"""The release loader on a tiny real release: 11 clips of 2 ffmpeg test videos (landscape 320x240, portrait
240x320), encoded with the shard recipe, in 2 buckets x 3 and 2 shards, read through real DataLoader workers.

Every check is exact: sample sets, frame shapes and pixels, batch sizes per bucket, resumed positions.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import av
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

from videolake import dataset as D
from videolake.dataset import open_release
from videolake.platform.objectstore import LocalObjectStore
from videolake.platform.shards.buckets import bucket_of
from videolake.platform.shards.config import ShardConfig
from videolake.platform.shards.encode import encode_clip
from videolake.platform.shards.tarfile_det import sample_fragment, write_shard
from videolake.platform.video.clips import sample_indices

DAY = "2024-01-01"
# DataLoader workers are forked from a fork server, never from the test process: by the time this module runs, the
# test process may hold threads of earlier tests (OpenMP's pool after a torch model ran, a Ray core worker), and a
# child forked from it that needs one of their locks hangs (seen under pytest-xdist: the first DataLoader never
# returned). The fork server is a fresh interpreter that imported torch, PyAV and the loader once (the preload below)
# and ran nothing; its children start in milliseconds. It also checks that the dataset pickles to its workers.
WORKER_START = "forkserver"
WORKER_PRELOAD = ["torch", "av", "numpy", "videolake.dataset"]
FPS = 25.0
CONFIG = ShardConfig(preset="ultrafast")
# source name -> (size, clips as [start, end) frame ranges of its 50 frames); (20, 25) and (3, 9) are shorter
# than the default num_frames=8
SOURCES = {
    "land": ("320x240", [(0, 12), (12, 20), (20, 25), (25, 37), (37, 50), (5, 45)]),
    "port": ("240x320", [(0, 10), (10, 30), (30, 50), (3, 9), (15, 40)]),
}
SHARD_SIZES = {"land": [3, 2, 1], "port": [3, 2]}  # samples per shard, in clip-id order
LAND = "resolution_240/aspect_4_3/frames_0_63"
PORT = "resolution_240/aspect_3_4/frames_0_63"


def _ff(ffmpeg: str, *args: str) -> None:
    subprocess.run([ffmpeg, "-nostdin", "-v", "error", "-y", *args], check=True)


def _write_manifest(folder: Path, name: str, shards: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {
        "format": D.RELEASE_FORMAT,
        "name": name,
        "created_at": "2024-01-02T00:00:00Z",
        "partitions": [DAY],
        "excluded_partitions": [],
        "buckets": None,
        "tables": {},
        "shards": sorted(shards, key=lambda s: s["uri"]),
        "totals": {
            "samples": sum(s["samples"] for s in shards),
            "shards": len(shards),
            "bytes": sum(s["bytes"] for s in shards),
        },
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module", autouse=True)
def _fork_server_preload():
    """What the fork server imports before it forks the workers (ignored if this process started it already)."""
    import multiprocessing

    multiprocessing.set_forkserver_preload(WORKER_PRELOAD)


@pytest.fixture(scope="session")
def rel(ffmpeg, tmp_path_factory) -> SimpleNamespace:
    d = tmp_path_factory.mktemp("dataset")
    store = LocalObjectStore(str(d / "lake"))
    samples: dict[str, dict] = {}
    by_source: dict[str, list[str]] = {}
    for name, (size, clips) in SOURCES.items():
        src = d / f"{name}.mp4"
        _ff(
            ffmpeg,
            "-f",
            "lavfi",
            "-i",
            f"testsrc2=size={size}:rate=25",
            "-t",
            "2",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
            str(src),
        )
        video_id = hashlib.sha256(src.read_bytes()).hexdigest()
        for start, end in clips:
            clip_id = f"{video_id}_{start:08d}_{end:08d}"
            enc = encode_clip(str(src), start, end, FPS, CONFIG)
            bucket = bucket_of(enc.width, enc.height, enc.num_frames, CONFIG)
            caption = f"clip {start}-{end} of the {name} test card — ünïcode"
            meta = {
                "caption": caption,
                "clip_id": clip_id,
                "video_id": video_id,
                "source_uri": src.as_uri(),
                "model": "tiny",
                "model_revision": "0",
                "prompt_version": "1",
                "fps": FPS,
                "num_frames": enc.num_frames,
                "width": enc.width,
                "height": enc.height,
                "duration_s": enc.num_frames / FPS,
                "start_frame": start,
                "end_frame": end,
                "bucket": bucket,
                "partition_date": DAY,
                "scores": {"motion": 0.5, "sharpness": 10.0},
            }
            samples[clip_id] = {
                "mp4": enc.data,
                "meta": meta,
                "caption": caption,
                "bucket": bucket,
                "frames": enc.num_frames,
                "size": (enc.height, enc.width),
            }
            by_source.setdefault(name, []).append(clip_id)
    shards, shard_members = [], {}
    index = 0
    for name, sizes in SHARD_SIZES.items():
        ids = sorted(by_source[name])
        assert sum(sizes) == len(ids)
        bucket = samples[ids[0]]["bucket"]
        assert {samples[i]["bucket"] for i in ids} == {bucket}
        for n in sizes:
            chunk, ids = ids[:n], ids[n:]
            frags = [
                sample_fragment(
                    k,
                    {
                        "json": json.dumps(samples[k]["meta"]).encode(),
                        "mp4": samples[k]["mp4"],
                        "txt": samples[k]["caption"].encode(),
                    },
                )
                for k in chunk
            ]
            buf = io.BytesIO()
            write_shard(frags, buf)
            data = buf.getvalue()
            digest = hashlib.sha256(b"".join(frags)).hexdigest()[:10]
            key = f"shards/partition_date={DAY}/{bucket}/shard-{DAY}-{index:05d}-{digest}.tar"
            store.put_bytes(key, data)
            index += 1
            uri = store.uri(key)
            shards.append(
                {
                    "uri": uri,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "samples": n,
                    "bytes": len(data),
                    "bucket": bucket,
                    "partition_date": DAY,
                }
            )
            shard_members[uri] = chunk
    folder = d / "lake" / "releases" / "r1"
    _write_manifest(folder, "r1", shards)
    return SimpleNamespace(
        root=d,
        uri=str(folder),
        samples=samples,
        shards=shards,
        members=shard_members,
        keys=set(samples),
        manifest_order=[k for s in sorted(shards, key=lambda s: s["uri"]) for k in shard_members[s["uri"]]],
    )


def _keys(items) -> list[str]:
    out: list[str] = []
    for item in items:
        k = item["__key__"]
        out.extend(k if isinstance(k, list) else [k])
    return out


def _reference_frames(data: bytes) -> list[np.ndarray]:
    with av.open(io.BytesIO(data)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])]


# ------------------------------------------------------------------------------------------------ samples


def test_fixture_is_two_buckets_of_uneven_shards(rel):
    assert {s["bucket"] for s in rel.shards} == {LAND, PORT}
    assert sorted(s["samples"] for s in rel.shards) == [1, 2, 2, 3, 3]
    assert len(rel.keys) == 11


def test_samples_carry_frames_caption_and_meta(rel):
    ds = open_release(rel.uri, shuffle_seed=None)
    assert isinstance(ds, IterableDataset)
    items = list(ds)
    assert _keys(items) == rel.manifest_order  # no shuffle: shard uri order, samples in key order
    for item in items:
        want = rel.samples[item["__key__"]]
        h, w = want["size"]
        assert item["frames"].dtype == torch.uint8
        assert tuple(item["frames"].shape) == (min(8, want["frames"]), h, w, 3)
        assert item["caption"] == want["caption"]
        assert item["meta"] == want["meta"]
        assert item["__bucket__"] == want["bucket"]
    shapes = Counter(tuple(i["frames"].shape) for i in items)
    assert shapes == {(8, 240, 320, 3): 5, (5, 240, 320, 3): 1, (8, 320, 240, 3): 4, (6, 320, 240, 3): 1}


def test_frames_are_the_evenly_spread_frames(rel):
    for key, want in rel.samples.items():
        ref = _reference_frames(want["mp4"])
        assert len(ref) == want["frames"]
        for t in (8, 3):
            got = D.decode_frames(want["mp4"], t, want["frames"])
            idx = sample_indices(0, want["frames"], t)
            assert got.shape == (len(idx), *want["size"], 3)
            assert np.array_equal(got, np.stack([ref[i] for i in idx])), (key, t)
    # without the frame count (no json): the packets are counted
    long = next(v for v in rel.samples.values() if v["frames"] == 40)
    assert np.array_equal(D.decode_frames(long["mp4"], 4), D.decode_frames(long["mp4"], 4, 40))
    assert sample_indices(0, 40, 4) == [5, 15, 25, 35]


def test_num_frames_sets_t(rel):
    ds = open_release(rel.uri, num_frames=3, buckets=[PORT])
    got = {i["__key__"]: tuple(i["frames"].shape) for i in ds}
    assert got == {k: (3, 320, 240, 3) for k, v in rel.samples.items() if v["bucket"] == PORT}


# ------------------------------------------------------------------------------------------------ exactly once


@pytest.mark.parametrize("batch_size", [None, 2])
def test_every_sample_once_across_ranks_and_workers(rel, batch_size):
    per_rank = []
    for rank in range(2):
        ds = open_release(rel.uri, rank=rank, world_size=2, num_frames=2, batch_size=batch_size, shuffle_seed=7)
        items = list(DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=WORKER_START))
        keys = _keys(items)
        assert len(keys) == ds.num_samples
        assert {i["__worker__"] for i in items} <= {0, 1}
        if batch_size:
            for b in items:
                assert {rel.samples[k]["bucket"] for k in b["__key__"]} == {b["__bucket__"]}
        per_rank.append(keys)
    counts = Counter(per_rank[0] + per_rank[1])
    assert set(counts) == rel.keys and set(counts.values()) == {1}
    assert not set(per_rank[0]) & set(per_rank[1])
    assert sorted(len(k) for k in per_rank) == [5, 6]  # balanced by samples: 3+2 and 3+2+1


def test_plan_deals_every_shard_once_and_balanced(rel):
    shards = open_release(rel.uri).shards
    for seed, epoch, world, workers in [(0, 0, 2, 2), (1, 3, 3, 1), (None, 0, 1, 4), (5, 1, 2, 3)]:
        dealt = [
            s.uri
            for r in range(world)
            for w in D.plan_shards(
                shards, rank=r, world_size=world, num_workers=workers, shuffle_seed=seed, epoch=epoch
            )
            for s in w
        ]
        assert sorted(dealt) == sorted(s.uri for s in shards)
        # a rank's shards do not depend on its workers
        for r in range(world):
            one = D.plan_shards(shards, rank=r, world_size=world, num_workers=1, shuffle_seed=seed, epoch=epoch)
            many = D.plan_shards(shards, rank=r, world_size=world, num_workers=workers, shuffle_seed=seed, epoch=epoch)
            assert sorted(s.uri for s in one[0]) == sorted(s.uri for w in many for s in w)


def test_order_is_deterministic_per_seed_and_epoch(rel):
    def order(**kw):
        return _keys(open_release(rel.uri, num_frames=1, **kw))

    base = order(shuffle_seed=3)
    assert sorted(base) == sorted(rel.keys)
    assert order(shuffle_seed=3) == base
    assert order(shuffle_seed=4) != base
    assert order(shuffle_seed=3, epoch=1) != base
    assert sorted(order(shuffle_seed=4)) == sorted(order(shuffle_seed=3, epoch=1)) == sorted(base)
    ds = open_release(rel.uri, num_frames=1, shuffle_seed=3)
    ds.set_epoch(1)
    assert _keys(ds) == order(shuffle_seed=3, epoch=1)


def test_batches_hold_one_bucket(rel):
    batches = list(open_release(rel.uri, batch_size=2, shuffle_seed=11))
    sizes = {LAND: [], PORT: []}
    for b in batches:
        assert {m["bucket"] for m in b["meta"]} == {b["__bucket__"]}
        assert len(b["caption"]) == len(b["meta"]) == len(b["__key__"])
        shapes = {(min(8, rel.samples[k]["frames"]), *rel.samples[k]["size"], 3) for k in b["__key__"]}
        if len(shapes) == 1:
            assert isinstance(b["frames"], torch.Tensor)
            assert tuple(b["frames"].shape) == (len(b["__key__"]), *shapes.pop())
        else:
            assert isinstance(b["frames"], list)
            assert [tuple(f.shape)[0] for f in b["frames"]] == [min(8, rel.samples[k]["frames"]) for k in b["__key__"]]
        sizes[b["__bucket__"]].append(len(b["__key__"]))
    assert sorted(sizes[LAND]) == [2, 2, 2] and sorted(sizes[PORT]) == [1, 2, 2]
    assert sorted(_keys(batches)) == sorted(rel.keys)


# ------------------------------------------------------------------------------------------------ resume


@pytest.mark.parametrize("batch_size, k", [(None, 5), (2, 2)])
def test_resume_mid_epoch_with_dataloader_workers(rel, batch_size, k):
    ds = open_release(rel.uri, num_frames=1, batch_size=batch_size, shuffle_seed=5, epoch=2)
    loader = ds.loader(num_workers=2, multiprocessing_context=WORKER_START)
    first = _keys(itertools.islice(iter(loader), k))
    state = json.loads(json.dumps(loader.state_dict()))  # what a checkpoint stores
    assert state["epoch"] == 2 and state["num_workers"] == 2 and sum(state["taken"]) == k
    assert all(state["taken"])  # both workers stopped mid-stream

    loader2 = open_release(rel.uri, num_frames=1, batch_size=batch_size, shuffle_seed=5).loader(
        num_workers=2, multiprocessing_context=WORKER_START
    )
    loader2.load_state_dict(state)
    assert loader2.epoch == 2
    rest = _keys(loader2)
    assert len(first) + len(rest) == 11
    assert sorted(first + rest) == sorted(rel.keys)
    # a whole pass moves the loader to the next epoch, from its beginning
    assert loader2.epoch == 3 and loader2.state_dict()["taken"] == [0, 0]
    loader2.set_epoch(3)  # the same epoch: a no-op
    assert sorted(_keys(loader2)) == sorted(rel.keys) and loader2.epoch == 4


def test_resume_bare_dataset_continues_the_same_order(rel):
    full = _keys(open_release(rel.uri, num_frames=1, shuffle_seed=9))
    ds = open_release(rel.uri, num_frames=1, shuffle_seed=9)
    first = _keys(itertools.islice(iter(ds), 4))
    state = ds.state_dict()
    assert state["taken"] == [4]
    ds2 = open_release(rel.uri, num_frames=1, shuffle_seed=9)
    ds2.load_state_dict(state)
    rest = _keys(ds2)
    assert first + rest == full
    assert ds2.state_dict()["taken"] == [11]
    ds2.set_epoch(0)  # same epoch: keeps the loaded position
    assert _keys(ds2) == full[4:]
    ds2.set_epoch(1)  # another epoch: from its beginning
    assert sorted(_keys(ds2)) == sorted(full)


def test_state_from_other_settings_is_refused(rel):
    ds = open_release(rel.uri, num_frames=1, shuffle_seed=1)
    loader = ds.loader(num_workers=2, multiprocessing_context=WORKER_START)
    next(iter(loader))
    state = loader.state_dict()
    with pytest.raises(ValueError, match="shuffle_seed"):
        open_release(rel.uri, shuffle_seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="batch_size"):
        open_release(rel.uri, shuffle_seed=1, batch_size=2).load_state_dict(state)
    with pytest.raises(ValueError, match="num_workers"):
        open_release(rel.uri, shuffle_seed=1).loader(num_workers=1).load_state_dict(state)
    bare = open_release(rel.uri, shuffle_seed=1, num_frames=1)
    bare.load_state_dict(state)  # 2 workers' position, iterated by 1
    with pytest.raises(ValueError, match="same num_workers"):
        next(iter(bare))
    with pytest.raises(ValueError, match="batch_size"):
        ds.loader(batch_size=4)


def test_dataset_pickles_by_name(rel):
    import pickle

    ds = open_release(rel.uri, shuffle_seed=None, num_frames=1)
    back = pickle.loads(pickle.dumps(ds))
    assert type(back) is D.ReleaseDataset and isinstance(back, IterableDataset)
    assert _keys(back) == rel.manifest_order


# ------------------------------------------------------------------------------------------------ uris, errors


def test_bucket_filter(rel):
    got = _keys(open_release(rel.uri, buckets=[LAND], num_frames=1))
    assert sorted(got) == sorted(k for k, v in rel.samples.items() if v["bucket"] == LAND)
    with pytest.raises(ValueError, match="not in release 'r1'"):
        open_release(rel.uri, buckets=["resolution_720/aspect_16_9/frames_64_127"])


def test_missing_release_is_a_clear_error(rel, tmp_path):
    with pytest.raises(FileNotFoundError, match="folder does not exist"):
        open_release(str(tmp_path / "releases" / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="manifest.json not found"):
        open_release((tmp_path / "empty").as_uri())
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text(json.dumps({"format": "other/9"}))
    with pytest.raises(ValueError, match="not a videolake-release/1 manifest"):
        open_release(str(tmp_path / "bad"))
    with pytest.raises(ValueError, match="unsupported URI scheme"):
        open_release("gs://bucket/releases/r1")
    with pytest.raises(ValueError, match="rank must be in"):
        open_release(rel.uri, rank=2, world_size=2)


def test_a_short_shard_is_an_error(rel, tmp_path):
    shard = dict(rel.shards[0], samples=rel.shards[0]["samples"] + 1)
    _write_manifest(tmp_path / "r", "r", [shard])
    with pytest.raises(ValueError, match=r"held 3 samples, the manifest lists 4"):
        list(open_release(str(tmp_path / "r"), num_frames=1))


def test_a_shard_whose_bytes_changed_fails_at_its_end_naming_it_unless_the_check_is_off(rel, tmp_path):
    """Issue 40, item 7: 4 bytes flipped in a caption (the tar and the video still read: only the hash sees it).
    The error comes after the shard's samples, before the next shard's first; with the check off it reads."""
    first, second = rel.shards[0], rel.shards[1]
    data = bytearray(Path(D._resolve(first["uri"], None)[1]).read_bytes())
    key = rel.members[first["uri"]][0]
    at = data.find(rel.samples[key]["caption"].encode())  # the .txt member (the json escapes its non-ASCII)
    assert at > 0 and data[at : at + 4] == b"clip"
    data[at : at + 4] = bytes(c ^ 0x20 for c in data[at : at + 4])  # "CLIP": same length, valid UTF-8
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "0-changed.tar").write_bytes(data)
    (folder / "1-next.tar").write_bytes(Path(D._resolve(second["uri"], None)[1]).read_bytes())
    changed = (folder / "0-changed.tar").as_uri()
    shards = [dict(first, uri=changed), dict(second, uri=(folder / "1-next.tar").as_uri())]
    _write_manifest(folder, "r", shards)

    got = []
    with pytest.raises(D.ShardChecksumError, match=changed) as err:
        for item in open_release(str(folder), num_frames=1, shuffle_seed=None):
            got.append(item)
    assert (err.value.uri, err.value.expected) == (changed, first["sha256"])
    assert err.value.actual == hashlib.sha256(bytes(data)).hexdigest()
    assert [i["__url__"] for i in got] == [changed] * first["samples"]  # all of it, nothing of the next shard
    # a DataLoader worker's error is raised again in the training process as its class, rebuilt from its message
    # (torch's ExceptionWrapper; through a real worker this costs torch's 5 s shutdown wait for a failed worker)
    from torch._utils import ExceptionWrapper

    with pytest.raises(D.ShardChecksumError, match=changed):
        ExceptionWrapper((type(err.value), err.value, None), where="in DataLoader worker process 0").reraise()

    unchecked = list(open_release(str(folder), num_frames=1, shuffle_seed=None, verify_shards=False))
    assert len(unchecked) == first["samples"] + second["samples"]
    assert unchecked[0]["caption"] == "CLIP" + rel.samples[key]["caption"][4:]  # what the check kept out
    no_sha = tmp_path / "no-sha"
    _write_manifest(no_sha, "no-sha", [dict(second, sha256="")])
    with pytest.raises(ValueError, match="no sha256 in the manifest"):
        open_release(str(no_sha))
    assert len(list(open_release(str(no_sha), num_frames=1, verify_shards=False))) == second["samples"]


def test_file_uri(rel):
    ds = open_release(Path(rel.uri).as_uri(), num_frames=1, shuffle_seed=None)
    assert _keys(ds) == rel.manifest_order


def test_s3_release(rel, tmp_path, monkeypatch):
    """The s3:// code path end to end on a stand-in filesystem (a local folder as the bucket)."""
    import pyarrow.fs as pafs

    bucket = tmp_path / "bkt"
    shards = []
    for s in rel.shards:
        key = "lake/" + s["uri"].split("/lake/", 1)[1]
        (bucket / key).parent.mkdir(parents=True, exist_ok=True)
        (bucket / key).write_bytes(Path(D._resolve(s["uri"], None)[1]).read_bytes())
        shards.append(dict(s, uri=f"s3://bkt/{key}"))
    _write_manifest(bucket / "lake" / "releases" / "r1", "r1", shards)
    seen = []

    def fake(options):
        seen.append(options)
        return pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())

    monkeypatch.setattr(D, "_s3_filesystem", fake)
    opts = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
    ds = open_release("s3://bkt/lake/releases/r1", num_frames=1, shuffle_seed=None, storage_options=opts)
    assert sorted(_keys(ds)) == sorted(rel.keys)
    assert seen and all(o == opts for o in seen)
    with pytest.raises(FileNotFoundError, match="manifest.json not found"):
        open_release("s3://bkt/lake/releases/r2", storage_options=opts)


def test_s3_filesystem_from_options_or_environment(monkeypatch):
    def kwargs(fs):
        return fs.__reduce__()[1][0]

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.delenv("AWS_REGION", raising=False)
    env = kwargs(D._s3_filesystem(None))
    assert (env["endpoint_override"], env["scheme"], env["access_key"], env["region"]) == (
        "127.0.0.1:8333",
        "http",
        "env-key",
        "eu-west-1",
    )
    given = kwargs(
        D._s3_filesystem(
            {
                "aws_endpoint_url": "https://s3.example.com",
                "AWS_ACCESS_KEY_ID": "k",
                "AWS_SECRET_ACCESS_KEY": "s",
                "AWS_REGION": "us-west-2",
            }
        )
    )
    assert (given["endpoint_override"], given["scheme"], given["access_key"], given["region"]) == (
        "s3.example.com",
        "https",
        "k",
        "us-west-2",
    )


def test_import_is_light():
    code = (
        "import sys, videolake.dataset; "
        "print(sorted(m for m in ('torch', 'webdataset', 'av', 'ray', 'dagster') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------------------------------------ other readers


def test_shards_are_plain_tars(rel, tmp_path):
    for s in rel.shards:
        path = D._resolve(s["uri"], None)[1]
        names = subprocess.run(["tar", "-tf", path], check=True, capture_output=True, text=True).stdout.split()
        assert names == [f"{k}.{e}" for k in rel.members[s["uri"]] for e in ("json", "mp4", "txt")]
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["tar", "-xf", D._resolve(rel.shards[0]["uri"], None)[1], "-C", str(out)], check=True)
    for k in rel.members[rel.shards[0]["uri"]]:
        assert (out / f"{k}.mp4").read_bytes() == rel.samples[k]["mp4"]
        assert (out / f"{k}.txt").read_text("utf-8") == rel.samples[k]["caption"]
        assert json.loads((out / f"{k}.json").read_text("utf-8")) == rel.samples[k]["meta"]


@pytest.mark.slow
def test_ray_reads_the_shards(rel):
    import ray

    if ray.is_initialized():  # another module's Ray, with its own options: read through a fresh one
        ray.shutdown()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        paths = [D._resolve(s["uri"], None)[1] for s in rel.shards]
        rows = ray.data.read_webdataset(paths).take_all()
    finally:
        ray.shutdown()
    assert sorted(r["__key__"] for r in rows) == sorted(rel.keys)
    for r in rows:
        want = rel.samples[r["__key__"]]
        assert r["txt"] == want["caption"] == r["json"]["caption"]
        assert r["json"]["num_frames"] == want["frames"]
        assert bytes(r["mp4"]) == want["mp4"]
