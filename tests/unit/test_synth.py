"""videolake synth: the rendered files match their ground truth exactly (frame counts, cut frames, transitions,
flashes, timestamps), the specials have the property they stand for, and variants recompute their truth.

Videos are rendered at test time into tmp dirs (small: 160x120 unless a test needs more) and decoded with PyAV.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from videolake import synth
from videolake.synth import Segment, Transition, VideoSpec

S, T = Segment, Transition
W, H = 160, 120


def decode_gray(path: Path) -> tuple[np.ndarray, list[float]]:
    """All frames of the first video stream as float32 luma (n, h, w) and their presentation times (s)."""
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        frames, times = [], []
        for f in c.decode(stream):
            frames.append(f.to_ndarray(format="gray").astype(np.float32))
            times.append(float(f.pts * stream.time_base))
    return np.stack(frames), times


def luma_diffs(frames: np.ndarray) -> np.ndarray:
    """Mean abs luma difference of each frame to the previous one (frame 0: 0)."""
    d = np.abs(np.diff(frames, axis=0)).mean(axis=(1, 2))
    return np.concatenate([[0.0], d])


def top_jumps(frames: np.ndarray, k: int) -> list[int]:
    return sorted(int(i) for i in np.argsort(luma_diffs(frames))[::-1][:k])


def cut_spec(name: str, codec: str, fps: str, container: str | None = None, **kw) -> VideoSpec:
    """Four very different shots joined by hard cuts."""
    return VideoSpec(
        name=name,
        width=W,
        height=H,
        fps=fps,
        codec=codec,
        container=container,
        segments=(S("testsrc2", 17), S("color:blue", 14), S("mandelbrot", 20), S("color:yellow", 11)),
        transitions=(T("cut"), T("cut"), T("cut")),
        **kw,
    )


@pytest.mark.parametrize(
    "codec,container,fps",
    [
        ("h264", None, "30"),
        ("hevc", None, "30000/1001"),
        ("vp9", None, "25"),
        ("mpeg4", None, "24"),
        ("mpeg4", "mp4", "60"),
        ("h264", "mkv", "30000/1001"),
    ],
)
def test_hard_cuts_are_exact_for_each_codec(tmp_path, ffmpeg, codec, container, fps):
    path, truth = synth.render(cut_spec(f"cuts_{codec}", codec, fps, container), tmp_path)
    frames, _ = decode_gray(path)
    assert len(frames) == truth["num_frames"] == 17 + 14 + 20 + 11
    assert truth["cuts"] == [17, 31, 51]
    assert truth["cut_ranges"] == [[17, 17], [31, 31], [51, 51]]
    # The three largest frame-to-frame jumps are exactly the cuts.
    assert top_jumps(frames, 3) == [17, 31, 51]
    assert path.suffix == "." + (container or {"h264": "mp4", "hevc": "mp4", "vp9": "webm", "mpeg4": "avi"}[codec])
    assert json.loads(path.with_suffix(".json").read_text()) == truth
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        assert (s.codec_context.name, s.width, s.height) == (
            {"h264": "h264", "hevc": "hevc", "vp9": "vp9", "mpeg4": "mpeg4"}[codec],
            W,
            H,
        )
        assert s.average_rate == Fraction(fps)


@pytest.mark.parametrize("kind", ["dissolve", "fade", "wipe"])
def test_gradual_transition_spans_exactly_its_frames(tmp_path, ffmpeg, kind):
    # Flat colours make every frame's mean luma exact: blue (dark) -> yellow (bright).
    d = 10
    spec = VideoSpec(
        name=kind,
        width=W,
        height=H,
        fps="30000/1001",
        codec="h264",
        segments=(S("color:blue", 15), S("color:yellow", 12)),
        transitions=(T(kind, d),),
    )
    path, truth = synth.render(spec, tmp_path)
    frames, _ = decode_gray(path)
    assert len(frames) == truth["num_frames"] == 15 + d + 12
    assert truth["transitions"] == [{"kind": kind, "start": 15, "frames": d}]
    assert truth["cut_ranges"] == [[15, 25]] and truth["cuts"] == [20]
    means = frames.mean(axis=(1, 2))
    blue, yellow = means[0], means[-1]
    assert np.allclose(means[:15], blue, atol=2) and np.allclose(means[25:], yellow, atol=2)
    inside = means[15:25]
    # Every transition frame is a mixture: away from both pure shots.
    assert np.all(np.abs(inside - blue) > 2) and np.all(np.abs(inside - yellow) > 2)
    if kind == "fade":  # through black: darker than the dark shot somewhere in the middle
        assert inside.min() < blue - 10
    else:  # dissolve and wipe move monotonically from blue to yellow
        assert np.all(np.diff(inside) > 0) and blue < inside[0] and inside[-1] < yellow


def test_flashes_are_near_white_frames_inside_a_shot(tmp_path, ffmpeg):
    spec = VideoSpec(
        name="flash",
        width=W,
        height=H,
        fps="25",
        codec="h264",
        segments=(S("testsrc2", 50, flashes=(10, 30)), S("color:white", 12)),
        transitions=(T("cut"),),
    )
    path, truth = synth.render(spec, tmp_path)
    assert truth["flashes"] == [10, 30] and truth["flash_frames"] == [10, 30, 31] and truth["cuts"] == [50]
    frames, _ = decode_gray(path)
    means = frames[:50].mean(axis=(1, 2))
    bright = sorted(int(i) for i in np.nonzero(means > 190)[0])
    assert bright == [10, 30, 31]
    assert np.all(means[[9, 11, 29, 32]] < 150)


def test_fast_pan_moves_a_lot_without_a_cut(tmp_path, ffmpeg):
    spec = VideoSpec(
        name="pan",
        width=W,
        height=H,
        fps="30",
        codec="h264",
        segments=(S("pan", 60), S("color:white", 15)),
        transitions=(T("cut"),),
        seed=3,
    )
    path, truth = synth.render(spec, tmp_path)
    frames, _ = decode_gray(path)
    diffs = luma_diffs(frames)
    assert truth["segments"][0]["motion"] == "fast" and truth["cuts"] == [60]
    assert diffs[1:60].mean() > 8  # the camera moves every frame
    assert int(np.argmax(diffs)) == 60 and diffs[60] > 1.5 * diffs[1:60].max()


def test_vfr_keeps_frames_and_cuts_with_irregular_timestamps(tmp_path, ffmpeg):
    spec = VideoSpec(
        name="vfr",
        width=W,
        height=H,
        fps="30",
        codec="h264",
        container="mp4",
        vfr=True,
        segments=(S("testsrc2", 20), S("color:purple", 25), S("mandelbrot", 15)),
        transitions=(T("cut"), T("cut")),
    )
    path, truth = synth.render(spec, tmp_path)
    frames, times = decode_gray(path)
    assert truth["vfr"] is True and len(frames) == truth["num_frames"] == 60
    assert top_jumps(frames, 2) == truth["cuts"] == [20, 45]
    assert np.allclose(times, truth["frame_times_s"], atol=1e-3)
    durations = np.round(np.diff(times), 4)
    assert np.all(durations > 0)
    assert durations.max() > 2 * durations.min()  # not one constant rate


@pytest.mark.parametrize("codec,container", [("h264", "mp4"), ("vp9", "webm"), ("mpeg4", "avi"), ("hevc", "mkv")])
def test_audio_track_is_as_long_as_the_video(tmp_path, ffmpeg, codec, container):
    spec = cut_spec("audio", codec, "25", container, audio=True)
    path, truth = synth.render(spec, tmp_path)
    with av.open(str(path)) as c:
        assert len(c.streams.audio) == 1
        samples = sum(f.samples for f in c.decode(audio=0))  # matroska has no per-stream duration: count
        audio_s = samples / c.streams.audio[0].rate
    assert truth["has_audio"] is True
    assert abs(audio_s - truth["num_frames"] / 25) < 0.1
    assert len(decode_gray(path)[0]) == truth["num_frames"]


def test_invalid_specs_are_rejected():
    with pytest.raises(ValueError, match="transitions"):
        synth.validate(VideoSpec("x", W, H, "30", "h264", (S("testsrc2", 5), S("black", 5)), ()))
    with pytest.raises(ValueError, match="unknown source"):
        synth.validate(VideoSpec("x", W, H, "30", "h264", (S("life", 5),), ()))
    with pytest.raises(ValueError, match="flash"):
        synth.validate(VideoSpec("x", W, H, "30", "h264", (S("testsrc2", 5, flashes=(5,)),), ()))
    with pytest.raises(ValueError, match="cut has 0 frames"):
        synth.validate(VideoSpec("x", W, H, "30", "h264", (S("testsrc2", 5), S("black", 5)), (T("dissolve", 0),)))


def test_specials_have_the_property_they_stand_for(tmp_path, ffmpeg):
    out = {k: synth.render_special(k, tmp_path, width=W, height=H) for k in synth.SPECIAL_KINDS}
    for kind, (path, truth) in out.items():
        assert truth["expect"] == synth.SPECIAL_EXPECT[kind]
        assert json.loads(path.with_suffix(".json").read_text())["expect"] == truth["expect"]
    assert out["zero_bytes"][0].stat().st_size == 0
    with pytest.raises(av.error.FFmpegError):
        av.open(str(out["not_video"][0]))
    with av.open(str(out["audio_only"][0])) as c:
        assert len(c.streams.video) == 0 and len(c.streams.audio) == 1
    # Truncated: the header still declares every frame, but only part of them decode.
    path, truth = out["truncated"]
    assert path.stat().st_size == truth["size_bytes_full"] // 2
    assert 0 < synth.count_frames(path) == truth["num_frames"] < truth["declared_frames"]
    short, short_truth = out["short"]
    assert len(decode_gray(short)[0]) == short_truth["num_frames"] == 9  # 0.3 s at 30 fps
    black, _ = decode_gray(out["black"][0])
    assert len(black) == 60 and black.max() < 20
    frozen, _ = decode_gray(out["frozen"][0])
    assert len(frozen) == 60 and luma_diffs(frozen).max() < 1 and frozen.std() > 30  # a real picture, never moving


@pytest.mark.parametrize("speed", [Fraction(5, 4), Fraction(4, 5)])
def test_speed_variant_moves_cuts_exactly(tmp_path, ffmpeg, speed):
    src, truth = synth.render(cut_spec("src", "h264", "30"), tmp_path)
    path, vt = synth.perturb(src, truth, 1, tmp_path, ops=["speed"], speed=speed)
    frames, _ = decode_gray(path)
    n = truth["num_frames"]
    assert len(frames) == vt["num_frames"] == -(-n * speed.denominator // speed.numerator)  # ceil(n / s)
    expected_cuts = [-(-c * speed.denominator // speed.numerator) for c in truth["cuts"]]  # ceil(c / s)
    assert vt["cuts"] == expected_cuts and vt["cut_ranges"] == [[c, c] for c in expected_cuts]
    assert top_jumps(frames, 3) == expected_cuts
    assert path.name == "src__v1.mp4" and vt["variant_of"] == "src.mp4"
    assert vt["perturbations"][0] == f"speed:{speed}"


def test_speed_variant_remaps_flashes_and_transitions(tmp_path, ffmpeg):
    spec = VideoSpec(
        name="fl",
        width=W,
        height=H,
        fps="24",
        codec="h264",
        segments=(S("testsrc2", 40, flashes=(12, 25)), S("color:blue", 20)),
        transitions=(T("dissolve", 9),),
    )
    src, truth = synth.render(spec, tmp_path)
    path, vt = synth.perturb(src, truth, 1, tmp_path, ops=["speed"], speed=Fraction(4, 5))
    frames, _ = decode_gray(path)
    assert len(frames) == vt["num_frames"] == 87  # ceil(69 / 0.8)
    means = frames.mean(axis=(1, 2))
    bright = [int(i) for i in np.nonzero(means > 190)[0]]
    assert bright == vt["flash_frames"]
    assert vt["flashes"] == [15, 32]  # ceil(12 / 0.8), ceil(25 / 0.8)
    assert vt["transitions"] == [{"kind": "dissolve", "start": 50, "frames": 12}]  # [40, 49] -> [50, 62)


@pytest.mark.parametrize("ops", [["crop"], ["scale"], ["codec"], ["crop", "scale", "codec"]])
def test_crop_scale_codec_variants_keep_frame_indices(tmp_path, ffmpeg, ops):
    src, truth = synth.render(cut_spec("src", "h264", "25", audio=True), tmp_path)
    path, vt = synth.perturb(src, truth, 2, tmp_path, seed=4, ops=ops)
    frames, _ = decode_gray(path)
    assert len(frames) == vt["num_frames"] == truth["num_frames"]
    assert vt["cuts"] == truth["cuts"] and top_jumps(frames, 3) == truth["cuts"]
    assert frames.shape[1:] == (vt["height"], vt["width"])
    if "crop" in ops or "scale" in ops:
        assert (vt["width"], vt["height"]) != (W, H)
    if ops == ["codec"]:
        assert vt["codec"] != "h264" and path.suffix == "." + vt["container"]
    with av.open(str(path)) as c:
        assert len(c.streams.audio) == 1


def test_vfr_variant_keeps_its_timestamps(tmp_path, ffmpeg):
    spec = VideoSpec(
        name="vfr",
        width=W,
        height=H,
        fps="30",
        codec="h264",
        container="mkv",
        vfr=True,
        segments=(S("testsrc2", 30), S("color:white", 20)),
        transitions=(T("cut"),),
    )
    src, truth = synth.render(spec, tmp_path)
    path, vt = synth.perturb(src, truth, 1, tmp_path, ops=["speed", "crop"])  # speed is not applied to VFR
    frames, times = decode_gray(path)
    assert "crop" in vt["perturbations"][0] and not any(p.startswith("speed") for p in vt["perturbations"])
    assert len(frames) == vt["num_frames"] == 50 and top_jumps(frames, 1) == [30]
    assert np.allclose(times, truth["frame_times_s"], atol=2e-3)


def test_plan_covers_the_feature_matrix_and_is_deterministic():
    specs = synth.plan(12, seed=0, max_duration_s=600)
    assert synth.plan(12, seed=0, max_duration_s=600) == specs
    assert synth.plan(12, seed=1, max_duration_s=600) != specs
    assert {s.codec for s in specs} == {"h264", "hevc", "vp9", "mpeg4"}
    assert {s.fps for s in specs} == {"24", "25", "30", "30000/1001", "60"}
    assert sum(s.vfr for s in specs) == 1 and any(s.audio for s in specs)
    kinds = {t.kind for s in specs for t in s.transitions}
    assert kinds == {"cut", "dissolve", "fade", "wipe"}
    assert any(not s.transitions for s in specs)  # videos without any cut
    assert any(seg.flashes for s in specs for seg in s.segments)
    assert any(seg.source == "pan" for s in specs for seg in s.segments)
    heights = sorted(s.height for s in specs)
    assert heights[0] == 240 and heights[-1] == 1080 and sum(h <= 480 for h in heights) >= 9
    durations = [synth.spec_truth(s)["duration_s"] for s in specs]
    assert min(durations) <= 1.0 and max(durations) >= 120  # 1 s .. minutes when the cap allows it
    assert max(synth.spec_truth(s)["duration_s"] for s in synth.plan(12, max_duration_s=5)) <= 5.0


def test_generated_neighbours_are_distinct_and_transitions_fit():
    for seed in range(4):
        for spec in synth.plan(30, seed=seed, max_duration_s=30):
            synth.validate(spec)
            for a, b in zip(spec.segments, spec.segments[1:]):
                assert synth.distinct(a.source, b.source), (spec.name, a.source, b.source)
            for t in spec.transitions:
                assert t.frames == 0 if t.kind == "cut" else 8 <= t.frames <= 30


@pytest.mark.slow
def test_generated_hard_cuts_stand_out(tmp_path, ffmpeg):
    """In rendered generate() output every hard cut jumps more than anything inside a shot (flashes excluded)."""
    paths = synth.generate(tmp_path / "out", count=5, include_specials=False, max_duration_s=3)
    assert len(paths) == 5
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths)  # media only
    for path in paths:
        truth = json.loads((tmp_path / "out.truth" / (path.stem + ".json")).read_text())
        frames, _ = decode_gray(path)
        assert len(frames) == truth["num_frames"], path.name
        diffs = luma_diffs(frames)
        skip = {f + k for f in truth["flash_frames"] for k in (0, 1)}
        skip |= {i for lo, hi in truth["cut_ranges"] for i in range(lo, hi + 1)}
        in_shot = max((diffs[i] for i in range(1, len(diffs)) if i not in skip), default=0.0)
        for lo, hi in truth["cut_ranges"]:
            if lo == hi:
                assert diffs[lo] > 1.25 * in_shot + 5, (path.name, lo, diffs[lo], in_shot)


def test_cli_writes_n_videos_into_out_and_n_truths_beside_it(tmp_path, ffmpeg, capsys):
    """OUT gets media files only (it may be a landing folder); the truths go to the sibling OUT.truth."""
    from videolake.cli import main

    out = tmp_path / "landing" / "2024-03-01"
    assert main(["synth", str(out), "--count", "3", "--no-specials", "--max-duration", "2", "--seed", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    media = sorted(out.iterdir())
    truths = sorted((tmp_path / "landing" / "2024-03-01.truth").iterdir())
    assert len(media) == 3 and len(truths) == 3
    assert not [p for p in media if p.suffix == ".json"]
    assert [p.suffix for p in truths] == [".json"] * 3
    assert {p.stem for p in media} == {p.stem for p in truths}
    assert len(lines) == 4 and lines[0].startswith("[1/3] 000_cuts_")
    assert lines[-1].startswith(f"wrote 3 files to {out} and 3 truth JSONs to {out.parent / '2024-03-01.truth'} in ")
    for t in truths:
        truth = json.loads(t.read_text())
        assert synth.count_frames(out / truth["file"]) == truth["num_frames"]
        assert truth["duration_s"] <= 2.0


def test_cli_truth_dir_option(tmp_path, ffmpeg, capsys):
    from videolake.cli import main

    out, truth_dir = tmp_path / "videos", tmp_path / "elsewhere" / "truth"
    assert (
        main(["synth", str(out), "--truth-dir", str(truth_dir), "--count", "2", "--no-specials", "--max-duration", "1"])
        == 0
    )
    media = sorted(p.name for p in out.iterdir())
    assert len(media) == 2
    assert sorted(p.name for p in truth_dir.iterdir()) == sorted(Path(m).stem + ".json" for m in media)
    assert not (tmp_path / "videos.truth").exists()
    # OUT itself as the truth dir: the layout the scene evaluator reads (truth beside each video)
    same = tmp_path / "beside"
    assert (
        main(["synth", str(same), "--truth-dir", str(same), "--count", "1", "--no-specials", "--max-duration", "1"])
        == 0
    )
    names = sorted(p.name for p in same.iterdir())
    assert len(names) == 2 and names[0].endswith(".json") ^ names[1].endswith(".json")


@pytest.mark.slow
def test_cli_is_byte_identical_for_one_seed(tmp_path, ffmpeg, capsys):
    """Two runs with one seed into two folders write the same bytes: same file names, same sha256, media and truths.

    --count 6 renders one video of each of the first six templates: h264/mp4, vp9/webm, hevc/mp4, h264/mkv with an
    AAC track, mpeg4/avi and VFR h264/mkv; then the 7 specials (truncated, audio only, ...) and, --variants 1, one
    re-encoded copy of each decodable file (read from an input file). Seed 6 puts a ``gradients`` shot into the
    hevc file. Before the fix the three Matroska/WebM files (random segment and track UIDs) and every file with a
    ``gradients`` shot (random colours), and their variants, changed from run to run.
    """
    import hashlib

    from videolake.cli import main

    def synthesize(out: Path) -> dict[tuple[str, str], str]:
        assert main(["synth", str(out), "--count", "6", "--variants", "1", "--seed", "6", "--max-duration", "1"]) == 0
        return {
            (kind, p.name): hashlib.sha256(p.read_bytes()).hexdigest()
            for kind, folder in (("media", out), ("truth", synth.default_truth_dir(out)))
            for p in folder.iterdir()
        }

    first, second = synthesize(tmp_path / "a"), synthesize(tmp_path / "b")
    capsys.readouterr()
    assert first == second
    # The run covers what the docstring says.
    truths = [json.loads((tmp_path / "a.truth" / name).read_text()) for kind, name in first if kind == "truth"]
    assert len(truths) == 6 + 7 + 6 + 3
    assert {(t["codec"], t["container"]) for t in truths if not t["variant_of"]} >= {
        ("h264", "mp4"),
        ("vp9", "webm"),
        ("hevc", "mp4"),
        ("h264", "mkv"),
        ("mpeg4", "avi"),
    }
    assert {t.get("special") for t in truths} >= set(synth.SPECIAL_KINDS)
    assert any(t["vfr"] for t in truths) and any(t["has_audio"] and t["container"] == "mkv" for t in truths)
    assert any(g["source"] == "gradients" for t in truths for g in t["segments"])


def test_default_truth_dir_is_a_sibling():
    assert synth.default_truth_dir("/data/store/landing/2024-03-01") == Path("/data/store/landing/2024-03-01.truth")
    assert synth.default_truth_dir("/data/out/") == Path("/data/out.truth")


def test_the_scene_evaluation_finds_every_generated_video_with_its_truth(tmp_path):
    """generate() writes truths into the sibling <out>.truth; the evaluation harness reads them from there (it once
    looked only beside the videos and scored the synthetic set on 0 files)."""
    from videolake.evaluation.scenes import _truth_dir_items

    out = tmp_path / "synth"
    paths = synth.generate(out, count=3, include_specials=False, max_duration_s=2)
    items = _truth_dir_items(str(out))
    assert [name for name, _, _ in items] == sorted(p.name for p in paths)
    truth_dir = synth.default_truth_dir(out)
    for name, path, truth in items:
        assert path == str(out / name)
        stem = name.rsplit(".", 1)[0]
        assert truth == json.loads((truth_dir / f"{stem}.json").read_text())
