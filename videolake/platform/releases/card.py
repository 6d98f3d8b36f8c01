"""The dataset card of a release: ``releases/<NAME>/README.md`` and its PNGs beside it.

What a card holds (docs/releases.md): the totals; samples and hours per bucket and per day; the caption-length
distribution; the captioning models and prompt versions; what the pipeline rejected upstream on the released days,
by reason; duration, resolution and aspect-ratio plots; a contact sheet of sample frames read back from the shards;
the days left out and why; the source table versions; the shard list's total.

The figures are computed from the rows the release took (``ok``: the ok training_shards rows of the released days
and buckets) and, for the rejections, from every row of the released days (a bucket filter does not apply to
upstream rows, which have no bucket).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from videolake.platform.lake.schemas import PARTITION_COLUMN
from videolake.platform.objectstore.base import ObjectStore
from videolake.platform.releases.manifest import CARD, ReleaseError, release_key

log = logging.getLogger(__name__)

CONTACT_SAMPLES = 12
SHARDS_LISTED = 50  # shards named in the card; the manifest lists all
IMAGES = {
    "duration": "duration.png",
    "resolution": "resolution.png",
    "aspect": "aspect.png",
    "caption_length": "caption_length.png",
    "contact_sheet": "contact_sheet.png",
}


def nearest_rank(sorted_values: Sequence[float], q: float) -> float | None:
    """The q-quantile by nearest rank (a value of the data: the smallest with at least q of the values <= it)."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def length_stats(values: Sequence[int | None]) -> dict[str, float | None]:
    """min, p50, p90, max (nearest rank) and count of the caption lengths."""
    vals = sorted(int(v) for v in values if v is not None)
    return {
        "count": len(vals),
        "min": vals[0] if vals else None,
        "p50": nearest_rank(vals, 0.5),
        "p90": nearest_rank(vals, 0.9),
        "max": vals[-1] if vals else None,
    }


def per_group(ok: pa.Table, column: str) -> dict[str, dict[str, Any]]:
    """{value of ``column``: {samples, hours, shards}} over the ok rows, sorted by value."""
    out: dict[str, dict[str, Any]] = {}
    for key, duration, shard in zip(
        ok.column(column).to_pylist(), ok.column("duration_s").to_pylist(), ok.column("shard_uri").to_pylist()
    ):
        g = out.setdefault(str(key), {"samples": 0, "seconds": 0.0, "shards": set()})
        g["samples"] += 1
        g["seconds"] += float(duration or 0.0)
        g["shards"].add(shard)
    return {
        k: {"samples": v["samples"], "hours": round(v["seconds"] / 3600, 6), "shards": len(v["shards"])}
        for k, v in sorted(out.items())
    }


def caption_models(ok: pa.Table, captions: pa.Table) -> list[dict[str, Any]]:
    """[{model, model_revision, prompt_version, samples}] of the released samples' captions, most samples first."""
    joined = ok.select(["clip_id"]).join(
        captions.filter(pc.equal(captions.column("status"), "ok")).select(
            ["clip_id", "model", "model_revision", "prompt_version"]
        ),
        "clip_id",
        join_type="left outer",
    )
    counts = Counter(zip(*(joined.column(c).to_pylist() for c in ("model", "model_revision", "prompt_version"))))
    return [
        {"model": m, "model_revision": r, "prompt_version": p, "samples": n}
        for (m, r, p), n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    ]


def rejections(data: dict[str, pa.Table]) -> dict[str, dict[str, int]]:
    """What the pipeline rejected on the released days, by reason, per stage (most frequent first)."""

    def count(reasons) -> dict[str, int]:
        return dict(sorted(Counter(reasons).items(), key=lambda kv: (-kv[1], kv[0])))

    raw, filt = data["raw_videos"], data["filtered_clips"]
    caps, shards = data["clip_captions"], data["training_shards"]
    return {
        "raw_videos": count(
            _reason(r)
            for s, r in zip(raw.column("status").to_pylist(), raw.column("reject_reason").to_pylist())
            if s != "ok"
        ),
        "filtered_clips": count(
            p
            for ok, r in zip(filt.column("passed").to_pylist(), filt.column("reject_reason").to_pylist())
            if not ok
            for p in (r or "unknown").split(";")
            if p
        ),
        "clip_captions": count(
            _reason(e) for s, e in zip(caps.column("status").to_pylist(), caps.column("error").to_pylist()) if s != "ok"
        ),
        "training_shards": count(
            _reason(e)
            for s, e in zip(shards.column("status").to_pylist(), shards.column("error").to_pylist())
            if s != "ok"
        ),
    }


def _reason(text: str | None) -> str:
    """A reason's name: the text before its first ':' (details after it vary per row), first line, <= 80 chars."""
    first = (text or "unknown").strip().splitlines()[0] if (text or "").strip() else "unknown"
    return first.split(":", 1)[0].strip()[:80] or "unknown"


def funnel(data: dict[str, pa.Table], ok: pa.Table) -> list[tuple[str, int]]:
    """The released days' counts from videos to samples."""
    raw, filt, caps = data["raw_videos"], data["filtered_clips"], data["clip_captions"]
    return [
        ("videos", raw.num_rows),
        ("videos probed ok", sum(1 for s in raw.column("status").to_pylist() if s == "ok")),
        ("scene clips", data["scene_clips"].num_rows),
        ("clips passed filtering", sum(1 for p in filt.column("passed").to_pylist() if p)),
        ("clips captioned", sum(1 for s in caps.column("status").to_pylist() if s == "ok")),
        ("samples in shards", sum(1 for s in data["training_shards"].column("status").to_pylist() if s == "ok")),
        ("samples released (bucket filter applied)", ok.num_rows),
    ]


def contact_tiles(store: ObjectStore, ok: pa.Table, n: int = CONTACT_SAMPLES) -> list[tuple[str, Any]]:
    """(clip id, middle frame) of up to ``n`` samples spread evenly over the release (by clip id), read back from
    their shards (one ranged read of the sample's members each). A sample that cannot be read is a ReleaseError:
    the release would name a broken shard."""
    from videolake.platform.releases.plots import middle_frame
    from videolake.platform.releases.shardio import read_range
    from videolake.platform.shards.tarfile_det import END_OF_ARCHIVE, read_samples

    rows = sorted(
        ok.select(["clip_id", "shard_uri", "sample_offset", "sample_bytes", "num_frames"]).to_pylist(),
        key=lambda r: r["clip_id"],
    )
    if not rows:
        return []
    k = min(n, len(rows))
    picks = sorted({round(i * (len(rows) - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0]
    tiles = []
    for row in (rows[i] for i in picks):
        try:
            if row["sample_offset"] is not None and row["sample_bytes"]:
                data = read_range(store, row["shard_uri"], row["sample_offset"], row["sample_bytes"])
                samples = read_samples(data + END_OF_ARCHIVE)
            else:
                samples = read_samples(store.get_bytes(store.key_from_uri(row["shard_uri"])))
            files = dict(samples).get(row["clip_id"])
            if files is None or "mp4" not in files:
                raise ReleaseError(f"sample {row['clip_id']} is not in {row['shard_uri']} at its offset")
            tiles.append((row["clip_id"], middle_frame(files["mp4"], row["num_frames"])))
        except ReleaseError:
            raise
        except Exception as exc:  # noqa: BLE001 (any read or decode failure names the sample)
            raise ReleaseError(f"cannot read sample {row['clip_id']} from {row['shard_uri']}: {exc}") from exc
    return tiles


def write_card(
    store: ObjectStore, manifest: dict[str, Any], ok: pa.Table, data: dict[str, pa.Table]
) -> tuple[str, tuple[str, ...]]:
    """Write the PNGs and README.md of the release; returns (card uri, PNG uris)."""
    from videolake.platform.releases.plots import bar_png, contact_sheet_png, histogram_png

    name = manifest["name"]
    widths, heights = ok.column("width").to_pylist(), ok.column("height").to_pylist()
    sizes = Counter(f"{w}x{h}" for w, h in zip(widths, heights))
    top = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    lengths = ok.column("caption_chars").to_pylist()
    pngs = {
        "duration": histogram_png(ok.column("duration_s").to_pylist(), "Clip duration", "seconds"),
        "resolution": bar_png([k for k, _ in top], [v for _, v in top], "Resolution (encoded)", "samples"),
        "aspect": histogram_png([w / h for w, h in zip(widths, heights) if w and h], "Aspect ratio", "width / height"),
        "caption_length": histogram_png(lengths, "Caption length", "characters"),
        "contact_sheet": contact_sheet_png(contact_tiles(store, ok)),
    }
    images = tuple(store.put_bytes(release_key(name, IMAGES[k]), png) for k, png in pngs.items())
    text = card_markdown(manifest, ok, data, sizes)
    return store.put_bytes(release_key(name, CARD), text.encode("utf-8")), images


def faces_section(ok: pa.Table) -> list[str]:
    """The card's face-blur statement, from the released rows' ``faces_blurred`` (ShardConfig.blur_faces when the
    shard stage wrote them; null on rows written before the column existed): docs/privacy.md."""
    values = ok.column("faces_blurred").to_pylist() if "faces_blurred" in ok.column_names else [None] * ok.num_rows
    counts = Counter("blurred" if v else "not blurred" if v is not None else "unknown" for v in values)
    if counts.get("blurred") == ok.num_rows:
        verdict = "Faces were blurred in every sample's mp4 (the shard stage's `blur_faces`)."
    elif counts.get("not blurred") == ok.num_rows:
        verdict = "Faces were not blurred: the samples show every face as the source did (`blur_faces` was off)."
    else:
        verdict = "Faces were blurred in some samples only, or it is not recorded for some (see the counts)."
    return [
        "## Faces",
        "",
        verdict + " A blurred sample hides the faces the detector (MTCNN) found; a face it missed is not blurred "
        "(docs/privacy.md).",
        "",
        *_table(["faces", "samples"], sorted(counts.items())),
        "",
    ]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        return "" if v is None else str(v).replace("|", "\\|").replace("\n", " ")

    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(cell(v) for v in r) + " |" for r in rows),
    ]


def card_markdown(
    manifest: dict[str, Any], ok: pa.Table, data: dict[str, pa.Table], sizes: Counter | None = None
) -> str:
    """The card's markdown (its images are the PNGs beside it, named in ``IMAGES``)."""
    t = manifest["totals"]
    req = manifest.get("requested", {})
    buckets = manifest["buckets"]
    out = [
        f"# Dataset release `{manifest['name']}`",
        "",
        f"Created {manifest['created_at']} from the days {req.get('start')} to {req.get('end')} (inclusive): "
        f"{len(manifest['partitions'])} taken, {len(manifest['excluded_partitions'])} left out. "
        f"Buckets: {'all' if buckets is None else ', '.join(f'`{b}`' for b in buckets)}. "
        "This release is immutable: its name is never reused; `manifest.json` beside this card lists every "
        f"shard with its sha256 (check them with `videolake release verify {manifest['name']}`).",
        "",
        "## Totals",
        "",
        *_table(
            ["samples", "shards", "hours", "frames", "bytes"],
            [[t["samples"], t["shards"], f"{t['hours']:.4f}", t["frames"], t["bytes"]]],
        ),
        "",
        "## Samples per bucket",
        "",
        *_table(
            ["bucket", "samples", "hours", "shards"],
            [[f"`{k}`", v["samples"], f"{v['hours']:.4f}", v["shards"]] for k, v in per_group(ok, "bucket").items()],
        ),
        "",
    ]
    if buckets is not None:
        empty = [b for b in buckets if b not in t["by_bucket"]]
        if empty:
            out += [f"Requested buckets without samples: {', '.join(f'`{b}`' for b in empty)}.", ""]
    out += [
        "## Samples per day",
        "",
        *_table(
            ["day", "samples", "hours", "shards"],
            [[k, v["samples"], f"{v['hours']:.4f}", v["shards"]] for k, v in per_group(ok, PARTITION_COLUMN).items()],
        ),
        "",
    ]
    stats = length_stats(ok.column("caption_chars").to_pylist())
    out += [
        "## Caption length (characters)",
        "",
        *_table(
            ["captions", "min", "p50", "p90", "max"],
            [[stats["count"], stats["min"], stats["p50"], stats["p90"], stats["max"]]],
        ),
        "",
        "p50 and p90 are nearest-rank percentiles.",
        "",
        f"![caption length]({IMAGES['caption_length']})",
        "",
    ]
    out += [
        "## Captioning models and prompts",
        "",
        f"Caption track: `{manifest.get('caption_track', 'default')}` (clip_captions.caption_track): every sample's "
        "text is that track's caption.",
        "",
        *_table(
            ["model", "revision", "prompt version", "samples"],
            [
                [m["model"], m["model_revision"] or "", m["prompt_version"], m["samples"]]
                for m in caption_models(ok, data["clip_captions"])
            ],
        ),
        "",
    ]
    out += faces_section(ok)
    out += ["## From videos to samples (released days)", "", *_table(["stage", "count"], funnel(data, ok)), ""]
    out += [
        "## Upstream rejections by reason (released days)",
        "",
        "Every row the pipeline rejected on the released days (all buckets), by reason.",
        "",
    ]
    titles = {
        "raw_videos": "Videos rejected at ingest (raw_videos.reject_reason)",
        "filtered_clips": "Clips rejected by the quality filter (filtered_clips.reject_reason, per rule)",
        "clip_captions": "Captions that failed (clip_captions.error)",
        "training_shards": "Clips that could not be encoded into a shard (training_shards.error)",
    }
    for table, reasons in rejections(data).items():
        out += [f"### {titles[table]}", ""]
        out += (_table(["reason", "count"], list(reasons.items())) if reasons else ["None."]) + [""]
    out += [
        "## Distributions",
        "",
        f"![duration]({IMAGES['duration']})",
        "",
        f"![resolution]({IMAGES['resolution']})",
        "",
        f"![aspect ratio]({IMAGES['aspect']})",
        "",
    ]
    if sizes:
        top = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        out += _table(["resolution", "samples"], top) + [""]
    out += [
        "## Sample frames",
        "",
        f"The middle frame of up to {CONTACT_SAMPLES} samples spread over the release, read back from the "
        "shards, with their clip ids.",
        "",
        f"![contact sheet]({IMAGES['contact_sheet']})",
        "",
    ]
    out += ["## Days left out", ""]
    if manifest["excluded_partitions"]:
        out += _table(["day", "reason"], [[e["partition_date"], e["reason"]] for e in manifest["excluded_partitions"]])
    else:
        out += ["None: every day of the range passed every gate."]
    out += [
        "",
        "## Source tables (pinned Delta versions)",
        "",
        *_table(["table", "version", "uri"], [[k, v["version"], v["uri"]] for k, v in manifest["tables"].items()]),
        "",
    ]
    shards = manifest["shards"]
    out += [
        "## Shards",
        "",
        f"{len(shards)} shards, {t['samples']} samples, {t['bytes']} bytes in total (every one with its sha256 "
        "in `manifest.json`).",
        "",
    ]
    out += _table(
        ["shard", "bucket", "day", "samples", "bytes"],
        [[s["uri"], f"`{s['bucket']}`", s["partition_date"], s["samples"], s["bytes"]] for s in shards[:SHARDS_LISTED]],
    )
    if len(shards) > SHARDS_LISTED:
        out += ["", f"... and {len(shards) - SHARDS_LISTED} more in `manifest.json`."]
    out += [
        "",
        "## Loading",
        "",
        "The shards are WebDataset tars: each sample is `<clip_id>.json` (caption, provenance, frame range, "
        "scores), `<clip_id>.mp4` (H.264) and `<clip_id>.txt` (the caption). Read the shard uris from "
        "`manifest.json` (`shards[].uri`), not from a listing: they are exactly this release's.",
        "",
    ]
    return "\n".join(out)
