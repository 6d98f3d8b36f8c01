"""The one Definitions object. VIDEOLAKE_PROFILE picks the resources: `local` (default, embedded) or `prod`.

Every endpoint, bucket and secret of the prod profile comes from environment variables (dg.EnvVar), never code.
"""

from __future__ import annotations

import os

import dagster as dg

from videolake.assets import cpu_assets
from videolake.assets.automation import daily_schedule, pipeline_job

PROFILE = os.environ.get("VIDEOLAKE_PROFILE", "local")


def local_resources() -> dict:
    from dagster_ray import LocalRay

    from videolake.resources import LakeResource, ObjectStoreResource

    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    ray_cpus = int(os.environ.get("VIDEOLAKE_RAY_CPUS", str(os.cpu_count() or 2)))
    return {
        "object_store": ObjectStoreResource(kind="local", root=os.path.join(data, "store")),
        "lake": LakeResource(root=os.path.join(data, "lake")),
        "ray_cluster": LocalRay(
            ray_init_options={"num_cpus": ray_cpus, "include_dashboard": False, "ignore_reinit_error": True}
        ),
    }


def resources_for(profile: str) -> dict:
    if profile == "local":
        return local_resources()
    if profile == "prod":
        from videolake.resources.prod import prod_resources

        return prod_resources()
    raise ValueError(f"unknown VIDEOLAKE_PROFILE {profile!r}: use 'local' or 'prod'")


def build_definitions(profile: str = PROFILE) -> dg.Definitions:
    assets = dg.load_assets_from_modules([cpu_assets])
    return dg.Definitions(
        assets=assets,
        jobs=[pipeline_job],
        schedules=[daily_schedule],
        resources=resources_for(profile),
    )


defs = build_definitions()
