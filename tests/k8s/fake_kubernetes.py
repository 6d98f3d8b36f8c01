"""FakeKubernetesApi: a FAKE of the kubernetes client's ApiClient, because no API server can run here.

dagster-ray's real KubeRayCluster code runs against it. It keeps RayClusters (and Leases, for dagster-ray's cluster
sharing) in a store, answers a RayCluster's ``.../status`` as the KubeRay operator would, serves a head pod and its
log, and records every call as (method, path, label selector). ``call_api`` accepts exactly the arguments of the
installed client's ``ApiClient.call_api`` (bound against its real signature), so a caller that passes an argument the
real client rejects fails here with the same TypeError.

The store is a dict, or a directory (``state_dir``) when steps in other processes must see the same API (Dagster's
multiprocess executor): one JSON file per object and one JSON line per call, each written whole.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

NAMESPACE = "videolake"
HEAD_CONTAINER = "ray-head"
_CALL_API = inspect.signature(k8s.ApiClient.call_api)


class _MemoryStore:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Any] = {}
        self.calls: list[dict[str, Any]] = []

    def put(self, kind: str, name: str, body: Any) -> None:
        self.objects[(kind, name)] = body

    def get(self, kind: str, name: str) -> Any | None:
        return self.objects.get((kind, name))

    def delete(self, kind: str, name: str) -> None:
        self.objects.pop((kind, name), None)

    def items(self, kind: str) -> list[Any]:
        return [v for (k, _), v in sorted(self.objects.items()) if k == kind]

    def record(self, call: dict[str, Any]) -> None:
        self.calls.append(call)

    def read_calls(self) -> list[dict[str, Any]]:
        return list(self.calls)


class _DirStore:
    """The same store in a directory, shared by processes; every write is one whole file or one appended line."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        (self.root / "objects").mkdir(parents=True, exist_ok=True)

    def _path(self, kind: str, name: str) -> Path:
        return self.root / "objects" / f"{kind}.{name}.json"

    def put(self, kind: str, name: str, body: Any) -> None:
        tmp = self._path(kind, name).with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(body))
        tmp.replace(self._path(kind, name))

    def get(self, kind: str, name: str) -> Any | None:
        path = self._path(kind, name)
        return json.loads(path.read_text()) if path.exists() else None

    def delete(self, kind: str, name: str) -> None:
        self._path(kind, name).unlink(missing_ok=True)

    def items(self, kind: str) -> list[Any]:
        return [json.loads(p.read_text()) for p in sorted((self.root / "objects").glob(f"{kind}.*.json"))]

    def record(self, call: dict[str, Any]) -> None:
        line = json.dumps(call) + "\n"
        fd = os.open(self.root / "calls.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def read_calls(self) -> list[dict[str, Any]]:
        path = self.root / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class FakeKubernetesApi(k8s.ApiClient):
    """A FAKE kubernetes ApiClient (see the module docstring). ``cluster_state`` is the state KubeRay reports for
    every RayCluster ("ready" or "failed")."""

    def __init__(self, cluster_state: str = "ready", state_dir: str | os.PathLike | None = None) -> None:
        super().__init__(k8s.Configuration(host="https://fake-apiserver.invalid"))
        self.cluster_state = cluster_state
        self.store = _DirStore(Path(state_dir)) if state_dir else _MemoryStore()

    # ------------------------------------------------------------------ what tests read
    @property
    def calls(self) -> list[tuple[str, str, str]]:
        return [(c["method"], c["path"], c["selector"]) for c in self.store.read_calls()]

    @property
    def created(self) -> list[dict]:
        """RayCluster bodies posted, in order."""
        return [c["body"] for c in self.store.read_calls() if c["method"] == "POST" and c["kind"] == "rayclusters"]

    @property
    def deleted(self) -> list[str]:
        """Names of the RayClusters deleted, in order."""
        return [
            c["name"]
            for c in self.store.read_calls()
            if c["method"] == "DELETE" and c["kind"] == "rayclusters" and c["found"]
        ]

    @property
    def clusters(self) -> dict[str, dict]:
        return {c["metadata"]["name"]: c for c in self.store.items("rayclusters")}

    def add_cluster(self, body: dict) -> None:
        self.store.put("rayclusters", body["metadata"]["name"], body)

    def add_run_pod(self, pod: str, job: str, uid: str) -> None:
        """A run pod owned by the Job ``job`` (uid ``uid``), as the K8sRunLauncher's Job controller makes it."""
        self.store.put("pods", pod, {"job": job, "uid": uid})

    def delete_job(self, uid: str) -> list[str]:
        """A FAKE of Kubernetes' garbage collector when the Job ``uid`` is deleted (its TTL after the run pod ended):
        every RayCluster whose ownerReferences name that uid is deleted. Returns their names."""
        gone = [
            c["metadata"]["name"]
            for c in self.store.items("rayclusters")
            if any(r.get("uid") == uid for r in c["metadata"].get("ownerReferences", []))
        ]
        for name in gone:
            self.store.delete("rayclusters", name)
        return gone

    # ------------------------------------------------------------------ the API
    def call_api(self, *args, **kwargs):
        arguments = _CALL_API.bind(self, *args, **kwargs).arguments  # TypeError where the real client raises one
        path = arguments["resource_path"]
        for key, value in (arguments.get("path_params") or {}).items():
            path = path.replace("{" + key + "}", str(value))
        method = arguments["method"]
        selector = dict(arguments.get("query_params") or []).get("labelSelector", "")
        body = arguments.get("body")
        call = {
            "method": method,
            "path": path,
            "selector": selector,
            "kind": "",
            "name": None,
            "found": True,
            "body": body if method == "POST" and isinstance(body, dict) else None,
        }
        try:
            return self._answer(method, path, selector, body, call)
        finally:
            self.store.record(call)

    def _answer(self, method: str, path: str, selector: str, body: Any, call: dict[str, Any]):
        ray = re.fullmatch(rf"/apis/ray\.io/v1/namespaces/{NAMESPACE}/rayclusters(?:/([^/]+))?(/status)?", path)
        if ray:
            call["kind"] = "rayclusters"
            return self._raycluster(method, ray.group(1), bool(ray.group(2)), selector, body, call)
        lease = re.fullmatch(rf"/apis/coordination\.k8s\.io/v1/namespaces/{NAMESPACE}/leases(?:/([^/]+))?", path)
        if lease:
            call["kind"] = "leases"
            return self._lease(method, lease.group(1), body, call)
        pod = re.fullmatch(rf"/api/v1/namespaces/{NAMESPACE}/pods/([^/]+)(/log)?", path)
        if pod and method == "GET":
            call["kind"], call["name"] = "pods", pod.group(1)
            if pod.group(2):
                return "ray.exceptions: the worker could not start (fake log)\n"
            owner = self.store.get("pods", pod.group(1))  # a run pod added by add_run_pod, with its Job
            refs = (
                [
                    k8s.V1OwnerReference(
                        api_version="batch/v1",
                        kind="Job",
                        name=owner["job"],
                        uid=owner["uid"],
                        controller=True,
                        block_owner_deletion=True,
                    )
                ]
                if owner
                else None
            )
            return k8s.V1Pod(
                metadata=k8s.V1ObjectMeta(name=pod.group(1), owner_references=refs),
                spec=k8s.V1PodSpec(containers=[k8s.V1Container(name=HEAD_CONTAINER)]),
            )
        raise AssertionError(f"unexpected Kubernetes API call {method} {path}")

    def _raycluster(self, method: str, name: str | None, status: bool, selector: str, body: Any, call: dict):
        if method == "POST" and name is None:
            name = body["metadata"]["name"]
            call["name"] = name
            self.store.put("rayclusters", name, body)
            return body
        if method == "GET" and name is None:
            wanted = dict(kv.split("=", 1) for kv in selector.split(",") if kv)
            return {
                "items": [
                    c
                    for c in self.store.items("rayclusters")
                    if wanted.items() <= c["metadata"].get("labels", {}).items()
                ]
            }
        call["name"] = name
        cluster = self.store.get("rayclusters", name)
        if cluster is None:
            call["found"] = False
            raise ApiException(status=404, reason="Not Found")
        if method == "GET" and status:
            return {
                **cluster,
                "status": {
                    "state": self.cluster_state,
                    "head": {
                        "podName": f"{name}-head-abcde",
                        "serviceIP": "10.0.0.7",
                        "serviceName": f"{name}-head-svc",
                    },
                    "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379"},
                },
            }
        if method == "GET":
            return cluster
        if method == "DELETE":
            self.store.delete("rayclusters", name)
            return {"kind": "Status", "status": "Success"}
        raise AssertionError(f"unexpected RayCluster call {method} {name}")

    def _lease(self, method: str, name: str | None, body: Any, call: dict):
        if method == "POST" and name is None:
            name = body.metadata.name
            call["name"] = name
            if self.store.get("leases", name) is not None:
                raise ApiException(status=409, reason="AlreadyExists")
            self.store.put("leases", name, {"holder": body.spec.holder_identity})
            return body
        call["name"] = name
        lease = self.store.get("leases", name)
        if lease is None:
            call["found"] = False
            raise ApiException(status=404, reason="Not Found")
        if method == "GET":
            return k8s.V1Lease(
                metadata=k8s.V1ObjectMeta(name=name), spec=k8s.V1LeaseSpec(holder_identity=lease["holder"])
            )
        if method == "DELETE":
            self.store.delete("leases", name)
            return {"kind": "Status", "status": "Success"}
        raise AssertionError(f"unexpected Lease call {method} {name}")

    def permissions_used(self) -> set[tuple[str, str, str]]:
        """The recorded calls as RBAC (apiGroup, resource, verb) triples."""
        used = set()
        for method, path, _selector in self.calls:
            m = re.fullmatch(r"/apis?/(?:([^/]+)/)?v1/namespaces/[^/]+/([^/]+)(?:/([^/]+))?(?:/([^/]+))?", path)
            assert m, path
            group = m.group(1) if path.startswith("/apis/") else ""
            resource = m.group(2) + (f"/{m.group(4)}" if m.group(4) else "")
            named = m.group(3) is not None
            verb = {
                "GET": "get" if named else "list",
                "POST": "create",
                "DELETE": "delete",
                "PATCH": "patch",
                "PUT": "update",
            }[method]
            used.add((group, resource, verb))
        return used
