"""ray_map: results in order, a raising item becomes a TaskFailure with its reason, others still succeed."""

from __future__ import annotations

import pytest

from videolake.platform.raymap import TaskFailure, local_map, ray_map


def _work(x: int, *, k: int) -> int:
    if x == 3:
        raise ValueError("bad item 3")
    return x * k


@pytest.fixture(scope="module")
def ray_local():
    import sys

    import ray
    from ray import cloudpickle

    # Ray workers cannot import this test module by name: ship its functions by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def test_ray_map_isolates_failures(ray_local):
    seen = []
    out = ray_map(_work, list(range(6)), kwargs={"k": 10}, progress=lambda d, t: seen.append((d, t)))
    assert [o for i, o in enumerate(out) if i != 3] == [0, 10, 20, 40, 50]
    assert isinstance(out[3], TaskFailure) and out[3].error == "ValueError: bad item 3"
    assert seen[-1] == (6, 6) and len(seen) == 6


def test_local_map_same_contract():
    out = local_map(_work, [1, 3], kwargs={"k": 2})
    assert out[0] == 2 and isinstance(out[1], TaskFailure)
