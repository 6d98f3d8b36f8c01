"""The reject rules of filtered_clips and how they join into ``reject_reason``: in a fixed order, so one clip's
reason reads the same whichever scorer, or the cross-day duplicate verdict, added a rule.

A module of its own because both the scoring (``quality``) and the near-duplicate verdicts across days
(``dedup.cross_day``) write ``reject_reason``, and neither should import the other.
"""

from __future__ import annotations

from collections.abc import Iterable

# Every reject rule, in the order in which they are joined into reject_reason.
REJECT_RULES: tuple[str, ...] = (
    "too_few_frames",  # fewer than 2 frames with statistics: nothing can be measured
    "too_short",  # duration_s < min_clip_s
    "too_long",  # duration_s > max_clip_s, or over the bound scene_clips cut it under (its row's max_clip_s)
    "undecodable",  # its frame range does not decode as the shard encoder reads it (reject_detail: the error)
    "low_resolution",  # width < min_width or height < min_height
    "black",  # black_ratio > max_black_ratio
    "too_dark",  # brightness < min_brightness
    "too_bright",  # brightness > max_brightness
    "frozen",  # frozen_ratio > max_frozen_ratio
    "low_motion",  # motion < min_motion
    "high_motion",  # motion > max_motion
    "blurry",  # sharpness < min_sharpness
    "text",  # text_area > max_text_area
    "text_overlay",  # text_overlay scorer (OCR, not run by default): text_overlay_area > its max_area
    "nsfw",  # nsfw scorer (open_nsfw, not run by default): nsfw_score > its max_score
    "faces",  # faces scorer with policy reject_any: a face in the clip
    "large_face",  # faces scorer with policy reject_large: face_area > its max_face_area
    "low_aesthetic",  # aesthetic scorer (a model directory): aesthetic_score < its min_score
    "duplicate",  # a near- or semantic duplicate of the group's kept clip, the earliest by (partition_date, clip_id)
)
_RULE_ORDER = {name: i for i, name in enumerate(REJECT_RULES)}


def join_rules(rules: Iterable[str]) -> str | None:
    """The ';'-joined reason of the rules that fired (empty and repeated ones dropped), built-in rules in the order
    of ``REJECT_RULES``, then any others (a plugin's) by name; None when no rule fired."""
    unique = sorted({r for r in rules if r}, key=lambda r: (_RULE_ORDER.get(r, len(_RULE_ORDER)), r))
    return ";".join(unique) or None
