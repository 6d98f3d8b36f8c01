"""`videolake release export` (videolake/platform/releases/export.py): a release as one folder that travels.

The release is test_releases' tiny lake (real shards encoded by FFmpeg) cut to the days 2026-01-05..06: 3 shards,
4 samples. It is exported once per module to a local folder, which is then copied elsewhere and its original
deleted, so every read below proves the folder needs nothing but itself (no lake, no Dagster, no original shard).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
from test_releases import B169, D1, D2, Builder, build_world

from videolake.dataset import ShardChecksumError, open_release
from videolake.platform.releases import create_release
from videolake.platform.releases.croissant import CroissantError, validate
from videolake.platform.releases.export import ExportError, ShardMismatchError, destination, export_release

NAME = "exp-1"


def _all_pass(table: str, day: str) -> list[str]:
    return []


@pytest.fixture(scope="module")
def built(tmp_path_factory, ffmpeg):
    """(world root, builder, store, release, the exported folder after it was copied away from where it was
    written)."""
    root = tmp_path_factory.mktemp("export")
    caption = Builder.caption

    def with_track(self, d, clip, text, error=None):  # clip_captions.caption_track is required (caption tracks)
        caption(self, d, clip, text, error)
        self.day(d).captions[-1].setdefault("caption_track", "default")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Builder, "caption", with_track)
        b, lake = build_world(root, ffmpeg, days=(D1, D2))
    release = create_release(lake, b.store, NAME, D1, D2, gate_verdicts=_all_pass)
    first = root / "first-export"
    result = export_release(b.store, NAME, destination(str(first)))
    moved = root / "elsewhere" / "exp-1"
    shutil.copytree(first, moved)
    shutil.rmtree(first)
    return root, b, lake, release, result, moved


def _keys_captions(ds) -> list[tuple[str, str]]:
    return sorted((s["__key__"], s["caption"]) for s in ds)


def test_the_folder_holds_shards_manifest_card_and_croissant(built):
    root, b, _lake, release, result, moved = built
    names = {f"shards/{os.path.basename(s['uri'])}" for s in release.shards}
    assert len(names) == 3
    card_files = {"README.md", "duration.png", "resolution.png", "aspect.png", "caption_length.png"}
    card_files |= {"contact_sheet.png", "files.json"}
    expected = names | card_files | {"manifest.json", "croissant.json"}
    on_disk = {str(p.relative_to(moved)) for p in moved.rglob("*") if p.is_file()}
    assert on_disk == expected == set(result.files)
    assert (result.shards, result.samples) == (3, 4)

    manifest = json.loads((moved / "manifest.json").read_text())
    original = release.manifest
    assert manifest["format"] == original["format"] == "videolake-release/1"
    for key in original:  # every field of the release is carried (tables and versions for provenance)
        if key != "shards":
            assert manifest[key] == original[key], key
    assert manifest["export"]["format"] == "videolake-release-export/1"
    assert manifest["export"]["source_manifest"] == b.store.uri(f"releases/{NAME}/manifest.json")
    by_origin = {s["origin_uri"]: s for s in manifest["shards"]}
    assert sorted(by_origin) == sorted(s["uri"] for s in original["shards"])
    for s in original["shards"]:
        out = by_origin[s["uri"]]
        assert out["uri"] == f"shards/{os.path.basename(s['uri'])}"
        assert {k: out[k] for k in s if k != "uri"} == {k: v for k, v in s.items() if k != "uri"}
        # byte for byte
        assert (moved / out["uri"]).read_bytes() == Path(
            b.store.local_path(b.store.key_from_uri(s["uri"]))
        ).read_bytes()
    card = b.store.get_bytes(f"releases/{NAME}/README.md")
    assert (moved / "README.md").read_bytes() == card
    assert manifest["export"]["files"]["README.md"]["bytes"] == len(card)


def test_open_release_reads_the_copied_folder_as_the_original_release(built):
    root, b, _lake, _release, _result, moved = built
    original = _keys_captions(open_release(str(root / "store" / "releases" / NAME), num_frames=1))
    assert len(original) == 4
    assert _keys_captions(open_release(str(moved), num_frames=1)) == original
    assert _keys_captions(open_release(moved.as_uri(), num_frames=1, shuffle_seed=None)) == original
    captions = dict(original)
    assert set(captions.values()) == {
        "A colourful test pattern with a moving gradient and a counter.",
        "Bright vertical colour bars while a small white square moves to the right.",
        "Wide test card with colour bars and a clock face counting seconds.",
        "Moving colour gradient behind a ticking counter in the corner.",
    }
    ds = open_release(str(moved), num_frames=1, buckets=[B169])
    assert [s["__url__"] for s in ds] == [str(moved / "shards" / os.path.basename(_b169(b)))]


def _b169(b) -> str:
    (uri,) = [u for u, s in b.shards.items() if s["bucket"] == B169]
    return uri


def test_a_loader_position_saved_on_one_copy_resumes_on_another(built, tmp_path):
    _root, _b, _lake, _release, _result, moved = built
    other = tmp_path / "second-copy"
    shutil.copytree(moved, other)
    ds = open_release(str(moved), num_frames=1, shuffle_seed=7)
    it = iter(ds)
    first = [next(it)["__key__"], next(it)["__key__"]]
    state = json.loads(json.dumps(ds.state_dict()))
    rest = [s["__key__"] for s in it]
    resumed = open_release(str(other), num_frames=1, shuffle_seed=7)
    resumed.load_state_dict(state)
    assert [s["__key__"] for s in resumed] == rest and len(first + rest) == 4


def test_plain_webdataset_reads_the_exported_tars(built):
    import webdataset as wds

    _root, _b, _lake, _release, _result, moved = built
    manifest = json.loads((moved / "manifest.json").read_text())
    urls = [str(moved / s["uri"]) for s in manifest["shards"]]
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    original = sorted(k for k, _ in _keys_captions(open_release(str(moved), num_frames=1)))
    assert sorted(s["__key__"] for s in samples) == original
    for s in samples:
        meta = json.loads(s["json"])
        assert meta["clip_id"] == s["__key__"] and s["txt"].decode() == meta["caption"]
        assert s["mp4"][4:8] == b"ftyp"


def test_croissant_validates_and_describes_the_shards_and_samples(built, tmp_path, monkeypatch):
    import mlcroissant as mlc
    from mlcroissant._src.operation_graph.operations import extract

    _root, b, _lake, release, _result, moved = built
    doc = json.loads((moved / "croissant.json").read_text())
    assert validate(str(moved / "croissant.json")) == validate(doc)
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.1"
    files = {d["@id"]: d for d in doc["distribution"] if d["@type"] == "cr:FileObject"}
    manifest = json.loads((moved / "manifest.json").read_text())
    assert {k: (f["contentUrl"], f["sha256"], f["contentSize"]) for k, f in files.items()} == {
        s["uri"]: (s["uri"], s["sha256"], f"{s['bytes']} B") for s in manifest["shards"]
    }
    sets = {d["@id"]: d for d in doc["distribution"] if d["@type"] == "cr:FileSet"}
    assert {k: (v["includes"], v["encodingFormat"]) for k, v in sets.items()} == {
        "mp4-files": ("*.mp4", "video/mp4"),
        "txt-files": ("*.txt", "text/plain"),
        "json-files": ("*.json", "application/json"),
    }
    # the RAI facts the release knows
    assert doc["rai:dataCollectionTimeframe"] == [D1, D2]
    assert "2 day(s) (2026-01-05 to 2026-01-06)" in doc["rai:dataCollection"]
    preprocessing = "\n".join(doc["rai:dataPreprocessingProtocol"])
    assert "too_short 1" in preprocessing  # the card's filtered_clips rejections (a1)
    assert "not_a_video 1" in preprocessing  # the card's raw_videos rejections (notes.json)
    assert "motion 12..12" in preprocessing  # the released samples' scores
    assert "min_sharpness=50.0" in preprocessing
    assert doc["rai:machineAnnotationTools"] == [
        "Qwen/Qwen2.5-VL-3B-Instruct @ 66285546d2b8 (prompt v1-describe): 4 caption(s)"
    ]
    assert doc["rai:personalSensitiveInformation"][0].startswith("No review for personal or sensitive content")
    assert "(scores in the samples' json: motion)" in doc["rai:personalSensitiveInformation"][0]

    # mlcroissant reads the samples out of the exported tars (its extract cache under tmp_path)
    monkeypatch.setattr(extract, "EXTRACT_PATH", extract.epath.Path(tmp_path / "croissant-extract"))
    records = list(mlc.Dataset(jsonld=str(moved / "croissant.json")).records("samples"))
    got = sorted((r["samples/key"].decode(), r["samples/caption"].decode()) for r in records)
    assert got == _keys_captions(open_release(str(moved), num_frames=1))
    assert all(r["samples/mp4"][4:8] == b"ftyp" for r in records)


def test_a_corrupted_croissant_fails_validation(built):
    _root, b, _lake, _release, _result, moved = built
    doc = json.loads((moved / "croissant.json").read_text())
    validate(doc)
    no_checksum = copy.deepcopy(doc)
    shard = next(d for d in no_checksum["distribution"] if d["@type"] == "cr:FileObject")
    del shard["sha256"]
    with pytest.raises(CroissantError, match="sha256"):
        validate(no_checksum)
    dangling = copy.deepcopy(doc)
    dangling["recordSet"][0]["field"][1]["source"]["fileSet"]["@id"] = "nowhere"
    with pytest.raises(CroissantError, match="nowhere"):
        validate(dangling)
    with pytest.raises(ExportError, match="unknown Croissant RAI property 'rai:dataLimitation'"):
        export_release(b.store, NAME, destination(str(moved.parent / "typo")), overrides={"rai:dataLimitation": "x"})


def test_overrides_replace_rai_facts_and_a_second_export_into_the_folder_is_refused(built, tmp_path):
    root, b, _lake, _release, _result, moved = built
    result = export_release(
        b.store,
        NAME,
        destination(str(tmp_path / "x")),
        license="CC-BY-4.0",
        overrides={"rai:personalSensitiveInformation": "Reviewed: no identifiable people."},
    )
    doc = json.loads((tmp_path / "x" / "croissant.json").read_text())
    assert doc["license"] == "CC-BY-4.0"
    assert doc["rai:personalSensitiveInformation"] == ["Reviewed: no identifiable people."]
    assert result.samples == 4
    with pytest.raises(ExportError, match="holds a release already"):
        export_release(b.store, NAME, destination(str(tmp_path / "x")))


def test_a_tampered_shard_in_the_export_fails_verify_shards_naming_it(built, tmp_path):
    _root, _b, _lake, _release, _result, moved = built
    copy_dir = tmp_path / "tampered"
    shutil.copytree(moved, copy_dir)
    victim = sorted(copy_dir.glob("shards/*.tar"))[0]
    data = bytearray(victim.read_bytes())
    with tarfile.open(victim) as tar:  # flip one byte inside the first mp4 member: the tar still reads
        mp4 = next(m for m in tar.getmembers() if m.name.endswith(".mp4"))
    data[mp4.offset_data + 100] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(ShardChecksumError, match=victim.name) as err:
        list(open_release(str(copy_dir), num_frames=1, shuffle_seed=None))
    assert err.value.uri == str(victim)
    # unchecked, the same folder reads (the check is what caught it)
    assert len(list(open_release(str(copy_dir), num_frames=1, verify_shards=False))) == 4


def test_a_shard_that_changed_in_the_lake_fails_the_export_naming_it(built, tmp_path):
    root, b, _lake, release, _result, _moved = built
    uri = release.shards[0]["uri"]
    path = Path(b.store.local_path(b.store.key_from_uri(uri)))
    saved = path.read_bytes()
    try:
        path.write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))
        with pytest.raises(ShardMismatchError, match="does not hold the bytes") as err:
            export_release(b.store, NAME, destination(str(tmp_path / "bad")))
        assert err.value.uri == uri and uri in str(err.value)
        assert not (tmp_path / "bad" / "manifest.json").exists()
        assert not list((tmp_path / "bad").rglob("*.tar"))
    finally:
        path.write_bytes(saved)


def test_an_exported_manifest_naming_a_shard_outside_its_folder_is_refused(built, tmp_path):
    _root, _b, _lake, _release, _result, moved = built
    bad = tmp_path / "bad"
    shutil.copytree(moved, bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["shards"][0]["uri"] = "../elsewhere.tar"
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not a plain path inside the release folder"):
        open_release(str(bad))


# -- S3 -----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seaweed_server(tmp_path_factory):
    """A SeaweedFS S3 server of this module (the integration tests' session fixture is not visible here)."""
    here = str(Path(__file__).resolve().parents[1] / "integration")
    sys.path.insert(0, here)
    try:
        from s3_server import start_seaweed
    finally:
        sys.path.remove(here)

    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    try:
        yield server
    finally:
        server.close()


@pytest.mark.slow
def test_export_to_s3_and_read_it_from_s3_with_no_lake(built, seaweed_server, monkeypatch):
    from videolake.platform.objectstore import S3ObjectStore

    _root, b, _lake, _release, _result, moved = built
    server = seaweed_server
    like = S3ObjectStore(
        server.bucket,
        "lake-store",
        endpoint_url=server.endpoint_url,
        region=server.region,
        access_key_id=server.access_key,
        secret_access_key=server.secret_key,
    )
    prefix = f"exports/{uuid.uuid4().hex[:8]}/{NAME}"
    dest = destination(f"s3://{server.bucket}/{prefix}", like=like)
    result = export_release(b.store, NAME, dest)
    assert result.dest == f"s3://{server.bucket}/{prefix}/"
    listed = sorted(
        o["Key"][len(prefix) + 1 :]
        for o in server.client().list_objects_v2(Bucket=server.bucket, Prefix=prefix + "/")["Contents"]
    )
    assert listed == sorted(result.files)
    options = {
        "AWS_ENDPOINT_URL": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "AWS_REGION": server.region,
        "AWS_ALLOW_HTTP": "true",
    }
    ds = open_release(f"s3://{server.bucket}/{prefix}", num_frames=1, storage_options=options)
    assert _keys_captions(ds) == _keys_captions(open_release(str(moved), num_frames=1))
    assert {
        s["__url__"].split("/shards/")[0]
        for s in open_release(f"s3://{server.bucket}/{prefix}", num_frames=1, storage_options=options)
    } == {f"s3://{server.bucket}/{prefix}"}


@pytest.mark.slow
def test_cli_export(built, tmp_path, monkeypatch, capsys):
    from videolake.cli import main

    root, _b, _lake, _release, _result, moved = built
    monkeypatch.setenv("VIDEOLAKE_PROFILE", "local")
    monkeypatch.setenv("VIDEOLAKE_DATA_DIR", str(root))  # the local profile's lake and store: <dir>/lake, <dir>/store
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    rai = tmp_path / "rai.json"
    rai.write_text(json.dumps({"rai:dataLimitations": "Synthetic test patterns only."}))
    dest = tmp_path / "cli-export"
    assert main(["release", "export", NAME, str(dest), "--license", "CC-BY-4.0", "--rai", str(rai)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (
        f"release {NAME} exported to {dest.as_uri()}: 3 shard(s), 4 samples, "
        f"{sum(p.stat().st_size for p in moved.glob('shards/*.tar'))} bytes (sha256 checked), 12 file(s)"
    )
    assert "mlcroissant: valid, 0 warning(s)" in out  # the license was its one warning
    doc = json.loads((dest / "croissant.json").read_text())
    assert doc["rai:dataLimitations"] == ["Synthetic test patterns only."]
    assert sorted(p.name for p in dest.glob("shards/*")) == sorted(p.name for p in moved.glob("shards/*"))
    assert main(["release", "export", NAME, str(dest)]) == 2
    assert "holds a release already" in capsys.readouterr().out
    assert main(["release", "export", "nope", str(tmp_path / "n")]) == 2
    assert "no release 'nope'" in capsys.readouterr().out
