"""The GPU asset: clip_captions, one row per passed clip of filtered_clips, captioned by a VLM on Ray.

It is built by a factory because its code_version derives from the captioner's settings (model, revision, prompt,
sampling, frames): changing any of them marks the existing partitions stale in the UI.

Backfill policy: the code location's (partitions.backfill_policy). By default every day is a run of its own: a day
that fails stops only itself, at the price of one ephemeral Ray cluster (KubeRay in production) and one model load per
day. With VIDEOLAKE_DAYS_PER_RUN=N (0: the whole range) a backfill's runs caption N days each, with one cluster and
one load per actor for all of them.

Caption tracks (docs/captioning.md): the same factory builds one asset per track. The default track (the captioner
resource's own settings) is ``clip_captions``; a track declared in $VIDEOLAKE_CAPTION_TRACKS is
``clip_captions__<track>`` in the group ``caption_tracks``, with its own code_version, gates and history in the UI.
Each writes only its own rows of the one clip_captions table, per (day, track), so materializing one never touches
another. Declared tracks are not in the daily pipeline job: a track under trial is backfilled over the days wanted
(its clips are the passed clips already there: nothing is split or scored again), and a track the team adopts
becomes the default.
"""

import dataclasses
from typing import Any

import dagster as dg
from dagster_ray import RayResource

from videolake.assets.checks import caption_asset_name
from videolake.assets.guard import step_guard
from videolake.assets.metadata import asset_metadata, caption_figures, column_schema
from videolake.assets.partitions import backfill_policy, daily_partitions, partition_keys
from videolake.assets.ui_metadata import add_partition_figures, column_lineage, preview_of, tag_run
from videolake.platform.captioning.base import DEFAULT_TRACK
from videolake.platform.lake.schemas import CLIP_CAPTIONS, table_spec, upstream_of
from videolake.platform.lake.table import PartitionRange
from videolake.resources import LakeResource, ObjectStoreResource
from videolake.resources.captioner import CaptionerResource, track_captioner
from videolake.resources.ray_on_demand import connect_on_demand

GROUP = "videolake"
TRACKS_GROUP = "caption_tracks"  # the declared (non-default) caption tracks: materialized on demand


def add_contact_sheets(
    context: dg.AssetExecutionContext, keys: list[str], lake, store, track: str = DEFAULT_TRACK
) -> None:
    """Each partition's materialization shows a contact sheet: a few of its clips (middle frame) with their
    captions, as an image in markdown, and the clips' ids below it to follow them (``videolake lineage ID``)."""
    import base64

    from videolake.platform.captioning.contact_sheet import contact_sheet_jpeg, day_samples

    for key in keys:
        samples = day_samples(lake, key, track=track)
        sheet = contact_sheet_jpeg(store, samples) if samples else None
        if sheet is None:
            continue
        ids = "\n".join(f"- `{s['clip_id']}`: {s['caption']}" for s in samples)
        text = f"![contact sheet of {key}](data:image/jpeg;base64,{base64.b64encode(sheet).decode()})\n\n{ids}"
        context.add_asset_metadata({"contact_sheet": dg.MetadataValue.md(text)}, partition_key=key)


def gpu_step(partitions_def: dg.PartitionsDefinition | None) -> dict:
    """What every GPU step's asset shares: the daily partitions and backfill policy, the gpu pool, the retry."""
    return dict(
        partitions_def=partitions_def or daily_partitions(),
        backfill_policy=backfill_policy(),
        # Retrying recomputes the range; the overwrite makes it idempotent. Model errors per clip are already rows
        # with status=failed, so only infrastructure failures (a lost actor or node) reach this.
        retry_policy=dg.RetryPolicy(max_retries=1, delay=10),
        group_name=GROUP,
        owners=["team:ml-data"],
        pool="gpu",
    )


def build_clip_captions(
    captioner: CaptionerResource,
    partitions_def: dg.PartitionsDefinition | None = None,
    track: str = DEFAULT_TRACK,
    overrides: dict[str, Any] | None = None,
) -> dg.AssetsDefinition:
    """The asset of caption track ``track`` (the default: clip_captions) over ``partitions_def`` (default:
    ``daily_partitions()``, read now): ``captioner``'s settings with the track's ``overrides`` on top."""
    from videolake.platform.captioning.base import code_version

    overrides = dict(overrides or {})
    settings = track_captioner(captioner, track, overrides) if track != DEFAULT_TRACK else captioner
    engine_config = settings.to_config()
    version = code_version(engine_config)
    name = caption_asset_name(track)
    deps = [*upstream_of("clip_captions")]
    if engine_config.source_track is not None:
        deps.append(caption_asset_name(engine_config.source_track))
    step = gpu_step(partitions_def)
    if track != DEFAULT_TRACK:
        step["group_name"] = TRACKS_GROUP

    @dg.asset(
        name=name,
        **step,
        kinds={"deltalake", "ray", "vllm"},
        deps=deps,
        code_version=version,
        description=f"Caption track `{track}` of clip_captions: one caption row per passed clip (status ok with the "
        "caption, or failed with the error), from a vision-language model on vLLM in a Ray actor pool; model, "
        "prompt (version and hash), sampling, engine and version, and the frames' times recorded on every row."
        + (f" A second pass over track `{engine_config.source_track}`." if engine_config.source_track else ""),
        metadata={
            "dagster/column_schema": column_schema(CLIP_CAPTIONS),
            "captioner_code_version": version,
            "caption_track": track,
            "caption_track_settings": dg.MetadataValue.json(
                {
                    "model": engine_config.model_label,
                    "model_revision": engine_config.model_revision,
                    "prompt_version": engine_config.prompt_version,
                    "sampling": dataclasses.asdict(engine_config.sampling),
                    "frames": dataclasses.asdict(engine_config.frames),
                    "input_mode": engine_config.input_mode,
                    "source_track": engine_config.source_track,
                    "overrides": overrides,
                }
            ),
        },
    )
    @step_guard
    def clip_captions(
        context: dg.AssetExecutionContext,
        object_store: ObjectStoreResource,
        lake: LakeResource,
        captioner: CaptionerResource,
        caption_ray: RayResource,
    ) -> dg.MaterializeResult:
        from videolake.platform.captioning.stage import caption_partitions

        keys = partition_keys(context)
        lk = lake.get_lake()
        # the run's captioner settings (launchpad) with this track's overrides on top
        run_settings = track_captioner(captioner, track, overrides) if track != DEFAULT_TRACK else captioner
        config = run_settings.to_config()
        tag_run(context, "clip_captions", captioner_code_version=version, gpu=config.num_gpus_per_actor > 0)
        with connect_on_demand(context, caption_ray):
            run = caption_partitions(
                lk,
                PartitionRange.of(keys),
                config,
                store=object_store.get_store(),
                progress=context.log.info,
                prepare=lambda: run_settings.ensure_model(context.log),
            )
        for figures in run.per_partition.values():
            figures.pop("useful_s", None)
        add_partition_figures(context, "clip_captions", run.per_partition, keys, lk)
        add_contact_sheets(context, keys, lk, object_store.get_store(), track)
        extra = {
            **caption_figures(run.metrics),
            # across every attempt of this range: model load, idle and lost work count against it
            "goodput": run.goodput,
            "accelerator_s_all_attempts": run.accelerator_s_all_attempts,
            "clips_reused": run.clips_reused,
            "clips_computed": run.clips_computed,
            "clips_retried": run.clips_retried,
            "phases_s": run.phases,
            "model": config.model_label,
            "prompt_version": config.prompt_version,
            "caption_track": track,
        }
        counts = table_spec("clip_captions").merge_figures(list(run.per_partition.values()))
        return dg.MaterializeResult(
            metadata={
                **asset_metadata(
                    "clip_captions",
                    counts,
                    keys,
                    run.write,
                    run.seconds,
                    extra=extra,
                    table_rows=lk.row_count("clip_captions", None),
                    preview=preview_of(lk, "clip_captions", keys),
                ),
                **{k: dg.MetadataValue.int(v) for k, v in run.progress.as_metadata().items()},
                "dagster/column_lineage": column_lineage("clip_captions"),
            }
        )

    return clip_captions


def build_caption_tracks(
    captioner: CaptionerResource,
    partitions_def: dg.PartitionsDefinition | None = None,
    tracks: dict[str, dict[str, Any]] | None = None,
) -> list[dg.AssetsDefinition]:
    """The default track's asset and one per declared track (``tracks``, default: $VIDEOLAKE_CAPTION_TRACKS)."""
    from videolake.resources.captioner import load_caption_tracks

    declared = load_caption_tracks() if tracks is None else tracks
    return [
        build_clip_captions(captioner, partitions_def),
        *(build_clip_captions(captioner, partitions_def, name, o) for name, o in sorted(declared.items())),
    ]
