"""No orphaned RayClusters (issue: operating it as a Dagster team would, item 4): in a run pod, the RayCluster a step
creates names the run's Kubernetes Job as its owner, so when the run pod dies without cleaning up (OOM, eviction,
node loss) Kubernetes deletes the cluster with the Job (the Job's TTL after the pod ended, k8s/values.yaml).

dagster-ray's real KubeRayCluster code runs against FakeKubernetesApi (no API server can run here); the garbage
collector is FAKED there too (``delete_job``). The manifest is pinned: what Kubernetes gets is what is asserted."""

from __future__ import annotations

import pytest
import yaml
from dagster_ray import Lifecycle
from fake_kubernetes import NAMESPACE, FakeKubernetesApi
from test_kuberay_spec import CLUSTERS, REPO, run_step

from videolake.resources.prod import kuberay_cluster_resource, owned_client_class

POD, JOB, UID = "dagster-run-1a2b3c-x7k2p", "dagster-run-1a2b3c", "0f0e0d0c-1111-2222-3333-444455556666"
OWNER = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": JOB,
    "uid": UID,
    "controller": False,
    "blockOwnerDeletion": False,
}


def in_run_pod(monkeypatch, api: FakeKubernetesApi) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("HOSTNAME", POD)
    api.add_run_pod(POD, JOB, UID)


def test_a_step_in_a_run_pod_creates_a_cluster_owned_by_the_runs_job(monkeypatch):
    for key, (_make_cfg, _name) in CLUSTERS.items():
        api = FakeKubernetesApi()
        in_run_pod(monkeypatch, api)
        assert run_step(api, key).success
        (posted,) = api.created
        assert posted["metadata"]["ownerReferences"] == [OWNER], key
        # the pod was read once, right before the create; the cluster was still deleted by the step's own cleanup
        verbs = [(m, p) for m, p, _ in api.calls]
        pod_reads = [i for i, v in enumerate(verbs) if v == ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}")]
        (post,) = [i for i, (m, _) in enumerate(verbs) if m == "POST"]
        assert pod_reads == [post - 1], verbs
        assert api.deleted == [posted["metadata"]["name"]] and api.clusters == {}


def test_when_the_run_pod_dies_the_cluster_goes_with_its_job(monkeypatch):
    api = FakeKubernetesApi()
    in_run_pod(monkeypatch, api)
    # the step's process is killed: nothing runs its cleanup (as with a pod OOM-killed mid-step)
    killed = kuberay_cluster_resource(
        CLUSTERS["caption_ray"][0](),
        client=owned_client_class()(api_client=api),
        lifecycle=Lifecycle(connect=False, cleanup="never"),
        deployment_name="prod",
        poll_interval=0.01,
        timeout=10,
    )
    assert run_step(api, "caption_ray", resource=killed).success
    (posted,) = api.created
    name = posted["metadata"]["name"]
    assert api.deleted == [] and list(api.clusters) == [name]  # left behind by the dead step
    assert api.delete_job("some-other-job-uid") == [] and list(api.clusters) == [name]
    assert api.delete_job(UID) == [name] and api.clusters == {}  # the Job's TTL: the cluster goes with it


def test_outside_a_pod_the_cluster_has_no_owner(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    api = FakeKubernetesApi()
    assert run_step(api, "ray_cluster").success
    (posted,) = api.created
    assert "ownerReferences" not in posted["metadata"]


def test_the_run_job_is_deleted_soon_after_its_pod_ended():
    values = yaml.safe_load((REPO / "k8s" / "values.yaml").read_text())
    job = values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["jobSpecConfig"]
    assert job["ttlSecondsAfterFinished"] == 600  # and with it, any RayCluster the run's steps left behind


def test_prod_reaps_ownerless_clusters_only_after_the_longest_run(monkeypatch):
    import dagster as dg
    from test_kuberay_spec import PROD_ENV

    from videolake.definitions import build_definitions

    for k, v in PROD_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("VIDEOLAKE_MAX_RUN_SECONDS", "7200")
    defs = build_definitions("prod")  # the code location loads whatever the expiration
    reaper = defs.resolve_sensor_def("videolake_raycluster_reaper")
    assert reaper.default_status == dg.DefaultSensorStatus.RUNNING and reaper.job_name == "delete_kuberay_clusters"
    api = FakeKubernetesApi()
    api.add_cluster({"metadata": {"name": "left-behind", "namespace": NAMESPACE}})
    context = dg.build_sensor_context(resources={"raycluster_client": owned_client_class()(api_client=api)})
    for unsafe in (None, "7200", str(7200 + 3599)):  # unset (dagster-ray's 4 h default) or below the longest run + 1 h
        if unsafe is None:
            monkeypatch.delenv("DAGSTER_RAY_CLUSTER_EXPIRATION_SECONDS", raising=False)
        else:
            monkeypatch.setenv("DAGSTER_RAY_CLUSTER_EXPIRATION_SECONDS", unsafe)
        with pytest.raises(ValueError, match="at least VIDEOLAKE_MAX_RUN_SECONDS"):
            list(reaper.evaluate_tick(context).run_requests or [])
        assert api.calls == [] and list(api.clusters) == ["left-behind"]  # refused before listing anything
    monkeypatch.setenv("DAGSTER_RAY_CLUSTER_EXPIRATION_SECONDS", str(7200 + 3600))
    job = defs.resolve_job_def("videolake_daily")
    assert job.run_tags["dagster/max_runtime"] == "7200" and job.run_tags["videolake/gpu"] == "true"
    local = build_definitions("local")
    assert "videolake_raycluster_reaper" not in {s.name for s in local.sensors}  # no Kubernetes locally
