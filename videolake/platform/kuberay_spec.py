"""The RayCluster that runs the GPU step on Kubernetes (KubeRay), as plain dicts: no kubernetes or dagster import.

One head (no GPU, schedules nothing itself) and one GPU worker group; vLLM runs on each worker. The cluster is
ephemeral: dagster-ray creates it for one step and deletes it afterwards, so the spec has no autoscaler and the
worker count is fixed by ``worker_replicas``. Model weights are cached on node-local disk (``/models-cache``) so a
new cluster on a node that already served the model does not download it again. S3 credentials reach the pods
as environment variables read from a Kubernetes Secret, never as values in the spec.

``build_raycluster_spec`` gives the ``spec`` (what dagster-ray's ``RayClusterSpec`` takes, see
``dagster_ray_spec_kwargs``); ``build_raycluster_manifest`` wraps it into a full RayCluster object (the k8s/
template, offline schema validation). ``python -m videolake.platform.kuberay_spec`` prints the template.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

API_VERSION = "ray.io/v1"
KIND = "RayCluster"
GPU_RESOURCE = "nvidia.com/gpu"
MODEL_CACHE_VOLUME = "model-cache"
MODEL_CACHE_VOLUME_KINDS = ("hostPath", "ephemeral", "emptyDir")
HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
# Ports the head exposes: GCS (cluster membership), dashboard (job API, metrics), Ray Client (dagster-ray connects
# with ray.init("ray://<head-svc>:10001")).
HEAD_PORTS = (("gcs-server", 6379), ("dashboard", 8265), ("client", 10001))

DEFAULT_TOLERATIONS: tuple[dict[str, str], ...] = (
    # GPU node pools are usually tainted so only GPU workloads land there.
    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
)


@dataclass(frozen=True)
class RayClusterSpecConfig:
    """Everything that varies between deployments; defaults fit one GPU node pool with 1-GPU workers."""

    image: str = "registry.example.com/videolake/videolake:0.1.0"  # user-code + Ray image (k8s/Dockerfile) on all pods
    ray_version: str = "2.60.0"  # must match the ray installed in the image
    image_pull_policy: str = "IfNotPresent"  # pin tags per release; "Always" only with a moving tag
    namespace: str = "videolake"  # where the RayCluster and its pods live
    service_account: str | None = "videolake-ray"  # Ray pods' ServiceAccount: no API rights, S3 via Secret env
    labels: dict[str, str] = field(default_factory=lambda: {"app.kubernetes.io/part-of": "videolake"})  # on CR+pods
    annotations: dict[str, str] = field(default_factory=dict)  # on the RayCluster object
    # head: coordination only (num-cpus 0 keeps tasks and actors off it)
    head_cpu: str = "2"  # CPU request = limit
    head_memory: str = "8Gi"  # memory request = limit (GCS, dashboard, object store of the head)
    head_num_cpus: str = "0"  # Ray's logical CPUs on the head
    # GPU worker group
    worker_group_name: str = "gpu"
    worker_replicas: int = 1  # workers started with the cluster (no autoscaler: this is the size)
    worker_min_replicas: int = 0  # KubeRay bounds; replicas must lie within [min, max]
    worker_max_replicas: int = 1
    gpus_per_worker: int = 1  # nvidia.com/gpu limit and Ray's num-gpus per worker pod
    worker_cpu: str = "8"  # CPU request = limit per worker
    worker_memory: str = "48Gi"  # memory request = limit per worker (vLLM engine + frames)
    gpu_resource_name: str = GPU_RESOURCE  # extended resource name of the device plugin
    node_selector: dict[str, str] = field(default_factory=dict)  # GPU workers only, e.g. {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    tolerations: tuple[dict[str, str], ...] = DEFAULT_TOLERATIONS  # GPU workers only
    shm_size: str = "16Gi"  # /dev/shm (memory-backed emptyDir): Ray's object store and vLLM/NCCL need a large one
    # model cache on node-local disk, mounted at model_cache_path in the workers
    model_cache_path: str = "/models-cache"
    model_cache_volume: str = "hostPath"  # "hostPath" (survives clusters), "ephemeral" (a PVC per pod), "emptyDir"
    model_cache_host_path: str = "/mnt/videolake/models-cache"  # node directory for "hostPath"
    model_cache_size: str = "200Gi"  # size of an "ephemeral" claim / limit of an "emptyDir"
    model_cache_storage_class: str | None = None  # "ephemeral": a node-local class (e.g. local-path); None = default
    # S3 credentials: env vars from this Secret's keys (same names as the env vars)
    s3_secret_name: str = "videolake-s3"
    s3_secret_keys: tuple[str, ...] = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    config_map_name: str | None = "videolake-config"  # non-secret settings (bucket, endpoint ...) as env, if set
    env: dict[str, str] = field(default_factory=dict)  # extra plain env vars on head and workers
    run_as_group: int = 1000  # fsGroup of the Ray pods (the image's user is uid/gid 1000)

    def __post_init__(self) -> None:
        if not self.image:
            raise ValueError("image is required")
        if not (0 <= self.worker_min_replicas <= self.worker_replicas <= self.worker_max_replicas):
            raise ValueError(
                f"need 0 <= worker_min_replicas ({self.worker_min_replicas}) <= worker_replicas "
                f"({self.worker_replicas}) <= worker_max_replicas ({self.worker_max_replicas})"
            )
        if self.gpus_per_worker < 0:
            raise ValueError("gpus_per_worker must be >= 0")
        if self.model_cache_volume not in MODEL_CACHE_VOLUME_KINDS:
            raise ValueError(f"model_cache_volume must be one of {MODEL_CACHE_VOLUME_KINDS}")
        if not self.model_cache_path.startswith("/"):
            raise ValueError("model_cache_path must be absolute")


def _env(cfg: RayClusterSpecConfig, *, worker: bool) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": cfg.s3_secret_name, "key": key}}}
        for key in cfg.s3_secret_keys
    ]
    if worker:
        # Hugging Face / vLLM caches on the node-local volume: weights are downloaded once per node.
        env += [
            {"name": "VIDEOLAKE_MODEL_CACHE", "value": cfg.model_cache_path},
            {"name": "HF_HOME", "value": f"{cfg.model_cache_path}/huggingface"},
            {"name": "VLLM_CACHE_ROOT", "value": f"{cfg.model_cache_path}/vllm"},
        ]
    env += [{"name": k, "value": v} for k, v in sorted(cfg.env.items())]
    return env


def _env_from(cfg: RayClusterSpecConfig) -> list[dict[str, Any]]:
    return [{"configMapRef": {"name": cfg.config_map_name}}] if cfg.config_map_name else []


def _resources(cpu: str, memory: str, extra_limits: dict[str, str] | None = None) -> dict[str, Any]:
    limits = {"cpu": cpu, "memory": memory, **(extra_limits or {})}
    return {"requests": dict(limits), "limits": limits}


def _model_cache_volume(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    if cfg.model_cache_volume == "hostPath":
        return {"name": MODEL_CACHE_VOLUME, "hostPath": {"path": cfg.model_cache_host_path, "type": "DirectoryOrCreate"}}
    if cfg.model_cache_volume == "emptyDir":
        return {"name": MODEL_CACHE_VOLUME, "emptyDir": {"sizeLimit": cfg.model_cache_size}}
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": cfg.model_cache_size}},
    }
    if cfg.model_cache_storage_class:
        claim["storageClassName"] = cfg.model_cache_storage_class
    return {"name": MODEL_CACHE_VOLUME, "ephemeral": {"volumeClaimTemplate": {"spec": claim}}}


def _shm_volume(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": cfg.shm_size}}


def _pod_spec(cfg: RayClusterSpecConfig, container: dict[str, Any], volumes: list[dict[str, Any]],
              *, gpu: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": volumes,
        # The image runs as uid 1000: volumes that support it (claims, emptyDir) are made group-writable for it.
        # OnRootMismatch: no recursive chown of a large, already-owned model cache on every pod start.
        "securityContext": {"fsGroup": cfg.run_as_group, "fsGroupChangePolicy": "OnRootMismatch"},
    }
    if cfg.service_account:
        spec["serviceAccountName"] = cfg.service_account
        # Ray pods never call the Kubernetes API: no token in the pod.
        spec["automountServiceAccountToken"] = False
    if gpu:
        if cfg.node_selector:
            spec["nodeSelector"] = dict(cfg.node_selector)
        if cfg.tolerations:
            spec["tolerations"] = [dict(t) for t in cfg.tolerations]
    return spec


def build_head_group_spec(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    container = {
        "name": HEAD_CONTAINER,
        "image": cfg.image,
        "imagePullPolicy": cfg.image_pull_policy,
        "ports": [{"name": name, "containerPort": port} for name, port in HEAD_PORTS],
        "resources": _resources(cfg.head_cpu, cfg.head_memory),
        "env": _env(cfg, worker=False),
        "envFrom": _env_from(cfg),
        "volumeMounts": [{"name": "ray-logs", "mountPath": "/tmp/ray"}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    volumes = [{"name": "ray-logs", "emptyDir": {}}, _shm_volume(cfg)]
    return {
        "serviceType": "ClusterIP",
        "rayStartParams": {"num-cpus": cfg.head_num_cpus, "dashboard-host": "0.0.0.0"},
        "template": {
            "metadata": {"labels": {**cfg.labels, "videolake/ray-node": "head"}},
            "spec": _pod_spec(cfg, container, volumes, gpu=False),
        },
    }


def build_worker_group_spec(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    gpu_limits = {cfg.gpu_resource_name: str(cfg.gpus_per_worker)} if cfg.gpus_per_worker else {}
    container = {
        "name": WORKER_CONTAINER,
        "image": cfg.image,
        "imagePullPolicy": cfg.image_pull_policy,
        "resources": _resources(cfg.worker_cpu, cfg.worker_memory, gpu_limits),
        "env": _env(cfg, worker=True),
        "envFrom": _env_from(cfg),
        "volumeMounts": [
            {"name": "ray-logs", "mountPath": "/tmp/ray"},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": MODEL_CACHE_VOLUME, "mountPath": cfg.model_cache_path},
        ],
    }
    volumes = [{"name": "ray-logs", "emptyDir": {}}, _shm_volume(cfg), _model_cache_volume(cfg)]
    return {
        "groupName": cfg.worker_group_name,
        "replicas": cfg.worker_replicas,
        "minReplicas": cfg.worker_min_replicas,
        "maxReplicas": cfg.worker_max_replicas,
        # rayStartParams values are strings in the CRD. num-gpus tells Ray what the pod was given.
        "rayStartParams": {"num-gpus": str(cfg.gpus_per_worker)},
        "template": {
            "metadata": {"labels": {**cfg.labels, "videolake/ray-node": "gpu-worker"}},
            "spec": _pod_spec(cfg, container, volumes, gpu=True),
        },
    }


def build_raycluster_spec(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    """The RayCluster ``spec``: head group + one GPU worker group, no autoscaler (fixed size, ephemeral)."""
    return {
        "rayVersion": cfg.ray_version,
        "enableInTreeAutoscaling": False,
        "headGroupSpec": build_head_group_spec(cfg),
        "workerGroupSpecs": [build_worker_group_spec(cfg)],
    }


def build_raycluster_manifest(cfg: RayClusterSpecConfig, name: str,
                              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A complete RayCluster object (apiVersion, kind, metadata, spec)."""
    metadata: dict[str, Any] = {"name": name, "namespace": cfg.namespace, "labels": {**cfg.labels, **(labels or {})}}
    if cfg.annotations:
        metadata["annotations"] = dict(cfg.annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": build_raycluster_spec(cfg)}


def dagster_ray_spec_kwargs(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    """Keyword arguments for ``dagster_ray.kuberay.configs.RayClusterSpec`` (snake_case field names), so that:

        RayClusterConfig(metadata={"namespace": cfg.namespace, "labels": cfg.labels},
                         spec=RayClusterSpec(**dagster_ray_spec_kwargs(cfg)))

    renders the same head and worker groups. dagster-ray adds its dagster/* labels, the step's env vars and, where a
    container has no image, the run's image.
    """
    spec = build_raycluster_spec(cfg)
    return {
        "ray_version": spec["rayVersion"],
        "enable_in_tree_autoscaling": spec["enableInTreeAutoscaling"],
        "head_group_spec": spec["headGroupSpec"],
        "worker_group_specs": spec["workerGroupSpecs"],
    }


TEMPLATE_NAME = "videolake-gpu"
TEMPLATE_HEADER = (
    "# RayCluster template for the GPU step, rendered from videolake/platform/kuberay_spec.py with its defaults.\n"
    "# Do not edit by hand: regenerate with\n"
    "#   .venv/bin/python -m videolake.platform.kuberay_spec > k8s/raycluster-template.yaml\n"
    "# dagster-ray creates one such cluster per GPU step (name dg-<deployment>-<run>-..., dagster/* labels) and\n"
    "# deletes it afterwards; this file is the reviewable shape of it (and `kubectl apply -f` gives a long-lived\n"
    "# cluster for debugging). It is not listed in kustomization.yaml on purpose.\n"
)


def render_template(cfg: RayClusterSpecConfig | None = None) -> str:
    """The k8s/raycluster-template.yaml text for ``cfg`` (defaults when None)."""
    import yaml

    manifest = build_raycluster_manifest(cfg or RayClusterSpecConfig(), TEMPLATE_NAME)
    return TEMPLATE_HEADER + yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=120)


if __name__ == "__main__":
    print(render_template(), end="")
