"""Croissant 1.1 metadata (``croissant.json``) of an exported release: its WebDataset shards, its samples, and the
responsible-AI (RAI) facts the release knows about itself.

Why Croissant: it is the ML-dataset description that catalogues and loaders read (Hugging Face, Kaggle, OpenML,
``mlcroissant``); a folder that carries one can be indexed and loaded without videolake.

What it says:

- ``distribution``: one ``cr:FileObject`` per shard (``contentUrl`` relative to the folder, ``sha256``, size,
  ``application/x-tar``) and one ``cr:FileSet`` per sample member (``*.mp4``, ``*.txt``, ``*.json``) contained in
  the shards;
- ``recordSet``: ``videos`` (key, mp4), ``captions`` (key, caption), ``metadata`` (key, json) and ``samples`` (key,
  caption and mp4, the captions joined to the videos on the key, which is the clip id: the WebDataset ``__key__``);
- RAI (``rai:``): where the data comes from and when (the released days), how it was processed (the pipeline, the
  quality rules that rejected clips on those days with their counts, the score ranges of the released samples,
  the quality filter's default thresholds), the machine annotation tools (caption models and prompts), known
  limitations, a personal and sensitive information note, use cases and the maintenance plan. ``overrides`` (e.g.
  ``--rai FILE``) replace or add properties a person knows and the pipeline does not (license, the thresholds a
  run actually overrode, sensitive content found by review).

``validate`` runs ``mlcroissant`` (1.1.1) on the document: a document it reports errors for is not written.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

CROISSANT_1_1 = "http://mlcommons.org/croissant/1.1"
FILE = "croissant.json"

# The JSON-LD context of a Croissant 1.1 document (as mlcroissant 1.1.1 writes it: core.rdf.make_context).
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "description": {"@container": "@language"},
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "name": {"@container": "@language"},
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}

# The RAI properties mlcroissant 1.1.1 knows (structure_graph/nodes/metadata.py), and whether each takes a list.
RAI_PROPERTIES: dict[str, bool] = {
    "rai:dataCollection": False,
    "rai:dataCollectionType": True,
    "rai:dataCollectionMissingData": False,
    "rai:dataCollectionRawData": False,
    "rai:dataCollectionTimeframe": True,
    "rai:dataImputationProtocol": False,
    "rai:dataPreprocessingProtocol": True,
    "rai:dataManipulationProtocol": False,
    "rai:dataAnnotationProtocol": True,
    "rai:dataAnnotationPlatform": True,
    "rai:dataAnnotationAnalysis": True,
    "rai:annotationsPerItem": False,
    "rai:annotatorDemographics": True,
    "rai:machineAnnotationTools": True,
    "rai:dataBiases": True,
    "rai:dataUseCases": True,
    "rai:dataLimitations": True,
    "rai:dataSocialImpact": False,
    "rai:personalSensitiveInformation": True,
    "rai:dataReleaseMaintenancePlan": False,
}

# The sample members of the shard contract (docs/shards.md): extension -> (mime type, record set, field, dataType).
MEMBERS: dict[str, tuple[str, str, str, str]] = {
    "mp4": ("video/mp4", "videos", "mp4", "sc:VideoObject"),
    "txt": ("text/plain", "captions", "caption", "sc:Text"),
    "json": ("application/json", "metadata", "json", "sc:Text"),
}


class CroissantError(ValueError):
    """mlcroissant reported errors for a document (the message lists them)."""


@dataclasses.dataclass
class SampleFacts:
    """What the released samples' json members say, gathered while their shards are copied."""

    samples: int = 0
    models: dict[tuple[str, str, str], int] = dataclasses.field(default_factory=dict)  # (model, rev, prompt) -> n
    scores: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)  # score -> (min, max)
    sources: dict[str, int] = dataclasses.field(default_factory=dict)  # source_uri scheme://host -> samples
    max_short_side: int = 0
    max_frames: int = 0

    def add(self, meta: Mapping[str, Any]) -> None:
        self.samples += 1
        key = (str(meta.get("model") or ""), str(meta.get("model_revision") or ""), str(meta.get("prompt_version")))
        self.models[key] = self.models.get(key, 0) + 1
        for name, value in (meta.get("scores") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
                lo, hi = self.scores.get(name, (float(value), float(value)))
                self.scores[name] = (min(lo, float(value)), max(hi, float(value)))
        src = str(meta.get("source_uri") or "")
        where = re.match(r"^([a-z0-9+.-]+://[^/]*)", src)
        origin = where.group(1) if where else "(unknown)"
        self.sources[origin] = self.sources.get(origin, 0) + 1
        w, h = meta.get("width"), meta.get("height")
        if isinstance(w, int) and isinstance(h, int):
            self.max_short_side = max(self.max_short_side, min(w, h))
        if isinstance(meta.get("num_frames"), int):
            self.max_frames = max(self.max_frames, int(meta["num_frames"]))

    def merge(self, other: SampleFacts) -> None:
        self.samples += other.samples
        for k, n in other.models.items():
            self.models[k] = self.models.get(k, 0) + n
        for name, (lo, hi) in other.scores.items():
            a, b = self.scores.get(name, (lo, hi))
            self.scores[name] = (min(a, lo), max(b, hi))
        for origin, n in other.sources.items():
            self.sources[origin] = self.sources.get(origin, 0) + n
        self.max_short_side = max(self.max_short_side, other.max_short_side)
        self.max_frames = max(self.max_frames, other.max_frames)


def markdown_tables(card: str) -> dict[str, list[dict[str, str]]]:
    """The tables of a card (markdown), by the heading above each (``##`` or ``###``): rows as {header: cell}.
    A card without a heading or a table gives what it has; nothing is required of its layout."""
    out: dict[str, list[dict[str, str]]] = {}
    heading, header, rows = "", None, None
    for line in card.splitlines():
        m = re.match(r"^#{2,4}\s+(.*\S)\s*$", line)
        if m:
            heading, header, rows = m.group(1), None, None
            continue
        if not line.startswith("|"):
            header, rows = None, None
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header, rows = cells, out.setdefault(heading, [])
        elif all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        elif rows is not None:
            rows.append(dict(zip(header, cells)))
    return out


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _collection(days: Sequence[str], facts: SampleFacts) -> str:
    """rai:dataCollection: the released days, what the pipeline did to each video, and where the videos came from."""
    sources = ", ".join(f"{o} ({n} samples)" for o, n in sorted(facts.sources.items()))
    return (
        f"Video files landed in object storage on {len(days)} day(s) ({days[0] if days else '-'} to "
        f"{days[-1] if days else '-'}) and ingested by videolake: each video probed (video_id = sha256 of its "
        "bytes), split into scene clips, scored by quality rules, captioned by a vision-language model and encoded "
        "into WebDataset samples (H.264 mp4, the caption, a json of provenance and scores). Each sample's json names "
        f"its source object (source_uri) and video. Sources: {sources or 'none'}."
    )


def _pipeline_steps(name: str, excluded: Sequence[Mapping[str, Any]]) -> list[str]:
    """The fixed part of rai:dataPreprocessingProtocol: one line per pipeline stage, then the release's day gate."""
    left_out = "; ".join(f"{e.get('partition_date')}: {e.get('reason')}" for e in excluded)
    return [
        "Ingest (raw_videos): files that are not readable videos, too short, or exact copies of earlier ones "
        "are rejected with a reason.",
        "Scene split (scene_clips): each video is cut into shot-level clips at detected cuts.",
        "Quality filter (filtered_clips): each clip is scored (motion, sharpness, brightness, black and frozen "
        "frames, text area, size, duration, plugin scorers) and rejected when a rule fires; near-duplicate and "
        "semantic-duplicate clips keep one clip per group.",
        "Captions (clip_captions): one caption per clip that passed; failed captions are not released.",
        "Shards (training_shards): every captioned clip is re-encoded (H.264, short side scaled down to the shard "
        "stage's max_short_side, 720 px by default) into WebDataset tar shards, one bucket (resolution, aspect "
        "ratio, length) per shard.",
        f"Release {name}: only days whose partitions passed every blocking quality gate of the five tables "
        f"(raw_videos, scene_clips, filtered_clips, clip_captions, training_shards) are taken; {len(excluded)} "
        "day(s) of the requested range were left out" + (": " + left_out if excluded else "") + ".",
    ]


def _card_rejections(card: str) -> list[str]:
    """One line per (reason, count) table of the release card: the upstream rejections on the released days."""
    return [
        f"Rejected on the released days, per the release card ({heading}): "
        + ", ".join(f"{r['reason']} {r['count']}" for r in rows)
        + "."
        for heading, rows in markdown_tables(card).items()
        if rows and set(rows[0]) == {"reason", "count"}
    ]


def _release_facts(facts: SampleFacts, thresholds: Mapping[str, Any] | None, tables: Mapping[str, Any]) -> list[str]:
    """The data-dependent lines of rai:dataPreprocessingProtocol, each only when the release knows it."""
    lines = []
    if facts.scores:
        ranges = ", ".join(f"{k} {_fmt(lo)}..{_fmt(hi)}" for k, (lo, hi) in sorted(facts.scores.items()))
        lines.append(f"Score ranges of the {facts.samples} released samples (min..max): {ranges}.")
    if thresholds:
        settings = ", ".join(f"{k}={v}" for k, v in thresholds.items())
        lines.append(
            "Quality filter thresholds (videolake's defaults; a run may override them in its run config, which the "
            f"release does not record: state overrides with --rai): {settings}."
        )
    if tables:
        pins = ", ".join(f"{t}@{v.get('version')}" for t, v in tables.items())
        lines.append(f"Provenance: the rows come from the Delta table versions {pins} (manifest.json).")
    return lines


def _annotation_tools(facts: SampleFacts) -> list[str]:
    """rai:machineAnnotationTools: each (model, revision, prompt), most captions first."""
    return [
        f"{m}{' @ ' + r if r else ''} (prompt {p}): {n} caption(s)"
        for (m, r, p), n in sorted(facts.models.items(), key=lambda kv: (-kv[1], kv[0]))
    ] or ["(no caption model recorded)"]


def _limitations(days: Sequence[str], facts: SampleFacts) -> list[str]:
    """rai:dataLimitations: what automatic captions, cuts and filters cannot promise, and the re-encode's limits."""
    limitations = [
        "Captions are machine-generated by the models listed under machineAnnotationTools and were not reviewed "
        "by people; they can be wrong, incomplete or hallucinated.",
        "Clip boundaries come from automatic scene detection: a clip may hold more than one shot or part of one.",
        "Quality rules and duplicate grouping are automatic and threshold-based: some poor or duplicate clips pass, "
        "some good ones are rejected.",
        f"Only the {len(days)} released day(s) are covered; the content reflects whatever was landed on those days, "
        "not a designed sample of any population.",
    ]
    if facts.max_short_side:
        limitations.append(
            f"Re-encoded video: short side at most {facts.max_short_side} px, at most {facts.max_frames} frames per "
            "clip in this release; no audio."
        )
    return limitations


def _sensitive(facts: SampleFacts) -> list[str]:
    """rai:personalSensitiveInformation: no review is recorded; names the scores a content filter may have left."""
    scored = sorted(facts.scores)
    return [
        "No review for personal or sensitive content is recorded for this release (state one with --rai): the "
        "videos and captions may show, name or describe identifiable people, and the pipeline removes such "
        "content only where a filter for it was configured"
        + (f" (scores in the samples' json: {', '.join(scored)})" if scored else "")
        + ". Check before use, and before publishing.",
    ]


def rai_properties(
    manifest: Mapping[str, Any],
    card: str,
    facts: SampleFacts,
    thresholds: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The RAI properties the release can state: from its manifest (days, gates, pinned tables), its card (the
    upstream rejections by reason) and its samples (``facts``). ``thresholds``: the quality filter's default
    settings, stated as defaults (a run may override them; the release does not record a run's overrides)."""
    days = list(manifest.get("partitions", []))
    excluded = list(manifest.get("excluded_partitions", []))
    name = manifest.get("name", "")
    tables = manifest.get("tables", {})
    preprocessing = [
        *_pipeline_steps(name, excluded),
        *_card_rejections(card),
        *_release_facts(facts, thresholds, tables),
    ]
    rai: dict[str, Any] = {
        "rai:dataCollection": _collection(days, facts),
        "rai:dataCollectionType": ["Existing video files, landed in object storage by the operator"],
        "rai:dataCollectionRawData": "The source videos are not part of the release; each sample's json names "
        "its source object (source_uri) and the video's sha256 (video_id).",
        "rai:dataPreprocessingProtocol": preprocessing,
        "rai:dataAnnotationProtocol": [
            "One caption per clip by a vision-language model prompted with frames sampled from the clip "
            "(prompt version in each sample's json)."
        ],
        "rai:machineAnnotationTools": _annotation_tools(facts),
        "rai:annotationsPerItem": "1 machine caption per sample",
        "rai:dataLimitations": _limitations(days, facts),
        "rai:personalSensitiveInformation": _sensitive(facts),
        "rai:dataUseCases": [
            "Training and evaluating video-language models (captioning, retrieval, text-to-video) on the released "
            "clips."
        ],
        "rai:dataReleaseMaintenancePlan": f"Release {name} is immutable: its name is never reused and its shards "
        "are never rewritten (sha256 in manifest.json and here); changes come as a new release with a new name.",
    }
    if days:
        rai["rai:dataCollectionTimeframe"] = [days[0], days[-1]]
    return rai


def build_croissant(
    manifest: Mapping[str, Any],
    shards: Sequence[Mapping[str, Any]],
    *,
    rai: Mapping[str, Any],
    description: str,
    license: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Croissant 1.1 JSON-LD of an exported release. ``shards``: the export's shard entries (``uri`` relative
    to the folder, ``sha256``, ``bytes``, ``samples``, ``bucket``); ``rai``: ``rai_properties``; ``overrides``:
    top-level properties that replace the generated ones (RAI or schema.org, e.g. ``license``, ``creator``)."""
    name = str(manifest["name"])
    files: list[dict[str, Any]] = [
        {
            "@type": "cr:FileObject",
            "@id": s["uri"],
            "name": s["uri"].rsplit("/", 1)[-1],
            "description": f"WebDataset shard of bucket {s.get('bucket')}, {s['samples']} samples, "
            f"day {s.get('partition_date')}",
            "contentUrl": s["uri"],
            "contentSize": f"{int(s['bytes'])} B",
            "encodingFormat": "application/x-tar",
            "sha256": s["sha256"],
        }
        for s in shards
    ]
    contained = [{"@id": s["uri"]} for s in shards]
    sets = [
        {
            "@type": "cr:FileSet",
            "@id": f"{ext}-files",
            "name": f"{ext}-files",
            "description": f"The <clip_id>.{ext} member of every sample, inside the shards.",
            "containedIn": contained,
            "encodingFormat": mime,
            "includes": f"*.{ext}",
        }
        for ext, (mime, _, _, _) in MEMBERS.items()
    ]

    def key_field(rs: str, ext: str) -> dict[str, Any]:
        return {
            "@type": "cr:Field",
            "@id": f"{rs}/key",
            "name": "key",
            "description": "The sample's WebDataset __key__: its clip id (member file name without extension).",
            "dataType": "sc:Text",
            "source": {
                "fileSet": {"@id": f"{ext}-files"},
                "extract": {"fileProperty": "filename"},
                "transform": {"regex": rf"^(.*)\.{ext}$"},
            },
        }

    record_sets: list[dict[str, Any]] = [
        {
            "@type": "cr:RecordSet",
            "@id": rs,
            "name": rs,
            "description": f"The {ext} member of each sample, by key.",
            "key": {"@id": f"{rs}/key"},
            "field": [
                key_field(rs, ext),
                {
                    "@type": "cr:Field",
                    "@id": f"{rs}/{field}",
                    "name": field,
                    "description": {
                        "mp4": "The clip, H.264 in an MP4 (no audio).",
                        "txt": "The caption (UTF-8 text).",
                        "json": "The sample's metadata (UTF-8 JSON): caption, clip_id, video_id, source_uri, model, "
                        "model_revision, prompt_version, fps, num_frames, width, height, duration_s, start_frame, "
                        "end_frame, bucket, partition_date, scores.",
                    }[ext],
                    "dataType": dtype,
                    "source": {"fileSet": {"@id": f"{ext}-files"}, "extract": {"fileProperty": "content"}},
                },
            ],
        }
        for ext, (_, rs, field, dtype) in MEMBERS.items()
    ]
    record_sets.append(
        {
            "@type": "cr:RecordSet",
            "@id": "samples",
            "name": "samples",
            "description": "One record per WebDataset sample: its key, caption and video (captions joined to videos "
            "on the key). The metadata record set holds each sample's json.",
            "key": {"@id": "samples/key"},
            "field": [
                {
                    "@type": "cr:Field",
                    "@id": "samples/key",
                    "name": "key",
                    "description": "The clip id (WebDataset __key__).",
                    "dataType": "sc:Text",
                    "source": {"field": {"@id": "captions/key"}},
                    "references": {"field": {"@id": "videos/key"}},
                },
                {
                    "@type": "cr:Field",
                    "@id": "samples/caption",
                    "name": "caption",
                    "description": "The caption (the sample's txt member).",
                    "dataType": "sc:Text",
                    "source": {"field": {"@id": "captions/caption"}},
                },
                {
                    "@type": "cr:Field",
                    "@id": "samples/mp4",
                    "name": "mp4",
                    "description": "The clip (the sample's mp4 member).",
                    "dataType": "sc:VideoObject",
                    "source": {"field": {"@id": "videos/mp4"}},
                },
            ],
        }
    )
    created = str(manifest.get("created_at") or "")
    doc: dict[str, Any] = {
        "@context": copy.deepcopy(CONTEXT),
        "@type": "sc:Dataset",
        "conformsTo": CROISSANT_1_1,
        "name": f"videolake-release-{name}",
        "alternateName": name,
        "description": description,
        "version": "1.0.0",
        "datePublished": created[:10] or None,
        "dateCreated": created or None,
        "keywords": ["video", "captions", "video-text", "WebDataset", "videolake"],
        "citeAs": f"@misc{{videolake_{re.sub(r'[^A-Za-z0-9]', '_', name)}, title = {{videolake release {name}}}, "
        f"note = {{{int(manifest.get('totals', {}).get('samples', 0))} captioned video clips, created {created}}}}}",
        "license": license,
        "distribution": files + sets,
        "recordSet": record_sets,
        **rai,
    }
    for key, value in (overrides or {}).items():
        doc[key] = value
    return {k: v for k, v in doc.items() if v is not None}


def validate(doc: Mapping[str, Any] | str) -> list[str]:
    """mlcroissant's warnings for ``doc`` (a JSON-LD dict, or the path of a ``croissant.json``); CroissantError
    listing its errors. Static analysis only: no data file is read."""
    import mlcroissant as mlc  # type: ignore[import-untyped]  # ships no type information

    try:
        # a copy: mlcroissant writes into the document it is given (its @context gains an @base)
        dataset = mlc.Dataset(jsonld=json.loads(json.dumps(doc)) if isinstance(doc, Mapping) else doc)
    except mlc.ValidationError as exc:
        raise CroissantError(f"Croissant metadata does not validate (mlcroissant): {exc}") from exc
    return sorted(dataset.metadata.ctx.issues.warnings)
