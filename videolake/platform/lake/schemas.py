"""Schemas of the five Delta tables: the contract between engine, assets, checks and users.

Every table carries ``partition_date`` (the Dagster daily partition key) and is partitioned by it.
Ids are deterministic: the same input bytes and parameters give the same ids, so re-runs replace rows, never add.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from videolake.platform.lake import figures as fig

PARTITION_COLUMN = "partition_date"

RAW_VIDEOS = pa.schema(
    [
        pa.field("video_id", pa.string(), nullable=False, metadata={"description": "sha256 of the file bytes (hex)"}),
        pa.field("source_uri", pa.string(), nullable=False, metadata={"description": "object the video came from"}),
        pa.field(
            "duplicate_uris",
            pa.list_(pa.string()),
            metadata={
                "description": "other objects of the partition with the same bytes (kept once, never dropped silently)"
            },
        ),
        pa.field("size_bytes", pa.int64(), nullable=False, metadata={"description": "file size in bytes"}),
        pa.field(
            "container",
            pa.string(),
            metadata={"description": "short container name, e.g. mp4, mov, webm, matroska, avi"},
        ),
        pa.field(
            "codec",
            pa.string(),
            metadata={"description": "FFmpeg codec name of the video stream, e.g. h264, hevc, vp9, mpeg4"},
        ),
        pa.field(
            "width", pa.int32(), metadata={"description": "coded frame width in pixels (as stored, before rotation)"}
        ),
        pa.field(
            "height", pa.int32(), metadata={"description": "coded frame height in pixels (as stored, before rotation)"}
        ),
        pa.field(
            "fps",
            pa.float64(),
            metadata={"description": "average frame rate: num_frames / duration_s (the header rate when within 1%)"},
        ),
        pa.field(
            "duration_s",
            pa.float64(),
            metadata={"description": "presentation-time span of the video stream in seconds"},
        ),
        pa.field(
            "num_frames",
            pa.int64(),
            metadata={"description": "video frames (decoded count, or the demuxed packet count)"},
        ),
        pa.field("has_audio", pa.bool_(), metadata={"description": "the file has at least one audio stream"}),
        pa.field(
            "rotation",
            pa.int32(),
            metadata={
                "description": "clockwise degrees (0, 90, 180, 270) a player turns the coded frame by (display "
                "matrix, e.g. phone portrait video); caption frames and clip files are upright"
            },
        ),
        pa.field("display_width", pa.int32(), metadata={"description": "width as displayed (after rotation)"}),
        pa.field("display_height", pa.int32(), metadata={"description": "height as displayed (after rotation)"}),
        pa.field(
            "status",
            pa.string(),
            nullable=False,
            metadata={
                "description": "ok | rejected | duplicate (the same bytes were landed on an earlier day: duplicate_of_date, duplicate_of_uri; no clip is cut from it)"
            },
        ),
        pa.field("reject_reason", pa.string(), metadata={"description": "null when status is ok"}),
        pa.field("reject_detail", pa.string(), metadata={"description": "human-readable explanation of the rejection"}),
        pa.field(
            "failure_class",
            pa.string(),
            metadata={
                "description": "transient | permanent on a rejected row: whether probing again can succeed (a storage error, a lost worker) or not (the file itself); null when ok"
            },
        ),
        pa.field(
            "duplicate_of_date",
            pa.date32(),
            metadata={
                "description": "on a duplicate row: the partition of the original, the earliest day these bytes were landed"
            },
        ),
        pa.field(
            "duplicate_of_uri",
            pa.string(),
            metadata={"description": "on a duplicate row: the original's source_uri (raw_videos of duplicate_of_date)"},
        ),
        pa.field(
            "ingested_at",
            pa.timestamp("us", tz="UTC"),
            nullable=False,
            metadata={"description": "when the video was probed (UTC)"},
        ),
        pa.field(
            PARTITION_COLUMN,
            pa.date32(),
            nullable=False,
            metadata={
                "description": "the landing day (Dagster partition key): the object was under landing/YYYY-MM-DD/"
            },
        ),
    ]
)

SCENE_CLIPS = pa.schema(
    [
        pa.field(
            "clip_id", pa.string(), nullable=False, metadata={"description": "`<video_id>_<start_frame>_<end_frame>`"}
        ),
        pa.field(
            "video_id",
            pa.string(),
            nullable=False,
            metadata={"description": "the video the clip is cut from (raw_videos.video_id)"},
        ),
        pa.field(
            "source_uri",
            pa.string(),
            nullable=False,
            metadata={"description": "object of the source video (raw_videos.source_uri)"},
        ),
        pa.field(
            "clip_index",
            pa.int32(),
            nullable=False,
            metadata={"description": "position of the clip in its video, from 0"},
        ),
        pa.field("start_frame", pa.int64(), nullable=False, metadata={"description": "first frame, inclusive"}),
        pa.field("end_frame", pa.int64(), nullable=False, metadata={"description": "last frame, exclusive"}),
        pa.field(
            "start_s",
            pa.float64(),
            nullable=False,
            metadata={"description": "start time in seconds (start_frame / fps)"},
        ),
        pa.field(
            "end_s",
            pa.float64(),
            nullable=False,
            metadata={"description": "end time in seconds, exclusive (end_frame / fps)"},
        ),
        pa.field("duration_s", pa.float64(), nullable=False, metadata={"description": "clip length in seconds"}),
        pa.field(
            "clip_uri", pa.string(), metadata={"description": "transcoded clip object, null when kept as a range"}
        ),
        pa.field(
            "detector",
            pa.string(),
            nullable=False,
            metadata={"description": "scene detector that found the cuts (luma, adaptive, content)"},
        ),
        pa.field(
            "detector_params", pa.string(), nullable=False, metadata={"description": "JSON of the detector config"}
        ),
        pa.field(
            "detect_error",
            pa.string(),
            metadata={"description": "why detection failed; the video is then one clip that the quality stage rejects"},
        ),
        pa.field(
            "failure_class",
            pa.string(),
            metadata={
                "description": "transient | permanent when detect_error is set: whether detecting again can succeed; null otherwise"
            },
        ),
        pa.field(
            "max_clip_s",
            pa.float64(),
            metadata={
                "description": "the longest clip the split allowed when this row was cut (scene_clips' run "
                "config), seconds; the duration gate checks each row against it"
            },
        ),
        pa.field(
            "frame_stats_uri",
            pa.string(),
            metadata={
                "description": "object holding the video's per-frame statistics, written by the detection that "
                "made this row; quality scoring reads them from here. Null when the detector keeps none "
                "(transnetv2): scoring then decodes the video"
            },
        ),
        pa.field(
            PARTITION_COLUMN,
            pa.date32(),
            nullable=False,
            metadata={"description": "the landing day of the source video (Dagster partition key)"},
        ),
    ]
)

FILTERED_CLIPS = pa.schema(
    [
        pa.field(
            "clip_id", pa.string(), nullable=False, metadata={"description": "the scored clip (scene_clips.clip_id)"}
        ),
        pa.field(
            "video_id", pa.string(), nullable=False, metadata={"description": "the clip's video (raw_videos.video_id)"}
        ),
        pa.field("duration_s", pa.float64(), nullable=False, metadata={"description": "clip length in seconds"}),
        pa.field("width", pa.int32(), metadata={"description": "frame width of the source video in pixels"}),
        pa.field("height", pa.int32(), metadata={"description": "frame height of the source video in pixels"}),
        pa.field("motion", pa.float64(), metadata={"description": "mean abs luma change between frames, 0..255"}),
        pa.field("sharpness", pa.float64(), metadata={"description": "variance of the Laplacian of luma"}),
        pa.field("brightness", pa.float64(), metadata={"description": "mean luma, 0..255"}),
        pa.field("black_ratio", pa.float64(), metadata={"description": "share of near-black frames, 0..1"}),
        pa.field(
            "frozen_ratio", pa.float64(), metadata={"description": "share of frames identical to the previous, 0..1"}
        ),
        pa.field(
            "text_area", pa.float64(), metadata={"description": "share of the frame covered by text-like edges, 0..1"}
        ),
        pa.field(
            "dhash",
            pa.string(),
            metadata={
                "description": "64-bit difference hash of the middle frame (hex); filled only when the dhash scorer is configured (duplicates are judged on near_hashes)"
            },
        ),
        pa.field(
            "near_hashes",
            pa.binary(),
            metadata={
                "description": "the clip's near-duplicate fingerprint: 32-byte PDQ hashes of its informative frames, bars removed, and for a still clip (a fixed camera) also of what moves in each frame (dedup.near); empty when every frame is flat"
            },
        ),
        pa.field(
            "duplicate_group",
            pa.string(),
            metadata={
                "description": "clip_id of the clip kept of this clip's near-duplicate group, on every member (the kept one too), also when it lies in an earlier day; the kept clip is the earliest by (partition_date, clip_id)"
            },
        ),
        pa.field(
            "duplicate_kept_date",
            pa.date32(),
            metadata={"description": "partition_date of the kept clip named by duplicate_group"},
        ),
        pa.field(
            "duplicate_kind",
            pa.string(),
            metadata={
                "description": "on a clip rejected as duplicate: near (fingerprints match) or semantic (embeddings within eps)"
            },
        ),
        pa.field(
            "scores",
            pa.map_(pa.string(), pa.float64()),
            metadata={
                "description": "scores of installed scorer plugins by name (e.g. {aesthetic: 5.1}); the "
                "built-in scores have columns of their own; null when no plugin scorer ran"
            },
        ),
        pa.field(
            "passed",
            pa.bool_(),
            nullable=False,
            metadata={"description": "the clip passed every quality rule and goes to captioning"},
        ),
        pa.field("reject_reason", pa.string(), metadata={"description": "null when passed; ';'-joined rule names"}),
        pa.field(
            "failure_class",
            pa.string(),
            metadata={
                "description": "transient | permanent when the clip could not be scored (score_error, detect_error, video_missing); null for a scored clip"
            },
        ),
        pa.field(
            "reject_detail",
            pa.string(),
            metadata={
                "description": "why a clip broke a per-clip invariant: the decode error of an undecodable clip (read as the shard encoder reads it), the measured duration of a too_long one; null otherwise"
            },
        ),
        pa.field(
            "source_uri",
            pa.string(),
            metadata={"description": "object of the clip's source video (scene_clips.source_uri)"},
        ),
        pa.field(
            PARTITION_COLUMN,
            pa.date32(),
            nullable=False,
            metadata={"description": "the landing day of the source video (Dagster partition key)"},
        ),
    ]
)

CLIP_CAPTIONS = pa.schema(
    [
        pa.field(
            "clip_id",
            pa.string(),
            nullable=False,
            metadata={"description": "the captioned clip (filtered_clips.clip_id, a passed clip)"},
        ),
        pa.field(
            "caption_track",
            pa.string(),
            nullable=False,
            metadata={
                "description": "the caption track (a named captioner setting, docs/captioning.md): one row per passed "
                "clip per track; the default track is `default`"
            },
        ),
        pa.field(
            "video_id", pa.string(), nullable=False, metadata={"description": "the clip's video (raw_videos.video_id)"}
        ),
        pa.field(
            "source_uri",
            pa.string(),
            nullable=False,
            metadata={"description": "object of the source video (raw_videos.source_uri)"},
        ),
        pa.field("status", pa.string(), nullable=False, metadata={"description": "ok | failed"}),
        pa.field("caption", pa.string(), metadata={"description": "null when failed"}),
        pa.field("error", pa.string(), metadata={"description": "null when ok"}),
        pa.field(
            "failure_class",
            pa.string(),
            metadata={
                "description": "transient | permanent on a failed row: whether captioning again can succeed (timeout, endpoint 5xx, lost actor, out of memory) or not (empty or invalid output, undecodable clip); null when ok"
            },
        ),
        pa.field(
            "model",
            pa.string(),
            nullable=False,
            metadata={"description": "model that wrote the caption (name or path)"},
        ),
        pa.field("model_revision", pa.string(), metadata={"description": "model revision (commit hash) when known"}),
        pa.field(
            "prompt_version",
            pa.string(),
            nullable=False,
            metadata={"description": "versioned prompt used (e.g. v1-describe)"},
        ),
        pa.field("num_frames", pa.int32(), metadata={"description": "frames of the clip shown to the model"}),
        pa.field("prompt_tokens", pa.int64(), metadata={"description": "tokens in the prompt, frames included"}),
        pa.field("output_tokens", pa.int64(), metadata={"description": "tokens generated"}),
        pa.field(
            "latency_s",
            pa.float64(),
            metadata={"description": "wall seconds of the generate call that produced this caption (its whole batch)"},
        ),
        pa.field(
            "captioned_at",
            pa.timestamp("us", tz="UTC"),
            nullable=False,
            metadata={"description": "when the caption was written (UTC)"},
        ),
        # Provenance (nullable in the Delta schema so that an older table gains them; every row the stage writes
        # sets them): enough to trace a regression to the rows it touched and re-run only those.
        pa.field(
            "prompt_sha256",
            pa.string(),
            metadata={"description": "sha256 of the exact prompt sent: system text, user text and JSON schema"},
        ),
        pa.field(
            "sampling",
            pa.string(),
            metadata={"description": "JSON of the sampling settings used (temperature, top_p, max_tokens, seed ...)"},
        ),
        pa.field(
            "engine",
            pa.string(),
            metadata={
                "description": "the serving engine: vllm, or openai:OWNER for an OpenAI-compatible server (the served model's owned_by), ..."
            },
        ),
        pa.field(
            "engine_version",
            pa.string(),
            metadata={"description": "the engine's version (`vllm.__version__`, or what the server reports)"},
        ),
        pa.field(
            "frame_timestamps_s",
            pa.list_(pa.float64()),
            metadata={
                "description": "times in the source (seconds: frame number / the clip's frame rate) of the frames "
                "shown to the model; empty when none were"
            },
        ),
        pa.field(
            "caption_fields",
            pa.map_(pa.string(), pa.string()),
            metadata={
                "description": "a structured (JSON-schema) track's fields, each as text (lists and objects as JSON); "
                "null for a free-text track or a failed row"
            },
        ),
        pa.field(
            "source_track",
            pa.string(),
            metadata={"description": "a second-pass (text-only) track: the track whose captions it rewrote; else null"},
        ),
        pa.field(
            PARTITION_COLUMN,
            pa.date32(),
            nullable=False,
            metadata={"description": "the landing day of the source video (Dagster partition key)"},
        ),
    ]
)

TRAINING_SHARDS = pa.schema(
    [
        pa.field(
            "clip_id",
            pa.string(),
            nullable=False,
            metadata={"description": "the sample's clip (clip_captions.clip_id), also its WebDataset key (`__key__`)"},
        ),
        pa.field(
            "video_id", pa.string(), nullable=False, metadata={"description": "the clip's video (raw_videos.video_id)"}
        ),
        pa.field(
            "source_uri",
            pa.string(),
            nullable=False,
            metadata={"description": "object of the source video (raw_videos.source_uri)"},
        ),
        pa.field(
            "status",
            pa.string(),
            nullable=False,
            metadata={"description": "ok (the sample is in shard_uri) | failed (the clip could not be encoded: error)"},
        ),
        pa.field("error", pa.string(), metadata={"description": "why the clip could not be encoded; null when ok"}),
        pa.field(
            "failure_class",
            pa.string(),
            metadata={
                "description": "transient | permanent on a failed row: whether encoding again can succeed; null when ok"
            },
        ),
        pa.field(
            "bucket",
            pa.string(),
            metadata={
                "description": "the sample's bucket and shard folder, e.g. `resolution_720/aspect_16_9/frames_64_127` (docs/shards.md)"
            },
        ),
        pa.field(
            "shard_uri",
            pa.string(),
            metadata={
                "description": "the tar shard holding the sample (object store, under shards/); null when failed"
            },
        ),
        pa.field("shard_sha256", pa.string(), metadata={"description": "sha256 of the whole shard file (hex)"}),
        pa.field("shard_samples", pa.int64(), metadata={"description": "samples in the shard"}),
        pa.field("shard_bytes", pa.int64(), metadata={"description": "size of the shard file in bytes"}),
        pa.field(
            "sample_offset",
            pa.int64(),
            metadata={
                "description": "byte offset of the sample's first tar member in its shard (a ranged read fetches one sample)"
            },
        ),
        pa.field(
            "sample_bytes",
            pa.int64(),
            metadata={"description": "bytes of the sample's tar members (json, mp4, txt) in the shard"},
        ),
        pa.field("sample_sha256", pa.string(), metadata={"description": "sha256 of the sample's tar members (hex)"}),
        pa.field(
            "num_frames",
            pa.int64(),
            metadata={"description": "frames of the sample's mp4: end_frame - start_frame of the clip"},
        ),
        pa.field(
            "width",
            pa.int32(),
            metadata={"description": "width of the encoded mp4 (upright, scaled to max_short_side), pixels"},
        ),
        pa.field("height", pa.int32(), metadata={"description": "height of the encoded mp4, pixels"}),
        pa.field("fps", pa.float64(), metadata={"description": "frame rate of the mp4 (the source's average rate)"}),
        pa.field("duration_s", pa.float64(), metadata={"description": "num_frames / fps, seconds"}),
        pa.field("caption_chars", pa.int32(), metadata={"description": "length of the sample's caption in characters"}),
        pa.field(
            "caption_track",
            pa.string(),
            metadata={
                "description": "the caption track whose caption the sample carries (clip_captions.caption_track)"
            },
        ),
        pa.field(
            "faces_blurred",
            pa.bool_(),
            metadata={
                "description": "whether the shard stage blurred the faces it found in the sample's mp4 (ShardConfig."
                "blur_faces, docs/privacy.md); null on a failed row and on rows written before this column"
            },
        ),
        pa.field(
            PARTITION_COLUMN,
            pa.date32(),
            nullable=False,
            metadata={"description": "the landing day of the source video (Dagster partition key)"},
        ),
    ]
)

CLIP_EMBEDDINGS = pa.schema(
    [
        pa.field(
            "clip_id", pa.string(), nullable=False, metadata={"description": "scene_clips.clip_id of the embedded clip"}
        ),
        pa.field(
            "video_id",
            pa.string(),
            nullable=False,
            metadata={"description": "raw_videos.video_id of the clip's source"},
        ),
        pa.field(
            "model",
            pa.string(),
            metadata={"description": "the embedding model's name and revision (EmbedderConfig.model_label)"},
        ),
        pa.field("status", pa.string(), nullable=False, metadata={"description": "ok | failed"}),
        pa.field("error", pa.string(), metadata={"description": "why the clip could not be embedded; null when ok"}),
        pa.field(
            "failure_class",
            pa.string(),
            metadata={
                "description": "transient | permanent on a failed row: whether embedding again can succeed; null when ok"
            },
        ),
        pa.field(
            "embedding",
            pa.list_(pa.float32()),
            metadata={
                "description": "the clip's L2-normalised embedding (frame embeddings mean-pooled); empty when failed"
            },
        ),
        pa.field("dim", pa.int32(), metadata={"description": "length of embedding (0 when failed)"}),
        pa.field(
            PARTITION_COLUMN,
            pa.date32(),
            nullable=False,
            metadata={"description": "the landing day of the source video (Dagster partition key)"},
        ),
    ]
)


@dataclass(frozen=True)
class TableSpec:
    """One table of the lake, in one place: everything that iterates the tables reads ``TABLE_SPECS``.

    Its gates are built by the module ``videolake.platform.gates.<name>`` against the same partition of its upstream
    table; its thresholds are ``gates.config.TABLE_CONFIGS[name]``.
    """

    name: str
    schema: pa.Schema
    key: str | tuple[str, ...]  # the primary key column(s) (unique within a partition)
    upstream: str | None  # the table its rows are computed from (its asset's deps); None: the landing area
    # Other tables its step reads when their assets exist (extra deps of its asset): filtered_clips reads
    # clip_embeddings for the semantic duplicate rule.
    reads: tuple[str, ...] = ()
    # Tables besides the upstream that its gates read (same partition): filtered_clips' gates read raw_videos for
    # the videos another day's run marked as copies after this day cut them (their clips may or may not be scored).
    gated_against: tuple[str, ...] = ()
    # An optional table's asset (and gates) exist only when configured (clip_embeddings: an embedding model).
    optional: bool = False
    # Where each column comes from: column -> ((upstream table, upstream column), ...); Dagster's column lineage.
    # Only the direct upstream and the tables the step reads are named; computed columns name their inputs.
    lineage: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    preview: tuple[str, ...] = ()  # the columns of the asset page's preview, in order
    # The counts and rates of a day's rows (platform.figures): computed by the stage's workers, shown per partition.
    figures: tuple[fig.Figure, ...] = (fig.RowCount(),)
    # The only numeric (plotted) metadata labels of the asset, in display order: some of ``figures`` and the step's
    # throughput labels (assets/metadata.py); every other figure goes into a JSON entry.
    plotted: tuple[str, ...] = (fig.ROW_COUNT,)
    # The step's throughput: (label, the figure counted per wall second of the step); None: the step reports its own.
    throughput: tuple[str, str] | None = None

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The primary key as a tuple of columns."""
        return (self.key,) if isinstance(self.key, str) else tuple(self.key)

    @property
    def gate_module(self) -> str:
        return f"videolake.platform.gates.{self.name}"

    @property
    def summary_columns(self) -> tuple[str, ...]:
        """The columns ``figures_of`` reads (and the partition column, to split a range by day)."""
        return tuple(dict.fromkeys((*fig.columns(self.figures), PARTITION_COLUMN)))

    def figures_of(self, rows: pa.Table) -> dict[str, Any]:
        """The figures of ``rows`` (one partition, or a whole range; at least ``summary_columns``)."""
        return fig.compute(self.figures, rows)

    def merge_figures(self, days: list[dict[str, Any]]) -> dict[str, Any]:
        """The figures of several days (``figures_of`` each) as if computed over all their rows."""
        return fig.merge(self.figures, days)


_SCENE_RANGE = (("scene_clips", "start_frame"), ("scene_clips", "end_frame"))
_SCORED_FROM = (*_SCENE_RANGE, ("scene_clips", "frame_stats_uri"), ("raw_videos", "source_uri"))

# In pipeline order: each table's upstream comes before it.
TABLE_SPECS: tuple[TableSpec, ...] = (
    TableSpec(
        "raw_videos",
        RAW_VIDEOS,
        key="video_id",
        upstream=None,
        preview=("video_id", "source_uri", "codec", "width", "height", "fps", "status", "reject_reason"),
        figures=(
            fig.RowCount(),
            fig.Count("videos_ok", "status", equals="ok"),
            fig.Count("videos_rejected", "status", equals="rejected"),
            fig.Rate("reject_rate", "videos_rejected"),
            fig.Count("copies_of_earlier_days", "status", equals="duplicate"),
            fig.Reasons("rejections_by_reason", "reject_reason"),
            fig.Total("bytes", "size_bytes"),
            fig.Total("frames", "num_frames"),
        ),
        plotted=(fig.ROW_COUNT, "videos_rejected", "reject_rate", "copies_of_earlier_days", "videos_per_s"),
        throughput=("videos_per_s", fig.ROW_COUNT),
    ),
    TableSpec(
        "scene_clips",
        SCENE_CLIPS,
        key="clip_id",
        upstream="raw_videos",
        lineage={
            "clip_id": (("raw_videos", "video_id"),),
            "video_id": (("raw_videos", "video_id"),),
            "source_uri": (("raw_videos", "source_uri"),),
            "start_s": (("raw_videos", "fps"),),
            "end_s": (("raw_videos", "fps"),),
            "duration_s": (("raw_videos", "fps"),),
            PARTITION_COLUMN: (("raw_videos", PARTITION_COLUMN),),
        },
        preview=("clip_id", "source_uri", "clip_index", "start_frame", "end_frame", "duration_s", "detect_error"),
        figures=(fig.RowCount(), fig.Distinct("videos", "video_id"), fig.Count("detect_errors", "detect_error")),
        plotted=(fig.ROW_COUNT, "videos", "detect_errors", "frames_per_s"),
        throughput=("frames_per_s", "frames"),
    ),
    TableSpec(
        "clip_embeddings",
        CLIP_EMBEDDINGS,
        key="clip_id",
        upstream="scene_clips",
        optional=True,
        lineage={
            "clip_id": (("scene_clips", "clip_id"),),
            "video_id": (("scene_clips", "video_id"),),
            "embedding": (("scene_clips", "source_uri"), *_SCENE_RANGE),
            PARTITION_COLUMN: (("scene_clips", PARTITION_COLUMN),),
        },
        preview=("clip_id", "video_id", "model", "status", "dim", "error"),
        figures=(
            fig.RowCount(),
            fig.Remainder("embeddings", of="embeddings_failed"),
            fig.Count("embeddings_failed", "status", equals="failed"),
            fig.Rate("failure_rate", "embeddings_failed"),
            fig.Reasons("failures_by_reason", "error", whole=True),
        ),
        plotted=(fig.ROW_COUNT, "embeddings_failed", "clips_per_s"),
        throughput=("clips_per_s", fig.ROW_COUNT),
    ),
    TableSpec(
        "filtered_clips",
        FILTERED_CLIPS,
        key="clip_id",
        upstream="scene_clips",
        reads=("clip_embeddings",),
        gated_against=("raw_videos",),
        lineage={
            "clip_id": (("scene_clips", "clip_id"),),
            "video_id": (("scene_clips", "video_id"),),
            "duration_s": (("scene_clips", "duration_s"),),
            "source_uri": (("scene_clips", "source_uri"),),
            "width": (("raw_videos", "width"),),
            "height": (("raw_videos", "height"),),
            "motion": _SCORED_FROM,
            "sharpness": _SCORED_FROM,
            "brightness": _SCORED_FROM,
            "scores": _SCORED_FROM,
            PARTITION_COLUMN: (("scene_clips", PARTITION_COLUMN),),
        },
        preview=("clip_id", "motion", "sharpness", "brightness", "passed", "reject_reason"),
        figures=(
            fig.RowCount(),
            fig.Count("passed", "passed"),
            fig.Remainder("rejected", of="passed"),
            fig.Rate("pass_rate", "passed"),
            fig.Reasons("rejections_by_reason", "reject_reason"),
            fig.RuleCount("duplicates", "reject_reason", rule="duplicate"),
            fig.Count("near_duplicates", "duplicate_kind", equals="near"),
            fig.Count("semantic_duplicates", "duplicate_kind", equals="semantic"),
            fig.EarlierDay("duplicates_of_earlier_days", "duplicate_kept_date"),
            fig.Remainder("duplicates_within_day", of="duplicates_of_earlier_days", total="duplicates"),
            fig.GroupSizes("duplicate_group_sizes", "duplicate_group"),
        ),
        plotted=(fig.ROW_COUNT, "passed", "pass_rate", "duplicates", "duplicates_of_earlier_days", "clips_per_s"),
        throughput=("clips_per_s", fig.ROW_COUNT),
    ),
    TableSpec(
        "clip_captions",
        CLIP_CAPTIONS,
        key=("clip_id", "caption_track"),
        upstream="filtered_clips",
        lineage={
            "clip_id": (("filtered_clips", "clip_id"),),
            "frame_timestamps_s": (*_SCENE_RANGE, ("raw_videos", "fps")),
            "caption_fields": (("scene_clips", "source_uri"), *_SCENE_RANGE),
            "video_id": (("scene_clips", "video_id"),),
            "source_uri": (("scene_clips", "source_uri"),),
            "num_frames": (*_SCENE_RANGE, ("raw_videos", "fps")),
            "caption": (("scene_clips", "source_uri"), *_SCENE_RANGE),
            PARTITION_COLUMN: (("filtered_clips", PARTITION_COLUMN),),
        },
        # The caption first (whole ids make the preview wider than the page), then its way back: clip, video and
        # source object, whole.
        # (no caption_track: each track is an asset of its own, and the caption must fit the page whole)
        preview=("status", "caption", "clip_id", "video_id", "source_uri", "error", "output_tokens"),
        figures=(
            fig.RowCount(),
            fig.Remainder("captions", of="captions_failed"),
            fig.Count("captions_failed", "status", equals="failed"),
            fig.Rate("failure_rate", "captions_failed"),
            fig.Reasons("failures_by_reason", "error", whole=True),
        ),
        plotted=(fig.ROW_COUNT, "captions_failed", "captions_per_s", "goodput", "stragglers"),
    ),
    TableSpec(
        "training_shards",
        TRAINING_SHARDS,
        key="clip_id",
        upstream="clip_captions",
        lineage={
            "clip_id": (("clip_captions", "clip_id"),),
            "video_id": (("clip_captions", "video_id"),),
            "source_uri": (("clip_captions", "source_uri"),),
            "caption_chars": (("clip_captions", "caption"),),
            "caption_track": (("clip_captions", "caption_track"),),
            "num_frames": _SCENE_RANGE,
            "fps": (("raw_videos", "fps"),),
            "shard_uri": (("clip_captions", "caption"), *_SCENE_RANGE, ("raw_videos", "source_uri")),
            PARTITION_COLUMN: (("clip_captions", PARTITION_COLUMN),),
        },
        preview=("clip_id", "bucket", "shard_uri", "num_frames", "width", "height", "status"),
        figures=(
            fig.RowCount(),
            fig.Remainder("samples", of="samples_failed"),
            fig.Count("samples_failed", "status", equals="failed"),
            fig.Distinct("shards", "shard_uri"),
            fig.Reasons("samples_by_bucket", "bucket"),
            fig.Total("sample_bytes", "sample_bytes"),
            fig.Total("frames", "num_frames"),
            fig.Total("seconds_of_video", "duration_s"),
        ),
        plotted=(fig.ROW_COUNT, "samples_failed", "shards", "samples_per_s"),
        throughput=("samples_per_s", fig.ROW_COUNT),
    ),
)
TABLE_NAMES: tuple[str, ...] = tuple(t.name for t in TABLE_SPECS)
# Tables the engine keeps for itself beside the asset tables: no asset, no gates; written with the asset they serve.
NEAR_DUP_INDEX = pa.schema(
    [
        pa.field(
            "band_key",
            pa.int64(),
            nullable=False,
            metadata={
                "description": "band number << bits | that band's bits of a PDQ view hash of one of the clip's filed "
                "frames (dedup.near.history_keys: 8 bands of 28 bits of 4 frames)"
            },
        ),
        pa.field(
            "clip_key",
            pa.int64(),
            nullable=False,
            metadata={
                "description": "the clip whose fingerprint has this key: the first 8 bytes of the BLAKE2b digest of "
                "its filtered_clips.clip_id (dedup.cross_day.clip_keys)"
            },
        ),
        pa.field(PARTITION_COLUMN, pa.date32(), nullable=False, metadata={"description": "the clip's partition"}),
    ]
)
# A day's vectors and its clusters in one table, so that one Delta commit replaces both (dedup.semantic_index): the
# cluster columns are set on the first row of each cluster only, null elsewhere (and on the rows of an older index).
SEMANTIC_INDEX = pa.schema(
    [
        pa.field("clip_id", pa.string(), nullable=False, metadata={"description": "clip_embeddings.clip_id"}),
        pa.field(
            "cluster",
            pa.int32(),
            nullable=False,
            metadata={"description": "the vector's k-means cluster among its day's"},
        ),
        pa.field(
            "embedding",
            pa.list_(pa.float32()),
            nullable=False,
            metadata={"description": "the clip's L2-normalised embedding (clip_embeddings.embedding)"},
        ),
        pa.field(
            "centroid",
            pa.list_(pa.float32()),
            nullable=True,
            metadata={"description": "on the first row of a cluster: the mean of its vectors (not normalised)"},
        ),
        pa.field(
            "radius",
            pa.float64(),
            nullable=True,
            metadata={
                "description": "on the first row of a cluster: the largest Euclidean distance of a member vector from "
                "the centroid (set exactly on the rows that carry their cluster)"
            },
        ),
        pa.field(
            "members",
            pa.int64(),
            nullable=True,
            metadata={"description": "on the first row of a cluster: the vectors in the cluster"},
        ),
        pa.field(
            "model",
            pa.string(),
            nullable=True,
            metadata={
                "description": "on the first row of a cluster: the model of its vectors (clip_embeddings.model); "
                "clusters of another model are never compared (null: an unknown model, compared by dimension only)"
            },
        ),
        pa.field(PARTITION_COLUMN, pa.date32(), nullable=False, metadata={"description": "the clip's partition"}),
    ]
)
# written by filtered_clips (dedup.cross_day, dedup.semantic_index)
INDEX_TABLES: dict[str, pa.Schema] = {
    "near_dup_index": NEAR_DUP_INDEX,
    "semantic_index": SEMANTIC_INDEX,  # its clusters too: an older lake's semantic_clusters table is no longer read
}


def _described(text: str) -> dict[str, str]:
    return {"description": text}


# written by `videolake captions compare` and caption_compare_job (captioning.compare): two caption tracks side by side
CAPTION_COMPARISONS = pa.schema(
    [
        pa.field("clip_id", pa.string(), nullable=False, metadata=_described("the clip (clip_captions.clip_id)")),
        pa.field("video_id", pa.string(), nullable=False, metadata=_described("the clip's video")),
        pa.field(
            "track_a", pa.string(), nullable=False, metadata=_described("the first track compared (caption_track)")
        ),
        pa.field("track_b", pa.string(), nullable=False, metadata=_described("the second track compared")),
        pa.field("status_a", pa.string(), nullable=False, metadata=_described("ok | failed | missing in track_a")),
        pa.field("status_b", pa.string(), nullable=False, metadata=_described("ok | failed | missing in track_b")),
        pa.field("caption_a", pa.string(), metadata=_described("track_a's caption; null unless status_a is ok")),
        pa.field("caption_b", pa.string(), metadata=_described("track_b's caption; null unless status_b is ok")),
        pa.field("words_a", pa.int32(), metadata=_described("caption_a's length in words; null without a caption")),
        pa.field("words_b", pa.int32(), metadata=_described("caption_b's length in words; null without a caption")),
        pa.field("flags_a", pa.list_(pa.string()), nullable=False, metadata=_described("QA flags of caption_a")),
        pa.field("flags_b", pa.list_(pa.string()), nullable=False, metadata=_described("QA flags of caption_b")),
        pa.field(
            "judge_verdict",
            pa.string(),
            metadata=_described("A | B | tie | invalid (an answer that names neither); null when not judged"),
        ),
        pa.field(
            "judge_order",
            pa.string(),
            metadata=_described(
                "AB: the judge saw caption_a first; BA: caption_b first (drawn per clip from the seed)"
            ),
        ),
        pa.field("judge_answer", pa.string(), metadata=_described("the judge model's raw answer")),
        pa.field("judge_model", pa.string(), metadata=_described("the judge model; null when not judged")),
        pa.field(PARTITION_COLUMN, pa.date32(), nullable=False, metadata=_described("the clip's partition")),
    ]
)
DERIVED_TABLES: dict[str, pa.Schema] = {"caption_comparisons": CAPTION_COMPARISONS}


# Parquet encodings of columns, per table, that every writer of the table uses (Lake.write_partitions), like its schema.
# near_dup_index.band_key: a day's keys are written sorted, so delta-encoded they take 40 % of the plain column and
# read 3x faster (dictionary encoding off: it would be tried first and fail on unique keys).
ParquetEncoding = Literal[
    "PLAIN", "RLE", "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "BYTE_STREAM_SPLIT"
]  # deltalake.ColumnProperties' encodings
COLUMN_ENCODINGS: dict[str, dict[str, ParquetEncoding]] = {"near_dup_index": {"band_key": "DELTA_BINARY_PACKED"}}

TABLES: dict[str, pa.Schema] = {t.name: t.schema for t in TABLE_SPECS}
LAKE_SCHEMAS: dict[str, pa.Schema] = {**TABLES, **INDEX_TABLES, **DERIVED_TABLES}  # every Delta table the lake uses
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {t.name: t.key_columns for t in TABLE_SPECS}


def table_spec(table: str) -> TableSpec:
    """The spec of the table named ``table``; KeyError for an unknown name."""
    for spec in TABLE_SPECS:
        if spec.name == table:
            return spec
    raise KeyError(f"no table {table!r}; the tables are {', '.join(TABLE_NAMES)}")


def upstream_of(table: str, present: Any = None) -> list[str]:
    """The tables ``table`` is computed from (its asset's deps): [] for the first table. ``present``: the optional
    tables whose assets exist (default none); a table it ``reads`` is a dep only when its asset exists."""
    spec = table_spec(table)
    present = set(present or ())
    reads = [t for t in spec.reads if not table_spec(t).optional or t in present]
    return ([spec.upstream] if spec.upstream else []) + reads


def clip_id(video_id: str, start_frame: int, end_frame: int) -> str:
    """Deterministic clip id: the video and its frame range [start, end)."""
    return f"{video_id}_{start_frame:08d}_{end_frame:08d}"
