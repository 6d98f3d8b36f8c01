"""Probe one video file: header facts, a frame count, and a decode check, so bad files become rejection rows.

``probe_video`` never raises for a bad file: every failure is a ``ProbeOutcome`` with a reject reason from the
constants below (shared with the synthetic-video generator, which labels the bad files it makes with them) and a
human-readable ``detail``. Only programming errors (e.g. a missing file path) propagate.

One pass over the file's video packets gives everything beyond the header:

- the packet count and the presentation-time span (``duration_s`` from timestamps, right for variable frame rates);
- the decode check: the first ``preflight_frames`` frames always, every frame when ``full_decode`` is on (the
  default: a file corrupted mid-stream decodes fine at its start, and only a full decode finds it);
- ``num_frames``: the number of decoded frames when the whole stream was decoded (exactly what the scene
  detector's decode pass will number), otherwise the demuxed packet count (one packet per frame for the codecs we
  ingest; the header count of MP4/MOV is only used to detect truncation because Matroska/WebM and MPEG-TS carry
  none).
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

log = logging.getLogger(__name__)

# Reject reasons (exact strings: they are stored in raw_videos.reject_reason and used by the synth generator).
EMPTY_FILE = "empty_file"  # zero bytes
NOT_A_VIDEO = "not_a_video"  # no known container signature and FFmpeg cannot open it
NO_VIDEO_STREAM = "no_video_stream"  # a media file without a video stream (audio only, cover art only)
CORRUPT = "corrupt"  # container readable but the video data does not decode
TRUNCATED = "truncated"  # the content ends early: MP4 index (moov) missing, a box cut short, stream time short of the declared duration
TOO_SHORT = "too_short"  # shorter than ProbeConfig.min_duration_s
UNSUPPORTED_CODEC = "unsupported_codec"  # no decoder for the video codec in this FFmpeg build
ZERO_DIMENSIONS = "zero_dimensions"  # the video stream declares a width or height of 0
NO_FRAMES = "no_frames"  # a video stream without a single packet

REJECT_REASONS: tuple[str, ...] = (
    EMPTY_FILE,
    NOT_A_VIDEO,
    NO_VIDEO_STREAM,
    CORRUPT,
    TRUNCATED,
    TOO_SHORT,
    UNSUPPORTED_CODEC,
    ZERO_DIMENSIONS,
    NO_FRAMES,
)


@dataclass(frozen=True)
class ProbeConfig:
    # Videos shorter than this are rejected too_short. Matches the minimum clip duration (QualityConfig.min_clip_s):
    # a shorter video cannot yield a single usable clip.
    min_duration_s: float = 1.0
    # Frames decoded at the start of every file, so undecodable files are rejected at ingest, not in a later stage.
    preflight_frames: int = 8
    # Decode every frame too (no colour conversion, no deblocking: ~540 frames/s at 720p h264 on one core): finds
    # corruption in the middle of a file, which decodes fine at its start, and gives the exact decoded frame count.
    # Off: only the preflight frames are decoded (a corrupt middle then surfaces in scene detection instead) and
    # num_frames is the demuxed packet count.
    full_decode: bool = True
    # A video stream whose packets end more than this share before the duration its header declares is truncated
    # (the container's duration stands in only when the video is the file's only stream).
    truncation_tolerance: float = 0.1


@dataclass(frozen=True)
class ProbeResult:
    """Field names match the raw_videos columns of the same names."""

    container: str  # short container name, e.g. mp4, mov, webm, matroska, avi
    codec: str  # FFmpeg codec name of the video stream, e.g. h264, hevc, vp9, mpeg4
    width: int
    height: int
    fps: float  # average frame rate: num_frames / duration_s (the header's exact rate when within 1% of that)
    duration_s: float  # presentation-time span of the video stream (first frame start .. last frame end)
    num_frames: int  # see the module docstring for how it is counted
    has_audio: bool
    # Display orientation (phone footage): width/height above are the coded picture's; a player turns it by
    # ``rotation`` degrees clockwise (see videolake.platform.video.orientation) and shows display_width x display_height.
    rotation: int = 0
    display_width: int | None = None
    display_height: int | None = None


@dataclass(frozen=True)
class ProbeOutcome:
    """``probe`` is set whenever the header was readable (also for some rejections, e.g. too_short, truncated);
    the video is ok exactly when ``reject_reason`` is None."""

    probe: ProbeResult | None
    reject_reason: str | None
    detail: str | None

    @property
    def ok(self) -> bool:
        return self.reject_reason is None


# ------------------------------------------------------------------------------------------------ signatures


def _sniff_container(head: bytes) -> str | None:
    """A container family from the first bytes, or None when no known video signature is present."""
    if len(head) >= 12 and head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip", b"pnot"):
        return "isobmff"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "matroska"
    if head.startswith(b"RIFF") and head[8:12] == b"AVI ":
        return "avi"
    if head.startswith(b"FLV"):
        return "flv"
    if head.startswith(b"\x00\x00\x01\xba") or head.startswith(b"\x00\x00\x01\xb3"):
        return "mpeg-ps"
    if len(head) >= 189 and head[0] == 0x47 and head[188] == 0x47:
        return "mpeg-ts"
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"\x30\x26\xb2\x75\x8e\x66\xcf\x11"):
        return "asf"
    return None


def _isobmff_truncation(path: str, size: int) -> str | None:
    """Walk the top-level MP4/MOV boxes: why the file looks cut short, or None when the box structure is whole."""
    boxes: list[bytes] = []
    with open(path, "rb") as f:
        offset = 0
        while offset < size:
            f.seek(offset)
            header = f.read(16)
            if len(header) < 8:
                return f"a box header at byte {offset} is cut off by the end of the file ({size} bytes)"
            box_size, box_type = struct.unpack(">I4s", header[:8])
            if box_size == 1:
                if len(header) < 16:
                    return f"a box header at byte {offset} is cut off by the end of the file ({size} bytes)"
                box_size = struct.unpack(">Q", header[8:16])[0]
            elif box_size == 0:  # "extends to the end of the file"
                box_size = size - offset
            if box_size < 8:
                return None  # not a box structure we understand; let the decoder's verdict stand
            boxes.append(box_type)
            if offset + box_size > size:
                name = box_type.decode("latin-1")
                return f"the '{name}' box at byte {offset} declares {box_size} bytes but the file ends after {size - offset}"
            offset += box_size
    if b"moov" not in boxes and b"moof" not in boxes:
        return "no 'moov' box (the MP4 index is missing: the file was cut before it was written)"
    return None


def _container_name(fmt_name: str, path: str) -> str:
    """FFmpeg's demuxer names are lists ('mov,mp4,m4a,...', 'matroska,webm'): pick the one the file's extension
    names, else the first."""
    names = fmt_name.split(",")
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    return ext if ext in names else names[0]


# ------------------------------------------------------------------------------------------------ probing


def _reject(reason: str, detail: str, probe: ProbeResult | None = None) -> ProbeOutcome:
    log.info("probe reject %s: %s", reason, detail)
    return ProbeOutcome(probe=probe, reject_reason=reason, detail=detail)


def _short_error(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def probe_video(path: str, config: ProbeConfig | None = None) -> ProbeOutcome:
    """Probe ``path`` (a local file). Never raises for a bad file; see the module docstring."""
    config = config or ProbeConfig()
    size = os.path.getsize(path)
    if size == 0:
        return _reject(EMPTY_FILE, "the file has 0 bytes")
    with open(path, "rb") as f:
        head = f.read(512)
    family = _sniff_container(head)
    try:
        return _probe_av(path, size, family, config)
    except Exception as exc:  # anything PyAV/FFmpeg throws on a hostile file becomes a rejection
        return _classify_failure(path, size, family, f"probe failed: {_short_error(exc)}", None)


def _classify_failure(
    path: str, size: int, family: str | None, detail: str, probe: ProbeResult | None, packets_short: str | None = None
) -> ProbeOutcome:
    """truncated when the file shows signs of being cut short, else corrupt (or not_a_video without a signature)."""
    if packets_short:
        return _reject(TRUNCATED, f"{packets_short}; {detail}", probe)
    if family == "isobmff":
        cut = _isobmff_truncation(path, size)
        if cut:
            return _reject(TRUNCATED, f"{cut}; {detail}", probe)
    if family is None and probe is None:
        return _reject(NOT_A_VIDEO, f"no known video container signature; {detail}")
    return _reject(CORRUPT, detail, probe)


def _probe_av(path: str, size: int, family: str | None, config: ProbeConfig) -> ProbeOutcome:
    import av

    try:
        container = av.open(path, metadata_errors="ignore")
    except Exception as exc:
        return _classify_failure(path, size, family, f"FFmpeg cannot open the file: {_short_error(exc)}", None)
    with container:
        return _probe_container(container, path, size, family, config)


def _probe_container(container: Any, path: str, size: int, family: str | None, config: ProbeConfig) -> ProbeOutcome:
    """The outcome for an opened container: pick its video stream, check the header, scan the packets."""
    import av

    attached = int(av.stream.Disposition.attached_pic)
    videos = [s for s in container.streams.video if not (int(s.disposition) & attached)]
    if not videos:
        kinds = sorted({str(s.type) for s in container.streams}) or ["none"]
        return _reject(NO_VIDEO_STREAM, f"streams: {', '.join(kinds)}")
    stream = videos[0]
    ctx = stream.codec_context
    codec = ctx.name if ctx is not None else None
    if not codec:
        return _reject(UNSUPPORTED_CODEC, f"this FFmpeg build has no decoder for video stream #{stream.index}")
    header = _Header(
        container=_container_name(container.format.name, path),
        codec=codec,
        width=int(ctx.width or 0),
        height=int(ctx.height or 0),
        has_audio=len(container.streams.audio) > 0,
        rate=stream.average_rate,
    )
    if header.width <= 0 or header.height <= 0:
        probe = header.result(int(stream.frames or 0), 0.0, None)
        return _reject(ZERO_DIMENSIONS, f"{codec} stream declares {header.width}x{header.height}", probe)

    scan = _scan_stream(container, stream, config)
    span = scan.span_s()
    num_frames = scan.frames_decoded if scan.decoded_all else scan.packets
    probe = header.result(num_frames, span, scan.orientation)
    short = _short_of_declared(container, stream, scan, config)
    if scan.error is not None:
        return _classify_failure(path, size, family, scan.error, probe, short)
    return _scan_verdict(scan, span, probe, short, config)


@dataclass(frozen=True)
class _Header:
    """The video stream's header facts a ProbeResult is built from."""

    container: str
    codec: str
    width: int
    height: int
    has_audio: bool
    rate: Any  # the header's average frame rate (a Fraction), None or 0 when it declares none

    def result(self, num_frames: int, duration_s: float, orient: Any) -> ProbeResult:
        """A ProbeResult for ``num_frames`` over ``duration_s``, displayed as ``orient`` says (None: upright)."""
        dw, dh = orient.display_size(self.width, self.height) if orient is not None else (self.width, self.height)
        return ProbeResult(
            self.container,
            self.codec,
            self.width,
            self.height,
            _fps(self.rate, num_frames, duration_s),
            float(duration_s),
            int(num_frames),
            self.has_audio,
            rotation=orient.rotation if orient is not None else 0,
            display_width=dw,
            display_height=dh,
        )


def _fps(header_rate: Any, num_frames: int, duration_s: float) -> float:
    """The frame rate to record for ``num_frames`` over ``duration_s``."""
    # The header's average rate where the measured one agrees within 1% (exact nominal rates: 30000/1001
    # stays 29.97002997...), else frames / measured span (variable frame rate; headers often disagree).
    measured = num_frames / duration_s if duration_s > 0 and num_frames > 0 else 0.0
    if header_rate and (measured == 0.0 or abs(measured - float(header_rate)) <= 0.01 * float(header_rate)):
        return float(header_rate)
    return measured


def _short_of_declared(container: Any, stream: Any, scan: _Scan, config: ProbeConfig) -> str | None:
    """Why the stream counts as truncated against its declared duration, or None when it plays long enough."""
    # Truncated means the content ends early: the stream's time (up to the end of its last packet, empty
    # "repeat the previous frame" chunks and edit-list-dropped packets included) against the duration the
    # header declares. Not a count of coded frames against the index: an AVI index may declare 444 entries of
    # which 376 are empty repeats of the frame before, and plays to its end.
    declared = _declared_duration(container, stream, only_stream=len(container.streams) == 1)
    played = scan.content_s()
    if declared is not None and declared > 0 and played < declared * (1.0 - config.truncation_tolerance):
        return f"the stream ends at {played:.3f} s of the {declared:.3f} s its header declares"
    return None


def _scan_verdict(scan: _Scan, span: float, probe: ProbeResult, short: str | None, config: ProbeConfig) -> ProbeOutcome:
    """The outcome of a scan that found no decode error: truncated, empty, undecodable, too short, or accepted."""
    if short:
        return _reject(TRUNCATED, short, probe)
    if scan.packets == 0:
        return _reject(NO_FRAMES, "the video stream has no packets", probe)
    if scan.frames_decoded == 0:
        return _reject(CORRUPT, f"none of the {scan.packets} packets decoded to a frame", probe)
    if span < config.min_duration_s:
        return _reject(TOO_SHORT, f"{span:.3f} s < min_duration_s {config.min_duration_s} s", probe)
    return ProbeOutcome(probe=probe, reject_reason=None, detail=None)


def _declared_duration(container: Any, stream: Any, *, only_stream: bool = True) -> float | None:
    """The video stream's declared duration; the container's only when the video is its only stream (else the
    container's may be an audio track's)."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if only_stream and container.duration is not None:
        return container.duration / 1_000_000
    return None


@dataclass
class _Scan:
    packets: int = 0  # packets that make a shown frame
    discarded: int = 0  # packets an MP4 edit list drops (counted in the header's frame count, never shown)
    frames_decoded: int = 0
    corrupt_frames: int = 0  # frames the decoder flags corrupt (it concealed errors in them)
    first_corrupt: int | None = None
    decoded_all: bool = False
    starts: list = field(default_factory=list)  # presentation time of each packet (stream time_base units)
    ends: list = field(default_factory=list)  # its end (start + duration) when the container stores a duration
    time_base: Fraction = Fraction(1, 1)
    # Stream time the demuxed packets cover, every packet with a timestamp counted (empty repeat chunks and
    # edit-list-dropped packets too): the first start and the last end (start + duration, or start).
    first_ts: int | None = None
    last_end: int | None = None
    error: str | None = None
    orientation: Any = None  # Orientation of the first decoded frame (its display matrix), None before any frame

    def covered(self, packet: Any) -> None:
        ts = packet.pts if packet.pts is not None else packet.dts
        if ts is None:
            return  # the demuxer's end-of-stream flush packet
        end = int(ts) + int(packet.duration or 0)
        self.first_ts = int(ts) if self.first_ts is None else min(self.first_ts, int(ts))
        self.last_end = end if self.last_end is None else max(self.last_end, end)

    def content_s(self) -> float:
        """Seconds of stream time the packets cover (0 without timestamps): what a player plays to."""
        if self.first_ts is None or self.last_end is None:
            return 0.0
        covered = float((self.last_end - self.first_ts) * self.time_base)
        return max(covered, self.span_s())

    def span_s(self) -> float:
        """First frame start to last frame end. The last frame's duration, when the container stores none
        (Matroska), is taken from the gap before it (variable frame rates) rather than from a nominal rate."""
        if not self.starts:
            return 0.0
        starts = sorted(self.starts)
        end = max(self.ends) if self.ends else starts[-1]
        if end <= starts[-1]:
            gap = starts[-1] - starts[-2] if len(starts) > 1 else 0
            end = starts[-1] + gap
        return float((end - starts[0]) * self.time_base)


def _count(scan: _Scan, frames: list) -> None:
    for frame in frames:
        if scan.orientation is None:
            from videolake.platform.video.orientation import Orientation

            scan.orientation = Orientation.from_frame(frame)
        if frame.is_corrupt:  # decoded, but with errors the decoder papered over (broken macroblocks)
            scan.corrupt_frames += 1
            if scan.first_corrupt is None:
                scan.first_corrupt = scan.frames_decoded
        scan.frames_decoded += 1


def _scan_stream(container: Any, stream: Any, config: ProbeConfig) -> _Scan:
    """One pass over the video packets: count them, track the timestamp span, decode the preflight (or all) frames."""
    scan = _Scan(time_base=stream.time_base or Fraction(1, 1))
    decoding = True
    _skip_loop_filter(stream)
    try:
        for packet in container.demux(stream):
            scan.covered(packet)
            if packet.size == 0:  # an empty chunk (AVI: repeat the previous frame) or the end-of-stream flush
                continue
            if packet.is_discard:  # dropped by an edit list: never shown, never numbered
                _discarded(scan, packet, decoding)
                continue
            scan.packets += 1
            ts = packet.pts if packet.pts is not None else packet.dts
            if ts is not None:
                scan.starts.append(int(ts))
                if packet.duration:
                    scan.ends.append(int(ts) + int(packet.duration))
            if decoding:
                try:
                    _count(scan, packet.decode())
                except Exception as exc:
                    scan.error = f"frame {scan.frames_decoded} does not decode: {_short_error(exc)}"
                    decoding = False
                    continue
                if not config.full_decode and scan.frames_decoded >= config.preflight_frames:
                    decoding = False
    except Exception as exc:
        scan.error = f"demuxing stops after {scan.packets} packets: {_short_error(exc)}"
        return scan
    if decoding:
        _flush(scan, stream)
    _check_decoded(scan, config)
    return scan


def _skip_loop_filter(stream: Any) -> None:
    """Turn off the decoder's deblocking filter for the verification decode."""
    try:
        # The check needs the bitstream to parse, not pretty pixels: skipping the deblocking filter makes the
        # verification decode ~30% cheaper (measured on 720p h264) and still finds the same errors.
        stream.codec_context.options = {"skip_loop_filter": "all"}
    except Exception:  # an option a decoder does not take only costs speed
        pass


def _discarded(scan: _Scan, packet: Any, decoding: bool) -> None:
    """Count a packet an edit list drops, and decode it while decoding (later shown frames may refer to it)."""
    scan.discarded += 1
    if decoding:  # but decoded: the shown frames after it may refer to it (a cut at a non-keyframe)
        try:
            _count(scan, packet.decode())  # FFmpeg's decoder returns no frame for it
        except Exception:  # noqa: BLE001 - a broken dropped packet shows up in the frames that need it
            pass


def _flush(scan: _Scan, stream: Any) -> None:
    """Decode the frames the decoder still holds; the whole stream is decoded when that succeeds."""
    try:
        _count(scan, stream.codec_context.decode(None))  # flush delayed frames
        scan.decoded_all = True
    except Exception as exc:
        scan.error = f"flushing the decoder fails after {scan.frames_decoded} frames: {_short_error(exc)}"


def _check_decoded(scan: _Scan, config: ProbeConfig) -> None:
    """Set the scan's error when frames decoded with concealed errors or too few of the first frames decoded."""
    if scan.error is None and scan.first_corrupt is not None:
        scan.error = (
            f"{scan.corrupt_frames} of {scan.frames_decoded} decoded frames have errors the decoder concealed "
            f"(first: frame {scan.first_corrupt})"
        )
    if scan.error is None and scan.packets > 0 and scan.frames_decoded < min(config.preflight_frames, scan.packets):
        scan.error = (
            f"only {scan.frames_decoded} of the first {min(config.preflight_frames, scan.packets)} frames decode"
        )


# ------------------------------------------------------------------------------------------------ rows


def raw_video_row(
    video_id: str,
    source_uri: str,
    size_bytes: int,
    outcome: ProbeOutcome,
    duplicate_uris: list[str] | None = None,
) -> dict[str, Any]:
    """A raw_videos row from a probe outcome, without ``partition_date`` and ``ingested_at`` (the caller adds them).

    Header facts are filled whenever the probe read them, also for rejected videos (a too_short video keeps its
    size and codec); ``reject_reason`` holds the reason constant only (the explanation goes to ``reject_detail``), so
    rejections can be counted by reason.
    """
    p = outcome.probe
    return {
        "video_id": video_id,
        "source_uri": source_uri,
        "duplicate_uris": list(duplicate_uris or []),
        "size_bytes": int(size_bytes),
        "container": p.container if p else None,
        "codec": p.codec if p else None,
        "width": p.width if p else None,
        "height": p.height if p else None,
        "fps": p.fps if p else None,
        "duration_s": p.duration_s if p else None,
        "num_frames": p.num_frames if p else None,
        "has_audio": p.has_audio if p else None,
        "rotation": p.rotation if p else None,
        "display_width": p.display_width if p else None,
        "display_height": p.display_height if p else None,
        "status": "ok" if outcome.reject_reason is None else "rejected",
        "reject_reason": outcome.reject_reason,
        "reject_detail": outcome.detail if outcome.reject_reason else None,
        # A rejection the probe (or the listing) gives is the file's own: probing it again gives the same answer.
        # Errors that can heal (the store's outage) raise, and the unit runner classes them.
        "failure_class": "permanent" if outcome.reject_reason else None,
        # Set later by dedup.exact.reconcile_copies on a copy of bytes landed on an earlier day.
        "duplicate_of_date": None,
        "duplicate_of_uri": None,
    }


def unread_video_id(source_uri: str) -> str:
    """The id of a row for an object whose bytes were never read: ``err-`` + sha256 of its URI (unique per object,
    stable across runs, never equal to a content hash)."""
    import hashlib

    return "err-" + hashlib.sha256(source_uri.encode("utf-8", "surrogateescape")).hexdigest()


def rejected_row(source_uri: str, size_bytes: int, reason: str, detail: str) -> dict[str, Any]:
    """A rejected raw_videos row for an object that was not (or could not be) read: a listing problem
    (``not_a_regular_file``, ``permission_denied``, ``invalid_name``...), or ``vanished``."""
    return raw_video_row(
        unread_video_id(source_uri),
        source_uri,
        size_bytes,
        ProbeOutcome(probe=None, reject_reason=reason, detail=detail),
    )
