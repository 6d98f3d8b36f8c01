"""The RayClusters of the prod profile (videolake.platform.runtime.kuberay_spec, videolake.resources.prod) as dagster-ray 0.4.8
renders and uses them, and the RBAC they need.

No API server can run here. dagster-ray's own KubeRayCluster resource, built by the prod profile's code, runs its
real lifecycle (create, wait, cleanup) against FakeKubernetesApi (tests/k8s/fake_kubernetes.py), a FAKE of the
kubernetes client's ApiClient that keeps RayClusters, answers .status as KubeRay would and records every API call.
Both clusters are covered: the CPU stages' (resource `ray_cluster`, autoscaling CPU worker group) and the GPU step's
(`caption_ray`). The spec dagster-ray posts must equal ours and validate against KubeRay's CRD, and the recorded calls
must be exactly what k8s/rbac.yaml's Role grants.
"""

import dataclasses
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster_ray import Lifecycle
from dagster_ray.kuberay import KubeRayCluster
from dagster_ray.kuberay.client import RayClusterClient
from dagster_ray.kuberay.configs import ClusterSharing
from dagster_ray.kuberay.ops import DeleteKubeRayClustersConfig, delete_kuberay_clusters_op
from fake_kubernetes import NAMESPACE, FakeKubernetesApi
from test_manifests import crd_errors, load_docs

from videolake.platform.runtime.kuberay_spec import (
    AUTOSCALER_TOKEN_VOLUME,
    CPU_STAGE_GROUP,
    HEAD_CONTAINER,
    MODEL_CACHE_VOLUME,
    SERVICE_ACCOUNT_DIR,
    WORKER_CONTAINER,
    RayClusterSpecConfig,
    WorkerGroupConfig,
    build_raycluster_manifest,
    build_raycluster_spec,
    cpu_stage_cluster_config,
    cpu_stage_gpu_group,
    cpu_stage_group,
    dagster_ray_spec_kwargs,
)
from videolake.resources.prod import kuberay_cluster_resource, owned_client_class

REPO = Path(__file__).resolve().parents[2]
PARTITION = "2024-01-05"
DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01")


# ------------------------------------------------------------------------------------------------ the spec itself
def test_spec_has_head_and_gpu_worker_group():
    cfg = RayClusterSpecConfig(
        image="registry.example.com/videolake/videolake:1.2.3",
        worker_groups=(
            WorkerGroupConfig(
                gpus_per_worker=2,
                replicas=2,
                max_replicas=3,
                node_selector={"cloud.google.com/gke-accelerator": "nvidia-l4"},
                tolerations=({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},),
            ),
        ),
        s3_secret_name="s3-creds",
    )
    spec = build_raycluster_spec(cfg)
    assert spec["rayVersion"] == "2.60.0" and spec["enableInTreeAutoscaling"] is False

    head = spec["headGroupSpec"]
    head_pod = head["template"]["spec"]
    (head_container,) = head_pod["containers"]
    assert head_container["name"] == HEAD_CONTAINER and head_container["image"] == cfg.image
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert "nvidia.com/gpu" not in head_container["resources"]["limits"]
    assert "nodeSelector" not in head_pod and "tolerations" not in head_pod  # the head runs on any node
    assert {p["containerPort"] for p in head_container["ports"]} == {6379, 8265, 10001, 8080}  # 8080: metrics

    (group,) = spec["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == ("gpu", 2, 0, 3)
    assert group["rayStartParams"] == {"num-gpus": "2", "metrics-export-port": "8080"}
    pod = group["template"]["spec"]
    (worker,) = pod["containers"]
    assert worker["name"] == WORKER_CONTAINER and worker["image"] == cfg.image
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert worker["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    assert pod["serviceAccountName"] == "videolake-ray" and pod["automountServiceAccountToken"] is False

    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[MODEL_CACHE_VOLUME]["hostPath"] == {
        "path": "/mnt/videolake/models-cache",
        "type": "DirectoryOrCreate",
    }
    assert {"name": MODEL_CACHE_VOLUME, "mountPath": "/models-cache"} in worker["volumeMounts"]
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"

    env = {e["name"]: e for e in worker["env"]}
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": key}}}
    assert env["HF_HOME"]["value"] == "/models-cache/huggingface"
    assert worker["envFrom"] == [{"configMapRef": {"name": "videolake-config"}}]
    flat = yaml.safe_dump(spec)
    assert "secret" not in flat.lower().replace("secretkeyref", "").replace("aws_secret_access_key", "")


def test_cpu_stage_cluster_autoscales_a_cpu_worker_group():
    cfg = cpu_stage_cluster_config(
        image="registry.example.com/videolake/videolake:1.2.3",
        worker_groups=(cpu_stage_group(max_replicas=40, cpu="16", memory="64Gi"),),
    )
    spec = build_raycluster_spec(cfg)
    assert spec["enableInTreeAutoscaling"] is True
    assert spec["autoscalerOptions"] == {
        "upscalingMode": "Default",
        "idleTimeoutSeconds": 60,
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
        "volumeMounts": [{"name": AUTOSCALER_TOKEN_VOLUME, "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}],
    }
    (group,) = spec["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == ("cpu", 1, 1, 40)
    assert group["rayStartParams"] == {
        "num-gpus": "0",
        "metrics-export-port": "8080",
    }  # no GPU task can land on a CPU worker
    pod = group["template"]["spec"]
    (worker,) = pod["containers"]
    assert worker["image"] == cfg.image
    assert worker["resources"] == {
        "requests": {"cpu": "16", "memory": "64Gi"},
        "limits": {"cpu": "16", "memory": "64Gi"},
    }
    assert "nodeSelector" not in pod and "tolerations" not in pod  # any node, not the tainted GPU pool
    assert [v["name"] for v in pod["volumes"]] == ["ray-logs", "dshm"]  # no model cache on CPU workers
    assert {e["name"] for e in worker["env"]} == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert group["template"]["metadata"]["labels"]["videolake/ray-node"] == "cpu-worker"

    # the API token: in a projected volume of the head pod that only the autoscaler sidecar mounts
    head_pod = spec["headGroupSpec"]["template"]["spec"]
    token = next(v for v in head_pod["volumes"] if v["name"] == AUTOSCALER_TOKEN_VOLUME)["projected"]["sources"]
    assert token[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
    assert token[1]["configMap"]["name"] == "kube-root-ca.crt"
    for p in (head_pod, pod):
        assert p["automountServiceAccountToken"] is False and p["serviceAccountName"] == "videolake-ray"
        assert all(m["name"] != AUTOSCALER_TOKEN_VOLUME for c in p["containers"] for m in c["volumeMounts"])
    assert crd_errors(build_raycluster_manifest(cfg, "dg-prod-1234abcd-cpu")) == []


def test_cpu_stage_cluster_starts_with_its_minimum():
    (group,) = cpu_stage_cluster_config(worker_groups=(cpu_stage_group(min_replicas=3, max_replicas=8),)).worker_groups
    assert (group.replicas, group.min_replicas, group.max_replicas) == (3, 3, 8)
    assert cpu_stage_group(min_replicas=0).replicas == 0
    assert cpu_stage_group(min_replicas=2, replicas=5).replicas == 5  # an explicit start size wins
    assert cpu_stage_cluster_config().worker_groups == (CPU_STAGE_GROUP,) == (cpu_stage_group(),)
    assert (
        CPU_STAGE_GROUP.name,
        CPU_STAGE_GROUP.replicas,
        CPU_STAGE_GROUP.min_replicas,
        CPU_STAGE_GROUP.max_replicas,
        CPU_STAGE_GROUP.gpus_per_worker,
        CPU_STAGE_GROUP.tolerations,
    ) == ("cpu", 1, 1, 16, 0, ())
    assert build_raycluster_spec(RayClusterSpecConfig())["enableInTreeAutoscaling"] is False  # the GPU step: fixed
    assert "autoscalerOptions" not in build_raycluster_spec(RayClusterSpecConfig())


H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
GPU_TAINT = ({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},)


def test_worker_groups_are_the_one_place_a_group_is_configured():
    """No flat worker_* copy of a group beside ``worker_groups``: the default cluster's one group is
    WorkerGroupConfig's defaults (the GPU step's fixed 1-GPU worker), and the builders render exactly the groups."""
    names = {f.name for f in dataclasses.fields(RayClusterSpecConfig)}
    assert "worker_groups" in names
    assert not {n for n in names if n.startswith("worker_") and n != "worker_groups"}
    assert not names & {"extra_worker_groups", "gpus_per_worker", "node_selector", "tolerations"}
    cfg = RayClusterSpecConfig()
    assert (
        cfg.worker_groups
        == (WorkerGroupConfig(),)
        == (
            WorkerGroupConfig(
                name="gpu",
                replicas=1,
                min_replicas=0,
                max_replicas=1,
                gpus_per_worker=1,
                cpu="8",
                memory="48Gi",
                node_selector={},
                tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
            ),
        )
    )
    # a list is kept as a tuple; anything but WorkerGroupConfig values is refused
    listed = RayClusterSpecConfig(worker_groups=[WorkerGroupConfig(), WorkerGroupConfig(name="big", memory="96Gi")])
    assert isinstance(listed.worker_groups, tuple)
    assert [g["groupName"] for g in build_raycluster_spec(listed)["workerGroupSpecs"]] == ["gpu", "big"]
    with pytest.raises(TypeError, match=r"worker_groups\[0\] must be a WorkerGroupConfig, got dict"):
        RayClusterSpecConfig(worker_groups=({"name": "gpu"},))
    with pytest.raises(TypeError, match="a single WorkerGroupConfig"):
        RayClusterSpecConfig(worker_groups=WorkerGroupConfig())


def test_cpu_stage_cluster_with_a_gpu_group_has_two_worker_groups():
    cfg = cpu_stage_cluster_config(
        image="registry.example.com/videolake/videolake:1.2.3",
        worker_groups=(
            cpu_stage_group(max_replicas=40),
            cpu_stage_gpu_group(4, gpus_per_worker=2, node_selector=H100, tolerations=GPU_TAINT),
        ),
    )
    spec = build_raycluster_spec(cfg)
    assert spec["enableInTreeAutoscaling"] is True and spec["autoscalerOptions"]["idleTimeoutSeconds"] == 60
    cpu_group, gpu_group = spec["workerGroupSpecs"]  # exactly two, the CPU group first
    assert (cpu_group["groupName"], cpu_group["replicas"], cpu_group["minReplicas"], cpu_group["maxReplicas"]) == (
        "cpu",
        1,
        1,
        40,
    )
    assert (gpu_group["groupName"], gpu_group["replicas"], gpu_group["minReplicas"], gpu_group["maxReplicas"]) == (
        "gpu",
        0,
        0,
        4,
    )  # starts empty: no GPU is held until something asks for one
    assert cpu_group["rayStartParams"] == {"num-gpus": "0", "metrics-export-port": "8080"} and gpu_group[
        "rayStartParams"
    ] == {"num-gpus": "2", "metrics-export-port": "8080"}
    assert cpu_group["template"]["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "videolake",
        "videolake/ray-node": "cpu-worker",
    }
    assert gpu_group["template"]["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "videolake",
        "videolake/ray-node": "gpu-worker",
    }
    cpu_pod, gpu_pod = cpu_group["template"]["spec"], gpu_group["template"]["spec"]
    (cpu_worker,), (gpu_worker,) = cpu_pod["containers"], gpu_pod["containers"]
    assert cpu_worker["resources"] == {
        "requests": {"cpu": "8", "memory": "32Gi"},
        "limits": {"cpu": "8", "memory": "32Gi"},
    }
    assert gpu_worker["resources"] == {
        "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
        "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
    }
    # placement: the GPU group only; the CPU workers stay on any (untainted) node
    assert "nodeSelector" not in cpu_pod and "tolerations" not in cpu_pod
    assert gpu_pod["nodeSelector"] == H100
    assert gpu_pod["tolerations"] == [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    # the rest of a GPU worker pod is a CPU worker pod's: image, env, volumes, service account
    assert gpu_worker["name"] == cpu_worker["name"] == WORKER_CONTAINER
    assert gpu_worker["image"] == cpu_worker["image"] == cfg.image
    assert gpu_worker["env"] == cpu_worker["env"] and gpu_worker["envFrom"] == cpu_worker["envFrom"]
    assert [v["name"] for v in gpu_pod["volumes"]] == ["ray-logs", "dshm"]
    assert gpu_pod["serviceAccountName"] == "videolake-ray" and gpu_pod["automountServiceAccountToken"] is False
    # the first group equals the one-group cluster's, and the head is untouched
    single = build_raycluster_spec(dataclasses.replace(cfg, worker_groups=cfg.worker_groups[:1]))
    assert cpu_group == single["workerGroupSpecs"][0] and spec["headGroupSpec"] == single["headGroupSpec"]
    assert crd_errors(build_raycluster_manifest(cfg, "dg-prod-1234abcd-cpu")) == []
    # what dagster-ray gets: both groups, in order
    assert dagster_ray_spec_kwargs(cfg)["worker_group_specs"] == [cpu_group, gpu_group]


def test_gpu_group_defaults_tolerate_the_gpu_taint_and_start_empty():
    group = cpu_stage_gpu_group(3)
    assert group == WorkerGroupConfig(
        name="gpu",
        replicas=0,
        min_replicas=0,
        max_replicas=3,
        gpus_per_worker=1,
        cpu="8",
        memory="32Gi",
        node_selector={},
        tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
    )
    (_, pod_group) = build_raycluster_spec(cpu_stage_cluster_config(worker_groups=(cpu_stage_group(), group)))[
        "workerGroupSpecs"
    ]
    pod = pod_group["template"]["spec"]
    assert "nodeSelector" not in pod
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod_group["rayStartParams"] == {"num-gpus": "1", "metrics-export-port": "8080"}


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: WorkerGroupConfig(replicas=2, max_replicas=1), "worker group 'gpu': need 0 <= min_replicas"),
        (lambda: WorkerGroupConfig(min_replicas=1, replicas=0), "worker group 'gpu': need 0 <= min_replicas"),
        (lambda: WorkerGroupConfig(gpus_per_worker=-1), "worker group 'gpu': gpus_per_worker must be >= 0"),
        (lambda: WorkerGroupConfig(name=""), "needs a name"),
        (
            lambda: cpu_stage_group(max_replicas=0),
            r"worker group 'cpu': need 0 <= min_replicas \(1\) <= replicas \(1\) "
            r"<= max_replicas \(0\)",
        ),
        (
            lambda: cpu_stage_cluster_config(worker_groups=(cpu_stage_group(), WorkerGroupConfig(name="cpu"))),
            r"worker group names must be distinct, got \['cpu', 'cpu'\]",
        ),
        (
            lambda: cpu_stage_cluster_config(
                worker_groups=(cpu_stage_group(), cpu_stage_gpu_group(1), cpu_stage_gpu_group(2))
            ),
            r"worker group names must be distinct, got \['cpu', 'gpu', 'gpu'\]",
        ),
        (
            lambda: cpu_stage_cluster_config(worker_groups=(cpu_stage_group(), cpu_stage_gpu_group(0))),
            "autoscaling worker group 'gpu' needs max_replicas >= 1",
        ),
        (
            lambda: cpu_stage_cluster_config(worker_groups=(cpu_stage_group(min_replicas=0, max_replicas=0),)),
            "autoscaling worker group 'cpu' needs max_replicas >= 1",
        ),
        (lambda: RayClusterSpecConfig(worker_groups=()), "at least one worker group"),
    ],
)
def test_worker_groups_reject_inconsistent_values(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_model_cache_volume_kinds():
    ephemeral = build_raycluster_spec(
        RayClusterSpecConfig(
            model_cache_volume="ephemeral", model_cache_size="500Gi", model_cache_storage_class="local-nvme"
        )
    )
    volumes = {v["name"]: v for v in ephemeral["workerGroupSpecs"][0]["template"]["spec"]["volumes"]}
    claim = volumes[MODEL_CACHE_VOLUME]["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert claim == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "500Gi"}},
        "storageClassName": "local-nvme",
    }
    empty = build_raycluster_spec(RayClusterSpecConfig(model_cache_volume="emptyDir"))
    volumes = {v["name"]: v for v in empty["workerGroupSpecs"][0]["template"]["spec"]["volumes"]}
    assert volumes[MODEL_CACHE_VOLUME] == {"name": MODEL_CACHE_VOLUME, "emptyDir": {"sizeLimit": "200Gi"}}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"autoscaling": True, "worker_groups": (WorkerGroupConfig(replicas=0, max_replicas=0),)},
            "autoscaling worker group 'gpu' needs max_replicas >= 1",
        ),
        ({"autoscaling": True, "autoscaler_upscaling_mode": "Fast"}, "autoscaler_upscaling_mode"),
        ({"autoscaling": True, "autoscaler_idle_timeout_s": -1}, "autoscaler_idle_timeout_s"),
        ({"autoscaling": True, "autoscaler_token_expiration_s": 60}, "autoscaler_token_expiration_s"),
        ({"model_cache_volume": "nfs"}, "model_cache_volume"),
        ({"model_cache_path": "models"}, "absolute"),
        ({"image": ""}, "image"),
    ],
)
def test_config_rejects_inconsistent_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RayClusterSpecConfig(**kwargs)


def test_manifest_metadata_merges_labels():
    cfg = RayClusterSpecConfig(labels={"team": "ml"}, annotations={"owner": "data-platform"})
    m = build_raycluster_manifest(cfg, "x", labels={"dagster/run-id": "abc"})
    assert m["apiVersion"] == "ray.io/v1" and m["kind"] == "RayCluster"
    assert m["metadata"] == {
        "name": "x",
        "namespace": "videolake",
        "labels": {"team": "ml", "dagster/run-id": "abc"},
        "annotations": {"owner": "data-platform"},
    }
    assert crd_errors(m) == []


# ------------------------------------------------------------------------------------------------ lifecycle on the fake API
# The two Ray resources of the prod profile, as resource key -> (cluster config, asset name). The tests build them
# with the prod profile's own builder; only the client (the fake) and the Ray connect differ.
CLUSTERS = {
    "ray_cluster": (cpu_stage_cluster_config, "scene_clips_stub"),
    "caption_ray": (RayClusterSpecConfig, "clip_captions_stub"),
}


def fake_resource(api: FakeKubernetesApi, cfg: RayClusterSpecConfig, **extra) -> KubeRayCluster:
    return kuberay_cluster_resource(
        cfg,
        client=owned_client_class()(api_client=api),
        # connect=False: nothing answers ray:// here; create, wait and cleanup are the Kubernetes side
        lifecycle=Lifecycle(connect=False, cleanup="always"),
        deployment_name="prod",
        poll_interval=0.01,
        timeout=10,
        **extra,
    )


def run_step(
    api: FakeKubernetesApi,
    key: str,
    *,
    fail_in_step: bool = False,
    resource: KubeRayCluster | None = None,
    instance: dg.DagsterInstance | None = None,
) -> dg.ExecuteInProcessResult:
    """One partition of a one-asset run whose asset needs the Ray resource ``key`` (its own step)."""
    make_cfg, name = CLUSTERS[key]

    @dg.asset(name=name, partitions_def=DAILY, required_resource_keys={key})
    def stub(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        if fail_in_step:
            raise RuntimeError("the stage failed")
        return dg.MaterializeResult(metadata={"cluster": getattr(context.resources, key).name})

    return dg.materialize(
        [stub],
        resources={key: resource or fake_resource(api, make_cfg())},
        partition_key=PARTITION,
        raise_on_error=False,
        instance=instance,
    )


def without_injected_env(spec: dict) -> dict:
    """``spec`` without the env var dagster-ray appends to every container (VIDEOLAKE_PROFILE, from env_vars)."""
    spec = yaml.safe_load(yaml.safe_dump(spec))
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        for container in group["template"]["spec"]["containers"]:
            assert container["env"][-1] == {"name": "VIDEOLAKE_PROFILE", "value": "prod"}
            container["env"] = container["env"][:-1]
    return spec


@pytest.mark.parametrize("key", list(CLUSTERS))
def test_step_creates_its_cluster_with_our_spec_and_deletes_it(key):
    api = FakeKubernetesApi()
    result = run_step(api, key)
    assert result.success
    (posted,) = api.created
    assert crd_errors(posted) == []
    name = posted["metadata"]["name"]
    assert name.startswith(f"dg-prod-{result.run_id[:8]}-") and api.deleted == [name] and api.clusters == {}
    assert result.asset_materializations_for_node(CLUSTERS[key][1])[0].metadata["cluster"].value == name
    labels = posted["metadata"]["labels"]
    assert labels["app.kubernetes.io/part-of"] == "videolake"
    assert labels["dagster/run-id"] == result.run_id
    assert labels["dagster/resource-key"] == key
    assert labels["dagster/deployment"] == "prod"
    assert labels["dagster/partition"] == PARTITION
    ours = build_raycluster_spec(CLUSTERS[key][0]())
    assert without_injected_env(posted["spec"]) == {**ours, "autoscalerOptions": ours.get("autoscalerOptions", {})}
    assert ours == build_raycluster_spec(CLUSTERS[key][0]())  # dagster-ray did not mutate our dicts
    # the order of the calls: existence check, create, polls of .status until ready, delete
    verbs = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in api.calls]
    assert verbs[:2] == [("GET", name), ("POST", "rayclusters")] and verbs[-1] == ("DELETE", name)
    assert set(verbs[2:-1]) == {("GET", "status")}


def test_cpu_cluster_carries_the_autoscaler_and_the_gpu_cluster_does_not():
    posted = {}
    for key in CLUSTERS:
        api = FakeKubernetesApi()
        assert run_step(api, key).success
        (posted[key],) = api.created
    cpu, gpu = posted["ray_cluster"]["spec"], posted["caption_ray"]["spec"]
    assert cpu["enableInTreeAutoscaling"] is True and gpu["enableInTreeAutoscaling"] is False
    assert cpu["autoscalerOptions"]["idleTimeoutSeconds"] == 60 and gpu["autoscalerOptions"] == {}
    cpu_group, gpu_group = cpu["workerGroupSpecs"][0], gpu["workerGroupSpecs"][0]
    assert (cpu_group["groupName"], cpu_group["minReplicas"], cpu_group["maxReplicas"]) == ("cpu", 1, 16)
    assert (gpu_group["groupName"], gpu_group["minReplicas"], gpu_group["maxReplicas"]) == ("gpu", 0, 1)
    gpu_pod = gpu_group["template"]["spec"]
    assert gpu_pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert gpu_pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    env = {e["name"]: e for e in gpu_pod["containers"][0]["env"]}
    assert env["VIDEOLAKE_PROFILE"] == {"name": "VIDEOLAKE_PROFILE", "value": "prod"}  # injected by dagster-ray
    assert "secretKeyRef" in env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]
    assert "nvidia.com/gpu" not in cpu_group["template"]["spec"]["containers"][0]["resources"]["limits"]


def test_cpu_step_with_a_gpu_group_posts_both_groups_and_deletes_the_cluster():
    api = FakeKubernetesApi()
    cfg = cpu_stage_cluster_config(worker_groups=(cpu_stage_group(), cpu_stage_gpu_group(2, node_selector=H100)))
    result = run_step(api, "ray_cluster", resource=fake_resource(api, cfg))
    assert result.success
    (posted,) = api.created
    assert crd_errors(posted) == []
    assert api.deleted == [posted["metadata"]["name"]] and api.clusters == {}
    groups = posted["spec"]["workerGroupSpecs"]
    assert [(g["groupName"], g["replicas"], g["minReplicas"], g["maxReplicas"]) for g in groups] == [
        ("cpu", 1, 1, 16),
        ("gpu", 0, 0, 2),
    ]
    ours = build_raycluster_spec(cfg)
    assert without_injected_env(posted["spec"]) == ours


@pytest.mark.parametrize("key", list(CLUSTERS))
def test_cluster_is_deleted_when_the_step_fails(key):
    api = FakeKubernetesApi()
    result = run_step(api, key, fail_in_step=True)
    assert not result.success
    (posted,) = api.created
    assert posted["metadata"]["labels"]["dagster/run-id"] == result.run_id
    assert api.deleted == [posted["metadata"]["name"]] and api.clusters == {}


@pytest.mark.parametrize("key", list(CLUSTERS))
def test_cluster_that_never_becomes_ready_is_deleted_and_its_head_log_read(key):
    api = FakeKubernetesApi(cluster_state="failed")
    result = run_step(api, key)
    assert not result.success
    (posted,) = api.created
    name = posted["metadata"]["name"]
    assert api.deleted == [name]
    assert ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}-head-abcde/log", "") in api.calls


# ------------------------------------------------------------------------------------------------ one cluster per step
def cpu_stages_job() -> dg.JobDefinition:
    """Three CPU stages in a chain, each needing `ray_cluster`, on the fake API in the directory
    $VIDEOLAKE_FAKE_K8S_DIR: loaded again in each step process by Dagster's multiprocess executor."""
    import os

    api = FakeKubernetesApi(state_dir=os.environ["VIDEOLAKE_FAKE_K8S_DIR"])

    def stage(name: str, deps: list[str]):
        @dg.asset(name=name, deps=deps, partitions_def=DAILY)
        def _stage(ray_cluster: KubeRayCluster) -> dg.MaterializeResult:
            assert ray_cluster.name in api.clusters  # the step runs while its cluster exists
            return dg.MaterializeResult(metadata={"cluster": ray_cluster.name})

        return _stage

    assets = [stage("raw_videos", []), stage("scene_clips", ["raw_videos"]), stage("filtered_clips", ["scene_clips"])]
    job = dg.define_asset_job(
        "cpu_stages", partitions_def=DAILY, executor_def=dg.multiprocess_executor.configured({"max_concurrent": 2})
    )
    defs = dg.Definitions(
        assets=assets, jobs=[job], resources={"ray_cluster": fake_resource(api, cpu_stage_cluster_config())}
    )
    return defs.resolve_job_def("cpu_stages")


@pytest.mark.slow  # three step processes, each importing dagster: 20-60 s on 2 cores
def test_each_step_of_a_run_gets_its_own_cluster_under_the_multiprocess_executor(tmp_path, monkeypatch):
    """The prod executor runs each step in its own process, which creates its own cluster and deletes it when the
    step ends: three CPU stages, three clusters, never two alive at once, all labeled with the run."""
    monkeypatch.setenv("VIDEOLAKE_FAKE_K8S_DIR", str(tmp_path / "api"))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        job = dg.build_reconstructable_job(  # the step processes import this module from this directory
            "test_kuberay_spec", "cpu_stages_job", reconstructor_working_directory=str(Path(__file__).parent)
        )
        result = dg.execute_job(job, instance=instance, tags={"dagster/partition": PARTITION})
        assert result.success
        clusters = {
            step: result.asset_materializations_for_node(step)[0].metadata["cluster"].value
            for step in ("raw_videos", "scene_clips", "filtered_clips")
        }
    api = FakeKubernetesApi(state_dir=tmp_path / "api")
    lifecycle = [(m, p.rsplit("/", 1)[-1] if m == "DELETE" else "") for m, p, _ in api.calls if m in ("POST", "DELETE")]
    names = [clusters["raw_videos"], clusters["scene_clips"], clusters["filtered_clips"]]
    assert len(set(names)) == 3
    assert lifecycle == [
        ("POST", ""),
        ("DELETE", names[0]),
        ("POST", ""),
        ("DELETE", names[1]),
        ("POST", ""),
        ("DELETE", names[2]),
    ]
    assert [c["metadata"]["name"] for c in api.created] == names
    assert {c["metadata"]["labels"]["dagster/run-id"] for c in api.created} == {result.run_id}
    assert api.clusters == {}


def test_cluster_sharing_is_unusable_with_this_kubernetes_client():
    """Why the prod profile does not share clusters between steps (dagster-ray 0.4.8 + kubernetes 36): the first
    step's lock heartbeat fails (only logged) and its cleanup leaves the cluster to the reaper; a second step that
    finds the shared cluster fails before it runs. Both hit ApiClient.call_api(response_type=...)."""
    api = FakeKubernetesApi()
    sharing = ClusterSharing(enabled=True, ttl_seconds=600)
    with dg.instance_for_test() as instance:
        first = run_step(
            api,
            "ray_cluster",
            resource=fake_resource(api, cpu_stage_cluster_config(), cluster_sharing=sharing),
            instance=instance,
        )
        assert first.success
        logs = [e.user_message for e in instance.all_logs(first.run_id)]
    (shared,) = api.created
    assert shared["metadata"]["labels"]["dagster/cluster-sharing"] == "true"
    assert any("Failed to renew the cluster sharing lock" in m and "response_type" in m for m in logs), logs
    assert api.deleted == [] and list(api.clusters) == [shared["metadata"]["name"]]  # not deleted after its step
    assert ("POST", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases", "") in api.calls

    second = run_step(
        api, "ray_cluster", resource=fake_resource(api, cpu_stage_cluster_config(), cluster_sharing=sharing)
    )
    assert not second.success
    (failure,) = [e for e in second.all_events if e.event_type == dg.DagsterEventType.RESOURCE_INIT_FAILURE]
    error = failure.event_specific_data.error
    assert error.cls_name == "TypeError" and "unexpected keyword argument 'response_type'" in error.message
    assert len(api.created) == 1  # the second step found the shared cluster, then failed to lock it


# ------------------------------------------------------------------------------------------------ RBAC
def role_permissions() -> set[tuple[str, str, str]]:
    (role,) = [d for d in load_docs(REPO / "k8s" / "rbac.yaml") if d["kind"] == "Role"]
    return {
        (g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }


def test_role_grants_exactly_what_dagster_ray_calls():
    used: set[tuple[str, str, str]] = set()
    for key in CLUSTERS:
        for state, fail in (("ready", False), ("ready", True), ("failed", False)):
            api = FakeKubernetesApi(cluster_state=state)
            run_step(api, key, fail_in_step=fail)
            used |= api.permissions_used()

    # dagster-ray's reaper for clusters a killed run pod could not delete: list by label, then delete.
    api = FakeKubernetesApi()
    for name, cfg in (("leaked-cpu", cpu_stage_cluster_config()), ("leaked-gpu", RayClusterSpecConfig())):
        api.add_cluster(build_raycluster_manifest(cfg, name, labels={"dagster/code-location": "videolake"}))
    context = dg.build_op_context(resources={"raycluster_client": RayClusterClient(api_client=api)})
    delete_kuberay_clusters_op(
        context, DeleteKubeRayClustersConfig(namespace=NAMESPACE, match_labels={"dagster/code-location": "videolake"})
    )
    assert sorted(api.deleted) == ["leaked-cpu", "leaked-gpu"]
    used |= api.permissions_used()

    assert used == role_permissions(), (
        f"Role grants but unused: {sorted(role_permissions() - used)}; used but not granted: "
        f"{sorted(used - role_permissions())}"
    )


# ------------------------------------------------------------------------------------------------ prod wiring
PROD_ENV = {
    "VIDEOLAKE_S3_BUCKET": "videolake-data",
    "VIDEOLAKE_RAY_IMAGE": "registry.example.com/videolake/videolake:9.9.9",
    "VIDEOLAKE_K8S_NAMESPACE": "videolake",
    "AWS_ACCESS_KEY_ID": "unused",
    "AWS_SECRET_ACCESS_KEY": "unused",
}


def test_prod_profile_puts_the_cpu_stages_on_an_autoscaling_kuberay_cluster(monkeypatch):
    from videolake.resources.prod import prod_resources

    for k, v in {
        **PROD_ENV,
        "VIDEOLAKE_RAY_CPU_IMAGE": "registry.example.com/videolake/cpu:9.9.9",
        "VIDEOLAKE_RAY_CPU_MIN_WORKERS": "2",
        "VIDEOLAKE_RAY_CPU_MAX_WORKERS": "40",
        "VIDEOLAKE_RAY_CPU_WORKER_CPUS": "16",
        "VIDEOLAKE_RAY_CPU_WORKER_MEMORY": "64Gi",
    }.items():
        monkeypatch.setenv(k, v)
    resources = prod_resources()
    cpu, gpu = resources["ray_cluster"], resources["caption_ray"]
    for r in (cpu, gpu):
        assert isinstance(r, KubeRayCluster)
        assert r.lifecycle.cleanup == "always" and r.cluster_sharing.enabled is False and r.timeout == 1200
        assert r.ray_cluster.metadata["namespace"] == "videolake"
    expected = cpu_stage_cluster_config(
        image="registry.example.com/videolake/cpu:9.9.9",
        worker_groups=(cpu_stage_group(min_replicas=2, max_replicas=40, cpu="16", memory="64Gi"),),
    )
    assert cpu.ray_cluster.spec.worker_group_specs == build_raycluster_spec(expected)["workerGroupSpecs"]
    assert cpu.ray_cluster.spec.enable_in_tree_autoscaling is True
    group = cpu.ray_cluster.spec.worker_group_specs[0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 40)
    assert gpu.ray_cluster.spec.enable_in_tree_autoscaling is False
    gpu_image = gpu.ray_cluster.spec.worker_group_specs[0]["template"]["spec"]["containers"][0]["image"]
    assert gpu_image == "registry.example.com/videolake/videolake:9.9.9"


def test_prod_cpu_cluster_defaults_and_bad_settings(monkeypatch):
    from videolake.resources.prod import cpu_cluster_config

    for k, v in PROD_ENV.items():
        monkeypatch.setenv(k, v)
    cfg = cpu_cluster_config()
    assert cfg == dataclasses.replace(cpu_stage_cluster_config(), image=PROD_ENV["VIDEOLAKE_RAY_IMAGE"])
    monkeypatch.setenv("VIDEOLAKE_RAY_CPU_MAX_WORKERS", "lots")
    with pytest.raises(ValueError, match="VIDEOLAKE_RAY_CPU_MAX_WORKERS must be an integer, got 'lots'"):
        cpu_cluster_config()
    monkeypatch.setenv("VIDEOLAKE_RAY_CPU_MAX_WORKERS", "0")
    with pytest.raises(
        ValueError,
        match=r"worker group 'cpu': need 0 <= min_replicas \(1\) <= replicas \(1\) "
        r"<= max_replicas \(0\)",
    ):
        cpu_cluster_config()
    monkeypatch.delenv("VIDEOLAKE_RAY_IMAGE")
    monkeypatch.delenv("VIDEOLAKE_RAY_CPU_MAX_WORKERS")
    with pytest.raises(RuntimeError, match="needs the environment variable VIDEOLAKE_RAY_IMAGE"):
        cpu_cluster_config()


def test_prod_cpu_cluster_has_no_gpu_group_by_default(monkeypatch):
    """Without VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS (or with 0 / empty) the CPU cluster is today's: one worker group,
    the committed k8s/ template's spec."""
    from videolake.resources.prod import cpu_cluster_config

    for k, v in PROD_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("VIDEOLAKE_RAY_NODE_SELECTOR", '{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}')
    monkeypatch.setenv("VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER", "2")  # without a GPU group: no effect
    template = yaml.safe_load((REPO / "k8s" / "raycluster-template-cpu.yaml").read_text())
    for value in (None, "0", ""):
        if value is None:
            monkeypatch.delenv("VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS", raising=False)
        else:
            monkeypatch.setenv("VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS", value)
        cfg = cpu_cluster_config()
        assert cfg.worker_groups == (CPU_STAGE_GROUP,)
        spec = build_raycluster_spec(dataclasses.replace(cfg, image=RayClusterSpecConfig().image))
        assert len(spec["workerGroupSpecs"]) == 1
        assert spec == template["spec"]


def test_prod_cpu_cluster_gpu_group_from_the_environment(monkeypatch):
    from videolake.resources.prod import cpu_cluster_config, prod_resources

    for k, v in {
        **PROD_ENV,
        "VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS": "3",
        "VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER": "2",
        "VIDEOLAKE_RAY_NODE_SELECTOR": '{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}',
        "VIDEOLAKE_RAY_TOLERATIONS": '[{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]',
    }.items():
        monkeypatch.setenv(k, v)
    cfg = cpu_cluster_config()
    assert cfg.worker_groups == (
        CPU_STAGE_GROUP,
        WorkerGroupConfig(
            name="gpu",
            replicas=0,
            min_replicas=0,
            max_replicas=3,
            gpus_per_worker=2,
            cpu="8",
            memory="32Gi",
            node_selector=H100,
            tolerations=GPU_TAINT,
        ),
    )
    # the CPU group keeps its defaults: no node selector, no toleration (the placement variables are the GPU pods')
    cpu_group = cfg.worker_groups[0]
    assert (cpu_group.name, cpu_group.gpus_per_worker, cpu_group.node_selector, cpu_group.tolerations) == (
        "cpu",
        0,
        {},
        (),
    )
    groups = prod_resources()["ray_cluster"].ray_cluster.spec.worker_group_specs
    assert [(g["groupName"], g["minReplicas"], g["maxReplicas"], g["rayStartParams"]["num-gpus"]) for g in groups] == [
        ("cpu", 1, 16, "0"),
        ("gpu", 0, 3, "2"),
    ]
    assert groups[1]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert groups[1]["template"]["spec"]["nodeSelector"] == H100
    assert "nodeSelector" not in groups[0]["template"]["spec"] and "tolerations" not in groups[0]["template"]["spec"]
    # what scene_clips asks the autoscaler for: 3 pods x 2 GPUs (the CPU group adds none)
    from videolake.resources.ray_on_demand import scalable_gpus

    assert scalable_gpus(prod_resources()["ray_cluster"]) == 6
    monkeypatch.setenv("VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS", "0")
    assert scalable_gpus(prod_resources()["ray_cluster"]) == 0
    monkeypatch.setenv("VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS", "3")

    # VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER unset: 1 GPU per pod; VIDEOLAKE_RAY_TOLERATIONS unset: the nvidia.com/gpu one
    monkeypatch.delenv("VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER")
    monkeypatch.delenv("VIDEOLAKE_RAY_TOLERATIONS")
    (_, group) = cpu_cluster_config().worker_groups
    assert (group.max_replicas, group.gpus_per_worker, group.tolerations) == (
        3,
        1,
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
    )


def test_prod_gpu_step_cluster_from_the_environment(monkeypatch):
    from videolake.resources.prod import ray_cluster_config

    for k, v in PROD_ENV.items():
        monkeypatch.setenv(k, v)
    assert ray_cluster_config() == RayClusterSpecConfig(image=PROD_ENV["VIDEOLAKE_RAY_IMAGE"])
    for k, v in {
        "VIDEOLAKE_RAY_GPU_WORKERS": "4",
        "VIDEOLAKE_RAY_GPUS_PER_WORKER": "8",
        "VIDEOLAKE_RAY_NODE_SELECTOR": '{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}',
        "VIDEOLAKE_RAY_TOLERATIONS": '[{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]',
    }.items():
        monkeypatch.setenv(k, v)
    (group,) = ray_cluster_config().worker_groups  # a fixed size: replicas = max_replicas = VIDEOLAKE_RAY_GPU_WORKERS
    assert group == WorkerGroupConfig(
        name="gpu",
        replicas=4,
        min_replicas=0,
        max_replicas=4,
        gpus_per_worker=8,
        cpu="8",
        memory="48Gi",
        node_selector=H100,
        tolerations=GPU_TAINT,
    )
    monkeypatch.setenv("VIDEOLAKE_RAY_GPU_WORKERS", "-1")
    with pytest.raises(ValueError, match=r"worker group 'gpu': need 0 <= min_replicas \(0\) <= replicas \(-1\)"):
        ray_cluster_config()


@pytest.mark.parametrize(
    "env, message",
    [
        (
            {"VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS": "two"},
            "VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS must be an integer, got 'two'",
        ),
        (
            {"VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS": "2", "VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER": "1.5"},
            r"VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER must be an integer, got '1\.5'",
        ),
        ({"VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS": "-1"}, "VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS must be >= 0"),
        (
            {"VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS": "2", "VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER": "0"},
            "VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER must be >= 1",
        ),
    ],
)
def test_prod_cpu_cluster_rejects_bad_gpu_group_settings(monkeypatch, env, message):
    from videolake.resources.prod import cpu_cluster_config

    for k, v in {**PROD_ENV, **env}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=message):
        cpu_cluster_config()
