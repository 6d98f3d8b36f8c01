"""``caption_compare_job``: two caption tracks compared over a range of days from the Dagster UI (Jobs ->
caption_compare_job -> Launchpad: ``tracks`` [A, B], ``start``, ``end``, optionally ``judge_model``).

One op runs the engine (``platform.captioning.compare.run_comparison``): it reads both tracks of clip_captions,
writes the pair's rows of ``caption_comparisons`` and records the markdown report (statistics, flag counts,
examples, the judge's tally) as the metadata of a ``caption_comparisons`` materialization and of the op's output,
so the report is on the run's page and in the asset's history. The op's pool (``caption_compare``, one slot by
dagster.yaml's default pool limit) runs one comparison at a time: the table is written by partition overwrite.

Wiring (videolake/definitions.py, ``build_definitions``): add ``caption_compare_job`` to ``jobs``; it uses the
``lake`` resource already there.
"""

from typing import Any

import dagster as dg
from pydantic import Field

from videolake.resources import LakeResource

COMPARE_POOL = "caption_compare"


class CaptionCompareConfig(dg.Config):
    tracks: list[str] = Field(description="The two caption tracks to compare, A then B (clip_captions.caption_track).")
    start: str = Field(description="First day, YYYY-MM-DD.")
    end: str = Field(description="Last day, YYYY-MM-DD, inclusive.")
    judge_model: str | None = Field(
        default=None,
        description="A judge model (checkpoint directory): a blind pairwise verdict per clip. Empty: none.",
    )
    judge_backend: str = Field(default="vllm", description="Caption backend that runs the judge: vllm or openai.")
    judge_seed: int = Field(default=0, description="Seed of the per-clip caption order the judge sees.")
    params: dict[str, str] = Field(
        default_factory=dict,
        description="QA thresholds (platform/captioning/compare.py CompareConfig), e.g. {length_k: '2.5'}.",
    )


def report_metadata(summary: dict[str, Any], report: str) -> dict[str, Any]:
    """What the UI shows for a comparison: the report, the coverage counts and the judge's tally."""
    md: dict[str, Any] = {
        "report": dg.MetadataValue.md(report),
        "tracks": dg.MetadataValue.json([summary["track_a"], summary["track_b"]]),
        "days": dg.MetadataValue.text(f"{summary['start']}..{summary['end']}"),
        "stats": dg.MetadataValue.json(summary["stats"]),
    }
    for key in ("clips", "both_ok", "missing_in_a", "missing_in_b", "failed_in_a", "failed_in_b"):
        md[key] = dg.MetadataValue.int(int(summary[key]))
    if summary.get("judge"):
        md["judge"] = dg.MetadataValue.json(summary["judge"])
    if summary.get("table_version") is not None:
        md["delta_version"] = dg.MetadataValue.int(int(summary["table_version"]))
    return md


@dg.op(
    name="compare_caption_tracks",
    pool=COMPARE_POOL,
    description="Compare two caption tracks over a range of days; write caption_comparisons and the report.",
)
def compare_caption_tracks(
    context: dg.OpExecutionContext, config: CaptionCompareConfig, lake: LakeResource
) -> dg.Output[dict]:
    from videolake.platform.captioning.compare import (
        TABLE,
        CompareConfig,
        day_range,
        render_report,
        run_comparison,
    )
    from videolake.platform.captioning.judge import JudgeConfig
    from videolake.platform.params import ParamError, parse_params

    if len(config.tracks) != 2:
        raise dg.Failure(f"give exactly two tracks (A, B), got {config.tracks}", allow_retries=False)
    try:
        cfg = parse_params(CompareConfig, config.params, "caption comparison")
        days = day_range(config.start, config.end)
        judge = (
            JudgeConfig(model=config.judge_model, backend=config.judge_backend, seed=config.judge_seed)
            if config.judge_model
            else None
        )
        lk = lake.get_lake()
        comparison, version = run_comparison(lk, config.tracks[0], config.tracks[1], days, cfg, judge=judge)
    except (ValueError, ParamError) as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc
    summary = {**comparison.summary(), "table_version": version}
    report = render_report(comparison)
    metadata = report_metadata(summary, report)
    context.log_event(
        dg.AssetMaterialization(
            asset_key=TABLE,
            description=f"{config.tracks[0]} vs {config.tracks[1]}, {config.start}..{config.end}",
            metadata={**metadata, "dagster/uri": dg.MetadataValue.path(lk.table_uri(TABLE))},
        )
    )
    context.log.info(
        f"{comparison.clips} clips compared ({summary['both_ok']} with both captions ok); table version {version}"
    )
    return dg.Output(summary, metadata=metadata)


@dg.job(
    name="caption_compare_job",
    description="Compare two caption tracks over a range of days: statistics, QA flags, an optional blind judge; "
    "writes caption_comparisons and attaches the markdown report. Config: tracks, start, end, judge_model.",
)
def caption_compare_job() -> None:
    compare_caption_tracks()


def compare_run_config(
    tracks: list[str], start: str, end: str, judge_model: str | None = None, **params: str
) -> dict[str, Any]:
    """The run config of a comparison run (tests, scripts)."""
    cfg: dict[str, Any] = {"tracks": list(tracks), "start": start, "end": end}
    if judge_model:
        cfg["judge_model"] = judge_model
    if params:
        cfg["params"] = dict(params)
    return {"ops": {"compare_caption_tracks": {"config": cfg}}}


__all__ = ["CaptionCompareConfig", "caption_compare_job", "compare_caption_tracks", "compare_run_config"]
