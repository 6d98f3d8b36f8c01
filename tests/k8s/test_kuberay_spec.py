"""The RayCluster spec (videolake.platform.kuberay_spec) as dagster-ray 0.4.8 renders and uses it, and the RBAC it needs.

No API server can run here. dagster-ray's own KubeRayCluster resource runs its real lifecycle (create, wait,
cleanup) against FakeKubernetesApi, a fake of the kubernetes client's ApiClient: it keeps RayClusters in a dict,
answers .status as KubeRay would, and records every API call as (API group, resource, verb). The spec dagster-ray
posts must validate against KubeRay's CRD, and the recorded calls must be exactly what k8s/rbac.yaml's Role grants.
"""

import re
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster_ray import Lifecycle
from dagster_ray.kuberay import KubeRayCluster
from dagster_ray.kuberay.client import RayClusterClient
from dagster_ray.kuberay.configs import RayClusterConfig, RayClusterSpec
from dagster_ray.kuberay.ops import DeleteKubeRayClustersConfig, delete_kuberay_clusters_op
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from test_manifests import crd_errors, load_docs

from videolake.platform.kuberay_spec import (
    HEAD_CONTAINER,
    MODEL_CACHE_VOLUME,
    WORKER_CONTAINER,
    RayClusterSpecConfig,
    build_raycluster_manifest,
    build_raycluster_spec,
    dagster_ray_spec_kwargs,
)

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "videolake"


# ------------------------------------------------------------------------------------------------ the spec itself
def test_spec_has_head_and_gpu_worker_group():
    cfg = RayClusterSpecConfig(
        image="registry.example.com/videolake/videolake:1.2.3",
        gpus_per_worker=2,
        worker_replicas=2,
        worker_max_replicas=3,
        node_selector={"cloud.google.com/gke-accelerator": "nvidia-l4"},
        tolerations=({"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},),
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
    assert {p["containerPort"] for p in head_container["ports"]} == {6379, 8265, 10001}

    (group,) = spec["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["minReplicas"], group["maxReplicas"]) == ("gpu", 2, 0, 3)
    assert group["rayStartParams"] == {"num-gpus": "2"}
    pod = group["template"]["spec"]
    (worker,) = pod["containers"]
    assert worker["name"] == WORKER_CONTAINER and worker["image"] == cfg.image
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert worker["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    assert pod["serviceAccountName"] == "videolake-ray" and pod["automountServiceAccountToken"] is False

    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[MODEL_CACHE_VOLUME]["hostPath"] == {"path": "/mnt/videolake/models-cache",
                                                       "type": "DirectoryOrCreate"}
    assert {"name": MODEL_CACHE_VOLUME, "mountPath": "/models-cache"} in worker["volumeMounts"]
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"

    env = {e["name"]: e for e in worker["env"]}
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[key] == {"name": key, "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": key}}}
    assert env["HF_HOME"]["value"] == "/models-cache/huggingface"
    assert worker["envFrom"] == [{"configMapRef": {"name": "videolake-config"}}]
    flat = yaml.safe_dump(spec)
    assert "secret" not in flat.lower().replace("secretkeyref", "").replace("aws_secret_access_key", "")


def test_model_cache_volume_kinds():
    ephemeral = build_raycluster_spec(RayClusterSpecConfig(model_cache_volume="ephemeral", model_cache_size="500Gi",
                                                           model_cache_storage_class="local-nvme"))
    volumes = {v["name"]: v for v in ephemeral["workerGroupSpecs"][0]["template"]["spec"]["volumes"]}
    claim = volumes[MODEL_CACHE_VOLUME]["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert claim == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "500Gi"}},
                     "storageClassName": "local-nvme"}
    empty = build_raycluster_spec(RayClusterSpecConfig(model_cache_volume="emptyDir"))
    volumes = {v["name"]: v for v in empty["workerGroupSpecs"][0]["template"]["spec"]["volumes"]}
    assert volumes[MODEL_CACHE_VOLUME] == {"name": MODEL_CACHE_VOLUME, "emptyDir": {"sizeLimit": "200Gi"}}


@pytest.mark.parametrize("kwargs, message", [
    ({"worker_replicas": 2, "worker_max_replicas": 1}, "worker_replicas"),
    ({"worker_min_replicas": 2, "worker_replicas": 1}, "worker_min_replicas"),
    ({"model_cache_volume": "nfs"}, "model_cache_volume"),
    ({"model_cache_path": "models"}, "absolute"),
    ({"image": ""}, "image"),
])
def test_config_rejects_inconsistent_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RayClusterSpecConfig(**kwargs)


def test_manifest_metadata_merges_labels():
    cfg = RayClusterSpecConfig(labels={"team": "ml"}, annotations={"owner": "data-platform"})
    m = build_raycluster_manifest(cfg, "x", labels={"dagster/run-id": "abc"})
    assert m["apiVersion"] == "ray.io/v1" and m["kind"] == "RayCluster"
    assert m["metadata"] == {"name": "x", "namespace": "videolake", "labels": {"team": "ml", "dagster/run-id": "abc"},
                             "annotations": {"owner": "data-platform"}}
    assert crd_errors(m) == []


# ------------------------------------------------------------------------------------------------ fake Kubernetes API
class FakeKubernetesApi(k8s.ApiClient):
    """A fake kubernetes ApiClient: RayClusters in a dict, KubeRay's status on .../status, every call recorded.

    ``cluster_state`` is the state KubeRay reports ("ready" or "failed").
    """

    def __init__(self, cluster_state: str = "ready") -> None:
        super().__init__(k8s.Configuration(host="https://fake-apiserver.invalid"))
        self.cluster_state = cluster_state
        self.clusters: dict[str, dict] = {}
        self.calls: list[tuple[str, str, str]] = []  # (method, path, label selector)
        self.created: list[dict] = []
        self.deleted: list[str] = []

    def call_api(self, resource_path, method, path_params=None, query_params=None, header_params=None, body=None,
                 *args, **kwargs):
        path = resource_path
        for key, value in (path_params or {}).items():
            path = path.replace("{" + key + "}", str(value))
        selector = dict(query_params or []).get("labelSelector", "")
        self.calls.append((method, path, selector))
        return self._answer(method, path, selector, body)

    def _answer(self, method: str, path: str, selector: str, body):
        ray = re.fullmatch(rf"/apis/ray\.io/v1/namespaces/{NAMESPACE}/rayclusters(?:/([^/]+))?(/status)?", path)
        if ray:
            name, status = ray.group(1), ray.group(2)
            if method == "POST" and name is None:
                name = body["metadata"]["name"]
                self.clusters[name] = body
                self.created.append(body)
                return body
            if method == "GET" and name is None:
                wanted = dict(kv.split("=", 1) for kv in selector.split(",") if kv)
                return {"items": [c for c in self.clusters.values()
                                  if wanted.items() <= c["metadata"].get("labels", {}).items()]}
            if name not in self.clusters:
                raise ApiException(status=404, reason="Not Found")
            if method == "GET" and status:
                return {**self.clusters[name], "status": {
                    "state": self.cluster_state,
                    "head": {"podName": f"{name}-head-abcde", "serviceIP": "10.0.0.7",
                             "serviceName": f"{name}-head-svc"},
                    "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379"},
                }}
            if method == "GET":
                return self.clusters[name]
            if method == "DELETE":
                self.deleted.append(name)
                return {"kind": "Status", "status": "Success"}
        pod = re.fullmatch(rf"/api/v1/namespaces/{NAMESPACE}/pods/([^/]+)(/log)?", path)
        if pod and method == "GET":
            if pod.group(2):
                return "ray.exceptions: the GPU worker could not start (fake log)\n"
            return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=pod.group(1)),
                             spec=k8s.V1PodSpec(containers=[k8s.V1Container(name=HEAD_CONTAINER)]))
        raise AssertionError(f"unexpected Kubernetes API call {method} {path}")

    def permissions_used(self) -> set[tuple[str, str, str]]:
        """The recorded calls as RBAC (apiGroup, resource, verb) triples."""
        used = set()
        for method, path, _selector in self.calls:
            m = re.fullmatch(r"/apis?/(?:([^/]+)/)?v1/namespaces/[^/]+/([^/]+)(?:/([^/]+))?(?:/([^/]+))?", path)
            assert m, path
            group = m.group(1) if path.startswith("/apis/") else ""
            resource = m.group(2) + (f"/{m.group(4)}" if m.group(4) else "")
            named = m.group(3) is not None
            verb = {"GET": "get" if named else "list", "POST": "create", "DELETE": "delete", "PATCH": "patch",
                    "PUT": "update"}[method]
            used.add((group, resource, verb))
        return used


def role_permissions() -> set[tuple[str, str, str]]:
    (role,) = [d for d in load_docs(REPO / "k8s" / "rbac.yaml") if d["kind"] == "Role"]
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def kuberay_resource(api: FakeKubernetesApi, cfg: RayClusterSpecConfig) -> KubeRayCluster:
    return KubeRayCluster(
        ray_cluster=RayClusterConfig(metadata={"namespace": cfg.namespace, "labels": dict(cfg.labels)},
                                     spec=RayClusterSpec(**dagster_ray_spec_kwargs(cfg))),
        client=RayClusterClient(api_client=api),
        # connect=False: nothing answers ray:// here; create, wait and cleanup are the Kubernetes side
        lifecycle=Lifecycle(connect=False, cleanup="always"),
        deployment_name="prod",
        poll_interval=0.01,
        timeout=10,
        env_vars={"VIDEOLAKE_PROFILE": "prod"},
    )


def run_gpu_step(api: FakeKubernetesApi, *, fail_in_step: bool = False) -> dg.ExecuteInProcessResult:
    @dg.asset(partitions_def=dg.DailyPartitionsDefinition(start_date="2024-01-01"))
    def clip_captions_stub(ray_cluster: KubeRayCluster) -> dg.MaterializeResult:
        if fail_in_step:
            raise RuntimeError("captioning failed")
        return dg.MaterializeResult(metadata={"cluster": ray_cluster.name})

    return dg.materialize([clip_captions_stub], resources={"ray_cluster": kuberay_resource(api, RayClusterSpecConfig())},
                          partition_key="2024-01-05", raise_on_error=False)


def test_dagster_ray_renders_a_valid_raycluster_from_our_spec():
    api = FakeKubernetesApi()
    result = run_gpu_step(api)
    assert result.success
    (posted,) = api.created
    assert crd_errors(posted) == []
    name = posted["metadata"]["name"]
    assert name.startswith("dg-prod-") and api.deleted == [name]
    labels = posted["metadata"]["labels"]
    assert labels["app.kubernetes.io/part-of"] == "videolake"
    assert labels["dagster/run-id"] == result.run_id
    assert labels["dagster/deployment"] == "prod"
    ours = build_raycluster_spec(RayClusterSpecConfig())
    rendered = posted["spec"]
    assert rendered["rayVersion"] == ours["rayVersion"]
    worker = rendered["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["containers"][0]["resources"] == ours["workerGroupSpecs"][0]["template"]["spec"]["containers"][0][
        "resources"]
    assert worker["volumes"] == ours["workerGroupSpecs"][0]["template"]["spec"]["volumes"]
    assert worker["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    env = {e["name"]: e for e in worker["containers"][0]["env"]}
    assert env["VIDEOLAKE_PROFILE"] == {"name": "VIDEOLAKE_PROFILE", "value": "prod"}  # injected by dagster-ray
    assert "secretKeyRef" in env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]
    assert ours == build_raycluster_spec(RayClusterSpecConfig())  # dagster-ray did not mutate our dicts


def test_cluster_is_deleted_when_the_step_fails():
    api = FakeKubernetesApi()
    result = run_gpu_step(api, fail_in_step=True)
    assert not result.success
    (posted,) = api.created
    assert api.deleted == [posted["metadata"]["name"]]


def test_cluster_that_never_becomes_ready_is_deleted_and_its_head_log_read():
    api = FakeKubernetesApi(cluster_state="failed")
    result = run_gpu_step(api)
    assert not result.success
    (posted,) = api.created
    name = posted["metadata"]["name"]
    assert api.deleted == [name]
    assert ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}-head-abcde/log", "") in api.calls


def test_role_grants_exactly_what_dagster_ray_calls():
    used: set[tuple[str, str, str]] = set()
    for state, fail in (("ready", False), ("ready", True), ("failed", False)):
        api = FakeKubernetesApi(cluster_state=state)
        run_gpu_step(api, fail_in_step=fail)
        used |= api.permissions_used()

    # dagster-ray's reaper for clusters a killed run pod could not delete: list by label, then delete.
    api = FakeKubernetesApi()
    api.clusters["leaked"] = build_raycluster_manifest(RayClusterSpecConfig(), "leaked",
                                                       labels={"dagster/code-location": "videolake"})
    context = dg.build_op_context(resources={"raycluster_client": RayClusterClient(api_client=api)})
    delete_kuberay_clusters_op(context, DeleteKubeRayClustersConfig(
        namespace=NAMESPACE, match_labels={"dagster/code-location": "videolake"}))
    assert api.deleted == ["leaked"]
    used |= api.permissions_used()

    assert used == role_permissions(), (
        f"Role grants but unused: {sorted(role_permissions() - used)}; used but not granted: "
        f"{sorted(used - role_permissions())}")
