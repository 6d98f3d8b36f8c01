"""Join the step's Ray cluster only when the stage has work.

dagster-ray's resources connect while Dagster sets up the step: ~5-9 s of `ray.init` on this 2-core machine,
paid again by every step of a run over a day that has nothing to do. With ``Lifecycle(connect=False)`` the resource
is set up but not joined; ``connect_on_demand`` hands the engine a connector that runs the resource's own
create -> wait -> connect chain the first time a stage needs Ray (``videolake.platform.runtime.units.ensure_ray``).
A resource that connected at setup (the prod profile's KubeRay clusters) is already joined and the connector never
runs.

A local Ray started here gets its metrics export port from VIDEOLAKE_RAY_METRICS_PORT (``pinned_metrics_port``),
decided when it starts: a port another local Ray of the machine holds would keep this one from starting at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import dagster as dg
from dagster_ray import LocalRay, RayResource


@contextlib.contextmanager
def connect_on_demand(context: dg.AssetExecutionContext, resource: RayResource) -> Iterator[None]:
    from videolake.platform.runtime.units import ray_connector

    def connect() -> None:
        context.log.info(f"the stage has work: connecting to {resource.display_name}")
        # dagster-ray 0.4's own chain (create if needed, wait until ready, ray.init with the resource's options
        # and injected env vars); the public create/wait/connect without their bookkeeping would skip the hooks.
        with pinned_metrics_port(resource, context.log):
            resource._connect(context)
        if isinstance(resource, LocalRay):
            from videolake.platform.runtime.telemetry import metrics_targets

            context.log.info(f"this local Ray exports its metrics (Prometheus) at {', '.join(metrics_targets())}")

    with ray_connector(connect):
        yield


@contextlib.contextmanager
def pinned_metrics_port(resource: RayResource, log) -> Iterator[None]:
    """While a LocalRay starts, its ``ray.init`` options carry the metrics export port from
    VIDEOLAKE_RAY_METRICS_PORT when that port is free (``telemetry.local_ray_options``); restored afterwards.

    The option is decided at start, not when the code location loads, because two steps may start local Rays at
    once (max_concurrent_runs); the resource's option dict is the one dagster-ray's ``connect`` copies into
    ``ray.init``, so the key is added for that call only.
    """
    from videolake.platform.runtime.telemetry import PORT_ENV, local_ray_options

    options = resource.ray_init_options if isinstance(resource, LocalRay) else None
    extra = local_ray_options() if options is not None and "_metrics_export_port" not in options else {}
    if not extra or options is None:
        yield
        return
    log.info(f"local Ray metrics on port {extra['_metrics_export_port']} ({PORT_ENV})")
    options.update(extra)
    try:
        yield
    finally:
        for key in extra:
            options.pop(key, None)


def scalable_gpus(resource: RayResource) -> int:
    """GPUs the resource's cluster can scale up to: a KubeRay cluster's worker groups (maxReplicas x num-gpus);
    0 for a local Ray, whose GPUs (if any) are there from the start."""
    from videolake.platform.runtime.kuberay_spec import scalable_gpus as of_groups

    cluster = getattr(resource, "ray_cluster", None)
    spec = getattr(cluster, "spec", None)
    groups = getattr(spec, "worker_group_specs", None)
    return of_groups(list(groups)) if groups else 0
