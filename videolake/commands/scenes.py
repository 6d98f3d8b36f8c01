"""`videolake scenes FILE`: print the scene cuts of one video as ONE JSON object on stdout.

Output: {"cuts": [first frame of each new scene, 0-based], "fps": F, "num_frames": N}; logs go to stderr. An
undecodable file exits with status 2 and a one-line reason on stderr.

Starts fast: only numpy and PyAV are imported for the default detector (no dagster, ray, torch, cv2, scenedetect;
check with `python -X importtime -m videolake.cli scenes FILE`).
"""

from __future__ import annotations

import argparse
import os
import sys

DEFAULT_DETECTOR = "luma"
# --threshold sets this config field of each built-in detector.
THRESHOLD_FIELD = {
    "luma": "threshold",
    "content": "threshold",
    "adaptive": "adaptive_threshold",
    "transnetv2": "threshold",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="video file")
    p.add_argument(
        "--detector",
        default=DEFAULT_DETECTOR,
        help="scene detector: luma (default), adaptive, content, transnetv2 (the TransNetV2 network; slow on CPU)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="the detector's main threshold (luma: min content change; content: score; adaptive: ratio; "
        "transnetv2: transition probability)",
    )
    p.add_argument("--min-scene-len", type=int, default=None, help="minimum frames between two cuts")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other parameter of the detector (repeatable, typed per detector), e.g. --param ratio=2.5; "
        "--list-params shows them",
    )
    p.add_argument("--list-params", action="store_true", help="print the detector's parameters as JSON and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")


def run(args: argparse.Namespace) -> int:
    # One BLAS thread: numpy's OpenBLAS otherwise starts a thread per core at import (CPU time for nothing here).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import logging

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from videolake.platform.params import ParamError
    from videolake.platform.scenes.base import detector_params, get_detector

    if args.list_params:
        try:
            rows = detector_params(args.detector)
        except KeyError as exc:
            print(f"videolake scenes: {exc.args[0]}", file=sys.stderr)
            return 2
        import json

        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        return 0
    if not args.file:
        print("videolake scenes: a video FILE is required", file=sys.stderr)
        return 2
    params: dict = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"videolake scenes: --param expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        params[key.replace("-", "_")] = value  # text: parsed against the detector's typed config
    if args.threshold is not None:
        params[THRESHOLD_FIELD.get(args.detector, "threshold")] = args.threshold
    if args.min_scene_len is not None:
        params["min_scene_len"] = args.min_scene_len
    try:
        detector = get_detector(args.detector, **params)
    except (KeyError, ParamError) as exc:  # unknown detector, unknown parameter or a value that does not fit
        print(f"videolake scenes: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    import contextlib

    try:
        # Anything a library prints goes to stderr: stdout carries exactly one JSON object.
        with contextlib.redirect_stdout(sys.stderr):
            result = detector.detect(args.file)
    except (ValueError, RuntimeError) as exc:
        print(f"videolake scenes: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(result.to_json() + "\n")
    sys.stdout.flush()
    return 0
