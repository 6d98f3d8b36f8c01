"""The landing sensor: a new <landing>/<YYYY-MM-DD>/ folder, or new objects in one, requests that day's partition.

The cursor stores a fingerprint per day (object count, total bytes, newest key); a day is requested again only when
its fingerprint changes, and the run_key carries the fingerprint so a tick that re-evaluates never launches twice.
"""

import datetime as dt
import hashlib
import json

import dagster as dg

from videolake.assets.automation import PIPELINE_JOB
from videolake.assets.partitions import daily_partitions
from videolake.resources import ObjectStoreResource


def landing_fingerprints(store, landing: str) -> dict[str, str]:
    """{day: fingerprint} for every well-formed date folder under the landing prefix."""
    days: dict[str, list] = {}
    for obj in store.list(landing.strip("/") + "/"):
        parts = obj.key[len(landing.strip("/")) + 1 :].split("/")
        # folders (empty ones, S3 markers) and hidden entries are not landed data (list_landing's rules)
        if len(parts) < 2 or obj.is_folder or any(p.startswith(".") for p in parts[1:]):
            continue
        try:
            dt.date.fromisoformat(parts[0])
        except ValueError:
            continue
        days.setdefault(parts[0], []).append((obj.key, obj.size))
    return {
        day: hashlib.sha256(json.dumps(sorted(objs)).encode()).hexdigest()[:16] for day, objs in sorted(days.items())
    }


@dg.sensor(
    job_name=PIPELINE_JOB,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Requests the partition of a landing date folder that appeared or changed.",
)
def landing_sensor(context: dg.SensorEvaluationContext, object_store: ObjectStoreResource):
    previous = json.loads(context.cursor) if context.cursor else {}
    current = landing_fingerprints(object_store.get_store(), object_store.landing)
    valid = set(daily_partitions().get_partition_keys())
    requests = []
    cursor = dict(current)
    for day, fp in current.items():
        if previous.get(day) == fp:
            continue
        if day not in valid:
            # Today's folder (its partition opens when the day ends) or a date before the first partition: not
            # remembered, so it is requested as soon as its partition exists.
            context.log.info(f"landing folder {day} has no partition yet; will request it once it does")
            cursor.pop(day)
            if day in previous:
                cursor[day] = previous[day]
            continue
        requests.append(dg.RunRequest(partition_key=day, run_key=f"{day}:{fp}", tags={"videolake/trigger": "landing"}))
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(cursor, sort_keys=True))
