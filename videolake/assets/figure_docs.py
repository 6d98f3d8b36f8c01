"""Every figure an asset reports, with its unit and what it means in one line (the ``details`` and ``step`` tables
of a materialization show them beside the value). A figure without an entry here shows as undocumented, and
tests/assets/test_metadata.py fails on it."""

from __future__ import annotations

# label -> (unit, meaning)
FIGURE_DOCS: dict[str, tuple[str, str]] = {
    # rows of the day and of the table (Dagster's own labels)
    "dagster/partition_row_count": ("rows", "rows of this partition (the day) in the table"),
    "dagster/row_count": ("rows", "rows of the whole table, every partition"),
    # raw_videos
    "videos_ok": ("videos", "videos probed and accepted"),
    "videos_rejected": (
        "videos",
        "landed files rejected (not a video, unreadable, too short...), each with its reason",
    ),
    "reject_rate": ("share 0-1", "videos_rejected / rows"),
    "copies_of_earlier_days": ("videos", "files whose exact bytes were landed on an earlier day (no clip is cut)"),
    "rejections_by_reason": ("rows per reason", "rejected rows counted by reject_reason"),
    "bytes": ("bytes", "size of the landed files"),
    "frames": ("frames", "video frames in the partition's rows"),
    "videos_per_s": ("videos/s", "rows written per wall second of the step"),
    # scene_clips
    "videos": ("videos", "distinct videos the clips come from"),
    "detect_errors": ("clips", "whole-video clips whose scene detection failed (rejected later, with the reason)"),
    "frames_per_s": ("frames/s", "video frames decoded per wall second of the step"),
    "videos_detected_on_gpus": ("videos", "videos whose cuts the GPU pre-pass (TransNetV2) detected"),
    # clip_embeddings
    "embeddings": ("clips", "clips with an embedding"),
    "embeddings_failed": ("clips", "clips that could not be embedded, each with its error"),
    "similarity": (
        "cosine",
        "per day: each clip's highest similarity within its cluster, and what eps values "
        "would reject (choose semantic_eps from it)",
    ),
    # filtered_clips
    "passed": ("clips", "clips that passed every quality rule"),
    "rejected": ("clips", "clips rejected by at least one rule"),
    "pass_rate": ("share 0-1", "passed / rows"),
    "duplicates": ("clips", "clips rejected as duplicates of a kept clip (near or semantic)"),
    "near_duplicates": ("clips", "duplicates found by the PDQ fingerprint"),
    "semantic_duplicates": ("clips", "duplicates found by the embeddings (cosine >= 1 - semantic_eps)"),
    "duplicates_of_earlier_days": ("clips", "duplicates whose kept clip lies in an earlier day"),
    "duplicates_within_day": ("clips", "duplicates whose kept clip lies in the same day"),
    "duplicate_group_sizes": ("groups per size", "groups counted by their members in this day"),
    "clips_per_s": ("clips/s", "rows written per wall second of the step"),
    "near_dup_candidates": ("clips", "clips of other days found through the index and verified"),
    "near_dup_index_completed": ("days", "days the near-duplicate index lacked, indexed and judged again by this run"),
    "semantic_pairs": (
        "pairs",
        "clip pairs the semantic rule called duplicates, within each judged day and with earlier days",
    ),
    "semantic_indexed": ("clips", "embeddings of the run's days clustered into the semantic index"),
    "days_reevaluated": ("days", "days outside the run whose verdicts changed and were rewritten"),
    "clips_of_copies_removed": (
        "clips",
        "rows removed from the judged days: clips of videos raw_videos marked as copies after they were cut",
    ),
    # clip_captions
    "captions": ("clips", "clips captioned (status ok)"),
    "captions_failed": ("clips", "clips whose captioning failed, each with its error"),
    "failure_rate": ("share 0-1", "failed rows / rows"),
    "failures_by_reason": ("rows per reason", "failed rows counted by their error"),
    "caption_wall_s": ("s", "wall seconds of the caption pipeline (model load included)"),
    "captions_per_s": ("captions/s", "captions per wall second of the pipeline, model load and idle included"),
    "steady_captions_per_s": ("captions/s", "captions per second once every actor had loaded its model"),
    "prompt_tokens_per_s": ("tokens/s", "prompt tokens (frames included) per second of the pipeline"),
    "output_tokens_per_s": ("tokens/s", "generated tokens per second of the pipeline"),
    "model_load_s_mean": ("s", "mean seconds an actor took to load the model"),
    "model_load_s_max": ("s", "longest model load of an actor"),
    "actors": ("actors", "captioner replicas in the actor pool"),
    "idle_actors": ("actors", "actors that captioned nothing"),
    "accelerator_s": ("GPU-s", "GPU-seconds the actors held"),
    "actor_s": ("actor-s", "seconds the actors (on CPU) held"),
    "accelerator": ("", "what the actors ran on: gpu or cpu"),
    "goodput": (
        "share 0-1",
        "accelerator-seconds spent on committed captions / accelerator-seconds held, every attempt included",
    ),
    "stragglers": ("actors", "actors slower than half the median actor"),
    "per_actor": ("per actor", "captions, captions/s, load seconds and straggler flag of each actor"),
    "accelerator_s_all_attempts": ("accelerator-s", "accelerator-seconds held by every attempt of this range"),
    "clips_reused": ("clips", "clips already captioned under this code version (checkpoints reused)"),
    "clips_computed": ("clips", "clips captioned by this run"),
    "clips_retried": ("clips", "clips captioned again after a transient failure"),
    "phases_s": ("s per phase", "seconds of plan, pipeline, finalize and commit"),
    "model": ("", "the model's name and revision"),
    "prompt_version": ("", "the versioned prompt"),
    # training_shards
    "samples": ("samples", "clips packed as WebDataset samples"),
    "samples_failed": ("samples", "clips that could not be encoded, each with its error"),
    "shards": ("shards", "tar shards the day's samples are in"),
    "samples_by_bucket": ("samples per bucket", "samples counted by resolution / aspect / length bucket"),
    "sample_bytes": ("bytes", "bytes of the samples (mp4 + json + txt)"),
    "seconds_of_video": ("s", "seconds of video in the samples"),
    "samples_per_s": ("samples/s", "samples written per wall second of the step"),
    "shards_removed": ("shards", "shards of earlier materializations no release references, deleted"),
    # every step
    "seconds": ("s", "wall seconds of the step's work"),
    "delta_version": ("version", "the Delta table version this step committed"),
    "days_written": ("days", "partitions the step wrote"),
}

UNDOCUMENTED = ("", "(undocumented)")


def figure_doc(label: str) -> tuple[str, str]:
    """(unit, meaning) of ``label``; per-actor labels (actor_<i>_*) share their figure's."""
    if label in FIGURE_DOCS:
        return FIGURE_DOCS[label]
    if label.startswith("actor_") and label.count("_") >= 2:
        base = label.split("_", 2)[2]
        unit, meaning = FIGURE_DOCS.get(base, UNDOCUMENTED)
        return unit, f"one actor's {base}: {meaning}" if meaning != UNDOCUMENTED[1] else meaning
    return UNDOCUMENTED
