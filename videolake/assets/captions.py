"""The GPU asset: clip_captions, one row per passed clip of filtered_clips, captioned by a VLM on Ray.

It is built by a factory because its code_version derives from the captioner's settings (model, revision, prompt,
sampling, frames): changing any of them marks the existing partitions stale in the UI.

Backfill policy: single_run on purpose. A multi-partition backfill is then one run with one step, so ONE ephemeral
Ray cluster (KubeRay in production, created and deleted by the `caption_ray` resource around the step) and one model
load per actor serve every partition of the backfill instead of paying cluster start + weight load per day.
"""

import time

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from dagster_ray import RayResource

from videolake.assets.guard import step_guard
from videolake.assets.metadata import column_schema, reason_counts, write_metadata
from videolake.assets.partitions import daily_partitions, partition_keys
from videolake.assets.ui_metadata import add_partition_metadata, column_lineage, record_preview
from videolake.platform.lake import PartitionRange
from videolake.platform.schemas import CLIP_CAPTIONS
from videolake.resources import LakeResource, ObjectStoreResource
from videolake.resources.captioner import CaptionerResource

GROUP = "videolake"


def clips_to_caption(lake, rng: PartitionRange) -> pa.Table:
    """Passed clips of the range joined with their frame ranges (scene_clips) and frame rate (raw_videos)."""
    filtered = lake.read_partitions("filtered_clips", rng, columns=["clip_id", "passed"])
    passed = filtered.filter(pc.equal(filtered.column("passed"), True)).select(["clip_id"])
    clips = lake.read_partitions(
        "scene_clips",
        rng,
        columns=["clip_id", "video_id", "source_uri", "start_frame", "end_frame", "clip_uri", "partition_date"],
    )
    videos = lake.read_partitions("raw_videos", rng, columns=["video_id", "fps"])
    joined = passed.join(clips, "clip_id", join_type="inner").join(videos, "video_id", join_type="left outer")
    return joined.sort_by("clip_id")


def build_clip_captions(captioner: CaptionerResource) -> dg.AssetsDefinition:
    from videolake.platform.captioning.base import code_version

    version = code_version(captioner.to_config())

    @dg.asset(
        name="clip_captions",
        partitions_def=daily_partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        # Retrying re-captions the whole range; the overwrite makes it idempotent. Model errors per clip are
        # already rows with status=failed, so only infrastructure failures (a lost actor or node) reach this.
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
    @step_guard
    def clip_captions(
        context: dg.AssetExecutionContext,
        object_store: ObjectStoreResource,
        lake: LakeResource,
        captioner: CaptionerResource,
        caption_ray: RayResource,
    ) -> dg.MaterializeResult:
        from videolake.platform.captioning.frames import store_opener
        from videolake.platform.captioning.pipeline import caption_clips

        keys = partition_keys(context)
        rng = PartitionRange.of(keys)
        lk = lake.get_lake()
        clips = clips_to_caption(lk, rng)
        context.log.info(f"{clips.num_rows} passed clips to caption in {len(keys)} partition(s)")
        captioner.ensure_model(context.log)
        config = captioner.to_config()
        store = object_store.get_store()
        t0 = time.monotonic()
        table, metrics = caption_clips(
            clips, config, open_source=store_opener(lambda _uri, _s=store: _s), store=store, progress=context.log.info
        )
        elapsed = time.monotonic() - t0
        result = lk.write_partitions("clip_captions", table, rng)
        m = metrics.to_metadata()
        add_partition_metadata(context, table, keys, _captions_partition_metadata)
        return dg.MaterializeResult(
            metadata={
                **write_metadata(result, keys),
                "dagster/column_lineage": column_lineage("clip_captions"),
                # numeric, so the UI plots them over partitions
                **{k: (dg.MetadataValue.float(float(v)) if isinstance(v, float) else dg.MetadataValue.int(int(v)))
                   for k, v in m.items()},
                "per_actor": dg.MetadataValue.json([a.__dict__ for a in metrics.per_actor]),
                "failures_by_reason": dg.MetadataValue.json(
                    reason_counts([e.split(":")[0] if e else None for e in table.column("error").to_pylist()])
                ),
                "model": dg.MetadataValue.text(config.model_label),
                "prompt_version": dg.MetadataValue.text(config.prompt_version),
                "seconds": dg.MetadataValue.float(round(elapsed, 3)),
                "preview": record_preview(table, CAPTIONS_PREVIEW),
            }
        )

    return clip_captions


# The caption row's way back to its clip, video and source object, then the caption itself.
CAPTIONS_PREVIEW = ["clip_id", "video_id", "source_uri", "status", "caption", "error", "output_tokens"]


def _captions_partition_metadata(part: pa.Table) -> dict:
    status = part.column("status").to_pylist()
    return {
        "captions": dg.MetadataValue.int(status.count("ok")),
        "captions_failed": dg.MetadataValue.int(status.count("failed")),
        "failures_by_reason": dg.MetadataValue.json(
            reason_counts([e.split(":")[0] if e else None for e in part.column("error").to_pylist()])
        ),
        "preview": record_preview(part, CAPTIONS_PREVIEW),
    }
