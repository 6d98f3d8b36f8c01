"""Thresholds of the quality gates: defaults in code, overridable from a YAML file or a dict without code edits.

Resolution order (later wins): the defaults below < the YAML file (the ``path`` argument, else the file named by the
environment variable ``VIDEOLAKE_GATES_FILE``) < an ``overrides`` dict (e.g. a Dagster profile's settings).
The YAML has one mapping per table, its threshold fields plus a ``gates`` mapping of per-gate settings::

    clip_captions:
      max_len: 1500
      gates:
        no_repetition: {severity: warn}
        no_refusal: {enabled: false}

Unknown tables, fields, gate names or severities are errors: a misspelled threshold must not be ignored silently.
See gates.example.yaml next to this module for every knob with its default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

GATES_FILE_ENV = "VIDEOLAKE_GATES_FILE"
SEVERITIES = ("error", "warn")

# Refusal / assistant boilerplate a video caption must never contain (Python regexes, matched anywhere, any case).
DEFAULT_REFUSAL_PATTERNS: tuple[str, ...] = (
    r"(?i)\bI(?:'|’| a)?m (?:sorry|unable to|not able to)\b",
    r"(?i)\bI (?:cannot|can't|can’t|can not|apologi[sz]e)\b",
    r"(?i)\bas an AI\b",
    r"(?i)\bas a (?:large )?language model\b",
    r"(?i)\bI(?:'|’| a)?m (?:just )?an AI\b",
)


@dataclass(frozen=True)
class GateSettings:
    """How one gate is applied."""

    enabled: bool = True  # False: the gate is not evaluated; its result says "disabled" and passes
    severity: str = "error"  # "error": a failure blocks downstream assets; "warn": the failure is reported only

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"gate severity must be one of {SEVERITIES}, got {self.severity!r}")


_DEFAULT_SETTINGS = GateSettings()


@dataclass(frozen=True)
class _TableGates:
    """Common part of every table's gate config: per-gate settings by gate name."""

    GATES: ClassVar[tuple[str, ...]] = ()  # the table's gate names, in evaluation order
    # Per-gate enabled/severity; a gate not listed uses GateSettings() (enabled, severity error).
    gates: Mapping[str, GateSettings] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        unknown = set(self.gates) - set(self.GATES)
        if unknown:
            raise ValueError(f"unknown gate(s) {sorted(unknown)}; known: {', '.join(self.GATES)}")
        # Settings equal to the default are dropped, so configs compare equal whether defaults are spelled out or not.
        kept = {g: s for g, s in self.gates.items() if s != _DEFAULT_SETTINGS}
        object.__setattr__(self, "gates", MappingProxyType(kept))

    def settings(self, gate: str) -> GateSettings:
        if gate not in self.GATES:
            raise KeyError(f"unknown gate {gate!r}; known: {', '.join(self.GATES)}")
        return self.gates.get(gate, _DEFAULT_SETTINGS)


@dataclass(frozen=True)
class RawVideosGates(_TableGates):
    GATES: ClassVar[tuple[str, ...]] = (
        "video_id_unique",
        "status_valid",
        "probe_fields_valid",
        "copies_name_their_original",
        "reject_reason_consistent",
        "reject_rate",
    )
    max_fps: float = 1000.0  # ok rows need 0 < fps <= max_fps; above it the probe misread the time base
    # Why 0.5: single corrupt or unsupported uploads are expected and are rejected with a reason; half of a day's
    # uploads failing to probe points at a systemic cause (broken uploader, new codec, truncated sync), not at files.
    max_reject_rate: float = 0.5  # share of rejected rows that fails the reject_rate gate when exceeded
    # Below this many rows a rate says little (one bad file moves it by >= 20 points): the gate passes with a note.
    min_rows_for_rate: int = 5


@dataclass(frozen=True)
class SceneClipsGates(_TableGates):
    GATES: ClassVar[tuple[str, ...]] = (
        "clip_id_unique",
        "clip_video_known",
        "frame_range_valid",
        "clips_ordered_non_overlapping",
        "coverage",
        "every_video_has_clips",
        "duration_in_bounds",
    )
    # Sum of a video's clip frames must reach this share of its num_frames (gaps = frames no clip covers).
    coverage_min: float = 0.98
    # Slack on each row's max_clip_s (the bound scene_clips cut it under, carried by the row) for frame rounding at
    # the split points, seconds.
    duration_tolerance_s: float = 0.5
    # Why 0.05: a clip over its bound is one file's oddity (a still held longer than max_clip_s), set aside by
    # filtered_clips as too_long; a twentieth of a day's clips over it means the split itself is broken.
    max_out_of_bounds_rate: float = 0.05  # share of clips out of bounds that fails duration_in_bounds when exceeded
    min_rows_for_rate: int = 20  # below this many clips duration_in_bounds passes with a note (one clip is 5 points)
    # No lower bound other than > 0 on purpose: short scenes are kept here and rejected later, with the reason
    # too_short, by the quality stage (filtered_clips), so every frame of a video stays accounted for.
    # Clips with a detect_error (the whole-video fallback clip of a video whose detection failed) are exempt from
    # the duration bound: the quality stage rejects them with the reason detect_error.


@dataclass(frozen=True)
class FilteredClipsGates(_TableGates):
    GATES: ClassVar[tuple[str, ...]] = (
        "scored_exactly_once",
        "scores_valid",
        "reject_reason_consistent",
        "duplicates_name_their_kept_clip",
        "undecodable_rate",
        "pass_rate",
    )
    # A 0 % or 100 % pass rate means a broken scorer or thresholds that filter nothing: both are suspicious.
    min_pass_rate: float = 0.05  # pass rates below this fail the pass_rate gate
    max_pass_rate: float = 0.999  # pass rates above this fail the pass_rate gate
    # Below this many clips the pass rate is noise (2 of 2 passing is normal): the gate passes with a note.
    min_rows_for_rate: int = 10
    # False (default): rejected clips may have null scores — the quality stage writes a clip it could not score
    # (detect_error, score_error, video_missing) as a rejected row with null scores. Passed clips always need
    # every score. True: every row needs every score.
    require_scores_on_rejected: bool = False
    # Why 0.05: a clip that does not decode as the shard encoder reads it is one odd file (rejected undecodable,
    # before captions); a twentieth of a day's clips means a broken decoder or store, not files.
    max_undecodable_rate: float = 0.05  # share of clips rejected undecodable that fails undecodable_rate
    max_motion: float = 255.0  # motion is a mean abs luma difference: 0..max_motion
    max_brightness: float = 255.0  # brightness is a mean luma: 0..max_brightness


@dataclass(frozen=True)
class ClipCaptionsGates(_TableGates):
    GATES: ClassVar[tuple[str, ...]] = (
        "one_caption_per_passed_clip",
        "status_consistent",
        "caption_present",
        "caption_length",
        "no_repetition",
        "no_refusal",
        "provenance_set",
        "failure_rate",
    )
    min_len: int = 8  # shortest acceptable caption of an ok row, characters
    max_len: int = 2000  # longest acceptable caption of an ok row, characters (a runaway generation is longer)
    # Highest acceptable repetition_score (share of the caption's tokens covered by its most repeated 1..3-gram).
    max_repetition: float = 0.5
    refusal_patterns: tuple[str, ...] = DEFAULT_REFUSAL_PATTERNS  # regexes an ok caption must not match
    # Why 0.1: a failed row is a clip the captioner could not handle (decode error, timeout); more than one in ten
    # means the captioner itself is broken or overloaded.
    max_failure_rate: float = 0.1  # share of failed rows that fails the failure_rate gate when exceeded
    # Below this many rows a rate says little: the failure_rate gate passes with a note.
    min_rows_for_rate: int = 5


@dataclass(frozen=True)
class TrainingShardsGates(_TableGates):
    GATES: ClassVar[tuple[str, ...]] = (
        "one_sample_per_eligible_clip",
        "shards_match_table",
        "mp4_frame_counts",
        "failure_rate",
    )
    # The mp4_frame_counts gate decodes every sample of this many shards of the day (the first by sha256: a
    # deterministic, content-independent sample); 0 decodes every shard. Tests decode all; a large day samples.
    decode_shards: int = 0
    # Why 0.05: a clip that captioned (its frames decoded) and then does not encode means a broken encoder or
    # storage, not one odd input.
    max_failure_rate: float = 0.05  # share of failed rows that fails the failure_rate gate when exceeded
    min_rows_for_rate: int = 5  # below this many rows the failure_rate gate passes with a note


@dataclass(frozen=True)
class ClipEmbeddingsGates(_TableGates):
    GATES: ClassVar[tuple[str, ...]] = ("one_row_per_clip", "vectors_well_formed", "failure_rate")
    # Why 0.05: the clips were decoded once already (scene detection); a clip that then does not embed means a
    # broken model or storage, not one odd input.
    max_failure_rate: float = 0.05  # share of failed rows that fails the failure_rate gate when exceeded
    min_rows_for_rate: int = 5  # below this many rows the failure_rate gate passes with a note


@dataclass(frozen=True)
class GateConfig:
    """Thresholds and gate settings of every table."""

    raw_videos: RawVideosGates = field(default_factory=RawVideosGates)  # gates of the probe table
    scene_clips: SceneClipsGates = field(default_factory=SceneClipsGates)  # gates of the scene split
    clip_embeddings: ClipEmbeddingsGates = field(default_factory=ClipEmbeddingsGates)  # gates of the embeddings
    filtered_clips: FilteredClipsGates = field(default_factory=FilteredClipsGates)  # gates of the quality scores
    clip_captions: ClipCaptionsGates = field(default_factory=ClipCaptionsGates)  # gates of the captions
    training_shards: TrainingShardsGates = field(default_factory=TrainingShardsGates)  # gates of the shards

    def for_table(self, table: str) -> _TableGates:
        if table not in TABLE_CONFIGS:
            raise KeyError(f"no gates for table {table!r}; known: {', '.join(TABLE_CONFIGS)}")
        return getattr(self, table)


TABLE_CONFIGS: dict[str, type[_TableGates]] = {
    "raw_videos": RawVideosGates,
    "scene_clips": SceneClipsGates,
    "clip_embeddings": ClipEmbeddingsGates,
    "filtered_clips": FilteredClipsGates,
    "clip_captions": ClipCaptionsGates,
    "training_shards": TrainingShardsGates,
}

# For runs whose captioner is a random-weight test model (random text): caption content gates only warn.
# Structural caption gates (one row per passed clip, non-empty, provenance, failure rate) stay blocking.
LENIENT_CAPTION_CONTENT: dict[str, Any] = {
    "clip_captions": {
        "gates": {
            "caption_length": {"severity": "warn"},
            "no_repetition": {"severity": "warn"},
            "no_refusal": {"severity": "warn"},
        }
    }
}


# One sentence per gate (the Dagster check's description); the thresholds are in the check results' metadata.
GATE_DOCS: dict[str, dict[str, str]] = {
    "raw_videos": {
        "video_id_unique": "video_id is set and unique within the partition.",
        "status_valid": "status is ok, rejected or duplicate.",
        "probe_fields_valid": "ok rows have fps in (0, max_fps] and width, height, size_bytes, duration_s, num_frames > 0.",
        "copies_name_their_original": "every duplicate row (bytes landed on an earlier day) has duplicate_of_date and duplicate_of_uri.",
        "reject_reason_consistent": "every rejected row has a non-empty reject_reason; ok rows have none.",
        "reject_rate": "share of rejected rows <= max_reject_rate (not enforced below min_rows_for_rate rows).",
    },
    "scene_clips": {
        "clip_id_unique": "clip_id is set and unique within the partition.",
        "clip_video_known": "every clip belongs to an ok raw_videos row of the same partition, or to one that another "
        "day's run has marked as a copy since it was cut (filtered_clips removes those clips).",
        "frame_range_valid": "0 <= start_frame < end_frame <= num_frames of the clip's video.",
        "clips_ordered_non_overlapping": "a video's clips are numbered 0, 1, ... in frame order and do not overlap.",
        "coverage": "the clips of every ok video cover at least coverage_min of its frames.",
        "every_video_has_clips": "every ok video of the partition has at least one clip.",
        "duration_in_bounds": "share of clips with duration_s <= 0 or over the row's max_clip_s + duration_tolerance_s "
        "<= max_out_of_bounds_rate (not enforced below min_rows_for_rate rows; those clips are rejected too_long by "
        "filtered_clips; detect_error fallback clips exempt; rows without max_clip_s are counted, not bounded); names "
        "their source objects.",
    },
    "filtered_clips": {
        "scored_exactly_once": "every scene clip of the partition has exactly one row; no rows for other clips.",
        "scores_valid": "scores are set (on passed rows, or all rows) and in range.",
        "reject_reason_consistent": "every rejected clip has a non-empty reject_reason; passed clips have none.",
        "duplicates_name_their_kept_clip": "every duplicate names its group's kept clip (of its day or earlier); a kept clip is never a duplicate.",
        "undecodable_rate": "share of clips rejected undecodable (their frames do not decode as the shard encoder "
        "reads them) <= max_undecodable_rate (not enforced below min_rows_for_rate rows); names their source objects "
        "and those of too_long clips.",
        "pass_rate": "pass rate within [min_pass_rate, max_pass_rate] (not enforced below min_rows_for_rate rows).",
    },
    "clip_captions": {
        "one_caption_per_passed_clip": "exactly one row per passed clip of filtered_clips; no rows for other clips.",
        "status_consistent": "status is ok or failed; failed rows carry an error, ok rows none.",
        "caption_present": "every ok row has a non-blank caption.",
        "caption_length": "ok captions are min_len..max_len characters long.",
        "no_repetition": "no ok caption's repetition_score exceeds max_repetition (a looping token or phrase).",
        "no_refusal": "no ok caption matches the refusal_patterns (assistant boilerplate).",
        "provenance_set": "every row names a non-empty model and prompt_version.",
        "failure_rate": "share of failed rows <= max_failure_rate (not enforced below min_rows_for_rate rows).",
    },
    "clip_embeddings": {
        "one_row_per_clip": "exactly one row per scene clip without a detect_error, no others.",
        "vectors_well_formed": "ok rows: a unit vector of the day's one dimension; failed rows: an error, no vector.",
        "failure_rate": "share of failed rows <= max_failure_rate (not enforced below min_rows_for_rate rows).",
    },
    "training_shards": {
        "one_sample_per_eligible_clip": "exactly one row per ok caption of clip_captions (a passed clip), no others.",
        "shards_match_table": "every shard exists, and its sha256 and sample keys match the table's rows.",
        "mp4_frame_counts": "every mp4 of the checked shards (decode_shards; 0: all) decodes to num_frames frames.",
        "failure_rate": "share of failed rows <= max_failure_rate (not enforced below min_rows_for_rate rows).",
    },
}


def gate_names(table: str) -> tuple[str, ...]:
    """The gate names of ``table``, in evaluation order (stable: they name the Dagster checks)."""
    return TABLE_CONFIGS[table].GATES


def load_gate_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> GateConfig:
    """Defaults < YAML (``path``, else $VIDEOLAKE_GATES_FILE when set) < ``overrides``."""
    env = os.environ if env is None else env
    if path is None and env.get(GATES_FILE_ENV):
        path = env[GATES_FILE_ENV]
    merged: dict[str, Any] = {}
    if path is not None:
        import yaml

        text = Path(path).read_text()
        loaded = yaml.safe_load(text) or {}
        if not isinstance(loaded, Mapping):
            raise ValueError(f"{path}: expected a mapping of table name -> settings, got {type(loaded).__name__}")
        merged = _deep_merge(merged, loaded)
    if overrides:
        merged = _deep_merge(merged, overrides)
    return config_from_dict(merged)


def config_from_dict(data: Mapping[str, Any]) -> GateConfig:
    """A GateConfig from a (partial) nested dict; missing keys keep their defaults, unknown keys are errors."""
    unknown = set(data) - set(TABLE_CONFIGS)
    if unknown:
        raise ValueError(f"unknown table(s) {sorted(unknown)} in gate config; known: {', '.join(TABLE_CONFIGS)}")
    # each table's entry is of its own class (TABLE_CONFIGS), which the dict's one value type cannot say
    tables: dict[str, Any] = {
        name: _table_from_dict(name, cls, data.get(name) or {}) for name, cls in TABLE_CONFIGS.items()
    }
    return GateConfig(**tables)


def config_to_dict(config: GateConfig) -> dict[str, Any]:
    """The full effective config as plain data (for logs, metadata and the example file)."""
    out: dict[str, Any] = {}
    for name in TABLE_CONFIGS:
        tc = config.for_table(name)
        d: dict[str, Any] = {}
        for f in dataclasses.fields(tc):
            value = getattr(tc, f.name)
            if f.name == "gates":
                d["gates"] = {g: dataclasses.asdict(tc.settings(g)) for g in tc.GATES}
            elif isinstance(value, tuple):
                d[f.name] = list(value)
            else:
                d[f.name] = value
        out[name] = d
    return out


# Settings a gate config no longer takes, with where the value lives now (a clear error instead of "unknown field").
RETIRED_FIELDS: dict[str, dict[str, str]] = {
    "scene_clips": {
        "max_clip_s": "each scene_clips row carries the max_clip_s it was cut under (scene_clips' run "
        "config), and the duration gate checks the row against that; remove it here"
    },
}


def _table_from_dict(table: str, cls: type[_TableGates], data: Mapping[str, Any]) -> _TableGates:
    if not isinstance(data, Mapping):
        raise ValueError(f"gate config for {table}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    retired = sorted(unknown & set(RETIRED_FIELDS.get(table, {})))
    if retired:
        raise ValueError(
            f"gate config for {table}: {', '.join(retired)} is no longer a gate setting: "
            + "; ".join(RETIRED_FIELDS[table][n] for n in retired)
        )
    if unknown:
        known = ", ".join(n for n in fields if n != "gates")
        raise ValueError(f"unknown field(s) {sorted(unknown)} for {table}; known: {known}, gates")
    kwargs: dict[str, Any] = {}
    defaults = cls()
    for name, value in data.items():
        if name == "gates":
            kwargs["gates"] = _gate_settings(table, cls, value or {})
        else:
            kwargs[name] = _coerce(f"{table}.{name}", getattr(defaults, name), value)
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise ValueError(f"gate config for {table}: {e}") from None


def _gate_settings(table: str, cls: type[_TableGates], data: Mapping[str, Any]) -> dict[str, GateSettings]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{table}.gates: expected a mapping of gate name -> settings")
    out: dict[str, GateSettings] = {}
    allowed = {f.name for f in dataclasses.fields(GateSettings)}
    for gate, settings in data.items():
        if gate not in cls.GATES:
            raise ValueError(f"unknown gate {gate!r} for {table}; known: {', '.join(cls.GATES)}")
        settings = settings or {}
        if not isinstance(settings, Mapping) or set(settings) - allowed:
            raise ValueError(f"{table}.gates.{gate}: expected a mapping with keys {sorted(allowed)}, got {settings!r}")
        enabled = settings.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ValueError(f"{table}.gates.{gate}.enabled: expected true/false, got {enabled!r}")
        out[gate] = GateSettings(enabled=enabled, severity=str(settings.get("severity", "error")).lower())
    return out


def _coerce(where: str, default: Any, value: Any) -> Any:
    """Check ``value`` against the type of the field's default (ints are accepted for floats)."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true/false, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if isinstance(default, tuple):
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: expected a list of strings, got {value!r}")
        return tuple(value)
    raise TypeError(f"{where}: unsupported field type {type(default).__name__}")


def _deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
