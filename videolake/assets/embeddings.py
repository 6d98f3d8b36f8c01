"""The optional GPU asset: clip_embeddings, one embedding per scene clip, read by filtered_clips' semantic rule.

It exists in the code location only when an embedding model is configured (resources/embedder.py): there is none
locally by default. Built by a factory because its code_version derives from the embedder's settings (changing the
model marks the partitions stale, and filtered_clips after them). It runs on the same per-step Ray cluster as the
captions (``caption_ray``: an ephemeral KubeRay cluster with GPUs in prod, a local Ray here).

Each materialization reports, per day, the distribution of every clip's highest cosine similarity within its
k-means cluster and how many clips several eps values would reject (``similarity``): choose
QualityConfig.semantic_eps from it, as NeMo Curator advises.
"""

import dagster as dg
from dagster_ray import RayResource

from videolake.assets.captions import gpu_step
from videolake.assets.cpu_assets import stage_progress, stage_result
from videolake.assets.guard import step_guard
from videolake.assets.metadata import column_schema
from videolake.assets.partitions import partition_keys
from videolake.assets.ui_metadata import tag_run
from videolake.platform.lake.schemas import CLIP_EMBEDDINGS, upstream_of
from videolake.platform.lake.table import PartitionRange
from videolake.resources import LakeResource, ObjectStoreResource
from videolake.resources.embedder import EmbedderResource
from videolake.resources.ray_on_demand import connect_on_demand


def build_clip_embeddings(
    embedder: EmbedderResource, partitions_def: dg.PartitionsDefinition | None = None
) -> dg.AssetsDefinition:
    """clip_embeddings for ``embedder`` (which must name a model) over ``partitions_def``."""
    from videolake.platform.embedding.base import embedding_version

    version = "clip_embeddings-1-" + embedding_version(embedder.to_config())

    @dg.asset(
        name="clip_embeddings",
        **gpu_step(partitions_def),
        kinds={"deltalake", "ray", "pytorch"},
        deps=upstream_of("clip_embeddings"),
        code_version=version,
        description="One L2-normalised embedding per scene clip (frames mean-pooled by the configured model), or a "
        "failed row with its reason; filtered_clips groups clips whose cosine similarity is >= 1 - semantic_eps.",
        metadata={"dagster/column_schema": column_schema(CLIP_EMBEDDINGS)},
    )
    @step_guard
    def clip_embeddings(
        context: dg.AssetExecutionContext,
        object_store: ObjectStoreResource,
        lake: LakeResource,
        embedder: EmbedderResource,
        caption_ray: RayResource,
    ) -> dg.MaterializeResult:
        from videolake.platform.embedding.semantic import SemanticDedupConfig
        from videolake.platform.stages.embed import embed_partitions, similarity_of_days

        keys = partition_keys(context)
        lk = lake.get_lake()
        tag_run(context, "clip_embeddings", gpu=embedder.device == "cuda")
        with connect_on_demand(context, caption_ray):
            run = embed_partitions(
                lk,
                object_store.get_store(),
                PartitionRange.of(keys),
                embedder.to_config(),
                progress=stage_progress(context, "embedded"),
            )
            similarity = similarity_of_days(lk, keys, SemanticDedupConfig())  # Ray tasks: no vectors in the step
        return stage_result(
            context,
            "clip_embeddings",
            run,
            keys,
            lk,
            extra={**run.extra, "model": embedder.to_config().model_label, "similarity": similarity},
        )

    return clip_embeddings
