"""The list of VIDEOLAKE_* variables the package reads (videolake/resources/environment.py) against the source and
the docs: a name used anywhere is in the list (else setting it would draw a false "unknown" warning), every listed
name is documented in docs/environment.md, and a misspelling is named with its closest known name."""

from __future__ import annotations

import re
from pathlib import Path

from videolake.resources.environment import KNOWN, profile_error, unknown_variables

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"VIDEOLAKE_[A-Z0-9_]+")
EXAMPLES = {"VIDEOLAKE_GATE_FILE"}  # the misspelling the docs show in the warning's example


def _names_in(paths) -> dict[str, str]:
    """name -> the first file using it; a name ending in '_' is a prefix (VIDEOLAKE_S3_*), not a variable."""
    found: dict[str, str] = {}
    for path in paths:
        for name in NAME.findall(path.read_text(errors="replace")):
            if not name.endswith("_"):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_every_name_the_source_and_the_docs_use_is_known():
    files = [*(ROOT / "videolake").rglob("*.py"), *(ROOT / "docs").glob("*.md"), *(ROOT / "k8s").rglob("*.yaml")]
    used = _names_in(files)
    assert len(used) >= 40  # the scan sees the settings
    assert {n: f for n, f in used.items() if n not in KNOWN and n not in EXAMPLES} == {}


def test_every_known_name_is_documented():
    page = (ROOT / "docs" / "environment.md").read_text()
    assert sorted(n for n in KNOWN if f"`{n}" not in page) == []


def test_misspelled_names_are_named_with_the_closest_known_one():
    env = {
        "VIDEOLAKE_GATE_FILE": "strict.yaml",  # one letter short
        "VIDEOLAKE_RAY_CPU": "4",  # VIDEOLAKE_RAY_CPUS
        "VIDEOLAKE_WHATEVER": "1",  # nothing close
        "VIDEOLAKE_GATES_FILE": "ok.yaml",  # known
        "VIDEOLAKE_TEST_DAEMON_INTERVAL_S": "1",  # the test suite's own
        "OTHER_GATE_FILE": "x",  # not ours
    }
    assert [(u.name, u.suggestion) for u in unknown_variables(env)] == [
        ("VIDEOLAKE_GATE_FILE", "VIDEOLAKE_GATES_FILE"),
        ("VIDEOLAKE_RAY_CPU", "VIDEOLAKE_RAY_CPUS"),
        ("VIDEOLAKE_WHATEVER", None),
    ]
    assert unknown_variables(env)[2].message() == (
        "warning: unknown environment variable VIDEOLAKE_WHATEVER: videolake does not read it"
    )


def test_profile_error_names_a_wrong_profile_only():
    assert profile_error({}) is None
    assert profile_error({"VIDEOLAKE_PROFILE": "prod"}) is None
    assert profile_error({"VIDEOLAKE_PROFILE": "prd"}) == (
        "unknown VIDEOLAKE_PROFILE 'prd' (did you mean 'prod'?): use 'local' or 'prod'"
    )
    assert (
        profile_error({"VIDEOLAKE_PROFILE": "staging"}) == "unknown VIDEOLAKE_PROFILE 'staging': use 'local' or 'prod'"
    )
