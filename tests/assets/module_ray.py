"""One local Ray per test module, joined by each of the module's materializations.

A ``dagster_ray.LocalRay`` that connects when Dagster sets it up starts a Ray in the test process and stops it again
after every materialization: ~6 s each on 2 cores, and fresh worker processes that import the stages again. Here the
module has one Ray (the ``module_ray`` fixture in conftest.py: the suite's shared Ray, tests/shared_ray.py, for the
modules its FILES names), and the materializations' ``ray_cluster`` is the local profile's own setting,
``Lifecycle(connect=False)`` (videolake/resources/local.py): a stage that has work finds Ray already up
(``videolake.platform.runtime.units.ensure_ray``) and uses it. Without the fixture the same resource starts its own Ray on
demand and stops it when the step ends, so a test that forgets the fixture is slower, not wrong.
"""

from __future__ import annotations

import shared_ray
from dagster_ray import Lifecycle, LocalRay


def joining_local_ray() -> LocalRay:
    """The materializations' ``ray_cluster``: joins the module's Ray when it is up, else starts one on demand."""
    return LocalRay(ray_init_options=dict(shared_ray.OPTIONS), lifecycle=Lifecycle(connect=False))
