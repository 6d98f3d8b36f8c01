"""The prod profile: data and tables in S3, Dagster on Kubernetes, every Ray step on its own ephemeral KubeRay cluster.

Two cluster shapes (videolake/platform/runtime/kuberay_spec.py), both created by dagster-ray's KubeRayCluster when a step
starts and deleted when it ends, on success and on failure (``cleanup="always"``):

- ``ray_cluster`` (raw_videos, scene_clips, filtered_clips): a CPU worker group that KubeRay's autoscaler grows from
  VIDEOLAKE_RAY_CPU_MIN_WORKERS to VIDEOLAKE_RAY_CPU_MAX_WORKERS pods while Ray tasks wait, so one day's decoding,
  scene detection and scoring is no longer bound to the run pod; with VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS > 0 also a
  GPU worker group of 0 to that many pods (VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER GPUs each) for scene_clips' TransNetV2;
- ``caption_ray`` (clip_captions): a fixed GPU worker group.

One cluster per step, not one shared by a run's steps. Sharing would save, on each later step of a run, the start
of a cluster minus a connect to a running one. Measured with the real Ray (k8s/bench_ray_startup.py, fresh process
per measurement, 2-core machine shared with other jobs; quietest of four runs, ranges over all four): ``ray start
--head`` 9.7 s (9.7-22.3), a worker's ``ray start`` 6.8 s (6.8-18.7), a Ray Client connect + one task + disconnect,
which both paths pay, 6.8 s (6.8-10.7); LocalRay's ``ray.init`` + one task 7.4 s. Documented Kubernetes figures add
the rest (docs/kubernetes.md, "One RayCluster per step"): a pod starts in <= 5 s at p99 without the image pull (the Kubernetes
pod-startup SLO), KubeRay's readiness probe first runs 10 s after a Ray container starts, and a multi-GB image takes
minutes to pull only on a node without it; nodes outlive the clusters (cluster-autoscaler keeps an unneeded node 10
min), so later steps start on warm nodes. That is about 25-40 s per step, at most about 2 min per run of three CPU
steps, against CPU steps that take hours at the reference workload (600 TB a day). And sharing in dagster-ray 0.4.8
does not work with the kubernetes 36 client it resolves with: a step that finds a shared cluster stamps its lock
through a JSON-patch helper that passes ``response_type`` to ``ApiClient.call_api``, which raises TypeError (the lock
heartbeat makes the same call and only logs it, so a lock can expire under a running step); its cleanup also leaves
the cluster to the reaper sensor for a lock TTL (30 min by default), and it needs lease and patch rights.
tests/k8s/test_kuberay_spec.py pins both facts and that each step of a run gets, and deletes, its own cluster.

Run with Dagster's per-step (multiprocess or k8s_job) executor, the default of the K8sRunLauncher: each step then
initializes only its own resources, so the GPU cluster exists only during clip_captions. An in-process run would
set up both clusters at run start and connect twice in one process (Ray Client allows one connection).

Non-secret settings come from the videolake-config ConfigMap (k8s/configmap.yaml): the KubeRay shapes are read at
load time; the S3 bucket, prefix, endpoint and region, like the credentials (from the videolake-s3 Secret), are
dg.EnvVar, resolved by Dagster at run time, never stored in code or config.
"""

from __future__ import annotations

import functools
import json
import os

import dagster as dg

# How long a step waits for its RayCluster to be ready before it fails (dagster-ray's default is 600 s). A cluster on
# nodes that must first be provisioned and pull the multi-GB image can take longer (docs/kubernetes.md);
# the same bound as run monitoring's start timeout in k8s/values.yaml.
READY_TIMEOUT_S = 1200.0


def _env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise RuntimeError(f"the prod profile needs the environment variable {name} (see k8s/configmap.yaml)")
    return value


def _int_env(name: str) -> int:
    try:
        return int(os.environ[name])
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {os.environ[name]!r}") from None


def _gpu_placement() -> dict:
    """node_selector / tolerations of GPU worker pods (both clusters' GPU groups), where the environment sets them;
    unset: no node selector and the nvidia.com/gpu toleration (the configs' defaults)."""
    kwargs = {}
    if "VIDEOLAKE_RAY_NODE_SELECTOR" in os.environ:
        kwargs["node_selector"] = json.loads(os.environ["VIDEOLAKE_RAY_NODE_SELECTOR"])
    if "VIDEOLAKE_RAY_TOLERATIONS" in os.environ:
        kwargs["tolerations"] = tuple(json.loads(os.environ["VIDEOLAKE_RAY_TOLERATIONS"]))
    return kwargs


def ray_cluster_config():
    """The RayCluster shape of the GPU step, from environment settings: its one worker group is WorkerGroupConfig's
    defaults (the GPU step's group) with VIDEOLAKE_RAY_GPU_WORKERS workers (fixed size),
    VIDEOLAKE_RAY_GPUS_PER_WORKER GPUs each and the GPU placement, where the environment sets them."""
    from videolake.platform.runtime.kuberay_spec import RayClusterSpecConfig, WorkerGroupConfig

    image, namespace = _env("VIDEOLAKE_RAY_IMAGE"), _env("VIDEOLAKE_K8S_NAMESPACE", "videolake")
    group = {}
    if "VIDEOLAKE_RAY_GPU_WORKERS" in os.environ:
        n = _int_env("VIDEOLAKE_RAY_GPU_WORKERS")
        group.update(replicas=n, max_replicas=n)
    if "VIDEOLAKE_RAY_GPUS_PER_WORKER" in os.environ:
        group["gpus_per_worker"] = _int_env("VIDEOLAKE_RAY_GPUS_PER_WORKER")
    group.update(_gpu_placement())
    return RayClusterSpecConfig(image=image, namespace=namespace, worker_groups=(WorkerGroupConfig(**group),))


def cpu_cluster_gpu_group():
    """The CPU stages' optional GPU worker group (scene_clips' TransNetV2), or None (the default): 0 to
    VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS pods of VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER GPUs (default 1), placed like the
    GPU step's workers (VIDEOLAKE_RAY_NODE_SELECTOR, VIDEOLAKE_RAY_TOLERATIONS)."""
    from videolake.platform.runtime.kuberay_spec import cpu_stage_gpu_group

    max_workers = (
        _int_env("VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS")
        if os.environ.get("VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS", "").strip()
        else 0
    )
    gpus = (
        _int_env("VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER")
        if os.environ.get("VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER", "").strip()
        else 1
    )
    if max_workers < 0:
        raise ValueError(f"VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS must be >= 0 (0: no GPU group), got {max_workers}")
    if gpus < 1:
        raise ValueError(f"VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER must be >= 1, got {gpus}")
    if max_workers == 0:
        return None
    return cpu_stage_gpu_group(max_workers, gpus_per_worker=gpus, **_gpu_placement())


def cpu_cluster_config():
    """The CPU stages' autoscaling RayCluster, from environment settings: its CPU group (defaults in
    CPU_STAGE_GROUP) with VIDEOLAKE_RAY_CPU_MIN_WORKERS..VIDEOLAKE_RAY_CPU_MAX_WORKERS workers of
    VIDEOLAKE_RAY_CPU_WORKER_CPUS and VIDEOLAKE_RAY_CPU_WORKER_MEMORY, where the environment sets them, then the GPU
    group of ``cpu_cluster_gpu_group`` if that gives one."""
    from videolake.platform.runtime.kuberay_spec import cpu_stage_cluster_config, cpu_stage_group

    image = os.environ.get("VIDEOLAKE_RAY_CPU_IMAGE") or _env("VIDEOLAKE_RAY_IMAGE")
    namespace = _env("VIDEOLAKE_K8S_NAMESPACE", "videolake")
    group = {}
    if "VIDEOLAKE_RAY_CPU_MIN_WORKERS" in os.environ:
        group["min_replicas"] = _int_env("VIDEOLAKE_RAY_CPU_MIN_WORKERS")
    if "VIDEOLAKE_RAY_CPU_MAX_WORKERS" in os.environ:
        group["max_replicas"] = _int_env("VIDEOLAKE_RAY_CPU_MAX_WORKERS")
    if "VIDEOLAKE_RAY_CPU_WORKER_CPUS" in os.environ:
        group["cpu"] = os.environ["VIDEOLAKE_RAY_CPU_WORKER_CPUS"]
    if "VIDEOLAKE_RAY_CPU_WORKER_MEMORY" in os.environ:
        group["memory"] = os.environ["VIDEOLAKE_RAY_CPU_WORKER_MEMORY"]
    gpu_group = cpu_cluster_gpu_group()
    groups = (cpu_stage_group(**group),) + ((gpu_group,) if gpu_group is not None else ())
    return cpu_stage_cluster_config(image=image, namespace=namespace, worker_groups=groups)


# The run's Kubernetes Job deletes its RayClusters with it (ownerReferences), this long after the run pod ended
# (k8s/values.yaml, runK8sConfig.jobSpecConfig.ttlSecondsAfterFinished).
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"  # set by Kubernetes in every pod


def run_job_owner(api_client, namespace: str, log=None) -> dict | None:
    """The ownerReference of the Kubernetes Job that runs this process (the run pod's owner), or None outside a pod.

    Why: a step deletes its RayCluster when it ends, but a run pod that dies (OOM, eviction, node loss) runs no
    cleanup. Owned by the run's Job, the RayCluster is deleted by Kubernetes' garbage collector when the Job is (its
    TTL after the pod ended), whatever happened to the pod."""
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    pod_name = os.environ.get("HOSTNAME")
    if not os.environ.get(IN_CLUSTER_ENV) or not pod_name:
        if log:
            log.warning(
                "not running in a Kubernetes pod: the RayCluster has no owner (the reaper sensor deletes it "
                "if this step dies)"
            )
        return None
    try:
        pod = k8s.CoreV1Api(api_client).read_namespaced_pod(pod_name, namespace)
    except ApiException as exc:
        if log:
            log.warning(f"cannot read this pod {namespace}/{pod_name} ({exc.status}): the RayCluster has no owner")
        return None
    for ref in pod.metadata.owner_references or []:
        if ref.kind == "Job":
            return {
                "apiVersion": ref.api_version or "batch/v1",
                "kind": "Job",
                "name": ref.name,
                "uid": ref.uid,
                "controller": False,
                "blockOwnerDeletion": False,
            }
    if log:
        log.warning(f"pod {pod_name} is not owned by a Job: the RayCluster has no owner")
    return None


@functools.cache
def owned_client_class():
    """dagster-ray's RayClusterClient whose ``create`` names the run's Job as the RayCluster's owner
    (``run_job_owner``). It goes into KubeRayCluster through dagster-ray's own ``client`` dependency, so the
    cluster resource itself is dagster-ray's, unchanged. Defined on first use: dagster_ray.kuberay imports the
    kubernetes client (the code location loads without it)."""
    import logging

    from dagster_ray.kuberay.client import RayClusterClient

    class OwnedRayClusterClient(RayClusterClient):
        def create(self, body, namespace):
            owner = run_job_owner(self.api_client, namespace, logging.getLogger("videolake.kuberay"))
            if owner is not None:
                body.setdefault("metadata", {})["ownerReferences"] = [owner]
            return super().create(body=body, namespace=namespace)

    return OwnedRayClusterClient


@functools.cache
def _owned_client_resource_class():
    from dagster_ray.kuberay.resources.raycluster import KubeRayClusterClientResource

    class OwnedRayClusterClientResource(KubeRayClusterClientResource):
        """dagster-ray's client resource, providing ``owned_client_class()``."""

        def create_resource(self, context):
            return owned_client_class()(kube_context=self.kube_context, kube_config=self.kube_config)

    return OwnedRayClusterClientResource


def kuberay_cluster_resource(cfg, **overrides):
    """dagster-ray's KubeRayCluster for one step with the RayCluster of ``cfg``: created at step start, deleted at
    its end whatever happened, owned by the run's Job (deleted with it if the run pod dies), no cluster sharing. ``overrides`` (tests: a fake API client, no Ray connect) go to
    the resource as given."""
    from dagster_ray import Lifecycle
    from dagster_ray.kuberay.configs import RayClusterConfig, RayClusterSpec

    from videolake.platform.runtime.kuberay_spec import dagster_ray_spec_kwargs

    kwargs = {
        "ray_cluster": RayClusterConfig(
            metadata={"namespace": cfg.namespace, "labels": dict(cfg.labels)},
            spec=RayClusterSpec(**dagster_ray_spec_kwargs(cfg)),
        ),
        "lifecycle": Lifecycle(cleanup="always"),
        "timeout": READY_TIMEOUT_S,
        "env_vars": {"VIDEOLAKE_PROFILE": "prod"},
        "client": _owned_client_resource_class()(),
        **overrides,
    }
    from dagster_ray.kuberay import KubeRayCluster

    return KubeRayCluster(**kwargs)


def caption_ray_resource(cfg=None, **overrides):
    return kuberay_cluster_resource(cfg or ray_cluster_config(), **overrides)


def cpu_ray_resource(cfg=None, **overrides):
    return kuberay_cluster_resource(cfg or cpu_cluster_config(), **overrides)


def _env_var(name: str, default: str | None = None):
    """``dg.EnvVar(name)``, resolved by Dagster at run time, when the variable is set here; else ``default``.

    Dagster fails a run on an EnvVar whose variable is unset, also for an optional field, so an optional setting
    (prefix, endpoint, region) is an EnvVar only where the environment sets it; where it is unset (k8s/configmap.yaml
    sets all of them) the field keeps its default. Required settings use ``_required_env_var``."""
    return dg.EnvVar(name) if name in os.environ else default


def _required_env_var(name: str):
    """``dg.EnvVar(name)`` of a required setting: checked here so that loading fails at once where it is unset or
    empty, resolved by Dagster at run time."""
    if not _env(name).strip():
        raise RuntimeError(f"the prod profile needs the environment variable {name} non-empty (see k8s/configmap.yaml)")
    return dg.EnvVar(name)


def prod_resources() -> dict:
    """S3 object store and lake on one S3 connection, KubeRay clusters, the captioner.

    Bucket, prefix, endpoint, region and the credentials are dg.EnvVar (see ``_env_var``): Dagster resolves them
    when a run initializes the resources, the UI shows which variable each comes from, and the lake builds its root,
    s3://<bucket>/<prefix>/tables, from the resolved bucket and prefix."""
    from videolake.resources import LakeResource, ObjectStoreResource, S3Resource
    from videolake.resources.alerts import alert_webhook_from_env
    from videolake.resources.captioner import captioner_from_env
    from videolake.resources.embedder import embedder_from_env
    from videolake.resources.environment import warn_unknown_variables

    warn_unknown_variables()  # a misspelled VIDEOLAKE_* setting is named, not silently ignored
    s3 = S3Resource(
        endpoint_url=_env_var("VIDEOLAKE_S3_ENDPOINT_URL"),
        region=_env_var("VIDEOLAKE_S3_REGION", "us-east-1"),
        access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID"),
        secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
    )
    location = {"bucket": _required_env_var("VIDEOLAKE_S3_BUCKET"), "prefix": _env_var("VIDEOLAKE_S3_PREFIX", "")}
    return {
        "s3": s3,  # one connection: the object store and the lake take it as their nested ``s3`` resource
        "object_store": ObjectStoreResource(kind="s3", s3=s3, **location),
        "lake": LakeResource(s3=s3, **location),
        "ray_cluster": cpu_ray_resource(),
        "caption_ray": caption_ray_resource(),
        "captioner": captioner_from_env(default_gpus=1.0),
        "embedder": embedder_from_env(),
        # Failed runs and gates post here (VIDEOLAKE_ALERT_WEBHOOK_URL, a secret: dg.EnvVar); unset: logged only.
        "alert_webhook": alert_webhook_from_env(),
    }
