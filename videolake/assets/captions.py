"""The GPU asset: clip_captions, one row per passed clip of filtered_clips, captioned by a VLM on Ray.

It is built by a factory because its code_version derives from the captioner's settings (model, revision, prompt,
sampling, frames): changing any of them marks the existing partitions stale in the UI.

Backfill policy: single_run on purpose. A multi-partition backfill is then one run with one step, so ONE ephemeral
Ray cluster (KubeRay in production, created and deleted by the `caption_ray` resource around the step) and one model
load per actor serve every partition of the backfill instead of paying cluster start + weight load per day.
"""

import dagster as dg
from dagster_ray import RayResource

from videolake.assets.metadata import column_schema, write_metadata
from videolake.assets.partitions import daily_partitions, partition_keys
from videolake.assets.ui_metadata import add_partition_figures, column_lineage, preview_of
from videolake.platform.lake import PartitionRange
from videolake.platform.schemas import CLIP_CAPTIONS
from videolake.resources import LakeResource, ObjectStoreResource
from videolake.resources.captioner import CaptionerResource

GROUP = "videolake"


def build_clip_captions(captioner: CaptionerResource) -> dg.AssetsDefinition:
    from videolake.platform.captioning.base import code_version

    version = code_version(captioner.to_config())

    @dg.asset(
        name="clip_captions",
        partitions_def=daily_partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        # A retry captions only the clips no checkpointed batch holds yet (the commit is one overwrite). Model
        # errors per clip are already rows with status=failed, so only infrastructure failures reach this.
        retry_policy=dg.RetryPolicy(max_retries=1, delay=10),
        group_name=GROUP,
        owners=["team:ml-data"],
        kinds={"delta", "ray", "vllm"},
        deps=["filtered_clips"],
        pool="gpu",
        code_version=version,
        description="One caption row per passed clip (status ok with the caption, or failed with the error), "
        "from a vision-language model on vLLM in a Ray actor pool; model, prompt version and token counts recorded.",
        metadata={"dagster/column_schema": column_schema(CLIP_CAPTIONS), "captioner_code_version": version},
    )
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
        config = captioner.to_config()
        run = caption_partitions(lk, PartitionRange.of(keys), config, store=object_store.get_store(),
                                 progress=context.log.info, prepare=lambda: captioner.ensure_model(context.log))
        m = run.metrics.to_metadata()
        for d in run.per_partition.values():
            d.pop("useful_s", None)
        add_partition_figures(context, lk, "clip_captions", keys, run.per_partition, CAPTIONS_PREVIEW)
        return dg.MaterializeResult(
            metadata={
                **write_metadata(run.write, keys),
                **{k: dg.MetadataValue.int(v) for k, v in run.progress.as_metadata().items()},
                "dagster/column_lineage": column_lineage("clip_captions"),
                # numeric, so the UI plots them over partitions
                **{k: (dg.MetadataValue.float(float(v)) if isinstance(v, float) else dg.MetadataValue.int(int(v)))
                   for k, v in m.items()},
                "goodput": dg.MetadataValue.float(round(run.goodput, 4)),
                "accelerator_s_all_attempts": dg.MetadataValue.float(round(run.accelerator_s_all_attempts, 2)),
                "clips_reused": dg.MetadataValue.int(run.clips_reused),
                "clips_computed": dg.MetadataValue.int(run.clips_computed),
                "per_actor": dg.MetadataValue.json([a.__dict__ for a in run.metrics.per_actor]),
                "model": dg.MetadataValue.text(config.model_label),
                "prompt_version": dg.MetadataValue.text(config.prompt_version),
                "seconds": dg.MetadataValue.float(round(run.seconds, 3)),
                "preview": preview_of(lk, "clip_captions", keys, CAPTIONS_PREVIEW),
            }
        )

    return clip_captions


# The caption row's way back to its clip, video and source object, then the caption itself.
CAPTIONS_PREVIEW = ["clip_id", "video_id", "source_uri", "status", "caption", "error", "output_tokens"]
