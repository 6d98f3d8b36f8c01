"""The RayClusters of the prod profile on Kubernetes (KubeRay), as plain dicts: no kubernetes or dagster import.

Two shapes, both one head (schedules nothing itself: num-cpus 0) plus worker groups (``worker_groups``, one
``WorkerGroupConfig`` each), both ephemeral (dagster-ray creates one for a step and deletes it after the step):

- the GPU step's (``RayClusterSpecConfig()``): a fixed-size GPU worker group, vLLM on each worker, no autoscaler;
  model weights cached on node-local disk (``/models-cache``) so a node that served the model does not download it
  again;
- the CPU stages' (``cpu_stage_cluster_config()``): a CPU worker group (``cpu_stage_group``) that KubeRay's in-tree
  autoscaler moves between its ``min_replicas`` and ``max_replicas`` with the Ray tasks waiting, so decoding, scene
  detection and scoring of a day spread over as many pods as the queue needs, and idle workers go after
  ``autoscaler_idle_timeout_s``. The autoscaler (a sidecar of the head) is the only Ray component that calls the
  Kubernetes API: KubeRay binds its Role to the head's ServiceAccount, and the token is projected into the autoscaler
  container alone (the pods mount no token otherwise; the head's Ray Client server runs driver code).
  Optionally (``cpu_stage_gpu_group``) a second, GPU worker group that the autoscaler moves between 0 and its
  maximum with the tasks and actors asking for num_gpus (TransNetV2 scene detection), so that no GPU is held
  while nothing needs one.

S3 credentials reach the pods as environment variables read from a Kubernetes Secret, never as values in the spec.

``build_raycluster_spec`` gives the ``spec`` (what dagster-ray's ``RayClusterSpec`` takes, see
``dagster_ray_spec_kwargs``); ``build_raycluster_manifest`` wraps it into a full RayCluster object (the k8s/
templates, offline schema validation). ``python -m videolake.platform.runtime.kuberay_spec [gpu|cpu]`` prints a template.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

API_VERSION = "ray.io/v1"
KIND = "RayCluster"
GPU_RESOURCE = "nvidia.com/gpu"
MODEL_CACHE_VOLUME = "model-cache"
MODEL_CACHE_VOLUME_KINDS = ("hostPath", "ephemeral", "emptyDir", "none")
UPSCALING_MODES = ("Default", "Aggressive", "Conservative")  # KubeRay autoscalerOptions.upscalingMode
# The Ray autoscaler reads the API token, CA and namespace where Kubernetes mounts them for a ServiceAccount.
AUTOSCALER_TOKEN_VOLUME = "autoscaler-api-token"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
# Ports the head exposes: GCS (cluster membership), dashboard (job API, metrics), Ray Client (dagster-ray connects
# with ray.init("ray://<head-svc>:10001")).
HEAD_PORTS = (("gcs-server", 6379), ("dashboard", 8265), ("client", 10001))
# Every Ray node exports its metrics (Ray's and videolake's, platform/runtime/telemetry.py) for Prometheus on this port,
# named so k8s/prometheus-podmonitor.yaml can select it.
METRICS_PORT = ("metrics", 8080)

DEFAULT_TOLERATIONS: tuple[dict[str, str], ...] = (
    # GPU node pools are usually tainted so only GPU workloads land there.
    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
)


@dataclass(frozen=True)
class WorkerGroupConfig:
    """One worker group of a cluster (an entry of ``RayClusterSpecConfig.worker_groups``, one ``workerGroupSpecs``
    entry). Image, env, /dev/shm and the model cache are the cluster's. The defaults are the GPU step's group: one
    fixed 1-GPU worker (``CPU_STAGE_GROUP`` and ``CPU_STAGE_GPU_GROUP`` are the CPU stages' groups)."""

    name: str = "gpu"  # KubeRay groupName; also names the pods' videolake/ray-node label: <name>-worker
    replicas: int = 1  # workers started with the cluster (without autoscaler: the size)
    min_replicas: int = 0  # KubeRay bounds; replicas must lie within [min, max]; 0 lets the autoscaler remove all
    max_replicas: int = 1
    gpus_per_worker: int = 1  # GPU limit (gpu_resource_name of the cluster) and Ray's num-gpus per pod (0: CPU)
    cpu: str = "8"  # CPU request = limit per worker (KubeRay gives Ray as many logical CPUs)
    memory: str = "48Gi"  # memory request = limit per worker (GPU step: vLLM engine + frames)
    # this group's pods only, e.g. {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = DEFAULT_TOLERATIONS  # this group's pods only

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a worker group needs a name")
        if not (0 <= self.min_replicas <= self.replicas <= self.max_replicas):
            raise ValueError(
                f"worker group {self.name!r}: need 0 <= min_replicas ({self.min_replicas}) <= replicas "
                f"({self.replicas}) <= max_replicas ({self.max_replicas})"
            )
        if self.gpus_per_worker < 0:
            raise ValueError(f"worker group {self.name!r}: gpus_per_worker must be >= 0")


@dataclass(frozen=True)
class RayClusterSpecConfig:
    """Everything that varies between deployments. The defaults are the GPU step's cluster (one GPU node pool with
    1-GPU workers); ``cpu_stage_cluster_config`` gives the CPU stages' autoscaling cluster."""

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
    # the worker groups (workerGroupSpecs in this order; at least one, distinct names): by default the GPU step's
    # one fixed 1-GPU worker
    worker_groups: tuple[WorkerGroupConfig, ...] = field(default_factory=lambda: (WorkerGroupConfig(),))
    gpu_resource_name: str = GPU_RESOURCE  # extended resource name of the device plugin (all groups)
    shm_size: str = "16Gi"  # /dev/shm (memory-backed emptyDir): Ray's object store and vLLM/NCCL need a large one
    # model cache on node-local disk, mounted at model_cache_path in the workers
    model_cache_path: str = "/models-cache"
    model_cache_volume: str = (
        "hostPath"  # "hostPath" (survives clusters), "ephemeral" (a PVC per pod), "emptyDir", "none"
    )
    model_cache_host_path: str = "/mnt/videolake/models-cache"  # node directory for "hostPath"
    model_cache_size: str = "200Gi"  # size of an "ephemeral" claim / limit of an "emptyDir"
    model_cache_storage_class: str | None = None  # "ephemeral": a node-local class (e.g. local-path); None = default
    # S3 credentials: env vars from this Secret's keys (same names as the env vars)
    s3_secret_name: str = "videolake-s3"
    s3_secret_keys: tuple[str, ...] = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    config_map_name: str | None = "videolake-config"  # non-secret settings (bucket, endpoint ...) as env, if set
    env: dict[str, str] = field(default_factory=dict)  # extra plain env vars on head and workers
    run_as_group: int = 1000  # fsGroup of the Ray pods (the image's user is uid/gid 1000)
    # KubeRay's in-tree autoscaler (a sidecar of the head): a group's replicas become its start size, the autoscaler
    # then moves each group within its [min_replicas, max_replicas] with the resources Ray tasks wait for.
    autoscaling: bool = False
    autoscaler_idle_timeout_s: int = 60  # a worker idle this long is removed (down to its group's min_replicas)
    autoscaler_upscaling_mode: str = "Default"  # "Default": no rate limit; "Conservative": pending <= cluster size
    autoscaler_cpu: str = "500m"  # autoscaler container request = limit (KubeRay's default size)
    autoscaler_memory: str = "512Mi"
    autoscaler_token_expiration_s: int = 3607  # projected API token lifetime (kubelet rotates it; Ray re-reads it)

    def __post_init__(self) -> None:
        if not self.image:
            raise ValueError("image is required")
        if isinstance(self.worker_groups, WorkerGroupConfig):
            raise TypeError("worker_groups must be a tuple of WorkerGroupConfig, got a single WorkerGroupConfig")
        object.__setattr__(self, "worker_groups", tuple(self.worker_groups))  # a list is accepted, kept as a tuple
        if not self.worker_groups:
            raise ValueError("a cluster needs at least one worker group (worker_groups is empty)")
        for i, group in enumerate(self.worker_groups):
            if not isinstance(group, WorkerGroupConfig):
                raise TypeError(f"worker_groups[{i}] must be a WorkerGroupConfig, got {type(group).__name__}")
        names = [group.name for group in self.worker_groups]
        if len(set(names)) != len(names):
            raise ValueError(f"worker group names must be distinct, got {names}")
        if self.model_cache_volume not in MODEL_CACHE_VOLUME_KINDS:
            raise ValueError(f"model_cache_volume must be one of {MODEL_CACHE_VOLUME_KINDS}")
        if not self.model_cache_path.startswith("/"):
            raise ValueError("model_cache_path must be absolute")
        if self.autoscaling:
            for group in self.worker_groups:
                if group.max_replicas < 1:
                    raise ValueError(f"autoscaling worker group {group.name!r} needs max_replicas >= 1")
            if self.autoscaler_upscaling_mode not in UPSCALING_MODES:
                raise ValueError(f"autoscaler_upscaling_mode must be one of {UPSCALING_MODES}")
            if self.autoscaler_idle_timeout_s < 0:
                raise ValueError("autoscaler_idle_timeout_s must be >= 0")
            if self.autoscaler_token_expiration_s < 600:
                raise ValueError("autoscaler_token_expiration_s must be >= 600 (the API server's minimum)")

    @property
    def uses_model_cache(self) -> bool:
        return self.model_cache_volume != "none"


# The CPU stages' CPU group: 8-CPU workers on any node (no GPU toleration), autoscaling from one worker up to sixteen.
CPU_STAGE_GROUP = WorkerGroupConfig(
    name="cpu",
    replicas=1,
    min_replicas=1,
    max_replicas=16,
    gpus_per_worker=0,
    cpu="8",
    memory="32Gi",
    tolerations=(),
)

# The CPU stages' optional GPU group (scene_clips' TransNetV2 on the cluster's GPUs): starts empty and goes back to
# empty after autoscaler_idle_timeout_s, so GPUs are held only while GPU actors run. GPU node pools are tainted:
# it tolerates nvidia.com/gpu (DEFAULT_TOLERATIONS) unless given other tolerations. Its maximum is the deployment's
# (``cpu_stage_gpu_group``).
CPU_STAGE_GPU_GROUP = WorkerGroupConfig(
    name="gpu",
    replicas=0,
    min_replicas=0,
    max_replicas=1,
    gpus_per_worker=1,
    cpu="8",  # the predictor actor and the window decoding next to it
    memory="32Gi",
)

# The CPU stages' cluster (raw_videos, scene_clips, filtered_clips): the CPU group above, no model cache,
# KubeRay's autoscaler.
CPU_STAGE_DEFAULTS: dict[str, Any] = {
    "worker_groups": (CPU_STAGE_GROUP,),
    "model_cache_volume": "none",
    "shm_size": "8Gi",  # Ray's object store (decoded frames between tasks) lives in /dev/shm
    "autoscaling": True,
}


def cpu_stage_group(**overrides: Any) -> WorkerGroupConfig:
    """The CPU stages' CPU group: ``CPU_STAGE_GROUP`` with ``overrides`` (min_replicas, max_replicas, cpu, memory,
    node_selector ...); it starts with ``min_replicas`` workers unless ``replicas`` is given."""
    overrides.setdefault("replicas", overrides.get("min_replicas", CPU_STAGE_GROUP.min_replicas))
    return dataclasses.replace(CPU_STAGE_GROUP, **overrides)


def cpu_stage_gpu_group(max_replicas: int, **overrides: Any) -> WorkerGroupConfig:
    """The CPU stages' GPU group of 0..``max_replicas`` workers: ``CPU_STAGE_GPU_GROUP`` with ``overrides``
    (gpus_per_worker, node_selector, tolerations ...)."""
    return dataclasses.replace(CPU_STAGE_GPU_GROUP, max_replicas=max_replicas, **overrides)


def cpu_stage_cluster_config(**overrides: Any) -> RayClusterSpecConfig:
    """The CPU stages' autoscaling cluster: ``CPU_STAGE_DEFAULTS`` with ``overrides``; its groups, e.g.
    ``worker_groups=(cpu_stage_group(max_replicas=40), cpu_stage_gpu_group(4))``, replace the one CPU group."""
    return RayClusterSpecConfig(**{**CPU_STAGE_DEFAULTS, **overrides})


def _env(cfg: RayClusterSpecConfig, *, worker: bool) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": cfg.s3_secret_name, "key": key}}}
        for key in cfg.s3_secret_keys
    ]
    if worker and cfg.uses_model_cache:
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
        return {
            "name": MODEL_CACHE_VOLUME,
            "hostPath": {"path": cfg.model_cache_host_path, "type": "DirectoryOrCreate"},
        }
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


def _autoscaler_token_volume(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    """What Kubernetes mounts for a ServiceAccount (token, cluster CA, namespace), as a volume that only the
    autoscaler container mounts: the pod itself has automountServiceAccountToken false."""
    return {
        "name": AUTOSCALER_TOKEN_VOLUME,
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": cfg.autoscaler_token_expiration_s}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
        },
    }


def build_autoscaler_options(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    """KubeRay's ``autoscalerOptions``: the sidecar's size, scaling behaviour and its API-token mount."""
    return {
        "upscalingMode": cfg.autoscaler_upscaling_mode,
        "idleTimeoutSeconds": cfg.autoscaler_idle_timeout_s,
        "resources": _resources(cfg.autoscaler_cpu, cfg.autoscaler_memory),
        "volumeMounts": [{"name": AUTOSCALER_TOKEN_VOLUME, "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}],
    }


def _pod_spec(
    cfg: RayClusterSpecConfig,
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
    *,
    group: WorkerGroupConfig | None,
) -> dict[str, Any]:
    """A Ray pod's spec; ``group``: the worker group whose placement it takes (None: the head, any node)."""
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": volumes,
        # The image runs as uid 1000: volumes that support it (claims, emptyDir) are made group-writable for it.
        # OnRootMismatch: no recursive chown of a large, already-owned model cache on every pod start.
        "securityContext": {"fsGroup": cfg.run_as_group, "fsGroupChangePolicy": "OnRootMismatch"},
    }
    if cfg.service_account:
        spec["serviceAccountName"] = cfg.service_account
    if cfg.service_account or cfg.autoscaling:
        # Ray's own processes never call the Kubernetes API: no token in the pod (the autoscaler sidecar gets its
        # token from a projected volume only it mounts).
        spec["automountServiceAccountToken"] = False
    if group is not None:
        if group.node_selector:
            spec["nodeSelector"] = dict(group.node_selector)
        if group.tolerations:
            spec["tolerations"] = [dict(t) for t in group.tolerations]
    return spec


def build_head_group_spec(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": HEAD_CONTAINER,
        "image": cfg.image,
        "imagePullPolicy": cfg.image_pull_policy,
        "ports": [{"name": name, "containerPort": port} for name, port in (*HEAD_PORTS, METRICS_PORT)],
        "resources": _resources(cfg.head_cpu, cfg.head_memory),
        "env": _env(cfg, worker=False),
        "envFrom": _env_from(cfg),
        "volumeMounts": [{"name": "ray-logs", "mountPath": "/tmp/ray"}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    volumes: list[dict[str, Any]] = [{"name": "ray-logs", "emptyDir": {}}, _shm_volume(cfg)]
    if cfg.autoscaling:
        volumes.append(_autoscaler_token_volume(cfg))
    return {
        "serviceType": "ClusterIP",
        "rayStartParams": {
            "num-cpus": cfg.head_num_cpus,
            "dashboard-host": "0.0.0.0",
            "metrics-export-port": str(METRICS_PORT[1]),
        },
        "template": {
            "metadata": {"labels": {**cfg.labels, "videolake/ray-node": "head"}},
            "spec": _pod_spec(cfg, container, volumes, group=None),
        },
    }


def build_worker_group_spec(cfg: RayClusterSpecConfig, group: WorkerGroupConfig | None = None) -> dict[str, Any]:
    """One entry of ``workerGroupSpecs``: ``group`` of ``cfg`` (None: its first)."""
    group = group or cfg.worker_groups[0]
    gpu_limits = {cfg.gpu_resource_name: str(group.gpus_per_worker)} if group.gpus_per_worker else {}
    container: dict[str, Any] = {
        "name": WORKER_CONTAINER,
        "image": cfg.image,
        "imagePullPolicy": cfg.image_pull_policy,
        "ports": [{"name": METRICS_PORT[0], "containerPort": METRICS_PORT[1]}],
        "resources": _resources(group.cpu, group.memory, gpu_limits),
        "env": _env(cfg, worker=True),
        "envFrom": _env_from(cfg),
        "volumeMounts": [{"name": "ray-logs", "mountPath": "/tmp/ray"}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    volumes: list[dict[str, Any]] = [{"name": "ray-logs", "emptyDir": {}}, _shm_volume(cfg)]
    if cfg.uses_model_cache:
        container["volumeMounts"].append({"name": MODEL_CACHE_VOLUME, "mountPath": cfg.model_cache_path})
        volumes.append(_model_cache_volume(cfg))
    return {
        "groupName": group.name,
        "replicas": group.replicas,
        "minReplicas": group.min_replicas,
        "maxReplicas": group.max_replicas,
        # rayStartParams values are strings in the CRD. num-gpus tells Ray what the pod was given (0 on a CPU
        # group, so no GPU task lands there); KubeRay derives num-cpus and memory from the container limits.
        "rayStartParams": {"num-gpus": str(group.gpus_per_worker), "metrics-export-port": str(METRICS_PORT[1])},
        "template": {
            "metadata": {"labels": {**cfg.labels, "videolake/ray-node": f"{group.name}-worker"}},
            "spec": _pod_spec(cfg, container, volumes, group=group),
        },
    }


def build_raycluster_spec(cfg: RayClusterSpecConfig) -> dict[str, Any]:
    """The RayCluster ``spec``: head group + the worker groups (``cfg.worker_groups``); with ``autoscaling``
    KubeRay's in-tree autoscaler and its options (for every group), without it a fixed size."""
    spec: dict[str, Any] = {
        "rayVersion": cfg.ray_version,
        "enableInTreeAutoscaling": cfg.autoscaling,
    }
    if cfg.autoscaling:
        spec["autoscalerOptions"] = build_autoscaler_options(cfg)
    spec["headGroupSpec"] = build_head_group_spec(cfg)
    spec["workerGroupSpecs"] = [build_worker_group_spec(cfg, group) for group in cfg.worker_groups]
    return spec


def build_raycluster_manifest(
    cfg: RayClusterSpecConfig, name: str, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A complete RayCluster object (apiVersion, kind, metadata, spec)."""
    metadata: dict[str, Any] = {"name": name, "namespace": cfg.namespace, "labels": {**cfg.labels, **(labels or {})}}
    if cfg.annotations:
        metadata["annotations"] = dict(cfg.annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": build_raycluster_spec(cfg)}


def scalable_gpus(worker_group_specs: list[dict[str, Any]]) -> int:
    """GPUs a RayCluster's worker groups can reach: the sum of maxReplicas x num-gpus over its groups."""
    total = 0
    for group in worker_group_specs:
        gpus = int(float(group.get("rayStartParams", {}).get("num-gpus", 0) or 0))
        total += gpus * int(group.get("maxReplicas", group.get("replicas", 0)) or 0)
    return total


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
        # {} without autoscaling: otherwise dagster-ray renders its own defaults, which KubeRay would ignore anyway
        "autoscaler_options": spec.get("autoscalerOptions", {}),
        "head_group_spec": spec["headGroupSpec"],
        "worker_group_specs": spec["workerGroupSpecs"],
    }


TEMPLATES: dict[str, tuple[Callable[[], RayClusterSpecConfig], str, str]] = {  # kind -> (config, name, k8s/ file)
    "gpu": (RayClusterSpecConfig, "videolake-gpu", "raycluster-template.yaml"),
    "cpu": (cpu_stage_cluster_config, "videolake-cpu", "raycluster-template-cpu.yaml"),
}
TEMPLATE_HEADER = (
    "# RayCluster template for the {what}, rendered from videolake/platform/runtime/kuberay_spec.py\n"
    "# with its defaults.\n"
    "# Do not edit by hand: regenerate with\n"
    "#   .venv/bin/python -m videolake.platform.runtime.kuberay_spec {kind} > k8s/{file}\n"
    "# dagster-ray creates one such cluster per step (name dg-<deployment>-<run>-..., dagster/* labels) and\n"
    "# deletes it afterwards; this file is the reviewable shape of it (and `kubectl apply -f` gives a long-lived\n"
    "# cluster for debugging). It is not listed in kustomization.yaml on purpose.\n"
)
WHAT = {"gpu": "GPU step (clip_captions)", "cpu": "CPU stages (raw_videos, scene_clips, filtered_clips)"}


def render_template(kind: str = "gpu", cfg: RayClusterSpecConfig | None = None) -> str:
    """The k8s/ template text of ``kind`` ("gpu" or "cpu") for ``cfg`` (that kind's defaults when None)."""
    import yaml

    make_default, name, file = TEMPLATES[kind]
    manifest = build_raycluster_manifest(cfg or make_default(), name)
    header = TEMPLATE_HEADER.format(what=WHAT[kind], kind=kind, file=file)
    return header + yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=120)


if __name__ == "__main__":
    import sys

    print(render_template(sys.argv[1] if len(sys.argv) > 1 else "gpu"), end="")
