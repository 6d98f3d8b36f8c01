"""The one grouping rule of duplicates: every member of a group matches the group's kept clip itself.

Why not connected components: matching is not transitive. A longer clip that spans two shots matches each shot's
own clip (A ~ B, B ~ C) although the shots differ (A !~ C); components put A and C in one group and dropped a
distinct shot (issue 41). Here clips are taken in order (earliest ``(partition_date, clip_id)`` first); a clip
joins the earliest kept clip it matches directly, and a clip that matches no kept clip is kept itself. So a group
is a kept clip and clips each of which shows what the kept clip shows; a clip that matches only a member of a
group is not in it. Deterministic, and the same verdicts whatever order the input is given in.

The pipeline (``dedup.cross_day.assign_day``, within a day and across days) and the evaluation
(``videolake.evaluation.near_copies``, which runs ``assign_day`` itself) both decide through ``assign``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def assign(
    order: Sequence[K],
    edges: Mapping[tuple[K, K], str],
    fixed: Mapping[K, K] | None = None,
) -> dict[K, tuple[K, str]]:
    """clip -> (its kept clip, the kind of the edge to it) for every clip of ``order`` that joins a group.

    ``order``: the clips to decide, earliest first. ``edges``: (a, b) -> kind (``near``, ``semantic``) for every
    pair that matches, either orientation. ``fixed``: clips decided before (earlier days), each with its kept clip
    (itself when it is a kept clip), given earliest first; they precede every clip of ``order``, and only those
    that are kept clips can be joined. A kept clip of ``order`` is absent from the result (it names itself only when another names it:
    the caller's concern)."""
    fixed = fixed or {}
    neighbours: dict[K, dict[K, str]] = {}
    for (a, b), kind in edges.items():
        if a == b:
            continue
        for x, y in ((a, b), (b, a)):
            have = neighbours.setdefault(x, {})
            have[y] = min(have.get(y, kind), kind)  # "near" before "semantic": a fingerprint match names it
    rank = {c: i for i, c in enumerate(order)}
    heads = [c for c, kept in fixed.items() if kept == c]
    head_rank = {c: -len(heads) + i for i, c in enumerate(heads)}  # earlier than every clip of ``order``
    out: dict[K, tuple[K, str]] = {}
    for c in order:
        options = [
            (head_rank[k] if k in head_rank else rank[k], k, kind)
            for k, kind in neighbours.get(c, {}).items()
            if (k in head_rank) or (k in rank and rank[k] < rank[c] and k not in out)
        ]
        if options:
            _, kept, kind = min(options, key=lambda o: o[0])
            out[c] = (kept, kind)
    return out
