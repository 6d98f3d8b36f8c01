"""The one Definitions object. VIDEOLAKE_PROFILE picks the resources: `local` (default, embedded) or `prod`.

Every endpoint, bucket and secret of the prod profile comes from environment variables (dg.EnvVar), never code.
"""

from __future__ import annotations

import os

import dagster as dg

from videolake.assets import cpu_assets
from videolake.assets.automation import daily_schedule, pipeline_job
from videolake.assets.sensors import landing_sensor

PROFILE = os.environ.get("VIDEOLAKE_PROFILE", "local")


def local_resources() -> dict:
    from dagster_ray import Lifecycle, LocalRay

    from videolake.resources import LakeResource, ObjectStoreResource

    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    ray_cpus = int(os.environ.get("VIDEOLAKE_RAY_CPUS", str(os.cpu_count() or 2)))
    ray_init = {"num_cpus": ray_cpus, "include_dashboard": False, "ignore_reinit_error": True}
    return {
        "object_store": ObjectStoreResource(kind="local", root=os.path.join(data, "store")),
        "lake": LakeResource(root=os.path.join(data, "lake")),
        # Ray starts when a stage has work (resources/ray_on_demand.py): a day with nothing to do never starts it.
        "ray_cluster": LocalRay(ray_init_options=ray_init, lifecycle=Lifecycle(connect=False)),
        # Locally the GPU step gets its own local Ray for the step's lifetime, like the ephemeral KubeRay cluster.
        "caption_ray": LocalRay(ray_init_options=ray_init, lifecycle=Lifecycle(connect=False)),
        "captioner": captioner_from_env(),
    }


def captioner_from_env(default_gpus: float = 0.0):
    """The captioner settings. Model and prompt are plain settings (not secrets), read here so that they also
    define the caption asset's code_version."""
    from videolake.resources.captioner import CaptionerResource

    env = os.environ
    kwargs = {
        "backend": env.get("VIDEOLAKE_CAPTION_BACKEND", "vllm"),
        "model": env.get("VIDEOLAKE_CAPTION_MODEL", ""),
        "model_revision": env.get("VIDEOLAKE_CAPTION_MODEL_REVISION") or None,
        "prompt_version": env.get("VIDEOLAKE_CAPTION_PROMPT_VERSION", "v1-describe"),
        "num_actors": int(env.get("VIDEOLAKE_CAPTION_ACTORS", "1")),
        "num_gpus_per_actor": float(env.get("VIDEOLAKE_CAPTION_GPUS_PER_ACTOR", str(default_gpus))),
    }
    if kwargs["num_gpus_per_actor"] > 0:
        kwargs["enforce_eager"] = False
        kwargs["num_cpus_per_actor"] = 1.0
    return CaptionerResource(**kwargs)


def resources_for(profile: str) -> dict:
    if profile == "local":
        return local_resources()
    if profile == "prod":
        from videolake.resources.prod import prod_resources

        return prod_resources()
    raise ValueError(f"unknown VIDEOLAKE_PROFILE {profile!r}: use 'local' or 'prod'")


def gate_overrides(captioner) -> dict | None:
    """The tiny random-weight test model writes random text: its captions cannot pass content gates (length,
    repetition, refusal), so those become warnings with it. A real model gets every gate as configured."""
    if captioner.uses_tiny_model:
        from videolake.platform.gates import LENIENT_CAPTION_CONTENT

        return LENIENT_CAPTION_CONTENT
    return None


def build_definitions(profile: str = PROFILE) -> dg.Definitions:
    from videolake.assets.captions import build_clip_captions

    from videolake.assets.checks import build_all_gate_checks
    from videolake.assets.landing import LANDING_CHECKS

    resources = resources_for(profile)
    assets = [*dg.load_assets_from_modules([cpu_assets]), build_clip_captions(resources["captioner"])]
    return dg.Definitions(
        assets=assets,
        asset_checks=[*build_all_gate_checks(overrides=gate_overrides(resources["captioner"])), *LANDING_CHECKS],
        jobs=[pipeline_job],
        schedules=[daily_schedule],
        sensors=[landing_sensor],
        resources=resources,
    )


defs = build_definitions()
