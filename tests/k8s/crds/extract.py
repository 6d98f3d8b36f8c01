"""Extract the v1 openAPIV3Schema of CRDs (KubeRay's, the Prometheus Operator's PodMonitor), without descriptions,
into <plural>.v1.schema.json.gz here.

    python tests/k8s/crds/extract.py path/to/ray.io_rayclusters.yaml path/to/ray.io_rayjobs.yaml ...

The tests validate RayCluster / RayJob / PodMonitor manifests offline against these schemas (tests/k8s/test_manifests.py).
Descriptions are dropped (they are 60 % of the CRD text and validate nothing); everything else is kept as is.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import yaml


def prune(node):
    if isinstance(node, dict):
        return {k: prune(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [prune(v) for v in node]
    return node


def extract(crd_path: str) -> Path:
    crd = yaml.load(Path(crd_path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    doc = {
        "kind": crd["spec"]["names"]["kind"],
        "version": "v1",
        "openAPIV3Schema": prune(version["schema"]["openAPIV3Schema"]),
    }
    out = Path(__file__).parent / f"{crd['spec']['names']['plural']}.v1.schema.json.gz"
    # mtime=0: the same input gives the same bytes
    out.write_bytes(gzip.compress(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(), mtime=0))
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(extract(path))
