"""platform/runtime/telemetry.py without a Ray cluster: what a unit's summary records, that recording never fails the work,
the local Ray's pinned metrics port, and that docs/metrics.md documents every metric.

The metrics reaching a real Prometheus through a real Ray are tests/integration/test_prometheus_metrics.py.
"""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

import pytest

from videolake.platform.runtime import telemetry

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def recorded(monkeypatch) -> list[tuple[str, float, dict]]:
    """Records instead of Ray's exporter (a stand-in: which metric, value and labels each call would record)."""
    calls: list[tuple[str, float, dict]] = []
    monkeypatch.setattr(telemetry, "enabled", lambda: True)
    monkeypatch.setattr(telemetry, "_record", lambda spec, value, tags: calls.append((spec.name, value, dict(tags))))
    return calls


def test_a_computed_unit_records_its_outcome_rows_seconds_and_failure_rows(recorded):
    summary = {"partition_date": "2026-01-02", "reused": False, "rows": 5, "seconds": 1.5, "error": None}
    telemetry.record_unit("scene_clips", summary, {"permanent": 2})
    assert recorded == [
        ("videolake_units_total", 1, {"stage": "scene_clips", "outcome": "computed", "partition_date": "2026-01-02"}),
        ("videolake_rows_total", 5, {"stage": "scene_clips", "partition_date": "2026-01-02"}),
        ("videolake_unit_seconds", 1.5, {"stage": "scene_clips"}),
        ("videolake_failure_rows_total", 2, {"stage": "scene_clips", "failure_class": "permanent"}),
    ]


def test_a_failed_unit_and_a_reused_unit(recorded):
    failed = {"partition_date": "2026-01-02", "reused": False, "rows": 1, "seconds": 0.2, "error": "ValueError: x"}
    telemetry.record_unit("raw_videos", failed, {"transient": 1})
    reused = {"partition_date": "2026-01-02", "reused": True, "rows": 7, "seconds": 0.0, "error": None}
    telemetry.record_unit("raw_videos", reused)
    outcomes = [tags["outcome"] for name, _, tags in recorded if name == "videolake_units_total"]
    assert outcomes == ["failed", "reused"]
    # a reused unit wrote nothing: no rows, no duration
    assert [v for n, v, _ in recorded if n == "videolake_rows_total"] == [1]
    assert ("videolake_failure_rows_total", 1, {"stage": "raw_videos", "failure_class": "transient"}) in recorded


def test_a_caption_batch_records_captions_tokens_and_failures(recorded):
    batch = {"day": "2026-01-02", "rows": 4, "ok": 3, "prompt_tokens": 400, "output_tokens": 40}
    telemetry.record_caption_batch(batch, 2.0, {"permanent": 1})
    got = {(n, tuple(sorted(t.items()))): v for n, v, t in recorded}
    day = ("partition_date", "2026-01-02")
    assert got[("videolake_captions_total", (day, ("status", "ok")))] == 3
    assert got[("videolake_captions_total", (day, ("status", "failed")))] == 1
    assert got[("videolake_caption_tokens_total", (("kind", "output"), day))] == 40
    assert got[("videolake_caption_tokens_total", (("kind", "prompt"), day))] == 400
    assert got[("videolake_units_total", (("outcome", "computed"), day, ("stage", "clip_captions")))] == 1
    assert got[("videolake_unit_seconds", (("stage", "clip_captions"),))] == 2.0


def test_failure_counts_count_classes_and_skip_rows_without_one():
    assert telemetry.failure_counts([None, "permanent", "transient", "permanent", ""]) == {
        "permanent": 2,
        "transient": 1,
    }


def test_without_ray_or_when_switched_off_nothing_is_recorded(monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    assert telemetry.enabled() is False
    telemetry.record(telemetry.UNITS, 1, stage="x")  # a no-op, no import of ray
    assert "ray" not in sys.modules
    monkeypatch.setenv(telemetry.ENABLED_ENV, "0")
    assert telemetry.enabled() is False


def test_a_failing_record_never_fails_the_unit(monkeypatch, caplog):
    def broken(_spec):
        raise RuntimeError("exporter gone")

    monkeypatch.setattr(telemetry, "enabled", lambda: True)
    monkeypatch.setattr(telemetry, "_metric", broken)
    monkeypatch.setattr(telemetry, "_warned", False)
    with caplog.at_level(logging.WARNING, logger=telemetry.__name__):
        telemetry.record_unit("raw_videos", {"reused": False, "rows": 1, "seconds": 0.1, "error": None})
        telemetry.record(telemetry.QUEUE_DEPTH, 3, stage="raw_videos")
    assert len([r for r in caplog.records if "recording metric" in r.message]) == 1  # warned once


def test_counters_skip_zero_increments(monkeypatch):
    made = []
    monkeypatch.setattr(telemetry, "_metric", lambda spec: made.append(spec.name))
    telemetry._record(telemetry.ROWS, 0, {"stage": "x"})
    assert made == []  # Ray's counter rejects 0: never asked


# ------------------------------------------------------------------------------------------ the local Ray's port
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def test_local_ray_options_pin_a_free_port(monkeypatch):
    monkeypatch.delenv(telemetry.PORT_ENV, raising=False)
    assert telemetry.local_ray_options() == {}
    port = _free_port()
    monkeypatch.setenv(telemetry.PORT_ENV, str(port))
    assert telemetry.local_ray_options() == {"_metrics_export_port": port}


def test_a_taken_port_is_not_pinned(monkeypatch, caplog):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        monkeypatch.setenv(telemetry.PORT_ENV, str(s.getsockname()[1]))
        with caplog.at_level(logging.WARNING, logger=telemetry.__name__):
            assert telemetry.local_ray_options() == {}
    assert "in use" in caplog.text


@pytest.mark.parametrize("raw", ["metrics", "0", "70000"])
def test_a_bad_port_is_a_clear_error(monkeypatch, raw):
    monkeypatch.setenv(telemetry.PORT_ENV, raw)
    with pytest.raises(ValueError, match=telemetry.PORT_ENV):
        telemetry.local_ray_options()


def test_the_local_ray_resource_gets_the_port_for_its_start_only(monkeypatch):
    from dagster_ray import Lifecycle, LocalRay

    from videolake.resources.ray_on_demand import pinned_metrics_port

    port = _free_port()
    monkeypatch.setenv(telemetry.PORT_ENV, str(port))
    resource = LocalRay(ray_init_options={"num_cpus": 1}, lifecycle=Lifecycle(connect=False))
    log = logging.getLogger("test")
    with pinned_metrics_port(resource, log):
        assert resource.ray_init_options == {"num_cpus": 1, "_metrics_export_port": port}
    assert resource.ray_init_options == {"num_cpus": 1}
    # an operator's own option wins
    own = LocalRay(ray_init_options={"_metrics_export_port": 9999}, lifecycle=Lifecycle(connect=False))
    with pinned_metrics_port(own, log):
        assert own.ray_init_options == {"_metrics_export_port": 9999}


def test_docs_describe_every_metric_and_the_port_setting():
    text = (REPO / "docs" / "metrics.md").read_text()
    for spec in telemetry.METRICS:
        assert f"`{spec.exported}" in text, spec.exported
        for tag in spec.tags:
            assert f"`{tag}`" in text, (spec.name, tag)
    assert telemetry.PORT_ENV in text and telemetry.ENABLED_ENV in text
    names = [m.name for m in telemetry.METRICS]
    assert len(names) == len(set(names)) and all(n.startswith("videolake_") for n in names)
