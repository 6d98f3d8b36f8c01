"""When a day is due: every daily table's newest partition must be materialized by a configurable hour (UTC).

The schedule materializes yesterday's partition at 00:30 UTC (automation.SCHEDULE_CRON). A Dagster freshness policy
(``FreshnessPolicy.cron``, evaluated by the daemon's freshness sensor and shown on every asset's page and in the
catalog as fresh / overdue) then requires a materialization of each asset between 00:00 and VIDEOLAKE_DUE_HOUR each
day. The hour is read when the code location loads; default 6 (six hours for a day's run, a retry and a look).
"""

from __future__ import annotations

import datetime as dt
import os

import dagster as dg

DEFAULT_DUE_HOUR = 6


def due_hour() -> int:
    """VIDEOLAKE_DUE_HOUR (read now; 1-23, UTC), else DEFAULT_DUE_HOUR."""
    raw = os.environ.get("VIDEOLAKE_DUE_HOUR", "").strip()
    hour = int(raw) if raw.isdigit() else (DEFAULT_DUE_HOUR if not raw else -1)
    if not 1 <= hour <= 23:
        raise ValueError(f"VIDEOLAKE_DUE_HOUR must be an hour from 1 to 23 (UTC), got {raw!r}")
    return hour


def freshness_policy(hour: int | None = None) -> dg.FreshnessPolicy:
    """Materialized each day between 00:00 and ``hour``:00 UTC (default ``due_hour()``)."""
    hour = due_hour() if hour is None else hour
    return dg.FreshnessPolicy.cron(
        deadline_cron=f"0 {hour} * * *", lower_bound_delta=dt.timedelta(hours=hour), timezone="UTC"
    )


def with_freshness(assets: list[dg.AssetsDefinition], policy: dg.FreshnessPolicy) -> list[dg.AssetsDefinition]:
    """``assets`` with ``policy`` on every asset spec."""
    return [a.map_asset_specs(lambda spec: dg.apply_freshness_policy(spec, policy)) for a in assets]
