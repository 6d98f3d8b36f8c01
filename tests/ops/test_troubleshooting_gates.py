"""docs/troubleshooting.md explains every blocking gate a day can trip: each gate of every table (the names of
videolake/platform/gates/config.py's GATE_DOCS, which name the Dagster checks) is in the page's section of its
table, so a new gate without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

from videolake.platform.gates.config import GATE_DOCS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def _sections() -> dict[str, str]:
    """'### title' -> the text up to the next heading of that level or above."""
    text = PAGE.read_text()
    parts = re.split(r"^(#{2,3}) (.+)$", text, flags=re.M)
    return {parts[i + 1].strip(): parts[i + 2] for i in range(1, len(parts) - 2, 3) if parts[i] == "###"}


def test_every_gate_of_every_table_has_its_line_in_its_tables_section():
    sections = _sections()
    missing = []
    for table, gates in GATE_DOCS.items():
        title = next((t for t in sections if t.split()[0] == table), None)
        body = sections.get(title or "", "")
        missing += [f"{table}.{g}" for g in gates if f"`{g}`" not in body]
    assert missing == []
    assert len([g for gates in GATE_DOCS.values() for g in gates]) >= 30  # the config's gates were read


def test_the_two_gates_real_footage_tripped_and_leaving_a_file_out_have_their_own_sections():
    sections = _sections()
    assert {"scene_clips.duration_in_bounds", "training_shards.failure_rate"} <= set(sections)
    assert "## Leaving one file out of a day" in PAGE.read_text()
