"""Live metrics of the stages, exported by Ray to Prometheus like Ray's own (``ray.util.metrics``).

The Dagster metadata of a step tells what a finished step did; these tell what a running one is doing, on the
dashboard (k8s/grafana-dashboard.json, docs/metrics.md): units and rows per second by stage, captions and tokens per
second, failure rows by class, unit durations (stragglers), queue depth and caption goodput.

Every metric is declared once, in ``METRICS``, with its name (``videolake_`` prefixed; Ray's exporter adds its own
``ray_`` prefix, so Prometheus sees ``ray_videolake_...``), kind, unit and labels. Labels stay few and bounded:
``stage`` (a table name), ``partition_date``, ``outcome``, ``status``, ``failure_class``, ``kind``; never a clip or
video id. Ray adds its own (``WorkerId``, ``NodeAddress``, ``SessionName``...), so a per-actor view is one
``sum by (WorkerId)`` away.

Where the figures come from: the summaries the stages already build (``units.UnitTask`` per unit, the caption
actor per batch, the caption driver at the end of a run): nothing is computed twice. Counters are recorded where
the work runs (Ray workers and actors), so they reach Prometheus on a KubeRay cluster too, whose driver is a Ray
Client; the gauges the driver sets (queue depth, the caption run's goodput and stragglers) are recorded only by a
driver that is itself a Ray process (a local Ray), see docs/metrics.md.

Recording is cheap (a Ray metric record is an in-process call; the metric objects are made once per process) and
never fails a unit: without Ray (or when ``VIDEOLAKE_METRICS=0``) every call is a no-op, and an error while
recording is logged once and swallowed.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

ENABLED_ENV = "VIDEOLAKE_METRICS"  # "0": record nothing
PORT_ENV = "VIDEOLAKE_RAY_METRICS_PORT"  # the local Ray's metrics export port (Prometheus scrapes it)
RAY_PREFIX = "ray_"  # what Ray's exporter puts before every metric name

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"
# Unit seconds: a probe takes ~0.1 s, a long video's scene split minutes, a caption batch on a GPU seconds.
SECONDS_BOUNDARIES = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its Ray name, kind, unit, meaning and label keys (docs/metrics.md lists them all)."""

    name: str
    kind: str
    unit: str
    description: str
    tags: tuple[str, ...] = ()
    boundaries: tuple[float, ...] = ()

    @property
    def exported(self) -> str:
        """The name Prometheus sees (a histogram adds _bucket, _sum and _count to it)."""
        return RAY_PREFIX + self.name


UNITS = MetricSpec(
    "videolake_units_total",
    COUNTER,
    "units",
    "Units finished, by stage and outcome: computed (rows written), reused (a checkpoint of this stage version "
    "existed), failed (the unit's code raised, or its worker was lost on every attempt; its failure rows are "
    "written). For clip_captions a unit is one captioned batch (reused: a checkpointed batch of an earlier attempt).",
    ("stage", "outcome", "partition_date"),
)
ROWS = MetricSpec(
    "videolake_rows_total",
    COUNTER,
    "rows",
    "Rows written by computed units, by stage (scene_clips rows are clips, clip_captions rows are captions).",
    ("stage", "partition_date"),
)
FAILURE_ROWS = MetricSpec(
    "videolake_failure_rows_total",
    COUNTER,
    "rows",
    "Failure rows written (a rejection, a detect or score error, a failed caption), by stage and failure class "
    "(transient: a re-run computes it again; permanent: it is reused).",
    ("stage", "failure_class"),
)
UNIT_SECONDS = MetricSpec(
    "videolake_unit_seconds",
    HISTOGRAM,
    "seconds",
    "Wall seconds of each computed unit in its worker, by stage: the slow tail (p99 against p50) shows stragglers.",
    ("stage",),
    SECONDS_BOUNDARIES,
)
QUEUE_DEPTH = MetricSpec(
    "videolake_queue_depth",
    GAUGE,
    "units (clips for clip_captions)",
    "Work of the running stage not finished yet: units of a CPU stage, clips of clip_captions; 0 when it ends.",
    ("stage",),
)
CAPTIONS = MetricSpec(
    "videolake_captions_total",
    COUNTER,
    "captions",
    "Caption rows the captioner actors wrote, by status (ok | failed).",
    ("status", "partition_date"),
)
TOKENS = MetricSpec(
    "videolake_caption_tokens_total",
    COUNTER,
    "tokens",
    "Prompt and output tokens of the captions written, by kind (prompt | output).",
    ("kind", "partition_date"),
)
GENERATE_SECONDS = MetricSpec(
    "videolake_caption_generate_seconds_total",
    COUNTER,
    "accelerator-seconds",
    "Accelerator-seconds the captioner actors spent inside generate (x GPUs per actor; an actor on CPU counts 1).",
)
HELD_SECONDS = MetricSpec(
    "videolake_caption_accelerator_seconds_total",
    COUNTER,
    "accelerator-seconds",
    "Accelerator-seconds the captioner actors held, from their start (model load included) to their last batch "
    "(x GPUs per actor; an actor on CPU counts 1). generate / held is the cluster's live goodput.",
)
GOODPUT = MetricSpec(
    "videolake_caption_goodput",
    GAUGE,
    "ratio 0..1",
    "Goodput of the last caption run: accelerator-seconds of committed captions / accelerator-seconds all actors "
    "of all attempts of its partitions held (the clip_captions materialization's goodput).",
)
STRAGGLERS = MetricSpec(
    "videolake_caption_straggler_actors",
    GAUGE,
    "actors",
    "Caption actors of the last caption run slower than half the median actor's captions per generate-second.",
)

METRICS: tuple[MetricSpec, ...] = (
    UNITS,
    ROWS,
    FAILURE_ROWS,
    UNIT_SECONDS,
    QUEUE_DEPTH,
    CAPTIONS,
    TOKENS,
    GENERATE_SECONDS,
    HELD_SECONDS,
    GOODPUT,
    STRAGGLERS,
)

_made: dict[str, Any] = {}  # this process's Ray metric objects, by name
_warned = False


def configured_port() -> int | None:
    """The metrics export port VIDEOLAKE_RAY_METRICS_PORT asks a local Ray to use (None: unset)."""
    raw = os.environ.get(PORT_ENV, "").strip()
    if not raw:
        return None
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{PORT_ENV} must be a TCP port number, got {raw!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"{PORT_ENV} must be a TCP port number (1-65535), got {port}")
    return port


def port_is_free(port: int) -> bool:
    """Whether a process could listen on ``port`` now (Ray's metrics agent listens on every interface)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def local_ray_options() -> dict[str, Any]:
    """``ray.init`` options for a local Ray about to start: its metrics export port pinned from
    VIDEOLAKE_RAY_METRICS_PORT, so an operator's Prometheus can scrape it at a known address.

    Unset: {} (Ray picks a free port). Set but taken (another local Ray of this machine holds it: two steps at once):
    {} with a warning. A second local Ray given a taken port does not start at all (its node times out), so the
    step runs unscraped rather than failing.
    """
    port = configured_port()
    if port is None:
        return {}
    if not port_is_free(port):
        log.warning("%s=%d is in use (another local Ray?): this Ray's metrics go to a port Ray picks", PORT_ENV, port)
        return {}
    return {"_metrics_export_port": port}


def metrics_targets() -> list[str]:
    """``host:port`` of every live node's metrics export port of the connected Ray (what Prometheus scrapes)."""
    import ray

    return [f"{n['NodeManagerAddress']}:{n['MetricsExportPort']}" for n in ray.nodes() if n.get("Alive")]


def enabled() -> bool:
    """True when a record reaches Ray's exporter: Ray is initialised in this process (a worker, an actor, or a
    driver that joined as a Ray process, not a Ray Client) and VIDEOLAKE_METRICS is not 0."""
    if os.environ.get(ENABLED_ENV, "1").strip() == "0":
        return False
    ray = sys.modules.get("ray")  # never imports Ray: a process that has not imported it has no cluster either
    if ray is None:
        return False
    try:
        if not ray.is_initialized():
            return False
        from ray.util.client import ray as client

        return not client.is_connected()
    except Exception:  # noqa: BLE001 - a half-initialised Ray: no metrics
        return False


def _metric(spec: MetricSpec) -> Any:
    m = _made.get(spec.name)
    if m is None:
        from ray.util import metrics

        if spec.kind == COUNTER:
            m = metrics.Counter(spec.name, description=spec.description, tag_keys=spec.tags)
        elif spec.kind == GAUGE:
            m = metrics.Gauge(spec.name, description=spec.description, tag_keys=spec.tags)
        else:
            m = metrics.Histogram(
                spec.name, description=spec.description, boundaries=list(spec.boundaries), tag_keys=spec.tags
            )
        _made[spec.name] = m
    return m


def _record(spec: MetricSpec, value: float, tags: dict[str, Any]) -> None:
    global _warned
    if spec.kind == COUNTER and value <= 0:
        return  # Ray's counter takes increments > 0 only
    try:
        m = _metric(spec)
        t = {k: str(tags.get(k, "")) for k in spec.tags}
        if spec.kind == COUNTER:
            m.inc(float(value), tags=t)
        elif spec.kind == GAUGE:
            m.set(float(value), tags=t)
        else:
            m.observe(float(value), tags=t)
    except Exception:  # noqa: BLE001 - metrics never fail the work they describe
        if not _warned:
            _warned = True
            log.warning(
                "recording metric %s failed; metrics of this process may be incomplete", spec.name, exc_info=True
            )


def record(spec: MetricSpec, value: float, **tags: Any) -> None:
    """Record one value (a counter's increment, a gauge's value, a histogram's observation); a no-op without Ray."""
    if enabled():
        _record(spec, value, tags)


# ------------------------------------------------------------------------------------------ what stages record


def record_unit(stage: str, summary: dict, failures: dict[str, int] | None = None) -> None:
    """One finished unit of a stage (``units.UnitTask``'s summary: reused, rows, seconds, error) and the failure rows
    it wrote by class."""
    if not enabled():
        return
    day = summary.get("partition_date") or ""
    if summary.get("reused"):
        _record(UNITS, 1, {"stage": stage, "outcome": "reused", "partition_date": day})
        return
    outcome = "failed" if summary.get("error") else "computed"
    _record(UNITS, 1, {"stage": stage, "outcome": outcome, "partition_date": day})
    _record(ROWS, int(summary.get("rows") or 0), {"stage": stage, "partition_date": day})
    _record(UNIT_SECONDS, float(summary.get("seconds") or 0.0), {"stage": stage})
    for cls, n in (failures or {}).items():
        _record(FAILURE_ROWS, n, {"stage": stage, "failure_class": cls})


def record_caption_batch(summary: dict, seconds: float, failures: dict[str, int]) -> None:
    """One batch a caption actor wrote (the stage's per-batch summary) and the wall seconds of the call."""
    if not enabled():
        return
    stage, day = "clip_captions", summary["day"]
    rows, ok = int(summary["rows"]), int(summary["ok"])
    _record(UNITS, 1, {"stage": stage, "outcome": "computed", "partition_date": day})
    _record(ROWS, rows, {"stage": stage, "partition_date": day})
    _record(UNIT_SECONDS, seconds, {"stage": stage})
    _record(CAPTIONS, ok, {"status": "ok", "partition_date": day})
    _record(CAPTIONS, rows - ok, {"status": "failed", "partition_date": day})
    _record(TOKENS, int(summary["prompt_tokens"]), {"kind": "prompt", "partition_date": day})
    _record(TOKENS, int(summary["output_tokens"]), {"kind": "output", "partition_date": day})
    for cls, n in failures.items():
        _record(FAILURE_ROWS, n, {"stage": stage, "failure_class": cls})


def failure_counts(classes: list[Any]) -> dict[str, int]:
    """Failure rows by class from a unit's ``failure_class`` values (None: not a failure row)."""
    out: dict[str, int] = {}
    for c in classes:
        if c:
            out[str(c)] = out.get(str(c), 0) + 1
    return out
