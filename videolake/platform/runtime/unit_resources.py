"""What one unit of a stage needs from the cluster, declared by the plugin that does the unit's work.

Light on purpose (no pyarrow, no ray): scene detectors and quality scorers import it, and the ``videolake scenes``
CLI must start fast.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class UnitResources:
    """What one unit's Ray task needs; a plugin (scene detector, quality scorer) declares it, the stage schedules
    its units with it. Ray places a task only where these are free, so a GPU detector's units land on GPU workers and
    a memory-hungry scorer's units are not packed onto one node until it runs out of memory."""

    num_cpus: float = 1.0  # logical CPUs per unit task (one decode thread by default)
    num_gpus: float = 0.0  # GPUs per unit task (0: CPU only)
    memory_mb: int = 0  # memory Ray reserves per unit task (0: no reservation)
    custom: tuple[tuple[str, float], ...] = ()  # Ray custom resources, e.g. (("accelerator_type:L4", 0.01),)

    def ray_args(self) -> dict[str, Any]:
        """Keyword arguments of ``Dataset.map`` for these resources."""
        out: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            out["num_gpus"] = self.num_gpus
        if self.memory_mb:
            out["memory"] = int(self.memory_mb) << 20
        if self.custom:
            out["resources"] = dict(self.custom)
        return out

    @staticmethod
    def union(items: Iterable[UnitResources]) -> UnitResources:
        """The most of each resource: one task that runs all of them (e.g. every scorer of a clip) needs that."""
        items = list(items) or [UnitResources()]
        custom: dict[str, float] = {}
        for r in items:
            for k, v in r.custom:
                custom[k] = max(custom.get(k, 0.0), v)
        return UnitResources(
            num_cpus=max(r.num_cpus for r in items),
            num_gpus=max(r.num_gpus for r in items),
            memory_mb=max(r.memory_mb for r in items),
            custom=tuple(sorted(custom.items())),
        )
