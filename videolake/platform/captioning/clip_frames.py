"""Frame extraction for captioning: the CPU half of the caption stage (Ray Data tasks ahead of the GPU actors).

A clip row names its frames as a range of its source (``source_uri``, ``start_frame``, ``end_frame``, ``fps``) or,
when it was materialised, its own file (``clip_uri``, frames 0..end-start). Frames are sampled at ``sample_fps``
(between ``min_frames`` and ``max_frames``), decoded frame-exactly by ``videolake.platform.video.clips.read_clip_frames``
(one seek per clip, numbering by the decode-order frame index the scene detector used) and downscaled to at most
``max_pixels`` each, aspect kept, and turned upright by the video's display matrix (phone portrait footage reaches the
captioner portrait, not sideways). The video metadata that vLLM's Qwen-VL processors need travels with them.

A clip that cannot be decoded (corrupt file, range beyond the end, missing object) is not an exception: its row
carries ``frame_error`` and an empty frames array, and the captioner turns it into a ``failed`` caption row.

Sources are URIs. ``open_source(uri)`` returns a local path, or a context manager yielding one (e.g.
``ObjectStore.open_local`` for S3, which downloads to a temporary file and removes it afterwards). The default
opener resolves ``file://`` URIs and plain paths; any other scheme needs an injected opener (``store_opener``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes, urlparse

import numpy as np

from videolake.platform.captioning.base import FrameConfig
from videolake.platform.runtime.failures import PERMANENT, failure_class

log = logging.getLogger(__name__)

SourceOpener = Callable[[str], "str | contextlib.AbstractContextManager[str]"]

EMPTY_FRAMES = np.zeros((0, 0, 0, 3), dtype=np.uint8)

REQUIRED_COLUMNS = ("clip_id", "video_id", "source_uri", "start_frame", "end_frame", "fps")


@dataclass(frozen=True)
class ClipFrames:
    """The sampled frames of one clip and the metadata a video-input model needs."""

    frames: np.ndarray  # uint8 (T, H, W, 3)
    frame_indices: list[int]  # clip-relative frame numbers of the T frames
    fps: float  # the clip's frame rate (source fps)
    clip_num_frames: int  # frames in the clip (end - start)

    @property
    def duration_s(self) -> float:
        return self.clip_num_frames / self.fps if self.fps > 0 else 0.0

    def video_metadata(self) -> dict[str, Any]:
        """The HF VideoMetadata fields vLLM's Qwen-VL path requires (else: "Video metadata is required").

        do_sample_frames=False: the frames are already sampled; the processor must not sample again.
        """
        return {
            "fps": float(self.fps),
            "duration": float(self.duration_s),
            "total_num_frames": int(self.clip_num_frames),
            "frames_indices": [int(i) for i in self.frame_indices],
            "video_backend": "pyav",
            "do_sample_frames": False,
        }


def default_open_source(uri: str) -> str:
    """A local path for ``file://`` URIs and plain paths; other schemes need an injected opener."""
    if uri.startswith("file://"):
        # Percent-decoded to bytes, then as the filesystem decodes names: '#', '%', spaces and non-UTF-8 names are
        # the file's own (urlparse would cut at '#').
        return os.fsdecode(unquote_to_bytes(uri[len("file://") :]))
    parsed = urlparse(uri)
    if parsed.scheme == "":
        return uri
    raise ValueError(f"no opener for {parsed.scheme}:// sources: pass open_source= (e.g. store_opener(factory))")


def store_opener(store_factory: Callable[[str], Any]) -> SourceOpener:
    """An opener over object stores: ``store_factory(uri)`` returns the ObjectStore holding ``uri``; the object is
    read through ``store.open_local`` (the file itself for a local store, a temporary download otherwise)."""

    def open_source(uri: str) -> contextlib.AbstractContextManager[str]:
        store = store_factory(uri)
        return store.open_local(store.key_from_uri(uri))

    return open_source


@contextlib.contextmanager
def _opened(open_source: SourceOpener | None, uri: str) -> Iterator[str]:
    got = (open_source or default_open_source)(uri)
    if hasattr(got, "__enter__"):
        with got as path:  # type: ignore[union-attr]
            yield path
    else:
        yield got


def frames_to_sample(num_clip_frames: int, fps: float, config: FrameConfig, even: bool = False) -> int:
    """How many frames to sample from a clip: ``sample_fps`` x duration, clamped to [min_frames, max_frames] and to
    the clip's length; rounded to an even count when ``even`` (Qwen-VL's temporal patch pairs frames)."""
    if num_clip_frames <= 0:
        return 0
    duration = num_clip_frames / fps if fps and fps > 0 else 0.0
    n = int(round(duration * config.sample_fps))
    n = max(config.min_frames, min(config.max_frames, n))
    n = min(n, num_clip_frames)
    if even and n % 2 == 1:
        if n + 1 <= min(config.max_frames, num_clip_frames):
            n += 1
        elif n > 1:
            n -= 1
    return max(n, 1)


def max_side_for(width: int, height: int, max_pixels: int) -> int | None:
    """The longer-side limit that keeps width x height within ``max_pixels`` at the same aspect ratio."""
    if width <= 0 or height <= 0 or width * height <= max_pixels:
        return None
    long, short = max(width, height), min(width, height)
    return max(1, int(math.floor(math.sqrt(max_pixels * long / short))))


def read_frames(
    path: str, start_frame: int, end_frame: int, fps: float, config: FrameConfig, even: bool = False
) -> ClipFrames:
    """Sample and decode the frames of [start_frame, end_frame) of a local video. Raises ValueError with a reason."""
    from videolake.platform.video.clips import frame_index, read_clip_frames, sample_indices

    if end_frame <= start_frame:
        raise ValueError(f"empty frame range [{start_frame}, {end_frame})")
    n_clip = int(end_frame - start_frame)
    n = frames_to_sample(n_clip, fps, config, even=even)
    try:
        index = frame_index(path)  # cached per file: the many clips of one video demux and open it once
    except OSError as exc:
        raise ValueError(f"cannot open video {path}: {type(exc).__name__}: {exc}") from exc
    width, height, total = index.width, index.height, index.num_frames
    if start_frame < 0 or end_frame > total:
        raise ValueError(f"frame range [{start_frame}, {end_frame}) is beyond the video's {total} frames: {path}")
    max_side = max_side_for(width, height, config.max_pixels)
    frames = read_clip_frames(path, int(start_frame), int(end_frame), n, max_side)
    indices = [i - int(start_frame) for i in sample_indices(int(start_frame), int(end_frame), n)]
    arr = np.stack(frames).astype(np.uint8, copy=False)
    return ClipFrames(frames=arr, frame_indices=indices, fps=float(fps), clip_num_frames=n_clip)


def extract_clip(
    row: dict[str, Any], config: FrameConfig, open_source: SourceOpener | None = None, even: bool = False
) -> ClipFrames:
    """The frames of one clip row (from its clip file when ``clip_uri`` is set, else from its source range)."""
    start, end = int(row["start_frame"]), int(row["end_frame"])
    fps = float(row["fps"] or 0.0)
    clip_uri = row.get("clip_uri")
    if clip_uri:
        uri, start, end = clip_uri, 0, end - start
    else:
        uri = row["source_uri"]
    with _opened(open_source, uri) as path:
        return read_frames(path, start, end, fps, config, even=even)


def extract_frames(
    batch: dict[str, np.ndarray],
    *,
    frame_config: FrameConfig,
    input_mode: str = "video",
    open_source: SourceOpener | None = None,
) -> dict[str, np.ndarray]:
    """Ray Data ``map_batches`` function (numpy format): clip rows in, captioner input rows out (see base.py).

    Never raises for a bad clip: the reason goes into ``frame_error``.
    """
    n = len(batch["clip_id"])
    frames = np.empty(n, dtype=object)
    errors = np.empty(n, dtype=object)
    classes = np.full(
        n, "", dtype=object
    )  # failure class of a frame_error (platform/runtime/failures.py), "" when none
    metas = np.empty(n, dtype=object)
    times = np.full(n, "", dtype=object)  # JSON: the sampled frames' times in the source, seconds
    counts = np.zeros(n, dtype=np.int32)
    clip_uris = batch.get("clip_uri")
    for i in range(n):
        row = {k: batch[k][i] for k in REQUIRED_COLUMNS}
        row["clip_uri"] = clip_uris[i] if clip_uris is not None else None
        try:
            clip = extract_clip(row, frame_config, open_source, even=(input_mode == "video"))
            frames[i], errors[i], metas[i] = clip.frames, "", json.dumps(clip.video_metadata())
            counts[i] = clip.frames.shape[0]
            times[i] = json.dumps(source_times(int(row["start_frame"]), clip))
        except Exception as exc:  # noqa: BLE001 - a bad clip becomes a failed row, not a crashed stage
            log.warning("clip %s: frame extraction failed: %s", row["clip_id"], exc)
            frames[i], errors[i], metas[i] = EMPTY_FRAMES, f"{type(exc).__name__}: {exc}", ""
            classes[i] = failure_class(exc)  # an undecodable clip is permanent, a storage timeout is not
    return {
        "clip_id": np.asarray(batch["clip_id"], dtype=object),
        "video_id": np.asarray(batch["video_id"], dtype=object),
        "source_uri": np.asarray(batch["source_uri"], dtype=object),
        "frames": frames,
        "frame_error": errors,
        "frame_error_class": classes,
        "video_meta": metas,
        "frame_times_s": times,
        "num_frames": counts,
    }


def source_times(start_frame: int, clip: ClipFrames) -> list[float]:
    """The times in the source video (seconds) of a clip's sampled frames: (the clip's first frame in the source +
    the frame's index in the clip) / the clip's frame rate; recorded as clip_captions.frame_timestamps_s."""
    if clip.fps <= 0:
        return []
    return [round((start_frame + int(i)) / clip.fps, 6) for i in clip.frame_indices]


class FrameCache:
    """Caption inputs decoded once and kept on disk by clip_id: the output of ``extract_frames`` for a set of clips.

    Why: ``videolake bench caption`` compares the stage with raw ``LLM.generate`` on the same pre-decoded frames.
    On a small CPU node decoding costs more than the tiny model's generation (512 one-second 320x240 clips: ~12 CPU
    seconds of decoding vs ~5 s of generation), so a stage that decodes again measures the decoder, not the
    pipeline. With a cache the stage's extraction tasks read the baseline's frames instead of decoding; clips not in
    the cache are decoded as usual.

    The file records the FrameConfig and input mode that made it; a cache made with other settings is refused with
    a ValueError (its frames would silently differ from what the config asks for).
    """

    FILE = "frames.parquet"
    ROW_GROUP = 32

    def __init__(self, directory: str, frame_config: FrameConfig, input_mode: str):
        self.directory = str(directory)
        self.frame_config = frame_config
        self.input_mode = input_mode

    @staticmethod
    def _fingerprint(frame_config: FrameConfig, input_mode: str) -> str:
        from dataclasses import asdict

        return json.dumps({"frames": asdict(frame_config), "input_mode": input_mode}, sort_keys=True)

    @classmethod
    def write(
        cls, directory: str, extracted: dict[str, np.ndarray], frame_config: FrameConfig, input_mode: str
    ) -> FrameCache:
        """Keep ``extracted`` (``extract_frames``' output) under ``directory``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        frames = [np.ascontiguousarray(f) for f in extracted["frames"]]
        table = pa.table(
            {
                "clip_id": pa.array([str(c) for c in extracted["clip_id"]], pa.string()),
                "frames": pa.array([f.tobytes() for f in frames], pa.binary()),
                "shape": pa.array([list(f.shape) for f in frames], pa.list_(pa.int32())),
                "frame_error": pa.array([str(e) for e in extracted["frame_error"]], pa.string()),
                "video_meta": pa.array([str(m) for m in extracted["video_meta"]], pa.string()),
            }
        )
        table = table.sort_by("clip_id").replace_schema_metadata(
            {"videolake.frames": cls._fingerprint(frame_config, input_mode)}
        )
        os.makedirs(directory, exist_ok=True)
        # Sorted, in small row groups: a lookup of a batch's clip ids reads the few groups that hold them.
        pq.write_table(table, os.path.join(directory, cls.FILE), row_group_size=cls.ROW_GROUP)
        return cls(directory, frame_config, input_mode)

    def extract(self, batch: dict[str, np.ndarray], open_source: SourceOpener | None = None) -> dict[str, np.ndarray]:
        """``extract_frames``' output for ``batch``: cached clips from the file, the others decoded."""
        wanted = [str(c) for c in batch["clip_id"]]
        table = self._read_cached(wanted)
        cached = {cid: i for i, cid in enumerate(table.column("clip_id").to_pylist())}
        missing = [i for i, cid in enumerate(wanted) if cid not in cached]
        decoded = self._decode(batch, missing, open_source) if missing else None
        out = self._empty_output(batch, len(wanted))
        _fill_cached(out, wanted, cached, table)
        if decoded is not None:  # exactly when clips are missing
            for src, i in enumerate(missing):
                for k in ("frames", "frame_error", "frame_error_class", "video_meta", "num_frames"):
                    out[k][i] = decoded[k][src]
        return out

    def _read_cached(self, wanted: list[str]) -> Any:
        """The cache file's rows of the ``wanted`` clip ids; a ValueError when it was made with other settings."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        path = os.path.join(self.directory, self.FILE)
        table = pq.read_table(path, filters=pc.field("clip_id").isin(wanted))
        made_with = (pq.read_schema(path).metadata or {}).get(b"videolake.frames", b"").decode()
        if made_with != self._fingerprint(self.frame_config, self.input_mode):
            raise ValueError(f"the frame cache {path} was made with other frame settings ({made_with or 'none'})")
        return table

    def _decode(
        self, batch: dict[str, np.ndarray], missing: list[int], open_source: SourceOpener | None
    ) -> dict[str, np.ndarray]:
        """``extract_frames``' output for the rows ``missing`` of ``batch`` (the clips not in the cache)."""
        return extract_frames(
            {k: np.asarray(v)[missing] for k, v in batch.items()},
            frame_config=self.frame_config,
            input_mode=self.input_mode,
            open_source=open_source,
        )

    def _empty_output(self, batch: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
        """``extract_frames``' columns and types for ``n`` rows, the batch's id columns filled in."""
        out = extract_frames(
            {k: np.asarray(v)[:0] for k, v in batch.items()}, frame_config=self.frame_config, input_mode=self.input_mode
        )  # the output's columns and types, no rows
        out = {k: np.empty(n, dtype=v.dtype) for k, v in out.items()}
        for k in ("clip_id", "video_id", "source_uri"):
            out[k] = np.asarray(batch[k], dtype=object)
        return out


def _fill_cached(out: dict[str, np.ndarray], wanted: list[str], cached: dict[str, int], table: Any) -> None:
    """Write the cached clips' frames (row ``cached[clip_id]`` of ``table``) into their rows of ``out``."""
    col = {c: table.column(c).to_pylist() for c in ("frames", "shape", "frame_error", "video_meta")}
    for i, cid in enumerate(wanted):
        j = cached.get(cid)
        if j is None:
            continue
        shape = tuple(col["shape"][j])
        out["frames"][i] = np.frombuffer(col["frames"][j], dtype=np.uint8).reshape(shape).copy()
        out["frame_error"][i] = col["frame_error"][j]
        out["frame_error_class"][i] = PERMANENT if col["frame_error"][j] else ""  # a cached decode failure
        out["video_meta"][i] = col["video_meta"][j]
        out["num_frames"][i] = shape[0] if shape else 0
