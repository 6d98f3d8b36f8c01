"""Dataset releases (videolake/platform/releases) on a tiny lake built here: five tables over five days, real shards.

    2026-01-05  videos A (320x240), B (432x240), C (caption failed), R (rejected): shards 4:3 [a0, a2], 16:9 [b0]
    2026-01-06  video D: shard 4:3 [d0]; d1 could not be encoded (a failed training_shards row)
    2026-01-07  3 of 5 videos rejected: raw_videos' reject_rate gate fails (its clips are sharded all the same)
    2026-01-08  every table but training_shards
    2026-01-09  nothing
    2026-01-10  video H: h0 sharded, h1 (ok caption) has no training_shards row: its one-sample gate fails

The gates are the real ones (GX) in the module's first release; the other releases inject their verdicts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from videolake.platform.lake.schemas import (
    CLIP_CAPTIONS,
    FILTERED_CLIPS,
    RAW_VIDEOS,
    SCENE_CLIPS,
    TABLES,
    TRAINING_SHARDS,
    clip_id,
)
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table
from videolake.platform.objectstore import LocalObjectStore

D1, D2, D3, D4, D5, D6 = "2026-01-05", "2026-01-06", "2026-01-07", "2026-01-08", "2026-01-09", "2026-01-10"
B43 = "resolution_240/aspect_4_3/frames_0_63"
B169 = "resolution_240/aspect_16_9/frames_0_63"
ALL_TABLES = ("raw_videos", "scene_clips", "filtered_clips", "clip_captions", "training_shards")
FPS = 25.0
NOW = dt.datetime(2026, 1, 10, tzinfo=dt.UTC)
MODEL, REVISION, PROMPT = "Qwen/Qwen2.5-VL-3B-Instruct", "66285546d2b8", "v1-describe"


@pytest.fixture(scope="module", autouse=True)
def _training_shards_registered():
    """The lead's stage registers training_shards in schemas.TABLE_SPECS; until then the Lake needs its schema."""
    if "training_shards" in TABLES:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(TABLES, "training_shards", TRAINING_SHARDS)
        yield


def _fid(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


@dataclass
class Day:
    raw: list = field(default_factory=list)
    scenes: list = field(default_factory=list)
    filtered: list = field(default_factory=list)
    captions: list = field(default_factory=list)
    shards: list = field(default_factory=list)  # training_shards rows


@dataclass
class World:
    root: str
    lake: Lake
    store: LocalObjectStore
    days: dict
    shards: dict  # uri -> {sha256, samples, bytes, bucket, partition_date}
    captions: dict  # clip_id -> caption (the released ones)


class Builder:
    """Rows of the five tables, and real shards in the store, for synthetic videos of real source files."""

    def __init__(self, store: LocalObjectStore, sources: dict[str, tuple[str, int, int]]) -> None:
        self.store, self.sources = store, sources  # name -> (local path, width, height)
        self.days: dict[str, Day] = {}
        self.shards: dict[str, dict] = {}
        self.captions: dict[str, str] = {}

    def day(self, d: str) -> Day:
        return self.days.setdefault(d, Day())

    def video(self, d: str, vid: str, source: str) -> dict:
        path, w, h = self.sources[source]
        row = dict(
            video_id=vid,
            source_uri=self.store.uri(f"landing/{d}/{source}.mp4"),
            size_bytes=1000,
            container="mp4",
            codec="h264",
            width=w,
            height=h,
            fps=FPS,
            duration_s=2.0,
            num_frames=50,
            has_audio=False,
            rotation=0,
            display_width=w,
            display_height=h,
            status="ok",
            ingested_at=NOW,
            partition_date=dt.date.fromisoformat(d),
            _path=path,
        )
        self.day(d).raw.append(row)
        return row

    def rejected(self, d: str, name: str, reason: str) -> None:
        self.day(d).raw.append(
            dict(
                video_id=_fid(name),
                source_uri=self.store.uri(f"landing/{d}/{name}"),
                size_bytes=10,
                status="rejected",
                reject_reason=reason,
                failure_class="permanent",
                ingested_at=NOW,
                partition_date=dt.date.fromisoformat(d),
            )
        )

    def clips(self, d: str, video: dict, ranges: list[tuple[int, int]]) -> list[dict]:
        out = []
        for i, (s, e) in enumerate(ranges):
            row = dict(
                clip_id=clip_id(video["video_id"], s, e),
                video_id=video["video_id"],
                source_uri=video["source_uri"],
                clip_index=i,
                start_frame=s,
                end_frame=e,
                start_s=s / FPS,
                end_s=e / FPS,
                duration_s=(e - s) / FPS,
                detector="luma",
                detector_params="{}",
                max_clip_s=20.0,
                partition_date=video["partition_date"],
                _video=video,
            )
            self.day(d).scenes.append(row)
            out.append(row)
        return out

    def score(self, d: str, clip: dict, reject: str | None = None) -> None:
        v = clip["_video"]
        self.day(d).filtered.append(
            dict(
                clip_id=clip["clip_id"],
                video_id=clip["video_id"],
                duration_s=clip["duration_s"],
                width=v["width"],
                height=v["height"],
                motion=12.0,
                sharpness=150.0,
                brightness=110.0,
                black_ratio=0.0,
                frozen_ratio=0.0,
                text_area=0.01,
                passed=reject is None,
                reject_reason=reject,
                partition_date=clip["partition_date"],
            )
        )

    def caption(self, d: str, clip: dict, text: str | None, error: str | None = None) -> None:
        self.day(d).captions.append(
            dict(
                clip_id=clip["clip_id"],
                caption_track="default",
                video_id=clip["video_id"],
                source_uri=clip["source_uri"],
                status="ok" if text else "failed",
                caption=text,
                error=error,
                failure_class="transient" if error else None,
                model=MODEL,
                model_revision=REVISION,
                prompt_version=PROMPT,
                num_frames=clip["end_frame"] - clip["start_frame"],
                captioned_at=NOW,
                partition_date=clip["partition_date"],
            )
        )
        clip["_caption"] = text

    def shard(self, d: str, bucket: str, clips: list[dict], idx: int = 0) -> str:
        """Encode ``clips`` into one shard of ``bucket`` (the contract's members and key), rows included."""
        from videolake.platform.shards.config import ShardConfig
        from videolake.platform.shards.encode import encode_clip
        from videolake.platform.shards.tarfile_det import sample_fragment, write_shard

        frags, rows = [], []
        for c in sorted(clips, key=lambda c: c["clip_id"]):
            enc = encode_clip(c["_video"]["_path"], c["start_frame"], c["end_frame"], FPS, ShardConfig())
            meta = dict(
                caption=c["_caption"],
                clip_id=c["clip_id"],
                video_id=c["video_id"],
                source_uri=c["source_uri"],
                model=MODEL,
                model_revision=REVISION,
                prompt_version=PROMPT,
                fps=FPS,
                num_frames=enc.num_frames,
                width=enc.width,
                height=enc.height,
                duration_s=enc.num_frames / FPS,
                start_frame=c["start_frame"],
                end_frame=c["end_frame"],
                bucket=bucket,
                partition_date=d,
                scores={"motion": 12.0},
            )
            frag = sample_fragment(
                c["clip_id"], {"json": json.dumps(meta).encode(), "mp4": enc.data, "txt": c["_caption"].encode()}
            )
            frags.append(frag)
            rows.append(
                dict(
                    clip_id=c["clip_id"],
                    video_id=c["video_id"],
                    source_uri=c["source_uri"],
                    status="ok",
                    bucket=bucket,
                    sample_bytes=len(frag),
                    sample_sha256=hashlib.sha256(frag).hexdigest(),
                    num_frames=enc.num_frames,
                    width=enc.width,
                    height=enc.height,
                    fps=FPS,
                    duration_s=enc.num_frames / FPS,
                    caption_chars=len(c["_caption"]),
                    partition_date=c["partition_date"],
                )
            )
        import io

        buf = io.BytesIO()
        write_shard(frags, buf)
        data = buf.getvalue()
        digest = hashlib.sha256(b"".join(frags)).hexdigest()[:10]
        uri = self.store.put_bytes(f"shards/{d}/{bucket}/shard-{d}-{idx:05d}-{digest}.tar", data)
        sha, offset = hashlib.sha256(data).hexdigest(), 0
        for row, frag in zip(rows, frags):
            row.update(
                shard_uri=uri, shard_sha256=sha, shard_samples=len(frags), shard_bytes=len(data), sample_offset=offset
            )
            offset += len(frag)
        self.day(d).shards.extend(rows)
        self.shards[uri] = {
            "uri": uri,
            "sha256": sha,
            "samples": len(frags),
            "bytes": len(data),
            "bucket": bucket,
            "partition_date": d,
        }
        return uri

    def encode_failed(self, d: str, clip: dict, error: str) -> None:
        self.day(d).shards.append(
            dict(
                clip_id=clip["clip_id"],
                video_id=clip["video_id"],
                source_uri=clip["source_uri"],
                status="failed",
                error=error,
                failure_class="permanent",
                partition_date=clip["partition_date"],
            )
        )

    def write(self, lake: Lake, skip: set[tuple[str, str]] = frozenset()) -> None:
        schemas = {
            "raw_videos": (RAW_VIDEOS, "raw"),
            "scene_clips": (SCENE_CLIPS, "scenes"),
            "filtered_clips": (FILTERED_CLIPS, "filtered"),
            "clip_captions": (CLIP_CAPTIONS, "captions"),
            "training_shards": (TRAINING_SHARDS, "shards"),
        }
        for table, (schema, attr) in schemas.items():
            for d, day in sorted(self.days.items()):
                if (table, d) in skip:
                    continue
                rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in getattr(day, attr)]
                lake.write_partitions(table, rows_to_table(rows, schema), PartitionRange.of([d]))


def _ffmpeg_video(ffmpeg: str, path: str, size: str, pattern: str = "testsrc2") -> None:
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
            f"{pattern}=size={size}:rate=25",
            "-t",
            "2",
            "-c:v",
            "libx264",
            "-pix_fmt",
            "yuv420p",
            "-preset",
            "ultrafast",
            path,
        ],
        check=True,
    )


def build_world(root, ffmpeg: str, days: tuple[str, ...] = (D1, D2, D3, D4, D6)) -> tuple[Builder, Lake]:
    store = LocalObjectStore(str(root / "store"))
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    _ffmpeg_video(ffmpeg, str(src / "a.mp4"), "320x240")
    _ffmpeg_video(ffmpeg, str(src / "b.mp4"), "432x240", "testsrc")
    b = Builder(store, {"a": (str(src / "a.mp4"), 320, 240), "b": (str(src / "b.mp4"), 432, 240)})
    if D1 in days:
        va, vb, vc = b.video(D1, _fid("A"), "a"), b.video(D1, _fid("B"), "b"), b.video(D1, _fid("C"), "a")
        b.rejected(D1, "notes.json", "not_a_video: notes.json is not a video")
        a0, a1, a2 = b.clips(D1, va, [(0, 20), (20, 30), (30, 50)])
        (b0,), (c0,) = b.clips(D1, vb, [(0, 50)]), b.clips(D1, vc, [(0, 50)])
        for c in (a0, a2, b0, c0):
            b.score(D1, c)
        b.score(D1, a1, "too_short")
        b.caption(D1, a0, "A colourful test pattern with a moving gradient and a counter.")
        b.caption(D1, a2, "Bright vertical colour bars while a small white square moves to the right.")
        b.caption(D1, b0, "Wide test card with colour bars and a clock face counting seconds.")
        b.caption(D1, c0, None, "timeout: generate took longer than 60 s")
        b.shard(D1, B43, [a0, a2])
        b.shard(D1, B169, [b0])
    if D2 in days:
        vd = b.video(D2, _fid("D"), "a")
        d0, d1 = b.clips(D2, vd, [(0, 25), (25, 50)])
        for c in (d0, d1):
            b.score(D2, c)
        b.caption(D2, d0, "Moving colour gradient behind a ticking counter in the corner.")
        b.caption(D2, d1, "The test pattern keeps scrolling; the counter shows the next second.")
        b.shard(D2, B43, [d0])
        b.encode_failed(D2, d1, "encode_error: frame 30 did not decode")
    if D3 in days:
        ve, vf = b.video(D3, _fid("E"), "a"), b.video(D3, _fid("F"), "a")
        for name, reason in (
            ("x.json", "not_a_video: x.json"),
            ("empty.mp4", "empty_file"),
            ("cut.mp4", "truncated: ends at 1.2 s of 4 s"),
        ):
            b.rejected(D3, name, reason)
        (e0,), (f0,) = b.clips(D3, ve, [(0, 50)]), b.clips(D3, vf, [(0, 50)])
        for c in (e0, f0):
            b.score(D3, c)
        b.caption(D3, e0, "A test pattern on a day whose videos were mostly rejected.")
        b.caption(D3, f0, "Another test pattern of that day, with its counter and colour bars.")
        b.shard(D3, B43, [e0, f0])
    if D4 in days:
        vg = b.video(D4, _fid("G"), "a")
        (g0,) = b.clips(D4, vg, [(0, 50)])
        b.score(D4, g0)
        b.caption(D4, g0, "A test pattern of a day that has not been sharded yet.")
    if D6 in days:
        vh = b.video(D6, _fid("H"), "a")
        h0, h1 = b.clips(D6, vh, [(0, 25), (25, 50)])
        for c in (h0, h1):
            b.score(D6, c)
        b.caption(D6, h0, "The first half of a test pattern clip, with the counter at zero.")
        b.caption(D6, h1, "The second half of it, whose sample the shard stage never wrote.")
        b.shard(D6, B43, [h0])
    lake = Lake(str(root / "lake"))
    b.write(lake)
    return b, lake


@pytest.fixture(scope="module")
def world(tmp_path_factory, ffmpeg) -> World:
    root = tmp_path_factory.mktemp("releases")
    b, lake = build_world(root, ffmpeg)
    captions = {c["clip_id"]: c["caption"] for d in (D1, D2) for c in b.days[d].captions if c["caption"]}
    return World(str(root), lake, b.store, b.days, b.shards, captions)


@pytest.fixture(scope="module")
def v1(world):
    """The release of the whole range with the real gates (GX)."""
    from videolake.platform.releases import create_release

    return create_release(world.lake, world.store, "v1", D1, D6)


def _all_pass(table: str, day: str) -> list[str]:
    return []


def _expected_shards(world, days, buckets=None):
    return sorted(
        (
            s
            for s in world.shards.values()
            if s["partition_date"] in days and (buckets is None or s["bucket"] in buckets)
        ),
        key=lambda s: s["uri"],
    )


# -- create ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_release_takes_only_days_that_passed_every_gate_of_every_table(world, v1):
    from videolake.platform.releases import read_manifest

    m = read_manifest(world.store, "v1")
    assert m == v1.manifest
    assert m["format"] == "videolake-release/1" and m["name"] == "v1" and m["buckets"] is None
    assert m["partitions"] == [D1, D2]
    assert [(e["partition_date"], e["reason"]) for e in m["excluded_partitions"]] == [
        (D3, "raw_videos failed blocking gate(s) reject_rate"),
        (D4, "no rows in training_shards"),
        (D5, "no rows in raw_videos, scene_clips, filtered_clips, clip_captions, training_shards"),
        (D6, "training_shards failed blocking gate(s) one_sample_per_eligible_clip"),
    ]
    assert m["excluded_partitions"][0]["failed_gates"] == {"raw_videos": ["reject_rate"]}
    assert m["excluded_partitions"][1]["missing_tables"] == ["training_shards"]
    assert m["tables"] == {t: {"uri": world.lake.table_uri(t), "version": world.lake.version(t)} for t in ALL_TABLES}
    assert dt.datetime.strptime(m["created_at"], "%Y-%m-%dT%H:%M:%SZ")


def test_release_lists_the_shards_of_the_taken_days_with_their_sha256_and_totals(world, v1):
    shards = v1.manifest["shards"]
    assert shards == _expected_shards(world, {D1, D2})
    assert [(s["partition_date"], s["bucket"], s["samples"]) for s in shards] == [
        (D1, B169, 1),
        (D1, B43, 2),
        (D2, B43, 1),
    ]
    for s in shards:  # the sha256 and size are those of the stored object
        data = world.store.get_bytes(world.store.key_from_uri(s["uri"]))
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (s["sha256"], s["bytes"])
    seconds_43, seconds_169 = (20 + 20 + 25) / FPS, 50 / FPS
    assert v1.totals == {
        "samples": 4,
        "shards": 3,
        "bytes": sum(s["bytes"] for s in shards),
        "frames": 20 + 20 + 50 + 25,
        "hours": round((seconds_43 + seconds_169) / 3600, 6),
        "by_bucket": {
            B169: {"samples": 1, "hours": round(seconds_169 / 3600, 6)},
            B43: {"samples": 3, "hours": round(seconds_43 / 3600, 6)},
        },
    }


def test_a_release_name_is_never_reused_and_must_be_valid(world, v1):
    from videolake.platform.releases import ReleaseError, ReleaseExistsError, create_release

    before = world.store.get_bytes("releases/v1/manifest.json")
    with pytest.raises(ReleaseExistsError, match="release 'v1' exists"):
        create_release(world.lake, world.store, "v1", D1, D2, gate_verdicts=_all_pass)
    assert world.store.get_bytes("releases/v1/manifest.json") == before
    for bad in ("", "../v1", "a/b", ".hidden", "v 1", "v1?"):
        with pytest.raises(ReleaseError, match="invalid release name"):
            create_release(world.lake, world.store, bad, D1, D2, gate_verdicts=_all_pass)
    with pytest.raises(ReleaseError, match="is before start"):
        create_release(world.lake, world.store, "backwards", D2, D1, gate_verdicts=_all_pass)
    with pytest.raises(ReleaseError, match="no partition of 2026-01-09 can be released"):
        create_release(world.lake, world.store, "empty", D5, D5, gate_verdicts=_all_pass)
    assert not world.store.exists("releases/empty/manifest.json")


def test_a_failed_gate_of_any_table_leaves_its_day_out(world):
    from videolake.platform.releases import create_release

    asked = []

    def verdicts(table, day):
        asked.append((table, day))
        return ["one_sample_per_eligible_clip"] if (table, day) == ("training_shards", D2) else []

    r = create_release(world.lake, world.store, "shards-gate", D1, D3, gate_verdicts=verdicts)
    assert r.partitions == [D1, D3]  # D3's raw_videos gate is not failed by these verdicts
    assert r.excluded_partitions == [
        {
            "partition_date": D2,
            "reason": "training_shards failed blocking gate(s) one_sample_per_eligible_clip",
            "failed_gates": {"training_shards": ["one_sample_per_eligible_clip"]},
        }
    ]
    assert sorted(asked) == sorted((t, d) for t in ALL_TABLES for d in (D1, D2, D3))
    assert r.shards == _expected_shards(world, {D1, D3})


def test_bucket_filter_and_a_create_that_crashed_before_its_manifest_may_be_retried(world):
    from videolake.platform.releases import create_release

    world.store.put_bytes("releases/wide/README.md", b"half a card from a crashed create")
    r = create_release(world.lake, world.store, "wide", D1, D2, buckets=[B169], gate_verdicts=_all_pass)
    assert r.manifest["buckets"] == [B169]
    assert r.shards == _expected_shards(world, {D1}, {B169})
    assert r.totals["samples"] == 1 and r.totals["by_bucket"] == {B169: {"samples": 1, "hours": round(2 / 3600, 6)}}
    assert world.store.get_bytes("releases/wide/README.md").startswith(b"# Dataset release `wide`")


# -- pending pins ---------------------------------------------------------------------------------------------------


class HookedStore(LocalObjectStore):
    """The store, calling ``hook(key)`` after each ``put_bytes``: a create's steps are interleaved with another
    writer's at an exact point (the card's README.md is the last object before the final check), no thread, no
    sleep."""

    def __init__(self, root, hook) -> None:
        super().__init__(str(root))
        self.hook = hook

    def put_bytes(self, key: str, data: bytes) -> str:
        uri = super().put_bytes(key, data)
        self.hook(key)
        return uri


def _pins(store, name: str) -> list[str]:
    return [o.key for o in store.list(f"releases/{name}/") if o.key.rsplit("/", 1)[-1].startswith("pending-")]


def _shard_cleanup(lake, store, day: str) -> int:
    """training_shards' own clean-up of ``day`` (the real one), with no retention: the shards were written seconds
    ago and a clean-up with the retention would keep them for their age alone."""
    from videolake.platform.shards.config import ShardConfig
    from videolake.platform.stages.shard import remove_stale_shards

    return remove_stale_shards(
        lake, store, PartitionRange.of([day]), ShardConfig(), "rerun", retention_hours=0, now_s=4e9
    )


def test_a_shards_rerun_committing_while_the_card_is_written_never_leaves_a_manifest_naming_deleted_shards(
    tmp_path, ffmpeg
):
    """Issue 40, item 5: a training_shards re-run of a released day commits new shards and deletes the ones no table
    and no release names, between the create's read of the shard list and its manifest. The pending pin keeps the
    shards through that clean-up; the final check sees the commit and publishes nothing; a new create then names
    the re-run's shards, which exist."""
    from videolake.platform.releases import ReleaseError, create_release, verify_release

    b, lake = build_world(tmp_path, ffmpeg, days=(D1,))
    named = set(b.shards)
    seen = {}

    def rerun(key: str) -> None:
        if key != "releases/r/README.md" or seen:
            return
        rows = []
        for i, old in enumerate(sorted(named)):
            new_key = store.key_from_uri(old).rsplit("/", 1)[0] + f"/shard-{D1}-rerun-{i}.tar"
            new = store.put_bytes(new_key, store.get_bytes(store.key_from_uri(old)))
            rows += [
                {**{k: v for k, v in r.items() if not k.startswith("_")}, "shard_uri": new}
                for r in b.days[D1].shards
                if r.get("shard_uri") == old
            ]
        lake.write_partitions("training_shards", rows_to_table(rows, TRAINING_SHARDS), PartitionRange.of([D1]))
        seen["removed"] = _shard_cleanup(lake, store, D1)
        seen["pins"] = _pins(store, "r")

    store = HookedStore(b.store.root, rerun)
    with pytest.raises(ReleaseError, match="training_shards was written"):
        create_release(lake, store, "r", D1, D1, gate_verdicts=_all_pass)
    assert seen["removed"] == 0 and len(seen["pins"]) == 1  # the clean-up ran, and kept the pinned shards
    assert all(store.exists(store.key_from_uri(u)) for u in named)
    assert not store.exists("releases/r/manifest.json") and _pins(store, "r") == []

    again = create_release(lake, store, "r", D1, D1, gate_verdicts=_all_pass)
    assert {s["uri"] for s in again.shards}.isdisjoint(named) and len(again.shards) == len(named)
    assert _pins(store, "r") == []
    # the first create's shards were kept by its pin alone: with the pin gone the next clean-up deletes them, and
    # the release (the re-run's shards) still verifies
    assert _shard_cleanup(lake, store, D1) == len(named)
    assert verify_release(store, "r").ok


def test_a_pending_pin_is_kept_by_both_deleters_until_the_manifest_and_expires_without_one(world):
    from videolake.platform.releases import ReleaseError, create_release, pinned_versions, referenced_shard_uris
    from videolake.platform.releases.manifest import pending_pins, write_pending_pin

    (h0,) = _expected_shards(world, {D6})  # D6's shard: named by no other release of this module
    assert h0["uri"] not in referenced_shard_uris(world.store)
    during = {}

    def look(key: str) -> None:
        if key == "releases/pin-d6/README.md":
            during["shards"] = referenced_shard_uris(world.store)
            during["versions"] = pinned_versions(world.lake, world.store)

    store = HookedStore(world.store.root, look)
    release = create_release(world.lake, store, "pin-d6", D6, D6, gate_verdicts=_all_pass)
    assert h0["uri"] in during["shards"]
    # the versions the release pins were pinned while it was being made (other releases pin the same ones)
    assert all("pin-d6" in during["versions"][t][v] for t, v in release.table_versions.items())
    assert _pins(world.store, "pin-d6") == []  # superseded by the manifest, removed
    assert h0["uri"] in referenced_shard_uris(world.store)  # through the manifest now

    tables = {t: {"uri": world.lake.table_uri(t), "version": 0} for t in ALL_TABLES}
    now = dt.datetime.now(dt.UTC)
    fresh = write_pending_pin(world.store, "crashed", tables, ["file:///fresh.tar"], now=now - dt.timedelta(hours=1))
    old = write_pending_pin(world.store, "crashed", tables, ["file:///old.tar"], now=now - dt.timedelta(hours=25))
    try:
        assert [p.shards for p in pending_pins(world.store)] == [("file:///fresh.tar",)]
        refs = referenced_shard_uris(world.store)
        assert "file:///fresh.tar" in refs and "file:///old.tar" not in refs
        assert "crashed" in pinned_versions(world.lake, world.store)["raw_videos"][0]
        assert "file:///fresh.tar" not in referenced_shard_uris(world.store, now=now + dt.timedelta(hours=24))
        world.store.put_bytes(fresh, b"{not json")
        with pytest.raises(ReleaseError, match="does not read"):
            referenced_shard_uris(world.store)
    finally:
        world.store.delete(fresh)
        world.store.delete(old)


def test_a_shard_deleted_before_the_final_check_fails_the_create(world):
    """A deleter that ignores the pin (a lifecycle rule, a hand): the final check finds the shard gone."""
    from videolake.platform.releases import ReleaseError, create_release

    (h0,) = _expected_shards(world, {D6})
    key = world.store.key_from_uri(h0["uri"])
    kept = world.store.get_bytes(key)

    def delete(k: str) -> None:
        if k == "releases/gone/README.md":
            world.store.delete(key)

    try:
        with pytest.raises(ReleaseError, match="no longer exist") as err:
            create_release(world.lake, HookedStore(world.store.root, delete), "gone", D6, D6, gate_verdicts=_all_pass)
        assert h0["uri"] in str(err.value)
        assert not world.store.exists("releases/gone/manifest.json") and _pins(world.store, "gone") == []
    finally:
        world.store.put_bytes(key, kept)


# -- card -----------------------------------------------------------------------------------------------------------


def test_card_holds_the_figures_of_the_release_and_valid_pngs(world, v1):
    from PIL import Image

    card = world.store.get_bytes("releases/v1/README.md").decode()
    for heading in (
        "## Totals",
        "## Samples per bucket",
        "## Samples per day",
        "## Caption length (characters)",
        "## Captioning models and prompts",
        "## Upstream rejections by reason (released days)",
        "## Distributions",
        "## Sample frames",
        "## Days left out",
        "## Source tables",
        "## Shards",
    ):
        assert heading in card, heading
    shards = v1.manifest["shards"]
    assert f"| 4 | 3 | {v1.totals['hours']:.4f} | 115 | {sum(s['bytes'] for s in shards)} |" in card
    assert f"| `{B43}` | 3 | {65 / FPS / 3600:.4f} | 2 |" in card
    assert f"| `{B169}` | 1 | {2 / 3600:.4f} | 1 |" in card
    assert f"| {D1} | 3 | {(40 + 50) / FPS / 3600:.4f} | 2 |" in card
    assert f"| {D2} | 1 | {25 / FPS / 3600:.4f} | 1 |" in card
    lengths = sorted(
        len(c)
        for i, c in world.captions.items()
        if i in {r["clip_id"] for d in (D1, D2) for r in world.days[d].shards if r["status"] == "ok"}
    )
    assert len(lengths) == 4
    # nearest rank of 4 values: p50 is the 2nd, p90 the 4th
    assert f"| 4 | {lengths[0]} | {lengths[1]} | {lengths[3]} | {lengths[3]} |" in card
    assert f"| {MODEL} | {REVISION} | {PROMPT} | 4 |" in card
    for row in ("| not_a_video | 1 |", "| too_short | 1 |", "| timeout | 1 |", "| encode_error | 1 |"):
        assert row in card, row
    assert "empty_file" not in card  # D3's rejections are not of a released day
    assert f"| {D3} | raw_videos failed blocking gate(s) reject_rate |" in card
    assert f"| {D4} | no rows in training_shards |" in card
    assert f"| {D6} | training_shards failed blocking gate(s) one_sample_per_eligible_clip |" in card
    assert "3 shards, 4 samples" in card
    for s in shards:
        assert s["uri"] in card
    for name in ("duration", "resolution", "aspect", "caption_length", "contact_sheet"):
        assert f"({name}.png)" in card
        data = world.store.get_bytes(f"releases/v1/{name}.png")
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        img = Image.open(world.store.local_path(f"releases/v1/{name}.png"))
        img.verify()
    sheet = Image.open(world.store.local_path("releases/v1/contact_sheet.png"))
    assert sheet.width == 4 * 200 + 5 * 4  # four samples: one row of four tiles
    assert len(v1.images) == 5


def test_contact_sheet_tiles_are_the_middle_frames_of_the_samples(world, v1):
    import av
    import numpy as np

    from videolake.platform.releases.card import contact_tiles
    from videolake.platform.releases.create import READ_COLUMNS, _read_days

    rows = _read_days(world.lake, "training_shards", [D1, D2], READ_COLUMNS["training_shards"])
    ok = rows.filter(pc.equal(rows.column("status"), "ok"))
    tiles = contact_tiles(world.store, ok)
    assert [t[0] for t in tiles] == sorted(ok.column("clip_id").to_pylist())
    first = ok.filter(pc.equal(ok.column("clip_id"), tiles[0][0])).to_pylist()[0]
    from videolake.platform.shards.tarfile_det import read_samples

    shard = world.store.get_bytes(world.store.key_from_uri(first["shard_uri"]))
    mp4 = dict(read_samples(shard))[first["clip_id"]]["mp4"]
    import io

    with av.open(io.BytesIO(mp4)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])]
    assert np.array_equal(np.asarray(tiles[0][1]), frames[first["num_frames"] // 2])


# -- verify ---------------------------------------------------------------------------------------------------------


def test_verify_passes_then_names_the_shard_whose_byte_changed_and_the_one_missing(world, v1):
    from videolake.platform.releases import verify_release

    result = verify_release(world.store, "v1")
    assert result.ok and (result.shards, result.checked) == (3, 3)
    # 5 pinned versions read, each one data file per released day (D1, D2)
    assert (result.tables, result.tables_checked, result.files_read) == (5, 5, 10)
    changed, removed = v1.shards[0]["uri"], v1.shards[2]["uri"]
    path, gone = world.store.local_path(world.store.key_from_uri(changed)), world.store.key_from_uri(removed)
    original, kept = open(path, "rb").read(), world.store.get_bytes(gone)
    try:
        flipped = bytearray(original)
        flipped[len(original) // 2] ^= 0xFF  # inside a sample's mp4: the tar still reads
        open(path, "wb").write(bytes(flipped))
        world.store.delete(gone)
        result = verify_release(world.store, "v1")
        assert not result.ok and result.checked == 2
        assert result.bad_shards == sorted([changed, removed]) and result.bad_tables == []
        assert [(p.uri, p.problem) for p in result.problems] == [(changed, "sha256"), (removed, "missing")]
        assert result.problems[0].expected == v1.shards[0]["sha256"]
        assert result.problems[0].actual == hashlib.sha256(bytes(flipped)).hexdigest()
    finally:
        open(path, "wb").write(original)
        world.store.put_bytes(gone, kept)
    assert verify_release(world.store, "v1").ok


def test_verify_reads_every_pinned_table_version_and_names_a_missing_data_file(world, v1):
    import os

    from videolake.platform.releases import verify_release

    version = v1.table_versions["filtered_clips"]
    listed = json.loads(world.store.get_bytes("releases/v1/files.json"))["filtered_clips"]["files"]
    rel = next(f for f in listed if f.startswith(f"partition_date={D2}/"))
    path = os.path.join(world.lake.table_uri("filtered_clips"), rel)
    os.rename(path, path + ".away")
    try:
        result = verify_release(world.store, "v1")
    finally:
        os.rename(path + ".away", path)
    assert not result.ok and result.bad_tables == ["filtered_clips"] and result.bad_shards == []
    assert (result.tables, result.tables_checked, result.checked) == (5, 4, 3)
    (p,) = result.problems
    assert (p.problem, p.table, p.uri) == ("table_file", "filtered_clips", path)
    assert p.detail == f"filtered_clips version {version}: data file {rel} does not exist"
    assert verify_release(world.store, "v1").ok


def test_verify_reads_the_files_json_files_when_the_log_lost_the_version(world, v1, monkeypatch):
    from videolake.platform.releases import verify_release

    class Gone:
        def __init__(self, uri, version=None, storage_options=None):
            raise OSError(f"version {version} not found")

    monkeypatch.setattr("deltalake.DeltaTable", Gone)
    result = verify_release(world.store, "v1")
    assert result.ok and (result.tables_checked, result.files_read) == (5, 10)


def test_verify_compares_the_shard_list_with_training_shards_at_the_pinned_version(world, v1):
    from videolake.platform.releases import verify_release

    manifest = json.loads(world.store.get_bytes("releases/v1/manifest.json"))
    dropped, changed = manifest["shards"][0], dict(manifest["shards"][1], bucket=B169)
    manifest.update(name="v1-edited", shards=[changed, *manifest["shards"][2:]])
    manifest["totals"].update(
        samples=sum(s["samples"] for s in manifest["shards"]),
        shards=len(manifest["shards"]),
        bytes=sum(s["bytes"] for s in manifest["shards"]),
    )
    world.store.put_bytes("releases/v1-edited/manifest.json", json.dumps(manifest).encode())
    try:
        result = verify_release(world.store, "v1-edited")
    finally:
        world.store.delete("releases/v1-edited/manifest.json")
    version = v1.table_versions["training_shards"]
    assert result.checked == 2 and result.tables_checked == 5
    assert [(p.uri, p.problem, p.expected, p.actual, p.detail) for p in result.problems] == sorted(
        [
            (
                dropped["uri"],
                "shard_list",
                None,
                None,
                f"named by training_shards version {version} in the released days, not by the manifest",
            ),
            (
                changed["uri"],
                "shard_list",
                {"bucket": B169},
                {"bucket": B43},
                f"the manifest's entry differs from training_shards version {version}",
            ),
        ]
    )
    assert result.bad_shards == sorted([dropped["uri"], changed["uri"]])


def test_verify_counts_the_samples_of_each_shard(world, v1):
    import io

    from videolake.platform.releases.verify import read_shard
    from videolake.platform.shards.tarfile_det import sample_fragment, write_shard

    buf = io.BytesIO()
    write_shard(
        [
            sample_fragment("k1", {"json": b"{}", "mp4": b"x", "txt": b"t"}),
            sample_fragment("k2", {"json": b"{}", "mp4": b"y"}),
        ],
        buf,
    )
    got = read_shard(io.BytesIO(buf.getvalue()))
    assert (got.samples, got.bad_members, got.error) == (2, ("k2",), None)
    assert (got.sha256, got.size) == (hashlib.sha256(buf.getvalue()).hexdigest(), len(buf.getvalue()))
    for s in v1.shards:
        with open(world.store.local_path(world.store.key_from_uri(s["uri"])), "rb") as fh:
            assert read_shard(fh).samples == s["samples"]


# -- listing, references, vacuum ------------------------------------------------------------------------------------


def test_list_releases_and_referenced_shards(world, v1):
    from videolake.platform.releases import list_releases, read_manifest, referenced_shard_uris, release_names

    names = release_names(world.store)
    assert "v1" in names and "empty" not in names
    summary = next(r for r in list_releases(world.store) if r.name == "v1")
    assert (summary.partitions, summary.excluded, summary.samples, summary.shards, summary.buckets) == (
        (D1, D2),
        4,
        4,
        3,
        None,
    )
    every = set().union(*({s["uri"] for s in read_manifest(world.store, n)["shards"]} for n in names))
    assert referenced_shard_uris(world.store) == every
    assert {s["uri"] for s in v1.shards} <= every


def test_vacuum_keeps_the_files_a_release_pins_and_deletes_an_unpinned_old_one(tmp_path, ffmpeg):
    from deltalake import DeltaTable

    from videolake.platform.releases import ReleaseError, create_release, referenced_shard_uris, vacuum_lake

    b, lake = build_world(tmp_path, ffmpeg, days=(D1,))
    release = create_release(lake, b.store, "pinned", D1, D1, gate_verdicts=_all_pass)
    assert referenced_shard_uris(b.store) == set(b.shards)
    raw = lake.table_uri("raw_videos")
    pinned_version = release.table_versions["raw_videos"]
    pinned_files = {f.rsplit("/", 1)[-1] for f in DeltaTable(raw).file_uris()}
    rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in b.days[D1].raw]
    lake.write_partitions("raw_videos", rows_to_table(rows, RAW_VIDEOS), PartitionRange.of([D1]))
    unpinned = {f.rsplit("/", 1)[-1] for f in DeltaTable(raw).file_uris()}
    lake.write_partitions("raw_videos", rows_to_table(rows, RAW_VIDEOS), PartitionRange.of([D1]))
    live = {f.rsplit("/", 1)[-1] for f in DeltaTable(raw).file_uris()}
    assert len(pinned_files | unpinned | live) == 3

    with pytest.raises(ReleaseError, match="allow-short-retention"):
        vacuum_lake(lake, b.store, retention_hours=0)
    dry = vacuum_lake(lake, b.store, retention_hours=0, dry_run=True, enforce_retention_duration=False)
    plan = {t.table: t for t in dry.tables}
    assert {t for t, p in plan.items() if p.candidates} == {"raw_videos"}
    names = lambda paths: {p.rsplit("/", 1)[-1] for p in paths}  # noqa: E731
    assert names(plan["raw_videos"].candidates) == pinned_files | unpinned
    assert names(plan["raw_videos"].kept) == pinned_files and names(plan["raw_videos"].deleted) == unpinned
    assert plan["raw_videos"].pinned == {pinned_version: ("pinned",)}
    on_disk = lambda: {p.name for p in (tmp_path / "lake" / "raw_videos" / f"partition_date={D1}").iterdir()}  # noqa: E731
    assert on_disk() == pinned_files | unpinned | live  # a dry run deletes nothing

    done = vacuum_lake(lake, b.store, retention_hours=0, enforce_retention_duration=False)
    assert (done.deleted, done.kept) == (1, 1)
    assert on_disk() == pinned_files | live
    # the release's version still reads (time travel), and so does the latest
    assert DeltaTable(raw, version=pinned_version).to_pyarrow_table().num_rows == len(rows)
    assert lake.read_partitions("raw_videos", PartitionRange.of([D1])).num_rows == len(rows)
    # without a release pinning it, the old file would have gone too
    from videolake.platform.releases.vacuum import plan_table

    bare = plan_table(lake, b.store, "raw_videos", {}, 0, enforce_retention_duration=False)
    assert names(bare.deleted) == pinned_files


def test_a_release_survives_its_days_rematerialized_twice_cleaned_up_and_vacuumed(tmp_path, ffmpeg):
    """Issue 40: after a release, every table of its days is written again twice (two re-runs: new data files, new
    shards), and the shards' clean-up and the vacuum then run with no retention. The vacuum deletes the first
    re-run's files (no release pins them), the clean-up deletes the first re-run's shards; the release still
    verifies, every pinned table version reads the rows it read, and the loader reads every sample."""
    from videolake.dataset import open_release
    from videolake.platform.releases import RELEASE_TABLES, create_release, vacuum_lake, verify_release

    b, lake = build_world(tmp_path, ffmpeg, days=(D1, D2))
    release = create_release(lake, b.store, "kept", D1, D2, gate_verdicts=_all_pass)
    days = PartitionRange.of([D1, D2])

    def rows(table: str, version: int | None = None) -> list[dict]:
        got = lake.read_partitions(table, days, version=version).to_pylist()
        return sorted(got, key=lambda r: json.dumps(r, sort_keys=True, default=str))

    pinned = {t: rows(t, v) for t, v in release.table_versions.items()}
    assert set(pinned) == set(RELEASE_TABLES) and all(pinned.values())

    released = {s["uri"] for s in release.shards}
    first_rerun: set[str] = set()
    for rerun in (1, 2):
        for table in RELEASE_TABLES:
            latest = lake.read_partitions(table, days)
            if table == "training_shards":  # re-packed: the same samples in new shard objects
                moved: dict[str | None, str | None] = {None: None}  # a row that failed to encode names none
                for old in sorted(set(latest.column("shard_uri").to_pylist()) - {None}):
                    key = b.store.key_from_uri(old).rsplit("/", 1)[0] + f"/rerun{rerun}-{len(moved) - 1}.tar"
                    moved[old] = b.store.put_bytes(key, b.store.get_bytes(b.store.key_from_uri(old)))
                if rerun == 1:
                    first_rerun = set(moved.values()) - {None}
                latest = latest.set_column(
                    latest.schema.get_field_index("shard_uri"),
                    "shard_uri",
                    pa.array([moved[u] for u in latest.column("shard_uri").to_pylist()], pa.string()),
                )
            lake.write_partitions(table, latest, days)
        for d in (D1, D2):
            _shard_cleanup(lake, b.store, d)
    exists = lambda uri: b.store.exists(b.store.key_from_uri(uri))  # noqa: E731
    assert all(exists(u) for u in released)  # the release names them
    assert first_rerun and not any(exists(u) for u in first_rerun)  # no table and no release names them

    done = vacuum_lake(lake, b.store, retention_hours=0, enforce_retention_duration=False)
    # per table: the released version's files and the second re-run's stay, the first re-run's go (one file per
    # day that table has rows on)
    per_day = sum(len({r["partition_date"] for r in pinned[t]}) for t in RELEASE_TABLES)
    assert done.deleted == per_day and done.kept == per_day

    result = verify_release(b.store, "kept")
    assert result.ok, result
    assert {t: rows(t, v) for t, v in release.table_versions.items()} == pinned
    samples = list(open_release(b.store.uri("releases/kept"), shuffle_seed=None, num_frames=1))
    assert len(samples) == sum(s["samples"] for s in release.shards) > 0
    assert {s["__url__"] for s in samples} == released
    packed = [r["clip_id"] for r in pinned["training_shards"] if r["shard_uri"] is not None]
    assert sorted(s["__key__"] for s in samples) == sorted(packed)


def test_vacuum_falls_back_to_the_release_file_list_when_the_log_lost_the_version(tmp_path, ffmpeg, monkeypatch):
    import videolake.platform.releases.vacuum as vac
    from videolake.platform.releases import create_release

    b, lake = build_world(tmp_path, ffmpeg, days=(D1,))
    release = create_release(lake, b.store, "old", D1, D1, gate_verdicts=_all_pass)
    listed = json.loads(b.store.get_bytes("releases/old/files.json"))
    assert listed["raw_videos"]["version"] == release.table_versions["raw_videos"]
    assert len(listed["raw_videos"]["files"]) == 1 and listed["raw_videos"]["files"][0].startswith(
        f"partition_date={D1}/"
    )

    class Gone:
        def __init__(self, uri, version=None, storage_options=None):
            if version is not None:
                raise OSError(f"version {version} not found")
            from deltalake import DeltaTable

            self._t = DeltaTable(uri, storage_options=storage_options)

        def __getattr__(self, name):
            return getattr(self._t, name)

    monkeypatch.setattr("deltalake.DeltaTable", Gone)
    files = vac._version_files(lake, b.store, "raw_videos", release.table_versions["raw_videos"], ["old"])
    assert files == set(listed["raw_videos"]["files"])
    b.store.delete("releases/old/files.json")
    with pytest.raises(vac.ReleaseError, match="has no files.json"):
        vac._version_files(lake, b.store, "raw_videos", release.table_versions["raw_videos"], ["old"])


# -- Dagster --------------------------------------------------------------------------------------------------------


def _resources(world):
    from videolake.resources import LakeResource, ObjectStoreResource

    return {
        "lake": LakeResource(root=world.lake.root),
        "object_store": ObjectStoreResource(kind="local", root=str(world.store.root)),
    }


def test_release_asset_creates_a_release_per_partition_and_reports_its_card_and_lineage(world, v1, monkeypatch):
    import dagster as dg

    import videolake.platform.releases as releases
    from videolake.assets.releases import RELEASE_PARTITIONS, build_release_defs, release_run_config

    defs = build_release_defs()
    (asset,), _, (sensor,) = defs.assets, defs.jobs, defs.sensors
    d = dg.Definitions(assets=[*defs.assets], jobs=[*defs.jobs], sensors=[*defs.sensors], resources=_resources(world))
    graph = d.resolve_asset_graph()
    assert {p.to_user_string() for p in graph.get(dg.AssetKey("dataset_release")).parent_keys} == set(ALL_TABLES)
    assert d.resolve_job_def("dataset_release_job").partitions_def == RELEASE_PARTITIONS

    # the engine's re-evaluation (GX) is tested with v1; here it is a stand-in that fails D3's reject_rate
    evaluated = []

    def engine_verdicts(lake, config=None):
        return lambda t, d: evaluated.append((t, d)) or (["reject_rate"] if (t, d) == ("raw_videos", D3) else [])

    monkeypatch.setattr(releases, "gate_verdicts_from_lake", engine_verdicts)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("releases", ["ui-1"])
    result = dg.materialize(
        [asset],
        partition_key="ui-1",
        instance=instance,
        resources=_resources(world),
        run_config=release_run_config(D1, D3),
    )
    md = result.asset_materializations_for_node("dataset_release")[0].metadata
    assert md["partitions"].value == [D1, D2]
    assert [e["partition_date"] for e in md["excluded_partitions"].value] == [D3]
    assert md["table_versions"].value == {t: world.lake.version(t) for t in ALL_TABLES}
    assert md["card"].value.startswith("# Dataset release `ui-1`") and md["samples"].value == 4
    # no check was ever recorded on this instance: every verdict was evaluated again
    assert md["gate_verdicts"].value == {d: {t: "evaluated" for t in sorted(ALL_TABLES)} for d in (D1, D2, D3)}
    assert sorted(evaluated) == sorted((t, d) for t in ALL_TABLES for d in (D1, D2, D3))
    assert md["reported_existing"].value is False

    again = dg.materialize([asset], partition_key="ui-1", instance=instance, resources=_resources(world))
    md2 = again.asset_materializations_for_node("dataset_release")[0].metadata
    assert md2["reported_existing"].value is True and md2["partitions"].value == [D1, D2]
    other = dg.materialize(
        [asset],
        partition_key="ui-1",
        instance=instance,
        resources=_resources(world),
        run_config=release_run_config(D1, D1),
        raise_on_error=False,
    )
    assert not other.success
    failure = next(e for e in other.all_events if e.event_type_value == "STEP_FAILURE")
    assert "never reused" in failure.step_failure_data.user_failure_data.description

    # the sync sensor gives releases made elsewhere (v1, by the engine) a partition and a run
    with dg.build_sensor_context(instance=instance, resources=_resources(world), definitions=d) as ctx:
        res = sensor(ctx)
    requested = sorted(r.partition_key for r in res.run_requests)
    assert "v1" in requested and "ui-1" not in requested


def test_recorded_check_evaluations_are_used_only_when_they_judged_the_released_data(world):
    import dagster as dg
    from dagster._core.definitions.asset_checks.asset_check_evaluation import (
        AssetCheckEvaluationTargetMaterializationData,
    )
    from deltalake import DeltaTable

    from videolake.assets.releases import instance_gate_verdicts, recorded_verdict
    from videolake.platform.gates import gate_names
    from videolake.platform.releases.create import _day_files

    instance = dg.DagsterInstance.ephemeral()
    lake, version = world.lake, world.lake.version("raw_videos")

    def materialize(day, written=version):
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                "raw_videos",
                partition=day,
                metadata={
                    "step": dg.MetadataValue.json({"delta_version": written}),
                    "table_uri": dg.MetadataValue.path(lake.table_uri("raw_videos")),
                },
            )
        )
        rec = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("raw_videos"), asset_partitions=[day]), limit=1
        ).records[0]
        return AssetCheckEvaluationTargetMaterializationData(
            storage_id=rec.storage_id, run_id=rec.run_id or "", timestamp=rec.timestamp
        )

    def evaluate(day, target, failing=(), skip=()):
        for g in gate_names("raw_videos"):
            if g in skip:
                continue
            instance.report_runless_asset_event(
                dg.AssetCheckEvaluation(
                    asset_key=dg.AssetKey("raw_videos"),
                    check_name=g,
                    passed=g not in failing,
                    severity=dg.AssetCheckSeverity.ERROR,
                    target_materialization_data=target,
                    blocking=True,
                    partition=day,
                )
            )

    target = materialize(D1)
    evaluate(D1, target, failing=("reject_rate",))
    assert recorded_verdict(instance, lake, "raw_videos", D1, version) == ["reject_rate"]
    assert recorded_verdict(instance, lake, "raw_videos", D2, version) is None  # never checked
    evaluate(D2, materialize(D2), skip=("reject_rate",))
    assert recorded_verdict(instance, lake, "raw_videos", D2, version) is None  # one gate never evaluated
    evaluate(D3, materialize(D3))  # (runless evaluations share one run id: one evaluation per check and day)
    assert recorded_verdict(instance, lake, "raw_videos", D3, version) == []
    calls = []
    verdicts, log = instance_gate_verdicts(instance, lake, lambda t, d: calls.append((t, d)) or ["x"])
    assert verdicts("raw_videos", D3) == [] and verdicts("scene_clips", D3) == ["x"]
    assert calls == [("scene_clips", D3)]
    assert log.as_metadata() == {D3: {"raw_videos": "recorded", "scene_clips": "evaluated"}}
    materialize(D1)  # a newer materialization the evaluations did not judge
    assert recorded_verdict(instance, lake, "raw_videos", D1, version) is None
    # evaluations of a materialization whose Delta version held other files for the day than the pinned one
    first = min(h["version"] for h in DeltaTable(lake.table_uri("raw_videos")).history())
    assert _day_files(lake, "raw_videos", first, [D4]) != _day_files(lake, "raw_videos", version, [D4])
    evaluate(D4, materialize(D4, written=first))
    assert recorded_verdict(instance, lake, "raw_videos", D4, version) is None


# -- CLI ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_create_verify_list_and_vacuum(world, v1, tmp_path, monkeypatch, capsys):
    from videolake.cli import main

    monkeypatch.setenv("VIDEOLAKE_PROFILE", "local")
    monkeypatch.setenv("VIDEOLAKE_DATA_DIR", world.root)  # the local profile's lake and store: <dir>/lake, <dir>/store
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("VIDEOLAKE_GATES_FILE", raising=False)

    assert main(["release", "create", "cli-1", "--start", D1, "--end", D4, "--bucket", B43]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("release cli-1: 3 samples, 2 shards, ")
    assert f"left out {D3}: raw_videos failed blocking gate(s) reject_rate" in out
    assert world.store.exists("releases/cli-1/manifest.json")
    assert main(["release", "create", "cli-1", "--start", D1, "--end", D2]) == 2
    assert "release 'cli-1' exists" in capsys.readouterr().out

    assert main(["release", "verify", "cli-1"]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("2 of 2 shard(s) read, 5 of 5 pinned table version(s) read (10 data file(s)); OK")
    )
    assert main(["release", "list"]) == 0
    listed = capsys.readouterr().out
    assert "cli-1" in listed and "v1" in listed and f"{D1}..{D2} (2 days), 4 samples, 3 shards" in listed

    assert main(["vacuum", "--dry-run"]) == 0  # nothing was removed a week ago
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == "0 file(s) to delete (dry run), 0 kept for releases (retention 168 h)"
    assert main(["vacuum", "--retention-hours", "0"]) == 2
    assert "--allow-short-retention" in capsys.readouterr().out
