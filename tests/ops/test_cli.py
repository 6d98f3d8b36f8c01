"""The `videolake` command table, and what `videolake demo` prints when a run fails (issue 9, items 5 and 7).

The demo runs in a subprocess against a throw-away instance and data directory, with the real pipeline; each case
breaks one thing on purpose and checks the exact lines a person sees (durations normalized to "Ns")."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys

import pytest
from cli_helpers import REPO, cli_env, normalized, videolake

DOCTOR_CHECKS = ["ffmpeg", "packages", "definitions", "object_store", "lake", "model", "dagster", "runs"]


def _commands() -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "videolake.cli", "--help"], capture_output=True, text=True, check=True, cwd=REPO
    )
    section = out.stdout.split("COMMAND\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^    ([a-z]+)\s", section, re.M)


def test_help_lists_every_command_and_each_command_has_help():
    commands = _commands()
    assert commands == [
        "demo",
        "synth",
        "scenes",
        "bench",
        "check",
        "doctor",
        "release",
        "vacuum",
        "lineage",
        "run",
        "rows",
        "captions",
    ]
    for name in commands:
        out = subprocess.run(
            [sys.executable, "-m", "videolake.cli", name, "--help"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert out.returncode == 0, f"videolake {name} --help failed:\n{out.stderr}"
        assert out.stdout.startswith(f"usage: videolake {name}"), out.stdout


def test_demo_with_a_broken_environment_says_what_to_fix(tmp_path):
    out = videolake(["demo", "--date", "2026-03-05"], cli_env(tmp_path, VIDEOLAKE_PROFILE="bogus"), tmp_path)
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        "FAILED to load the pipeline definitions: ValueError: unknown VIDEOLAKE_PROFILE 'bogus': use 'local' or 'prod'",
        "what to do: fix the setting named above (the VIDEOLAKE_* environment variables), then run the demo again; "
        "`videolake doctor` checks the set-up",
    ]


def _log_path(stdout: str) -> str:
    match = re.search(r"; event log: (\S+\.log)$", stdout, re.M)
    assert match, stdout
    return match.group(1)


@pytest.mark.slow
def test_demo_on_a_day_without_landing_data_names_the_step_the_error_and_the_fix(tmp_path):
    env = cli_env(tmp_path)
    out = videolake(["demo", "--date", "2026-03-05", "--no-synth"], env, tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr[:4000]
    log, run_id = _log_path(out.stdout), re.search(r"^run (\S+) FAILED", out.stdout, re.M).group(1)
    home, folder = tmp_path / "home", tmp_path / "data" / "store" / "landing" / "2026-03-05"
    assert normalized(out.stdout) == [
        f"[1/3] using the landing folder {folder}/ as it is (no landing folder)",
        f"[2/3] materializing partition 2026-03-05 on the Dagster instance at {home}; event log: {log}",
        "      raw_videos ...",
        "      raw_videos FAILED",
        "[3/3] summary",
        "  not materialized: raw_videos, scene_clips, filtered_clips, clip_captions, training_shards",
        "  pipeline time: Ns",
        "",
        f"FAILED at step raw_videos: NoLandingDataError: no landing data for 2026-03-05: the folder "
        f"{folder.as_uri()}/ does not exist (deterministic: not retried)",
        f"what to do: land the day's videos under {folder.as_uri()}/ (or pick a date that has them), then run it again",
        f"event log: {log}",
        "",
        f"run {run_id} FAILED in Ns total",
        "Browse the assets, checks and lineage in the Dagster UI:  make ui   (then open http://127.0.0.1:3000)",
    ]
    assert "Warning" not in out.stderr  # no BetaWarning / PreviewWarning blocks
    events = open(log).read()
    assert f"{run_id} - " in events and "NoLandingDataError" in events  # Dagster's event log went to the file


@pytest.mark.slow
def test_demo_whose_gate_fails_names_the_gate_and_reuses_landed_files(tmp_path, ffmpeg):
    folder = tmp_path / "data" / "store" / "landing" / "2026-03-06"
    folder.mkdir(parents=True)
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
            "48",
            "-pix_fmt",
            "yuv420p",
            "-c:v",
            "libx264",
            str(folder / "a.mp4"),
        ],
        check=True,
    )
    (folder / "b.mp4").write_text("not a video")
    gates = tmp_path / "gates.yaml"
    gates.write_text("raw_videos:\n  max_reject_rate: 0.1\n  min_rows_for_rate: 1\n")
    out = videolake(["demo", "--date", "2026-03-06"], cli_env(tmp_path, VIDEOLAKE_GATES_FILE=str(gates)), tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr[:4000]
    log, run_id = _log_path(out.stdout), re.search(r"^run (\S+) FAILED", out.stdout, re.M).group(1)
    assert normalized(out.stdout) == [
        f"[1/3] landing sample videos for 2026-03-06 under {folder}/",
        "      reusing the 2 files already there (delete the folder for new ones)",
        f"[2/3] materializing partition 2026-03-06 on the Dagster instance at {tmp_path / 'home'}; event log: {log}",
        "      raw_videos ...",
        "      raw_videos done (Ns)",
        "      raw_videos_gates ...",
        "      raw_videos_gates FAILED",
        "      raw_videos_landing_not_empty ...",
        "      raw_videos_landing_not_empty done (Ns)",
        "[3/3] summary",
        "  videos:   2 (1 ok, 1 rejected)",
        "            rejected not_a_video: 1",
        "  not materialized: scene_clips, filtered_clips, clip_captions, training_shards",
        "  gates:",
        "            PASS  raw_videos.copies_name_their_original",
        "            PASS  raw_videos.landing_not_empty",
        "            PASS  raw_videos.probe_fields_valid",
        "            FAIL  raw_videos.reject_rate",
        "            PASS  raw_videos.reject_reason_consistent",
        "            PASS  raw_videos.status_valid",
        "            PASS  raw_videos.video_id_unique",
        "  pipeline time: Ns",
        "",
        # the rate gate names the rows behind the rate: the rejected file's content hash
        "FAILED at gate raw_videos.reject_rate: reject rate 0.5 > max 0.1 "
        f"(e.g. {hashlib.sha256(b'not a video').hexdigest()})",
        "what to do: the data of 2026-03-06 failed this quality gate (its measured values are in the UI: `make ui`, "
        "the asset's Checks tab). Fix the data, or the threshold in $VIDEOLAKE_GATES_FILE and re-check with "
        "`videolake check --partition 2026-03-06`",
        f"event log: {log}",
        "",
        f"run {run_id} FAILED in Ns total",
        "Browse the assets, checks and lineage in the Dagster UI:  make ui   (then open http://127.0.0.1:3000)",
    ]
    assert "landed" not in out.stdout  # existing files are reused, not "landed"


@pytest.mark.slow
def test_doctor_local_setup_all_ok(tmp_path):
    out = videolake(["doctor"], cli_env(tmp_path), tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[:2] for line in lines[:-1]] == [["ok", name] for name in DOCTOR_CHECKS]
    assert lines[-1] == "8 of 8 checks ok"
    by_name = {line.split()[1]: line for line in lines[:-1]}
    assert by_name["object_store"].endswith(f"local {tmp_path / 'data' / 'store'} writable")
    assert by_name["lake"].endswith(f"local {tmp_path / 'data' / 'lake'} writable")
    assert by_name["runs"].endswith("no stale runs; pool slots held: none")
    assert "LocalRunLauncher, run monitoring on, run retries on" in by_name["dagster"]


def test_doctor_unreachable_s3_endpoint_is_a_clear_failure_without_the_secret(tmp_path):
    from free_port import free_port

    port = free_port()  # a port nothing listens on
    secret = "doctor-test-secret-Zq81"
    env = cli_env(
        tmp_path,
        VIDEOLAKE_PROFILE="prod",
        VIDEOLAKE_S3_BUCKET="videolake-data",
        VIDEOLAKE_S3_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        VIDEOLAKE_RAY_IMAGE="example/videolake:0",
        AWS_ACCESS_KEY_ID="doctor-test-key",
        AWS_SECRET_ACCESS_KEY=secret,
    )
    out = videolake(["doctor", "--only", "object_store", "--only", "lake"], env, tmp_path)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert [line.split()[:2] for line in lines[:2]] == [["FAIL", "object_store"], ["FAIL", "lake"]]
    endpoint = f"http://127.0.0.1:{port}"
    assert lines[0].startswith(
        f"FAIL  object_store  S3 bucket 'videolake-data' at endpoint {endpoint} still failing after "
    )
    assert "while trying to list the bucket: EndpointConnectionError: Could not connect to the endpoint URL" in lines[0]
    assert lines[2] == "0 of 2 checks ok; failed: object_store, lake"
    assert secret not in out.stdout + out.stderr
