"""Join the step's Ray cluster only when the stage has work.

dagster-ray's resources connect while Dagster sets up the step: ~5-9 s of `ray.init` on this 2-core machine,
paid again by every step of a run over a day that has nothing to do. With ``Lifecycle(connect=False)`` the resource
is set up but not joined; ``connect_on_demand`` hands the engine a connector that runs the resource's own
create -> wait -> connect chain the first time a stage needs Ray (``videolake.platform.units.ensure_ray``).
A resource that connected at setup (the prod profile's KubeRay clusters) is already joined and the connector never
runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import dagster as dg
from dagster_ray import RayResource


@contextlib.contextmanager
def connect_on_demand(context: dg.AssetExecutionContext, resource: RayResource) -> Iterator[None]:
    from videolake.platform.units import ray_connector

    def connect() -> None:
        context.log.info(f"the stage has work: connecting to {resource.display_name}")
        # dagster-ray 0.4's own chain (create if needed, wait until ready, ray.init with the resource's options
        # and injected env vars); the public create/wait/connect without their bookkeeping would skip the hooks.
        resource._connect(context)

    with ray_connector(connect):
        yield


def scalable_gpus(resource: RayResource) -> int:
    """GPUs the resource's cluster can scale up to: a KubeRay cluster's worker groups (maxReplicas x num-gpus);
    0 for a local Ray, whose GPUs (if any) are there from the start."""
    from videolake.platform.kuberay_spec import scalable_gpus as of_groups

    cluster = getattr(resource, "ray_cluster", None)
    spec = getattr(cluster, "spec", None)
    groups = getattr(spec, "worker_group_specs", None)
    return of_groups(list(groups)) if groups else 0
