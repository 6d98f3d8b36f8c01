"""Encodes a ``VideoSpec`` into a media file, checks the decoded frame count against the truth, and writes the truth."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from videolake.synth.ffmpeg import VFR_TIMEBASE, _encode_args, _ffmpeg, _run, count_frames, frame_times
from videolake.synth.graph import _audio_input, _filter_graph
from videolake.synth.specs import VideoSpec
from videolake.synth.truth import _write_truth, spec_truth

log = logging.getLogger(__name__)


def render(
    spec: VideoSpec, out_dir: str | Path, verify: bool = True, truth_dir: str | Path | None = None
) -> tuple[Path, dict[str, Any]]:
    """Encode ``spec`` into ``out_dir/<name>.<container>`` and write its truth as ``<name>.json`` into
    ``truth_dir`` (default: beside the video; ``generate`` and the CLI keep it out of the video folder).

    With ``verify`` the decoded frame count is checked against the truth (RuntimeError on mismatch).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    truth = spec_truth(spec)
    graph, n = _filter_graph(spec)
    container = truth["container"]
    path = out_dir / truth["file"]
    cmd = _ffmpeg(*(_audio_input(spec, n) if spec.audio else []), "-filter_complex", graph, "-map", "[v]")
    if spec.audio:
        cmd += ["-map", "0:a"]
    # -frames:v is only a guard (the graph yields exactly n frames); with a separate audio input it would end the
    # file when the video is done and cut the audio short.
    cmd += ([] if spec.audio else ["-frames:v", str(n)]) + ["-fps_mode", "passthrough"]
    if spec.vfr:
        cmd += ["-enc_time_base", f"1/{VFR_TIMEBASE}"]
        if container in ("mp4", "mov"):
            cmd += ["-video_track_timescale", str(VFR_TIMEBASE)]
    else:
        cmd += ["-r", spec.fps]
    cmd += _encode_args(spec.codec, container, spec.quality, spec.audio) + [str(path)]
    _run(cmd)
    if spec.vfr:
        times = frame_times(path)
        truth["frame_times_s"] = times
        if len(times) > 1:
            truth["duration_s"] = round(times[-1] + (times[-1] - times[-2]), 6)
    if verify:
        got = count_frames(path)
        if got != n:
            raise RuntimeError(f"{path.name}: decoded {got} frames, the spec has {n}")
    _write_truth(path, truth, truth_dir)
    log.info("rendered %s: %d frames, %d cuts", path.name, n, len(truth["cuts"]))
    return path, truth
