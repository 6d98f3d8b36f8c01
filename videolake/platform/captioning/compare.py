"""Two caption tracks side by side: per clip both captions, per track length and vocabulary statistics, QA flags on
every caption, and (optionally) a blind pairwise verdict of a judge model; the result is the ``caption_comparisons``
table and a markdown report.

Why: a team that changes its captioner (a model, a prompt, a second pass) needs to see what changed before it ships
the new track: whether captions got longer or shorter, richer or more repetitive, whether the model started refusing
or looping, whether neighbouring clips now get the same text, and, with a judge, which track a model prefers.

What is compared: the clip_captions rows of the two tracks (``caption_track``) in a range of days, read through the
lake. A clip present in either track gets one row; a caption counts only when its row is ``ok``: a ``failed`` row
is counted in the track's statistics (``failed``) and shown as such, never measured, flagged or judged. A clip that
a track lacks is ``missing`` there.

Words: lower-cased runs of letters, digits and apostrophes (``_WORD``): "A dog's ball, red!" -> a, dog's, ball, red.

Statistics per track (over its ok captions): count, mean / median / p95 length in words (p95: the nearest-rank
95th percentile, the smallest length that at least 95 % of the captions do not exceed), vocabulary (distinct
words), type-token ratio (vocabulary / words), distinct-2 (distinct word bigrams / bigrams, bigrams taken inside
each caption).

QA flags per ok caption (``FLAGS``, thresholds in ``CompareConfig``):
- ``length_outlier``: its length in words is more than ``length_k`` MADs from its track's median length (MAD: the
  median absolute deviation, at least ``min_mad_words``); only for a track with at least ``length_min_captions``
  ok captions;
- ``repeated_ngram``: one word ``ngram``-gram occurs at least ``ngram_repeats`` times in it (a looping generation);
- ``refusal``: it matches one of ``refusal_patterns`` (by default the caption gates' list, ``DEFAULT_REFUSAL_PATTERNS``:
  "I'm sorry", "I'm unable to", "I cannot", "I can't", "I apologise", "as an AI", "as a language model", "I'm an AI");
- ``near_duplicate_neighbour``: its word set has a Jaccard similarity of at least ``neighbour_jaccard`` with the
  caption of an adjacent clip of the same video in the same track (clips ordered by clip_id, i.e. by start frame);
- ``duplicate_in_day``: another clip of the same day in the same track has the same words in the same order (a
  hash per caption, so a day of any size costs one pass).

The judge (``platform/captioning/judge.py``) sees both ok captions of a clip in an order drawn per clip from a seed,
recorded in ``judge_order``, and its answer is mapped back to the tracks: ``A``, ``B``, ``tie`` or ``invalid``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from videolake.platform.gates.config import DEFAULT_REFUSAL_PATTERNS
from videolake.platform.lake.schemas import CAPTION_COMPARISONS, PARTITION_COLUMN
from videolake.platform.lake.table import Lake, PartitionRange
from videolake.platform.params import param

log = logging.getLogger(__name__)

TABLE = "caption_comparisons"
STATUS_OK, STATUS_FAILED, STATUS_MISSING = "ok", "failed", "missing"
FLAGS = ("length_outlier", "repeated_ngram", "refusal", "near_duplicate_neighbour", "duplicate_in_day")
VERDICTS = ("A", "B", "tie", "invalid")

_WORD = re.compile(r"[\w'’]+")


@dataclass(frozen=True)
class CompareConfig:
    """Thresholds of the QA flags (module docstring). Text values are parsed by ``params.parse_params``."""

    length_k: float = param(3.0, "a caption is a length outlier beyond this many MADs from its track's median", min=0)
    min_mad_words: float = param(
        1.0, "the MAD used is at least this many words (a track of equal lengths still has a scale)", min=0
    )
    length_min_captions: int = param(5, "length outliers only in a track with at least this many ok captions", min=1)
    ngram: int = param(3, "n of the word n-grams checked for repetition", min=1, max=8)
    ngram_repeats: int = param(3, "an n-gram that occurs at least this many times in one caption flags it", min=2)
    neighbour_jaccard: float = param(
        0.9, "word-set Jaccard similarity with an adjacent clip's caption that flags both", min=0, max=1
    )
    examples: int = param(3, "example captions per flag in the report", min=0, max=50)
    refusal_patterns: tuple[str, ...] = param(
        DEFAULT_REFUSAL_PATTERNS, "regexes (any case) of refusal and assistant boilerplate; default: the gates' list"
    )


def words(text: str | None) -> list[str]:
    """The caption's words, lower-cased (module docstring)."""
    return [w.replace("’", "'") for w in _WORD.findall((text or "").lower())]


def p95(values: Sequence[int]) -> int:
    """Nearest-rank 95th percentile: the ceil(0.95 n)-th smallest value (0 for no values)."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass(frozen=True)
class TrackStats:
    track: str
    rows: int  # clip_captions rows of the track in the range
    ok: int  # of which ok: the captions measured
    failed: int  # of which failed: counted, never measured
    mean_words: float
    median_words: float
    p95_words: int
    vocabulary: int  # distinct words over the ok captions
    type_token_ratio: float  # vocabulary / words
    distinct_2: float  # distinct bigrams / bigrams
    flags: dict[str, int]  # ok captions per flag

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def track_stats(track: str, statuses: Sequence[str], captions: Sequence[str], flags: Iterable[list[str]]) -> TrackStats:
    """Statistics of one track: ``statuses`` of all its rows, ``captions`` its ok captions, ``flags`` theirs."""
    tokenized = [words(c) for c in captions]
    lengths = [len(t) for t in tokenized]
    total = sum(lengths)
    vocab = {w for t in tokenized for w in t}
    bigrams = [tuple(t[i : i + 2]) for t in tokenized for i in range(len(t) - 1)]
    counts = Counter(f for fl in flags for f in fl)
    return TrackStats(
        track=track,
        rows=len(statuses),
        ok=sum(s == STATUS_OK for s in statuses),
        failed=sum(s == STATUS_FAILED for s in statuses),
        mean_words=statistics.fmean(lengths) if lengths else 0.0,
        median_words=float(statistics.median(lengths)) if lengths else 0.0,
        p95_words=p95(lengths),
        vocabulary=len(vocab),
        type_token_ratio=len(vocab) / total if total else 0.0,
        distinct_2=len(set(bigrams)) / len(bigrams) if bigrams else 0.0,
        flags={f: counts.get(f, 0) for f in FLAGS},
    )


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def repeated_ngram(tokens: Sequence[str], n: int, repeats: int) -> bool:
    grams = Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return any(c >= repeats for c in grams.values())


@dataclass(frozen=True)
class Caption:
    """One ok caption of a track (the unit the flags are computed on)."""

    clip_id: str
    video_id: str
    day: dt.date
    text: str


def caption_flags(captions: Sequence[Caption], config: CompareConfig) -> dict[str, list[str]]:
    """clip_id -> the flags (in ``FLAGS`` order) of each ok caption of ONE track."""
    tokens = {c.clip_id: words(c.text) for c in captions}
    found: dict[str, set[str]] = {c.clip_id: set() for c in captions}
    checks: tuple[tuple[str, Iterable[str]], ...] = (
        ("length_outlier", _length_outliers(tokens, config)),
        ("repeated_ngram", _looping(captions, tokens, config)),
        ("refusal", _refusals(captions, config)),
        ("near_duplicate_neighbour", _near_duplicate_neighbours(captions, tokens, config)),
        ("duplicate_in_day", _duplicates_in_day(captions, tokens)),
    )
    for flag, clip_ids in checks:
        for cid in clip_ids:
            found[cid].add(flag)
    return {cid: [f for f in FLAGS if f in fl] for cid, fl in found.items()}


def _length_outliers(tokens: dict[str, list[str]], config: CompareConfig) -> list[str]:
    """Clips whose length is more than ``length_k`` MADs from the track's median (none in a track too small)."""
    lengths = [len(t) for t in tokens.values()]
    if len(lengths) < config.length_min_captions:
        return []
    med = statistics.median(lengths)
    mad = max(statistics.median(abs(n - med) for n in lengths), config.min_mad_words)
    return [cid for cid, t in tokens.items() if abs(len(t) - med) > config.length_k * mad]


def _looping(captions: Sequence[Caption], tokens: dict[str, list[str]], config: CompareConfig) -> list[str]:
    """Clips whose caption repeats one word n-gram ``ngram_repeats`` times (a looping generation)."""
    return [c.clip_id for c in captions if repeated_ngram(tokens[c.clip_id], config.ngram, config.ngram_repeats)]


def _refusals(captions: Sequence[Caption], config: CompareConfig) -> list[str]:
    """Clips whose caption matches one of ``refusal_patterns`` (any case)."""
    refusals = [re.compile(p, re.IGNORECASE) for p in config.refusal_patterns]
    return [c.clip_id for c in captions if any(r.search(c.text) for r in refusals)]


def _near_duplicate_neighbours(
    captions: Sequence[Caption], tokens: dict[str, list[str]], config: CompareConfig
) -> list[str]:
    """Both clips of each adjacent pair (same day and video) whose word sets reach ``neighbour_jaccard``."""
    by_video: dict[tuple[dt.date, str], list[Caption]] = {}
    for c in captions:
        by_video.setdefault((c.day, c.video_id), []).append(c)
    flagged: list[str] = []
    for clips in by_video.values():
        clips.sort(key=lambda c: c.clip_id)  # clip ids carry the zero-padded start frame: the video's order
        for prev, cur in zip(clips, clips[1:]):
            if jaccard(tokens[prev.clip_id], tokens[cur.clip_id]) >= config.neighbour_jaccard:
                flagged += [prev.clip_id, cur.clip_id]
    return flagged


def _duplicates_in_day(captions: Sequence[Caption], tokens: dict[str, list[str]]) -> list[str]:
    """Clips of a day that share their exact word sequence with another clip of that day (one hash per caption)."""
    same: dict[tuple[dt.date, str], list[str]] = {}
    for c in captions:
        digest = hashlib.blake2b(" ".join(tokens[c.clip_id]).encode(), digest_size=16).hexdigest()
        same.setdefault((c.day, digest), []).append(c.clip_id)
    return [cid for ids in same.values() if len(ids) > 1 for cid in ids]


# -- reading the tracks ------------------------------------------------------------------------------------------------

READ_COLUMNS = ["clip_id", "video_id", "status", "caption", "caption_track", PARTITION_COLUMN]


def track_filter(track: str) -> Any:
    """The clip_captions rows of ``track`` ("default": the track of the captioner resource's own settings)."""
    import pyarrow.compute as pc

    return pc.field("caption_track") == track


def read_track(lake: Lake, track: str, partitions: PartitionRange) -> list[dict[str, Any]]:
    """The track's clip_captions rows in ``partitions``, read through the lake with a filtered scan."""
    rows = lake.read_partitions("clip_captions", partitions, columns=READ_COLUMNS, where=track_filter(track))
    return rows.to_pylist()


# -- the comparison ----------------------------------------------------------------------------------------------------

# A judge: (clip_id, caption_a, caption_b) triples -> one verdict per triple: {verdict, order, answer} (judge.py).
Judge = Callable[[list[tuple[str, str, str]]], list[dict[str, str | None]]]


@dataclass
class Comparison:
    track_a: str
    track_b: str
    partitions: PartitionRange
    table: pa.Table  # caption_comparisons rows, one per clip present in either track
    stats: dict[str, TrackStats]  # by track
    config: CompareConfig
    judge_model: str | None = None

    @property
    def clips(self) -> int:
        return self.table.num_rows

    def coverage(self) -> dict[str, int]:
        """Clips by (status_a, status_b) class: both ok, only one ok, failed or missing somewhere."""
        a = self.table.column("status_a").to_pylist()
        b = self.table.column("status_b").to_pylist()
        return {
            "clips": len(a),
            "both_ok": sum(x == STATUS_OK and y == STATUS_OK for x, y in zip(a, b)),
            "missing_in_a": sum(x == STATUS_MISSING for x in a),
            "missing_in_b": sum(y == STATUS_MISSING for y in b),
            "failed_in_a": sum(x == STATUS_FAILED for x in a),
            "failed_in_b": sum(y == STATUS_FAILED for y in b),
        }

    def judge_tally(self) -> dict[str, int]:
        """Verdicts by value (``VERDICTS``), empty when no judge ran."""
        got = [v for v in self.table.column("judge_verdict").to_pylist() if v is not None]
        if self.judge_model is None:
            return {}
        counts = Counter(got)
        return {v: counts.get(v, 0) for v in VERDICTS}

    def summary(self) -> dict[str, Any]:
        return {
            "track_a": self.track_a,
            "track_b": self.track_b,
            "start": self.partitions.start.isoformat(),
            "end": (self.partitions.end - dt.timedelta(days=1)).isoformat(),
            **self.coverage(),
            "stats": {t: s.as_dict() for t, s in self.stats.items()},
            "judge_model": self.judge_model,
            "judge": self.judge_tally(),
        }


def compare_rows(
    track_a: str,
    track_b: str,
    rows_a: list[dict[str, Any]],
    rows_b: list[dict[str, Any]],
    partitions: PartitionRange,
    config: CompareConfig | None = None,
    judge: Judge | None = None,
    judge_model: str | None = None,
) -> Comparison:
    """The comparison of two tracks' clip_captions rows (dicts with clip_id, video_id, status, caption,
    partition_date). ``judge``: judges every clip whose two captions are ok (judge.py's ``make_judge``)."""
    if track_a == track_b:
        raise ValueError(f"compare two different tracks, not {track_a!r} with itself")
    config = config or CompareConfig()
    by_track = {track_a: {r["clip_id"]: r for r in rows_a}, track_b: {r["clip_id"]: r for r in rows_b}}
    flags: dict[str, dict[str, list[str]]] = {}
    stats: dict[str, TrackStats] = {}
    for track, rows in by_track.items():
        flags[track], stats[track] = _flag_track(track, rows, config)
    ids = sorted(set(by_track[track_a]) | set(by_track[track_b]))
    out = [_clip_row(cid, track_a, track_b, by_track, flags) for cid in ids]
    if judge is not None:
        _judge_rows(out, judge, judge_model)
    table = pa.Table.from_pylist(out, schema=CAPTION_COMPARISONS) if out else CAPTION_COMPARISONS.empty_table()
    return Comparison(track_a, track_b, partitions, table, stats, config, judge_model if judge else None)


def _flag_track(
    track: str, rows: dict[str, dict[str, Any]], config: CompareConfig
) -> tuple[dict[str, list[str]], TrackStats]:
    """One track's flags (by clip_id, ok captions only) and its statistics (over all its rows)."""
    ok = [
        Caption(r["clip_id"], r["video_id"], r[PARTITION_COLUMN], r["caption"])
        for r in rows.values()
        if r["status"] == STATUS_OK and r["caption"] is not None
    ]
    flags = caption_flags(ok, config)
    stats = track_stats(track, [r["status"] for r in rows.values()], [c.text for c in ok], flags.values())
    return flags, stats


def _clip_row(
    cid: str,
    track_a: str,
    track_b: str,
    by_track: dict[str, dict[str, dict[str, Any]]],
    flags: dict[str, dict[str, list[str]]],
) -> dict[str, Any]:
    """The caption_comparisons row of one clip (without the judge's columns)."""
    ra, rb = by_track[track_a].get(cid), by_track[track_b].get(cid)
    any_row = ra or rb
    assert any_row is not None
    row: dict[str, Any] = {
        "clip_id": cid,
        "video_id": any_row["video_id"],
        "track_a": track_a,
        "track_b": track_b,
        PARTITION_COLUMN: any_row[PARTITION_COLUMN],
    }
    for side, track, r in (("a", track_a, ra), ("b", track_b, rb)):
        row.update(_side_columns(side, cid, r, flags[track]))
    return row


def _side_columns(side: str, cid: str, r: dict[str, Any] | None, flags: dict[str, list[str]]) -> dict[str, Any]:
    """status_, caption_, words_ and flags_ of one side: a clip is ok in a track exactly when it was flagged there
    (``flags`` holds every ok caption), failed when it has a row otherwise, missing without one."""
    status = STATUS_MISSING if r is None else (STATUS_OK if cid in flags else STATUS_FAILED)
    caption = r["caption"] if status == STATUS_OK and r is not None else None
    return {
        f"status_{side}": status,
        f"caption_{side}": caption,
        f"words_{side}": len(words(caption)) if caption is not None else None,
        f"flags_{side}": flags.get(cid, []),
    }


def _judge_rows(out: list[dict[str, Any]], judge: Judge, judge_model: str | None) -> None:
    """Fill the judge's columns of every row whose two captions are ok, in place."""
    todo = [r for r in out if r["status_a"] == STATUS_OK and r["status_b"] == STATUS_OK]
    verdicts = judge([(r["clip_id"], r["caption_a"], r["caption_b"]) for r in todo])
    if len(verdicts) != len(todo):
        raise RuntimeError(f"the judge returned {len(verdicts)} verdicts for {len(todo)} clips")
    for r, v in zip(todo, verdicts):
        r["judge_verdict"], r["judge_order"], r["judge_answer"] = v["verdict"], v["order"], v["answer"]
        r["judge_model"] = judge_model


def compare_tracks(
    lake: Lake,
    track_a: str,
    track_b: str,
    partitions: PartitionRange,
    config: CompareConfig | None = None,
    judge: Judge | None = None,
    judge_model: str | None = None,
) -> Comparison:
    """Read both tracks of ``partitions`` from the lake's clip_captions and compare them (``compare_rows``)."""
    rows_a = read_track(lake, track_a, partitions)
    rows_b = read_track(lake, track_b, partitions)
    log.info("comparing %s (%d rows) with %s (%d rows) over %s", track_a, len(rows_a), track_b, len(rows_b), partitions)
    return compare_rows(track_a, track_b, rows_a, rows_b, partitions, config, judge, judge_model)


def write_comparison(lake: Lake, comparison: Comparison) -> int | None:
    """Replace the pair's rows of the comparison's days in ``caption_comparisons`` (other pairs' rows of those days
    are kept); returns the table's new version. A partition overwrite, so two comparisons of the SAME days written
    at the same moment can lose one another's rows: run one comparison of a day at a time (the Dagster job's runs
    share a concurrency key)."""
    import pyarrow.compute as pc

    pair = (pc.field("track_a") == comparison.track_a) & (pc.field("track_b") == comparison.track_b)
    others = lake.read_partitions(TABLE, comparison.partitions, where=~pair)
    data = pa.concat_tables([others, comparison.table]).sort_by(
        [(PARTITION_COLUMN, "ascending"), ("track_a", "ascending"), ("track_b", "ascending"), ("clip_id", "ascending")]
    )
    return lake.write_partitions(TABLE, data, comparison.partitions).version


def run_comparison(
    lake: Lake,
    track_a: str,
    track_b: str,
    partitions: PartitionRange,
    config: CompareConfig | None = None,
    *,
    judge: Any = None,
    write: bool = True,
) -> tuple[Comparison, int | None]:
    """Compare the two tracks (with the judge of ``judge``, a ``judge.JudgeConfig``, loaded for the run and torn
    down after it) and write the pair's rows (unless ``write`` is False): (comparison, table version or None). The
    CLI and the Dagster job both run this."""
    if judge is None:
        comparison = compare_tracks(lake, track_a, track_b, partitions, config)
    else:
        from videolake.platform.captioning.judge import open_judge

        with open_judge(judge) as judge_fn:
            comparison = compare_tracks(lake, track_a, track_b, partitions, config, judge_fn, judge.model)
    return comparison, write_comparison(lake, comparison) if write else None


def read_comparison(lake: Lake, track_a: str, track_b: str, partitions: PartitionRange) -> pa.Table:
    """The stored rows of one pair over ``partitions``."""
    import pyarrow.compute as pc

    pair = (pc.field("track_a") == track_a) & (pc.field("track_b") == track_b)
    return lake.read_partitions(TABLE, partitions, where=pair).sort_by("clip_id")


# -- the report --------------------------------------------------------------------------------------------------------


def _cell(text: str | None, limit: int = 160) -> str:
    if text is None:
        return "—"
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_report(comparison: Comparison) -> str:
    """The comparison as markdown: coverage, the statistics table, flag counts, examples, and the judge's tally."""
    rows = comparison.table.to_pylist()
    return "\n".join(
        [
            *_report_head(comparison),
            *_flagged_examples(comparison, rows),
            *_side_by_side(comparison, rows),
            *_judge_section(comparison, rows),
        ]
    )


def _report_head(c: Comparison) -> list[str]:
    """The report's title, coverage line, statistics table and flag counts."""
    a, b = c.track_a, c.track_b
    sa, sb = c.stats[a], c.stats[b]
    last = c.partitions.end - dt.timedelta(days=1)
    cov = c.coverage()
    return [
        f"# Caption comparison: `{a}` (A) vs `{b}` (B)",
        "",
        f"Days {c.partitions.start.isoformat()} to {last.isoformat()}: {cov['clips']} clips, {cov['both_ok']} with "
        f"an ok caption in both tracks; missing in A: {cov['missing_in_a']}, in B: {cov['missing_in_b']}; "
        f"failed in A: {cov['failed_in_a']}, in B: {cov['failed_in_b']} (failed rows are counted, not compared).",
        "",
        "## Statistics (ok captions; lengths in words)",
        "",
        f"| statistic | A: `{a}` | B: `{b}` |",
        "|---|---:|---:|",
        f"| rows | {sa.rows} | {sb.rows} |",
        f"| ok captions | {sa.ok} | {sb.ok} |",
        f"| failed rows | {sa.failed} | {sb.failed} |",
        f"| mean length | {sa.mean_words:.2f} | {sb.mean_words:.2f} |",
        f"| median length | {sa.median_words:g} | {sb.median_words:g} |",
        f"| p95 length | {sa.p95_words} | {sb.p95_words} |",
        f"| vocabulary | {sa.vocabulary} | {sb.vocabulary} |",
        f"| type-token ratio | {sa.type_token_ratio:.3f} | {sb.type_token_ratio:.3f} |",
        f"| distinct-2 | {sa.distinct_2:.3f} | {sb.distinct_2:.3f} |",
        "",
        "## QA flags (ok captions flagged)",
        "",
        "| flag | A | B |",
        "|---|---:|---:|",
        *[f"| {f} | {sa.flags[f]} | {sb.flags[f]} |" for f in FLAGS],
        "",
    ]


def _flagged_examples(c: Comparison, rows: list[dict[str, Any]]) -> list[str]:
    """Up to ``examples`` flagged captions per flag (A's first); nothing when no caption is flagged."""
    sa, sb = c.stats[c.track_a], c.stats[c.track_b]
    if not (c.config.examples and any(sa.flags[f] or sb.flags[f] for f in FLAGS)):
        return []
    lines = ["## Flagged examples", ""]
    for f in FLAGS:
        shown = [
            (side.upper(), r["clip_id"], r[f"caption_{side}"])
            for side in ("a", "b")
            for r in rows
            if f in r[f"flags_{side}"]
        ][: c.config.examples]
        if shown:
            lines += [f"**{f}**", ""]
            lines += [f"- {s} `{cid}`: {_cell(text)}" for s, cid, text in shown]
            lines.append("")
    return lines


def _side_by_side(c: Comparison, rows: list[dict[str, Any]]) -> list[str]:
    """The first ``examples`` clips with an ok caption in both tracks, as a table."""
    both_ok = [r for r in rows if r["status_a"] == STATUS_OK and r["status_b"] == STATUS_OK]
    if not (both_ok and c.config.examples):
        return []
    return [
        "## Side by side",
        "",
        "| clip | A | B |",
        "|---|---|---|",
        *[
            f"| `{r['clip_id']}` | {_cell(r['caption_a'])} | {_cell(r['caption_b'])} |"
            for r in both_ok[: c.config.examples]
        ],
        "",
    ]


def _judge_section(c: Comparison, rows: list[dict[str, Any]]) -> list[str]:
    """The judge's tally with shares, and how often it chose the caption shown first (its position bias)."""
    tally = c.judge_tally()
    if not tally:
        return ["## Judge", "", "No judge model was configured.", ""]
    judged = sum(tally.values())
    decided = [(r["judge_verdict"], r["judge_order"]) for r in rows if r["judge_verdict"] in ("A", "B")]
    first = sum(v == o[0] for v, o in decided)
    return [
        "## Judge",
        "",
        f"Judge `{c.judge_model}`: {judged} clips judged blind (the order of the two captions drawn per clip, "
        "recorded in judge_order).",
        "",
        "| verdict | clips | share |",
        "|---|---:|---:|",
        *[f"| {v} | {n} | {n / judged:.1%} |" if judged else f"| {v} | {n} | — |" for v, n in tally.items()],
        "",
        f"The judge chose the caption shown first in {first} of {len(decided)} decided clips (a position bias "
        "shows as a share far from half).",
        "",
    ]


def day_range(start: str, end: str) -> PartitionRange:
    """The partitions of the days ``start`` to ``end`` (YYYY-MM-DD, both included)."""
    first, last = dt.date.fromisoformat(start), dt.date.fromisoformat(end)
    if last < first:
        raise ValueError(f"end {end} is before start {start}")
    return PartitionRange(first, last + dt.timedelta(days=1))
