"""The prod profile: data and tables in S3, Dagster on Kubernetes, the GPU step on an ephemeral KubeRay cluster.

Why KubeRayCluster rather than KubeRayInteractiveJob: with dagster-ray 0.4.8 and the kubernetes 36 client,
KubeRayInteractiveJob.connect (and cluster sharing) call a JSON-patch helper that raises TypeError(response_type);
KubeRayCluster's create -> wait -> connect -> delete path does not patch, and the GPU asset needs nothing a RayJob
adds (it drives Ray Data from the step as a Ray client). Sharing stays off: one cluster per step, deleted after it
(``cleanup="always"``), also on failure; dagster-ray's reaper sensor catches clusters a killed pod leaked.

Run with Dagster's per-step (multiprocess or k8s_job) executor, the default of the K8sRunLauncher: each step then
initializes only its own resources. An in-process run would set up `ray_cluster` (a local Ray) and `caption_ray`
(a ray:// client) in one process, and Ray allows one connection per process.

Non-secret settings come from the videolake-config ConfigMap (k8s/configmap.yaml), read at load time; credentials
only through dg.EnvVar (resolved at run time from the videolake-s3 Secret), never stored in code or config.
"""

from __future__ import annotations

import json
import os

import dagster as dg


def _env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise RuntimeError(f"the prod profile needs the environment variable {name} (see k8s/configmap.yaml)")
    return value


def ray_cluster_config():
    """The RayCluster shape of the GPU step, from environment settings (defaults in RayClusterSpecConfig)."""
    from videolake.platform.kuberay_spec import RayClusterSpecConfig

    kwargs = {"image": _env("VIDEOLAKE_RAY_IMAGE"), "namespace": _env("VIDEOLAKE_K8S_NAMESPACE", "videolake")}
    if "VIDEOLAKE_RAY_GPU_WORKERS" in os.environ:
        n = int(os.environ["VIDEOLAKE_RAY_GPU_WORKERS"])
        kwargs.update(worker_replicas=n, worker_max_replicas=n)
    if "VIDEOLAKE_RAY_GPUS_PER_WORKER" in os.environ:
        kwargs["gpus_per_worker"] = int(os.environ["VIDEOLAKE_RAY_GPUS_PER_WORKER"])
    if "VIDEOLAKE_RAY_NODE_SELECTOR" in os.environ:
        kwargs["node_selector"] = json.loads(os.environ["VIDEOLAKE_RAY_NODE_SELECTOR"])
    if "VIDEOLAKE_RAY_TOLERATIONS" in os.environ:
        kwargs["tolerations"] = tuple(json.loads(os.environ["VIDEOLAKE_RAY_TOLERATIONS"]))
    return RayClusterSpecConfig(**kwargs)


def caption_ray_resource(cfg=None):
    from dagster_ray import Lifecycle
    from dagster_ray.kuberay import KubeRayCluster
    from dagster_ray.kuberay.configs import RayClusterConfig, RayClusterSpec

    from videolake.platform.kuberay_spec import dagster_ray_spec_kwargs

    cfg = cfg or ray_cluster_config()
    return KubeRayCluster(
        ray_cluster=RayClusterConfig(
            metadata={"namespace": cfg.namespace, "labels": dict(cfg.labels)},
            spec=RayClusterSpec(**dagster_ray_spec_kwargs(cfg)),
        ),
        lifecycle=Lifecycle(cleanup="always"),
        env_vars={"VIDEOLAKE_PROFILE": "prod"},
    )


def prod_resources() -> dict:
    from dagster_ray import LocalRay

    from videolake.definitions import captioner_from_env
    from videolake.resources import LakeResource, ObjectStoreResource

    bucket = _env("VIDEOLAKE_S3_BUCKET")
    prefix = _env("VIDEOLAKE_S3_PREFIX", "").strip("/")
    endpoint = os.environ.get("VIDEOLAKE_S3_ENDPOINT_URL") or None
    region = _env("VIDEOLAKE_S3_REGION", "us-east-1")
    creds = {"access_key_id": dg.EnvVar("AWS_ACCESS_KEY_ID"), "secret_access_key": dg.EnvVar("AWS_SECRET_ACCESS_KEY")}
    lake_root = f"s3://{bucket}/{prefix + '/' if prefix else ''}tables"
    return {
        "object_store": ObjectStoreResource(
            kind="s3", bucket=bucket, prefix=prefix, endpoint_url=endpoint, region=region, **creds
        ),
        "lake": LakeResource(root=lake_root, endpoint_url=endpoint, region=region, **creds),
        # CPU assets run their Ray tasks inside the run pod (K8sRunLauncher sizes it); the GPU step gets a cluster.
        "ray_cluster": LocalRay(ray_init_options={"include_dashboard": False, "ignore_reinit_error": True}),
        "caption_ray": caption_ray_resource(),
        "captioner": captioner_from_env(default_gpus=1.0),
    }
