"""The landing sensor requests a partition when a date folder appears or changes, and nothing otherwise."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from videolake.assets.sensors import landing_sensor
from videolake.resources import ObjectStoreResource


def _tick(store_root, cursor):
    # a context manager: the resource has a nested one (its S3 connection), which Dagster opens and closes
    resources = {"object_store": ObjectStoreResource(kind="local", root=str(store_root))}
    with dg.build_sensor_context(cursor=cursor, resources=resources) as ctx:
        result = landing_sensor(ctx)
    return [(r.partition_key, r.run_key) for r in result.run_requests], result.cursor


def test_new_folder_and_new_objects_request_their_partition(tmp_path):
    landing = tmp_path / "landing"
    (landing / "2026-02-01").mkdir(parents=True)
    (landing / "2026-02-01" / "a.mp4").write_bytes(b"x" * 10)
    (landing / "not-a-date").mkdir()
    (landing / "not-a-date" / "b.mp4").write_bytes(b"y")

    reqs, cursor = _tick(tmp_path, None)
    assert [p for p, _ in reqs] == ["2026-02-01"]

    reqs2, cursor2 = _tick(tmp_path, cursor)  # nothing changed: no request
    assert reqs2 == [] and cursor2 == cursor

    (landing / "2026-02-02").mkdir()
    (landing / "2026-02-02" / "c.mp4").write_bytes(b"z")
    reqs3, cursor3 = _tick(tmp_path, cursor2)
    assert [p for p, _ in reqs3] == ["2026-02-02"]

    (landing / "2026-02-01" / "d.mp4").write_bytes(b"w")  # a late object in an existing folder
    reqs4, cursor4 = _tick(tmp_path, cursor3)
    assert [p for p, _ in reqs4] == ["2026-02-01"]
    assert reqs4[0][1] != reqs[0][1]  # a new run key: the changed folder runs again

    assert _tick(tmp_path, cursor4)[0] == []


def test_folder_without_partition_yet_is_requested_later(tmp_path):
    (tmp_path / "landing" / "2999-01-01").mkdir(parents=True)
    (tmp_path / "landing" / "2999-01-01" / "a.mp4").write_bytes(b"x")
    reqs, cursor = _tick(tmp_path, None)
    assert reqs == [] and "2999-01-01" not in cursor


def _schedule_tick(store_root, tick: dt.datetime):
    from videolake.assets.automation import daily_schedule

    resources = {"object_store": ObjectStoreResource(kind="local", root=str(store_root))}
    with dg.build_schedule_context(scheduled_execution_time=tick, resources=resources) as ctx:
        return daily_schedule(ctx)


def test_schedule_requests_yesterday_only_when_its_landing_folder_exists(tmp_path):
    tick = dt.datetime(2026, 3, 3, 0, 30, tzinfo=dt.UTC)
    missing = _schedule_tick(tmp_path, tick)
    assert isinstance(missing, dg.SkipReason)
    assert missing.skip_message == (
        f"no landing data for 2026-03-02: {(tmp_path / 'landing').resolve().as_uri()}/2026-03-02/ does not exist"
    )

    (tmp_path / "landing" / "2026-03-02").mkdir(parents=True)  # empty: requested (0 rows and a warning check)
    empty = _schedule_tick(tmp_path, tick)
    assert (empty.partition_key, empty.run_key, empty.tags["videolake/trigger"]) == (
        "2026-03-02",
        "2026-03-02",
        "schedule",
    )


def test_schedule_skips_days_before_the_first_partition(tmp_path):
    from videolake.assets.partitions import daily_partitions

    before = daily_partitions().start.date() - dt.timedelta(days=1)
    (tmp_path / "landing" / before.isoformat()).mkdir(parents=True)
    tick = dt.datetime.combine(before + dt.timedelta(days=1), dt.time(0, 30), tzinfo=dt.UTC)
    result = _schedule_tick(tmp_path, tick)
    assert isinstance(result, dg.SkipReason)
    assert result.skip_message == (
        f"{before} is not a partition of videolake_daily (first: {daily_partitions().start:%Y-%m-%d})"
    )


def test_sensor_never_requests_a_day_without_objects(tmp_path):
    (tmp_path / "landing" / "2026-02-03").mkdir(parents=True)  # an empty folder: nothing landed yet
    (tmp_path / "landing" / "2026-02-04").mkdir(parents=True)
    (tmp_path / "landing" / "2026-02-04" / ".DS_Store").write_bytes(b"x")  # hidden files are not data
    reqs, cursor = _tick(tmp_path, None)
    assert reqs == [] and cursor == "{}"
