"""The local profile: everything embedded on one machine (files under VIDEOLAKE_DATA_DIR; one local Ray per launched
run, joined by its Ray steps, and in an in-process run a local Ray per step that has work)."""

from __future__ import annotations

import os

from dagster_ray import LocalRay
from pydantic import Field

from videolake.resources.captioner import captioner_from_env
from videolake.resources.embedder import embedder_from_env

# The address of the local Ray a launched run's worker started for its steps (set by assets/executor.py).
RUN_RAY_ENV = "VIDEOLAKE_RUN_RAY_ADDRESS"


class StepLocalRay(LocalRay):
    """dagster-ray's LocalRay, except that it never joins a cluster by accident: it joins the run's local Ray when
    ``join_run_ray`` is set and the run started one (VIDEOLAKE_RUN_RAY_ADDRESS: assets/executor.py), and otherwise
    starts a new local Ray (``ray.init(address="local")``).

    LocalRay calls ``ray.init(address=None)``, and with no address Ray first looks for a cluster to join: the one
    $RAY_ADDRESS names, else the latest one ``ray start`` left running on the machine. Joining one with this
    profile's options fails at once ("When connecting to an existing cluster, num_cpus and num_gpus must not be
    provided"), so any Ray cluster on the machine, or a RAY_ADDRESS exported for another tool, failed every Ray step
    of the local profile.
    """

    join_run_ray: bool = Field(
        default=False,
        description="Join the local Ray the run worker started for the run (VIDEOLAKE_RUN_RAY_ADDRESS) when there "
        "is one, instead of starting one for the step.",
    )

    @property
    def ray_address(self) -> str:  # type: ignore[override]  # LocalRay's is typed None
        return self._run_ray_address() or "local"

    def _run_ray_address(self) -> str | None:
        return os.environ.get(RUN_RAY_ENV) if self.join_run_ray else None

    def connect(self, context):
        if not self._run_ray_address():
            return super().connect(context)
        # A cluster that exists takes no start options (num_cpus, the dashboard, the metrics port: its own).
        saved = dict(self.ray_init_options)
        for key in _START_ONLY_OPTIONS:
            self.ray_init_options.pop(key, None)
        try:
            return super().connect(context)
        finally:
            self.ray_init_options.clear()
            self.ray_init_options.update(saved)


_START_ONLY_OPTIONS = ("num_cpus", "num_gpus", "include_dashboard", "_metrics_export_port", "resources")


def local_ray_cpus() -> int:
    """CPUs of a local Ray this profile starts (VIDEOLAKE_RAY_CPUS, default: every core)."""
    return int(os.environ.get("VIDEOLAKE_RAY_CPUS", str(os.cpu_count() or 2)))


def local_resources() -> dict:
    from dagster_ray import Lifecycle

    from videolake.resources import LakeResource, ObjectStoreResource
    from videolake.resources.alerts import alert_webhook_from_env
    from videolake.resources.environment import warn_unknown_variables

    warn_unknown_variables()  # a misspelled VIDEOLAKE_* setting is named, not silently ignored
    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    ray_init = {"num_cpus": local_ray_cpus(), "include_dashboard": False, "ignore_reinit_error": True}
    return {
        "object_store": ObjectStoreResource(kind="local", root=os.path.join(data, "store")),
        "lake": LakeResource(root=os.path.join(data, "lake")),
        # A step joins Ray when its stage has work (resources/ray_on_demand.py): the run's local Ray in a launched run
        # (assets/executor.py), else one of its own; a day with nothing to do never joins.
        "ray_cluster": StepLocalRay(ray_init_options=ray_init, lifecycle=Lifecycle(connect=False), join_run_ray=True),
        # The GPU step joins the same local Ray (in prod it gets an ephemeral KubeRay cluster for the step's lifetime).
        "caption_ray": StepLocalRay(ray_init_options=ray_init, lifecycle=Lifecycle(connect=False), join_run_ray=True),
        "captioner": captioner_from_env(),
        # Off unless VIDEOLAKE_EMBED_MODEL names a model: then clip_embeddings runs on caption_ray.
        "embedder": embedder_from_env(),
        # Failed runs and gates post here (VIDEOLAKE_ALERT_WEBHOOK_URL, a secret: dg.EnvVar); unset: logged only.
        "alert_webhook": alert_webhook_from_env(),
    }
