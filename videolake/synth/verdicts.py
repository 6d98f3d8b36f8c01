"""The verdicts a synthetic file's truth expects (its ``expect`` field), shared with the probe and the pipeline's
tests, and the special files that exercise each rejection or filter.
"""

from __future__ import annotations

EXPECT_OK = "ok"
REJECT_TOO_SHORT = "reject:too_short"
REJECT_TRUNCATED = "reject:truncated"
REJECT_CORRUPT = "reject:corrupt"
REJECT_EMPTY_FILE = "reject:empty_file"
REJECT_NOT_A_VIDEO = "reject:not_a_video"
REJECT_NO_VIDEO_STREAM = "reject:no_video_stream"
FILTER_BLACK = "filter:black"
FILTER_FROZEN = "filter:frozen"

# Special files and the verdict the pipeline must reach on each.
SPECIAL_EXPECT: dict[str, str] = {
    "black": FILTER_BLACK,  # an all-black (but valid) video: filtered by the quality stage
    "frozen": FILTER_FROZEN,  # one frame shown for the whole video: filtered by the quality stage
    "short": REJECT_TOO_SHORT,  # 0.3 s, shorter than the minimum clip
    "truncated": REJECT_TRUNCATED,  # a faststart mp4 cut in half bytes-wise: header intact, data missing
    "zero_bytes": REJECT_EMPTY_FILE,  # an empty .mp4
    "not_video": REJECT_NOT_A_VIDEO,  # a text file named .mp4
    "audio_only": REJECT_NO_VIDEO_STREAM,  # an .mp4 that holds only an audio stream
}
SPECIAL_KINDS: tuple[str, ...] = tuple(SPECIAL_EXPECT)
