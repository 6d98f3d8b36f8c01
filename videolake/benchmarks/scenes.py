"""How much CPU `videolake scenes FILE` costs next to a bare single-threaded FFmpeg decode of the same file.

Both commands run as child processes; their CPU time (user + sys) is read with ``getrusage(RUSAGE_CHILDREN)``
around each run, so interpreter start-up and imports count, exactly as a user (or a pipeline worker) pays them.
The figure of merit is ``ratio = ffmpeg_cpu_s / scenes_cpu_s`` (1.0 = as cheap as decoding alone).
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from collections.abc import Sequence


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def child_cpu_seconds(cmd: Sequence[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``cmd`` to completion; (its CPU seconds, user + sys, the completed process)."""
    before = _child_cpu()
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    return _child_cpu() - before, proc


def scenes_command(path: str, detector: str | None = None) -> list[str]:
    """`videolake scenes PATH` through the installed console script when there is one (what users run)."""
    exe = shutil.which("videolake")
    cmd = [exe] if exe else [sys.executable, "-m", "videolake.cli"]
    cmd += ["scenes", str(path)]
    if detector:
        cmd += ["--detector", detector]
    return cmd


def bench_scenes(path: str, repeats: int = 3, detector: str | None = None, verbose: bool = True) -> dict:
    """CPU time of ``ffmpeg -threads 1 -i FILE -f null -`` vs ``videolake scenes FILE`` (best of ``repeats``).

    The minimum over repeats is the least disturbed by other processes on a shared machine.
    """
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RuntimeError("ffmpeg is not on PATH")
    ff_cmd = [
        ffmpeg,
        "-hide_banner",
        "-loglevel",
        "error",
        "-nostdin",
        "-threads",
        "1",
        "-i",
        str(path),
        "-f",
        "null",
        "-",
    ]
    sc_cmd = scenes_command(path, detector)
    ff_times, sc_times = [], []
    output = ""
    for _ in range(max(1, repeats)):
        t, proc = child_cpu_seconds(ff_cmd)
        if proc.returncode != 0:
            raise RuntimeError(f"ffmpeg failed on {path}: {proc.stderr.strip()[-500:]}")
        ff_times.append(t)
        t, proc = child_cpu_seconds(sc_cmd)
        if proc.returncode != 0:
            raise RuntimeError(f"videolake scenes failed on {path}: {proc.stderr.strip()[-500:]}")
        sc_times.append(t)
        output = proc.stdout.strip()
    ff, sc = min(ff_times), min(sc_times)
    result = {
        "file": str(path),
        "detector": detector or "luma",
        "ffmpeg_cpu_s": round(ff, 3),
        "scenes_cpu_s": round(sc, 3),
        "ratio": round(ff / sc, 3) if sc > 0 else float("inf"),
        "ffmpeg_runs_s": [round(t, 3) for t in ff_times],
        "scenes_runs_s": [round(t, 3) for t in sc_times],
        "output": output,
    }
    if verbose:
        print(f"{path}: ffmpeg {ff:.3f}s cpu, videolake scenes {sc:.3f}s cpu, ratio {result['ratio']:.3f}")
    return result


if __name__ == "__main__":  # python -m videolake.benchmarks.scenes FILE [FILE ...]
    for arg in sys.argv[1:]:
        bench_scenes(arg)
