"""What `videolake demo` and `videolake run` print after a day's run: counts per table, rejections by reason
(exact copies with the object and day they copy), gates, and, when the run failed, the failing step, the first line
of its error and what to do."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from videolake.platform.lake.schemas import TABLE_NAMES


def print_summary(defs, date: str, result, elapsed: float, out=print) -> None:
    from videolake.platform.lake.table import PartitionRange

    done = materialized(result)
    lake = defs.resources["lake"].get_lake()
    rng = PartitionRange.of([date])
    for table, section in _SECTIONS:
        if table in done:
            section(lake.read_partitions(table, rng).to_pylist(), out)
    missing = [t for t in TABLE_NAMES if t in _tables(defs) and t not in done]
    if missing:
        out(f"  not materialized: {', '.join(missing)}")
    evals = list(result.get_asset_check_evaluations())
    if evals:
        out("  gates:")
        for e in sorted(evals, key=lambda e: (e.asset_key.to_user_string(), e.check_name)):
            out(f"            {_verdict(e)}  {e.asset_key.to_user_string()}.{e.check_name}")
    out(f"  pipeline time: {elapsed:.1f}s")


def _videos_section(raw: list[dict], out) -> None:
    """raw_videos: videos ok and rejected, with the count per reason."""
    ok = [r for r in raw if r["status"] == "ok"]
    out(f"  videos:   {len(raw)} ({len(ok)} ok, {len(raw) - len(ok)} rejected)")
    for reason, n in sorted(Counter(raw_reason(r) for r in raw if r["status"] != "ok").items()):
        out(f"            rejected {reason}: {n}")


def _clips_section(clips: list[dict], out) -> None:
    """scene_clips: the clip count."""
    out(f"  clips:    {len(clips)}")


def _filtered_section(filt: list[dict], out) -> None:
    """filtered_clips: passed and rejected, with the count per reject rule (a clip may break several)."""
    passed = [r for r in filt if r["passed"]]
    out(f"  filtered: {len(passed)} passed, {len(filt) - len(passed)} rejected")
    reasons = Counter(p for r in filt if r["reject_reason"] for p in r["reject_reason"].split(";"))
    for reason, n in sorted(reasons.items()):
        out(f"            rejected {reason}: {n}")


def _captions_section(caps: list[dict], out) -> None:
    """clip_captions: ok and failed, the model, and one caption as an example."""
    okc = [c for c in caps if c["status"] == "ok"]
    model = f" (model {caps[0]['model']})" if caps else ""
    out(f"  captions: {len(okc)} ok, {len(caps) - len(okc)} failed{model}")
    if okc:
        out(f"            e.g. {okc[0]['clip_id'][:20]}…: {okc[0]['caption'][:100]!r}")


def _shards_section(samples: list[dict], out) -> None:
    """training_shards: the shards written (samples, size, path) and the samples that failed."""
    ok = [r for r in samples if r["status"] == "ok"]
    shards: dict[str, dict] = {}
    for r in ok:
        shards.setdefault(r["shard_uri"], r)
    out(f"  shards:   {len(shards)} shard(s), {len(ok)} sample(s), {len(samples) - len(ok)} failed")
    for uri, r in sorted(shards.items()):
        out(f"            {r['shard_samples']} sample(s), {r['shard_bytes'] / 1e6:.2f} MB  {_local(uri)}")


# What the summary says of each table the run materialized, in this order.
_SECTIONS = (
    ("raw_videos", _videos_section),
    ("scene_clips", _clips_section),
    ("filtered_clips", _filtered_section),
    ("clip_captions", _captions_section),
    ("training_shards", _shards_section),
)


def raw_reason(row: dict) -> str:
    """Why a raw_videos row is not ok, in a few words: its reject reason's rule, or for an exact copy of bytes
    landed on an earlier day (status ``duplicate``, no reject_reason) the object and day it copies."""
    if row.get("reject_reason"):
        return str(row["reject_reason"]).split(":")[0]
    if row.get("status") == "duplicate":
        return f"duplicate of {_local(row.get('duplicate_of_uri') or '?')} ({row.get('duplicate_of_date') or '?'})"
    return str(row.get("status"))


def _local(uri: str) -> str:
    """A file:// URI as the path a shell reads (tar -tf PATH); other URIs as they are."""
    from urllib.parse import unquote

    return unquote(uri[len("file://") :]) if uri.startswith("file://") else uri


def _verdict(evaluation) -> str:
    import dagster as dg

    if evaluation.passed:
        return "PASS"
    return "WARN" if evaluation.severity == dg.AssetCheckSeverity.WARN else "FAIL"


def materialized(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def _tables(defs) -> set[str]:
    return {k.to_user_string() for k in defs.resolve_all_asset_keys()}


@dataclass(frozen=True)
class FailureReport:
    where: str  # "step raw_videos" or "gate raw_videos.reject_rate"
    error: str  # the first line of the error
    todo: str  # what to do

    def lines(self, log_path: str | None) -> list[str]:
        out = [f"FAILED at {self.where}: {self.error}", f"what to do: {self.todo}"]
        if log_path:
            out.append(f"event log: {log_path}")
        return out


def explain_failure(result, date: str, log_path: str | None, again: str = "run the demo again") -> FailureReport:
    """The first cause of a failed run: a failed blocking gate, else the first failed step (with its error).
    ``again``: how the user runs the day again, as the advice ends ("run the demo again")."""
    gate = _failed_gate(result, date)
    if gate is not None:
        return gate
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    if not failures:
        return FailureReport("the run", "it failed before any step ran", _generic_todo(log_path, again))
    return _step_failure(result, failures[0], log_path, again)


def _failed_gate(result, date: str) -> FailureReport | None:
    """The report of the run's first failed blocking gate, or None when none failed."""
    import dagster as dg

    failed_gates = [
        e for e in result.get_asset_check_evaluations() if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
    ]
    if not failed_gates:
        return None
    gate = failed_gates[0]
    name = f"{gate.asset_key.to_user_string()}.{gate.check_name}"
    error = _first_line(gate.description or "failed")
    return FailureReport(
        where=f"gate {name}",
        error=error.removeprefix(f"{name} failed: "),
        todo=f"the data of {date} failed this quality gate (its measured values are in the UI: `make ui`, the "
        f"asset's Checks tab). Fix the data, or the threshold in $VIDEOLAKE_GATES_FILE and re-check with "
        f"`videolake check --partition {date}`",
    )


def _step_failure(result, event, log_path: str | None, again: str) -> FailureReport:
    """The report of a failed step: the description (and hint) the step raised, else the user's error, with
    advice that says so when it failed through retries."""
    data = event.step_failure_data
    user = data.user_failure_data if data else None
    if user is not None and user.description:
        hint = user.metadata.get("hint")
        return FailureReport(
            f"step {event.step_key}",
            _first_line(user.description),
            hint.value if hint is not None else _generic_todo(log_path, again),
        )
    cause = _user_error(data.error) if data and data.error else None
    text = _first_line(cause.message) if cause else "unknown error"
    attempts = _attempts(result, event.step_key)
    if attempts > 1:
        todo = (
            f"a transient failure (storage, network or a lost Ray worker) persisted through {attempts} attempts: "
            f"check the services with `videolake doctor`, then {again}"
        )
    else:
        todo = _generic_todo(log_path, again)
    return FailureReport(f"step {event.step_key}", text, todo)


def _attempts(result, step_key: str) -> int:
    """How many times the step ran in this run (its starts and restarts)."""
    attempts = sum(1 for e in result.all_events if e.step_key == step_key and e.event_type_value == "STEP_START")
    attempts += sum(1 for e in result.all_events if e.step_key == step_key and e.event_type_value == "STEP_RESTARTED")
    return attempts


def _generic_todo(log_path: str | None, again: str = "run the demo again") -> str:
    where = f"the event log ({log_path})" if log_path else "the output above"
    return f"read the step's error in {where}, fix the cause, then {again} (`videolake doctor` checks the set-up)"


def _user_error(error):
    """The user's exception inside Dagster's wrapper (DagsterExecutionStepExecutionError -> cause)."""
    while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
        error = error.cause
    return error


def _first_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[0] if lines else ""
