"""`videolake run` and `videolake rows` (issue 41, "your own data, the way a team works"), and the rough edges of
the commands around them: a wrong VIDEOLAKE_PROFILE, a misspelled VIDEOLAKE_* variable, Dagster's beta warnings,
a release over a range with nothing to release, where `lineage` writes its contact sheet.

Every command runs in a subprocess against a throw-away instance and data directory (tests/ops/cli_helpers.py),
over the real pipeline or real Delta tables written row by row; the lines a person sees are compared whole
(durations normalized to "Ns")."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import json
import re
import subprocess

import pytest
from cli_helpers import REPO, cli_env, normalized, videolake

from videolake.platform.lake.schemas import TABLES
from videolake.platform.lake.table import Lake, PartitionRange, rows_to_table

D1, D2, D3 = "2026-03-05", "2026-03-06", "2026-03-07"


def cut(text: str) -> str:
    """A text cell as `videolake rows` shows it: up to 120 characters, a longer one cut in the middle."""
    return text if len(text) <= 120 else text[:59] + "…" + text[-60:]


def _mp4(ffmpeg: str, path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            ffmpeg,
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=160x120:rate=24",
            "-frames:v",
            "24",
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            str(path),
        ],
        check=True,
    )


@pytest.mark.slow
def test_run_materializes_each_landing_day_on_the_instance_and_rows_names_each_rejection(tmp_path, ffmpeg):
    """Three days: D1 one video; D2 an exact copy of it and a file that is no video (a reject rate of 0.5, over the
    0.4 this test's gates allow); D3 nothing landed. Only raw_videos is materialized (the cheap step): D1 passes,
    D2 fails its reject-rate gate, D3 is skipped; the exit status is 1. The two runs are on the instance."""
    landing = tmp_path / "data" / "store" / "landing"
    _mp4(ffmpeg, landing / D1 / "a.mp4")
    (landing / D2).mkdir(parents=True)
    (landing / D2 / "copy.mp4").write_bytes((landing / D1 / "a.mp4").read_bytes())
    (landing / D2 / "b.mp4").write_text("not a video")
    gates = tmp_path / "gates.yaml"
    gates.write_text("raw_videos:\n  max_reject_rate: 0.4\n  min_rows_for_rate: 1\n")
    env = cli_env(tmp_path, VIDEOLAKE_GATES_FILE=str(gates))

    out = videolake(["run", "--start", D1, "--end", D3, "--assets", "raw_videos"], env, tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr[-4000:]
    log = re.search(r"; event log: (\S+\.log)$", out.stdout, re.M).group(1)
    run_ids = re.findall(r"^  \S+ (?:succeeded|FAILED) \(run (\S+)\)$", out.stdout, re.M)
    assert len(run_ids) == 2, out.stdout
    video = hashlib.sha256((landing / D1 / "a.mp4").read_bytes()).hexdigest()
    junk = hashlib.sha256(b"not a video").hexdigest()
    gate_lines = [
        "  gates:",
        "            PASS  raw_videos.copies_name_their_original",
        "            PASS  raw_videos.landing_not_empty",
        "            PASS  raw_videos.probe_fields_valid",
    ]
    other_gates = [
        "            PASS  raw_videos.reject_reason_consistent",
        "            PASS  raw_videos.status_valid",
        "            PASS  raw_videos.video_id_unique",
    ]
    assert normalized(out.stdout) == [
        f"materializing raw_videos for {D1}..{D3} (3 day(s)) on the Dagster instance at {tmp_path / 'home'}; "
        f"event log: {log}",
        f"[1/3] {D1}",
        "      raw_videos ...",
        "      raw_videos done (Ns)",
        "      raw_videos_gates ...",
        "      raw_videos_gates done (Ns)",
        "      raw_videos_landing_not_empty ...",
        "      raw_videos_landing_not_empty done (Ns)",
        "  videos:   1 (1 ok, 0 rejected)",
        "  not materialized: scene_clips, filtered_clips, clip_captions, training_shards",
        *gate_lines,
        "            PASS  raw_videos.reject_rate",
        *other_gates,
        "  pipeline time: Ns",
        f"  {D1} succeeded (run {run_ids[0]})",
        f"[2/3] {D2}",
        "      raw_videos ...",
        "      raw_videos done (Ns)",
        "      raw_videos_gates ...",
        "      raw_videos_gates FAILED",
        "      raw_videos_landing_not_empty ...",
        "      raw_videos_landing_not_empty done (Ns)",
        "  videos:   2 (0 ok, 2 rejected)",
        # the exact copy has no reject_reason: its line names the object and the day it copies
        f"            rejected duplicate of {landing / D1 / 'a.mp4'} ({D1}): 1",
        "            rejected not_a_video: 1",
        "  not materialized: scene_clips, filtered_clips, clip_captions, training_shards",
        *gate_lines,
        "            FAIL  raw_videos.reject_rate",
        *other_gates,
        "  pipeline time: Ns",
        f"  FAILED at gate raw_videos.reject_rate: reject rate 0.5 > max 0.4 (e.g. {junk})",
        f"  what to do: the data of {D2} failed this quality gate (its measured values are in the UI: `make ui`, "
        "the asset's Checks tab). Fix the data, or the threshold in $VIDEOLAKE_GATES_FILE and re-check with "
        f"`videolake check --partition {D2}`",
        f"  {D2} FAILED (run {run_ids[1]})",
        f"[3/3] {D3}: no landing data (skipped)",
        "",
        f"{D1}..{D3}: 1 of 2 day(s) succeeded, FAILED: {D2}, 1 skipped (no landing data) in Ns",
        f"event log: {log}",
    ]
    assert "Warning" not in out.stderr  # no BetaWarning / PreviewWarning blocks

    # the runs are the instance's, with their day and the range they belong to
    import dagster as dg

    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"videolake/trigger": "run"}))
        got = sorted((r.tags["dagster/partition"], r.tags["videolake/range"], r.status.value, r.run_id) for r in runs)
    assert got == [
        (D1, f"{D1}..{D3}", "SUCCESS", run_ids[0]),
        (D2, f"{D1}..{D3}", "FAILURE", run_ids[1]),
    ]

    # rows: the day's problems first, each with its reason, its detail and its source object
    rows = videolake(["rows", "raw_videos", "--date", D2], env, tmp_path)
    assert rows.returncode == 0, rows.stderr[-3000:]
    copy_detail = f"copy of {landing / D1 / 'a.mp4'} landed {D1}"
    junk_detail = (
        "no known video container signature; FFmpeg cannot open the file: InvalidDataError: [Errno 1094995529] "
        f"Invalid data found when processing input: '{landing / D2 / 'b.mp4'}'"
    )
    table = [re.split(r"\s{2,}", line) for line in rows.stdout.splitlines()]
    assert table == [
        ["video_id", "status", "reason", "detail", "source"],
        [video, "duplicate", "duplicate", cut(copy_detail), cut(str(landing / D2 / "copy.mp4"))],
        [junk, "rejected", "not_a_video", cut(junk_detail), cut(str(landing / D2 / "b.mp4"))],
        [f"raw_videos {D2}: 2 of 2 row(s) shown (1 duplicate, 1 rejected)"],
    ]
    only = videolake(["rows", "raw_videos", "--date", D2, "--reason", "NOT_A", "--json"], env, tmp_path)
    assert [json.loads(line)["video_id"] for line in only.stdout.splitlines()] == [junk]
    copies = videolake(
        [
            "rows",
            "raw_videos",
            "--date",
            D2,
            "--status",
            "duplicate",
            "--json",
            "--columns",
            "duplicate_of_date,source",
        ],
        env,
        tmp_path,
    )
    assert [json.loads(line) for line in copies.stdout.splitlines()] == [
        {"duplicate_of_date": D1, "source": str(landing / D2 / "copy.mp4")}
    ]


def _write_day_with_duplicates(data, day: str) -> dict[str, str]:
    """raw_videos and filtered_clips of ``day``, written as the stages write them (real Delta tables): two videos;
    clip a0 passed and keeps a near-duplicate group with b0; b1 was rejected for text; b2 is a semantic duplicate
    of a clip kept on an earlier day."""
    lake = Lake(str(data / "lake"))
    date = dt.date.fromisoformat(day)
    now = dt.datetime(2026, 3, 8, tzinfo=dt.UTC)
    va, vb = "a" * 64, "b" * 64
    src = {va: f"file://{data}/store/landing/{day}/a.mp4", vb: f"file://{data}/store/landing/{day}/b.mp4"}
    raw = [
        {"video_id": v, "source_uri": u, "size_bytes": 1, "status": "ok", "ingested_at": now, "partition_date": date}
        for v, u in src.items()
    ]
    clips = {"a0": f"{va}_00000000_00000048", "b0": f"{vb}_00000000_00000048"}
    clips |= {"b1": f"{vb}_00000048_00000096", "b2": f"{vb}_00000096_00000144", "old": f"{'c' * 64}_00000000_00000048"}
    earlier = dt.date(2026, 3, 1)

    def clip(name, video, passed, reason=None, group=None, kept=None, kind=None):
        return {
            "clip_id": clips[name],
            "video_id": video,
            "duration_s": 2.0,
            "passed": passed,
            "reject_reason": reason,
            "duplicate_group": group,
            "duplicate_kept_date": kept,
            "duplicate_kind": kind,
            "partition_date": date,
        }

    filtered = [
        clip("a0", va, True, group=clips["a0"], kept=date),
        clip("b0", vb, False, "duplicate", group=clips["a0"], kept=date, kind="near"),
        clip("b1", vb, False, "text"),
        clip("b2", vb, False, "duplicate", group=clips["old"], kept=earlier, kind="semantic"),
    ]
    for table, rows in (("raw_videos", raw), ("filtered_clips", filtered)):
        lake.write_partitions(table, rows_to_table(rows, TABLES[table]), PartitionRange.of([day]))
    return clips


def test_rows_lists_rejected_clips_with_their_source_and_the_duplicate_groups_with_their_kept_clip(tmp_path):
    day = "2026-03-08"
    clips = _write_day_with_duplicates(tmp_path / "data", day)
    env = cli_env(tmp_path)
    landing = tmp_path / "data" / "store" / "landing" / day

    out = videolake(["rows", "filtered_clips", "--date", day, "--status", "rejected"], env, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    table = [re.split(r"\s{2,}", line) for line in out.stdout.splitlines()]
    assert table == [
        ["clip_id", "status", "reason", "detail", "source"],
        [clips["b0"], "rejected", "duplicate", f"group kept {clips['a0']} ({day}, near)", str(landing / "b.mp4")],
        [
            clips["b2"],
            "rejected",
            "duplicate",
            f"group kept {clips['old']} (2026-03-01, semantic)",
            str(landing / "b.mp4"),
        ],
        [clips["b1"], "rejected", "text", "-", str(landing / "b.mp4")],
        [f"filtered_clips {day}: 3 of 4 row(s) shown (1 ok, 3 rejected)"],
    ]
    assert out.stderr == ""  # no Dagster BetaWarning / PreviewWarning lines

    groups = videolake(["rows", "filtered_clips", "--date", day, "--groups"], env, tmp_path)
    assert groups.returncode == 0, groups.stderr[-3000:]
    assert [re.split(r"\s{2,}", line.strip()) for line in groups.stdout.splitlines()] == [
        [f"kept {clips['a0']} ({day}, near)", str(landing / "a.mp4")],
        [clips["a0"], "kept", "ok", "-", str(landing / "a.mp4")],
        [clips["b0"], "dropped", "rejected", "duplicate", str(landing / "b.mp4")],
        [f"kept {clips['old']} (2026-03-01, semantic)"],
        [clips["b2"], "dropped", "rejected", "duplicate", str(landing / "b.mp4")],
        [f"filtered_clips {day}: 2 duplicate group(s)"],
    ]
    as_json = videolake(["rows", "filtered_clips", "--date", day, "--groups", "--json"], env, tmp_path)
    first = json.loads(as_json.stdout.splitlines()[0])
    assert (first["kept"], first["kept_date"], [m["clip_id"] for m in first["members"]]) == (
        clips["a0"],
        day,
        [clips["a0"], clips["b0"]],
    )

    kept = videolake(["rows", "filtered_clips", "--date", day, "--status", "ok", "--json"], env, tmp_path)
    assert [json.loads(line) for line in kept.stdout.splitlines()] == [
        {
            "clip_id": clips["a0"],
            "status": "ok",
            "reason": None,
            "detail": "kept clip of a duplicate group",
            "source": str(landing / "a.mp4"),
        }
    ]

    wrong = videolake(["rows", "filtered_clips", "--date", day, "--columns", "clip_id,bogus"], env, tmp_path)
    assert wrong.returncode == 2
    assert wrong.stdout.startswith("error: unknown column(s) bogus of filtered_clips: clip_id, video_id, ")


def test_a_wrong_profile_is_one_line_and_a_misspelled_variable_is_named(tmp_path):
    bad = videolake(["check", "--partition", D1], cli_env(tmp_path, VIDEOLAKE_PROFILE="lcoal"), tmp_path)
    assert (bad.returncode, bad.stdout, bad.stderr) == (
        2,
        "",
        "error: unknown VIDEOLAKE_PROFILE 'lcoal' (did you mean 'local'?): use 'local' or 'prod'\n",
    )
    env = cli_env(tmp_path, VIDEOLAKE_GATE_FILE="strict.yaml", VIDEOLAKE_TEST_ANYTHING="1")
    out = videolake(["check", "--partition", D1], env, tmp_path)
    assert out.returncode == 0, out.stderr
    # one line, once (the CLI and the profile's resources both check; the name is reported once), no beta warnings
    assert out.stderr.splitlines() == [
        "warning: unknown environment variable VIDEOLAKE_GATE_FILE (did you mean VIDEOLAKE_GATES_FILE?): "
        "videolake does not read it"
    ]
    assert out.stdout.splitlines()[-1] == f"0 blocking gate(s) failed for partition {D1}"


def test_a_release_over_a_range_with_nothing_to_release_is_a_short_error(tmp_path):
    out = videolake(
        ["release", "create", "r1", "--start", "2026-01-01", "--end", "2026-01-31"], cli_env(tmp_path), tmp_path
    )
    assert (out.returncode, out.stderr) == (2, "")
    tables = "raw_videos, scene_clips, filtered_clips, clip_captions, training_shards"
    assert out.stdout.splitlines() == [
        f"error: no day of 2026-01-01..2026-01-31 can be released: 31 day(s) between 2026-01-01 and 2026-01-31: "
        f"no rows in {tables}. Materialize the days first (`videolake run --start 2026-01-01 --end 2026-01-31`), "
        "or see why a day fails its gates (`videolake check --partition DAY`)"
    ]


def test_the_release_error_groups_days_by_reason_and_keeps_the_three_commonest():
    from videolake.commands.release import short_error

    why = "; ".join(
        [
            "2026-01-01: no rows in raw_videos",
            "2026-01-02: raw_videos failed blocking gate(s) reject_rate; scene_clips failed blocking gate(s) a, b",
            "2026-01-03: no rows in raw_videos",
            "2026-01-04: no rows in training_shards",
            "2026-01-05: no rows in clip_captions",
        ]
    )
    assert short_error(f"no partition of 2026-01-01..2026-01-05 can be released ({why})") == (
        "no day of 2026-01-01..2026-01-05 can be released: 2 day(s) between 2026-01-01 and 2026-01-03: no rows in "
        "raw_videos; 1 day(s) 2026-01-02: raw_videos failed blocking gate(s) reject_rate; scene_clips failed "
        "blocking gate(s) a, b; 1 day(s) 2026-01-04: no rows in training_shards; and 1 other reason(s). "
        "Materialize the days first (`videolake run --start 2026-01-01 --end 2026-01-05`), or see why a day fails "
        "its gates (`videolake check --partition DAY`)"
    )
    assert short_error("release 'r1' exists") == "release 'r1' exists"


def _lineage_world():
    """tests/unit/test_lineage.py's ``world`` fixture (real Delta tables and a real clip), under its own name."""
    spec = importlib.util.spec_from_file_location("videolake_lineage_world", REPO / "tests/unit/test_lineage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.world


world = _lineage_world()


def test_lineage_writes_its_contact_sheet_under_the_data_dir_not_the_current_directory(world, tmp_path):
    clip = world["clips"][0]
    env = cli_env(tmp_path, VIDEOLAKE_DATA_DIR=str(world["data"]))
    out = videolake(["lineage", clip, "--frames", "2"], env, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sheet = world["data"] / "lineage" / f"lineage-{clip[:16]}-{clip.rsplit('_', 2)[1]}.png"
    assert out.stdout.splitlines()[-1] == f"  contact sheet  {sheet}"
    assert sheet.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]  # nothing written where it ran
    elsewhere = tmp_path / "sheets" / "one.png"
    out = videolake(["lineage", clip, "--frames", "2", "--out", str(elsewhere)], env, tmp_path)
    assert out.stdout.splitlines()[-1] == f"  contact sheet  {elsewhere}"
    assert elsewhere.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_refuses_wrong_arguments_in_one_line_before_running_anything(tmp_path):
    env = cli_env(tmp_path)
    cases = {
        ("--start", D2, "--end", D1): f"error: --end {D1} is before --start {D2}",
        ("--start", D1, "--assets", "raw_videos,captions"): "error: unknown asset(s) captions: choose from "
        "clip_captions, filtered_clips, raw_videos, scene_clips, training_shards",
        ("--start", "2025-12-31"): "error: 2025-12-31 is not a partition of the daily job (days from 2026-01-01, "
        "VIDEOLAKE_PARTITIONS_START, to yesterday UTC)",
    }
    got = {args: videolake(["run", *args], env, tmp_path) for args in cases}
    assert {args: (out.returncode, out.stdout.strip(), out.stderr) for args, out in got.items()} == {
        args: (2, line, "") for args, line in cases.items()
    }
    assert not (tmp_path / "home" / "logs").exists()  # nothing ran
