"""The prod profile's reaper of RayClusters that outlived their step (dagster-ray's ``cleanup_expired_kuberay_clusters``).

A step deletes its cluster when it ends, and a run pod that dies takes its clusters with its Job (ownerReferences,
resources/prod.py). What is left: a cluster created outside a run pod, or whose owner could not be read. The reaper
deletes a cluster without an owner once it is older than DAGSTER_RAY_CLUSTER_EXPIRATION_SECONDS (dagster-ray reads
that variable itself), which must therefore be above the longest a run may take: every run of the code location
carries ``dagster/max_runtime`` = VIDEOLAKE_MAX_RUN_SECONDS (run monitoring fails a run that exceeds it), and the
expiration must be at least that plus an hour, so a legitimate step's cluster is never reaped while its run may still
be going. k8s/configmap.yaml sets both. The reaper refuses to evaluate (its ticks fail with the reason, shown on the
sensor's page; nothing is deleted) while the expiration is unset (dagster-ray's default, 4 h, is below the default
longest run) or too low; the rest of the code location loads and runs as usual.
"""

import os

import dagster as dg

MAX_RUNTIME_TAG = "dagster/max_runtime"
DEFAULT_MAX_RUNTIME_S = 12 * 3600  # the longest a run may take (VIDEOLAKE_MAX_RUN_SECONDS)
EXPIRATION_ENV = "DAGSTER_RAY_CLUSTER_EXPIRATION_SECONDS"


def max_run_seconds() -> int:
    raw = os.environ.get("VIDEOLAKE_MAX_RUN_SECONDS", "").strip()
    return int(raw) if raw else DEFAULT_MAX_RUNTIME_S


def min_expiration_seconds() -> int:
    """The least safe age limit for the reaper: the longest run plus an hour."""
    return max_run_seconds() + 3600


def check_expiration() -> int:
    """DAGSTER_RAY_CLUSTER_EXPIRATION_SECONDS, checked to be at least ``min_expiration_seconds()``."""
    raw = os.environ.get(EXPIRATION_ENV, "").strip()
    least = min_expiration_seconds()
    if not raw.isdigit() or int(raw) < least:
        raise ValueError(
            f"{EXPIRATION_ENV} must be at least VIDEOLAKE_MAX_RUN_SECONDS + 3600 = {least} s, or the RayCluster "
            f"reaper deletes clusters of runs that may still be going; got {raw or 'nothing'} "
            "(k8s/configmap.yaml sets both)"
        )
    return int(raw)


def reaper_definitions() -> tuple[list, list, dict]:
    """(jobs, sensors, resources) of the reaper, running by default."""
    from dagster_ray.kuberay.client import RayClusterClient
    from dagster_ray.kuberay.jobs import delete_kuberay_clusters
    from dagster_ray.kuberay.resources.raycluster import KubeRayClusterClientResource
    from dagster_ray.kuberay.sensors import cleanup_expired_kuberay_clusters

    @dg.sensor(
        name="videolake_raycluster_reaper",
        job=delete_kuberay_clusters,
        minimum_interval_seconds=5 * 60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Deletes RayClusters without an owner that are older than the longest run plus an hour "
        "(dagster-ray's cleanup_expired_kuberay_clusters).",
    )
    def raycluster_reaper(context: dg.SensorEvaluationContext, raycluster_client: dg.ResourceParam[RayClusterClient]):  # noqa: UP037 (Dagster reads it)
        # a SensorDefinition's __call__ is typed as any sensor result; this one's function is a generator
        check_expiration()  # before dagster-ray's sensor reads the variable: never reap with an unsafe age limit
        yield from cleanup_expired_kuberay_clusters(context, raycluster_client=raycluster_client)  # type: ignore[misc]

    return [delete_kuberay_clusters], [raycluster_reaper], {"raycluster_client": KubeRayClusterClientResource()}
