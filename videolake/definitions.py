"""The code location: ``defs``, built when Dagster loads it. VIDEOLAKE_PROFILE picks the resources: `local`
(default, embedded) or `prod`.

``defs`` is a ``@dg.definitions`` function, not a Definitions object made at import: the profile, the resources'
settings and the first partition day (VIDEOLAKE_PARTITIONS_START) are read when Dagster (or a command) calls
``defs()``; importing this module reads no setting. Every endpoint, bucket and secret of the prod profile comes from
environment variables (dg.EnvVar).
"""

from __future__ import annotations

import os

import dagster as dg

from videolake.assets.alerts import freshness_alert, gate_failure_alert, run_failure_alert
from videolake.assets.automation import build_pipeline_job, daily_schedule
from videolake.assets.executor import step_executor
from videolake.assets.sensors import landing_sensor


def profile() -> str:
    """The resource profile this process uses (VIDEOLAKE_PROFILE, default ``local``)."""
    return os.environ.get("VIDEOLAKE_PROFILE", "local")


def resources_for(profile: str) -> dict:
    if profile == "local":
        from videolake.resources.local import local_resources

        return local_resources()
    if profile == "prod":
        from videolake.resources.prod import prod_resources

        return prod_resources()
    raise ValueError(f"unknown VIDEOLAKE_PROFILE {profile!r}: use 'local' or 'prod'")


def gate_overrides(captioner) -> dict | None:
    """Gate config on top of the defaults for this captioner: the test model's policy when it runs (its random text
    cannot pass the caption content gates, so they warn); a real model gets every gate as configured."""
    policy = captioner.test_model()
    return policy.gate_overrides() if policy else None


def _with_code_reference(asset):
    """``asset`` with ``dagster/code_references`` naming the function that defines it. Why not
    ``dg.with_source_code_references``: it takes the file of the outermost function, which for our assets is the
    ``@step_guard`` wrapper in assets/guard.py; the definition is the function it wraps."""
    import inspect

    fn = getattr(getattr(getattr(asset, "op", None), "compute_fn", None), "decorated_fn", None)
    if fn is None:
        return asset
    fn = inspect.unwrap(fn)
    ref = dg.LocalFileCodeReference(
        file_path=os.path.abspath(inspect.getsourcefile(fn)), line_number=inspect.getsourcelines(fn)[1]
    )
    value = dg.CodeReferencesMetadataValue(code_references=[ref])
    return asset.map_asset_specs(
        lambda spec: spec.replace_attributes(metadata={**spec.metadata, "dagster/code_references": value})
    )


def code_references(assets: list) -> list:
    """Every asset links to the code that defines it (``dagster/code_references``): the local file, or the file in
    the repository when VIDEOLAKE_GIT_URL names it (e.g. https://github.com/ORG/videolake; branch
    VIDEOLAKE_GIT_BRANCH, default main), as a deployment built from a clone sets them."""
    from pathlib import Path

    assets = [_with_code_reference(a) for a in assets]
    url = os.environ.get("VIDEOLAKE_GIT_URL", "").strip()
    if url:
        mapping = dg.AnchorBasedFilePathMapping(
            local_file_anchor=Path(__file__), file_anchor_path_in_repository="videolake/definitions.py"
        )
        assets = list(
            dg.link_code_references_to_git(
                assets,
                git_url=url.rstrip("/"),
                git_branch=os.environ.get("VIDEOLAKE_GIT_BRANCH", "main"),
                file_path_mapping=mapping,
            )
        )
    return assets


def build_definitions(profile_name: str | None = None) -> dg.Definitions:
    """The Definitions of ``profile_name`` (default: this process's ``profile()``)."""
    from videolake.assets.caption_compare import caption_compare_job
    from videolake.assets.captions import build_caption_tracks
    from videolake.assets.checks import GATED_TABLES, build_all_gate_checks, build_gate_checks
    from videolake.assets.cpu_assets import build_cpu_assets
    from videolake.assets.freshness import freshness_policy, with_freshness
    from videolake.assets.landing import build_landing_checks
    from videolake.assets.partitions import daily_partitions
    from videolake.assets.releases import build_release_defs
    from videolake.resources.captioner import load_caption_tracks

    name = profile_name or profile()
    resources = resources_for(name)
    partitions = daily_partitions()
    optional = []
    if resources["embedder"].enabled:  # an embedding model is configured: semantic duplicates (clip_embeddings)
        from videolake.assets.embeddings import build_clip_embeddings

        optional.append(build_clip_embeddings(resources["embedder"], partitions))
    present = tuple(a.key.to_user_string() for a in optional)
    # every daily table's newest partition is due by VIDEOLAKE_DUE_HOUR (assets/freshness.py)
    assets = with_freshness(
        [*build_cpu_assets(partitions, present), *optional, *build_caption_tracks(resources["captioner"], partitions)],
        freshness_policy(),
    )
    overrides = gate_overrides(resources["captioner"])
    checks = build_all_gate_checks((*GATED_TABLES, *present), overrides=overrides, partitions_def=partitions)
    # each declared caption track's asset has the clip_captions gates over its own rows
    checks += [
        build_gate_checks("clip_captions", overrides, partitions, track=t) for t in sorted(load_caption_tracks())
    ]
    release = build_release_defs(overrides=overrides)
    jobs = [build_pipeline_job(gpu=resources["captioner"].num_gpus_per_actor > 0), *release.jobs, caption_compare_job]
    sensors: list[dg.SensorDefinition] = []
    if name == "prod":  # RayClusters on Kubernetes: reap any that outlived its run
        from videolake.assets.ray_reaper import reaper_definitions

        reaper_jobs, sensors, reaper_resources = reaper_definitions()
        jobs += reaper_jobs
        resources = {**resources, **reaper_resources}
    return dg.Definitions(
        assets=code_references([*assets, *release.assets]),
        asset_checks=[*checks, *build_landing_checks(partitions)],
        jobs=jobs,
        schedules=[daily_schedule],
        sensors=[landing_sensor, run_failure_alert, gate_failure_alert, freshness_alert, *release.sensors, *sensors],
        resources=resources,
        executor=step_executor(run_ray=name == "local"),  # the local profile: one local Ray per run
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
