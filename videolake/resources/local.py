"""The local profile: everything embedded on one machine (files under VIDEOLAKE_DATA_DIR, a local Ray per step)."""

from __future__ import annotations

import os

from dagster_ray import LocalRay

from videolake.resources.captioner import captioner_from_env
from videolake.resources.embedder import embedder_from_env


class StepLocalRay(LocalRay):
    """dagster-ray's LocalRay, except that it always starts a new local Ray (``ray.init(address="local")``).

    LocalRay calls ``ray.init(address=None)``, and with no address Ray first looks for a cluster to join: the one
    $RAY_ADDRESS names, else the latest one ``ray start`` left running on the machine. Joining one with this
    profile's options fails at once ("When connecting to an existing cluster, num_cpus and num_gpus must not be
    provided"), so any Ray cluster on the machine, or a RAY_ADDRESS exported for another tool, failed every Ray step
    of the local profile. A step's Ray is its own here, as a step's KubeRay cluster is in production.
    """

    @property
    def ray_address(self) -> str:  # type: ignore[override]  # LocalRay's is typed None
        return "local"


def local_resources() -> dict:
    from dagster_ray import Lifecycle

    from videolake.resources import LakeResource, ObjectStoreResource
    from videolake.resources.alerts import alert_webhook_from_env

    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    ray_cpus = int(os.environ.get("VIDEOLAKE_RAY_CPUS", str(os.cpu_count() or 2)))
    ray_init = {"num_cpus": ray_cpus, "include_dashboard": False, "ignore_reinit_error": True}
    return {
        "object_store": ObjectStoreResource(kind="local", root=os.path.join(data, "store")),
        "lake": LakeResource(root=os.path.join(data, "lake")),
        # Ray starts when a stage has work (resources/ray_on_demand.py): a day with nothing to do never starts it.
        "ray_cluster": StepLocalRay(ray_init_options=ray_init, lifecycle=Lifecycle(connect=False)),
        # Locally the GPU step gets its own local Ray for the step's lifetime, like the ephemeral KubeRay cluster.
        "caption_ray": StepLocalRay(ray_init_options=ray_init, lifecycle=Lifecycle(connect=False)),
        "captioner": captioner_from_env(),
        # Off unless VIDEOLAKE_EMBED_MODEL names a model: then clip_embeddings runs on caption_ray.
        "embedder": embedder_from_env(),
        # Failed runs and gates post here (VIDEOLAKE_ALERT_WEBHOOK_URL, a secret: dg.EnvVar); unset: logged only.
        "alert_webhook": alert_webhook_from_env(),
    }
