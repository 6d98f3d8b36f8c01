"""The Dagster UI as an ML team meets it, driven in headless Chromium: the asset graph, the asset pages, a backfill
of two daily partitions launched from the UI and run by the daemon, the materialized partitions, the gates and the
metadata plots. Screenshots of every step go to test-artifacts/browser/ (not committed).

The tests run in file order and share one `dagster dev` (tests/browser/conftest.py). The backfill is a module
fixture: the first test that needs it launches it from the UI and waits for the daemon to finish it (the captioning
step builds the tiny random-weight VLM and runs it with vLLM on CPU, so this takes minutes on a small machine).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"  # as in conftest.py

pytestmark = pytest.mark.timeout(2700)

ASSETS = ("raw_videos", "scene_clips", "filtered_clips", "clip_captions")
EDGES = {("raw_videos", "scene_clips"), ("scene_clips", "filtered_clips"), ("filtered_clips", "clip_captions")}
KINDS = {
    "raw_videos": {"delta", "ray"},
    "scene_clips": {"delta", "ray"},
    "filtered_clips": {"delta", "ray"},
    "clip_captions": {"delta", "ray", "vllm"},
}
OWNER = "ml-data"  # owners=["team:ml-data"]: the UI shows the team name
GROUP = "videolake"
# Numeric metadata the asset pages must plot over partitions.
PLOTTED = {
    "raw_videos": ("rows", "videos_ok", "bytes"),
    "scene_clips": ("rows", "clips", "frames_per_s"),
    "filtered_clips": ("rows", "pass_rate", "passed"),
    "clip_captions": ("rows", "captions", "captions_per_s", "goodput"),
}
BACKFILL_TIMEOUT_S = 35 * 60
RUNNING_STATES = {"Requested", "In progress", "Queued", "Canceling"}


def _definitions():
    """The asset definitions as the code location declares them (descriptions, gate names)."""
    from videolake.definitions import defs

    return defs


def gate_names(table: str) -> list[str]:
    from videolake.platform.gates import gate_names as names

    return list(names(table))


def lenient_gates(table: str) -> set[str]:
    """Gates the local profile makes warnings for the tiny random-weight model (its captions are random text)."""
    from videolake.platform.gates import LENIENT_CAPTION_CONTENT

    gates = (LENIENT_CAPTION_CONTENT.get(table) or {}).get("gates") or {}
    return {g for g, cfg in gates.items() if cfg.get("severity") == "warn"}


# ------------------------------------------------------------------------------------------------ page helpers


def button(scope, label: str, prefix: bool = False):
    """The button whose visible label is ``label`` (its accessible name may start with its icon's name)."""
    tail = "" if prefix else "$"
    return scope.get_by_role("button", name=re.compile(rf"(^|\s){re.escape(label)}{tail}"))


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def open_ui(page, url: str) -> None:
    """Go to ``url`` and dismiss the one-time "Join the Dagster community" dialog whenever it shows up."""
    community = page.get_by_role("dialog").filter(has_text="Join the Dagster community")

    def skip(dialog):
        button(dialog, "Skip").click()

    if not getattr(page, "_videolake_handler", False):
        page.add_locator_handler(community, skip)
        page._videolake_handler = True
    page.goto(url)
    page.get_by_role("link", name=re.compile(r"\bCatalog$")).first.wait_for()


def asset_page(page, ui, asset: str, view: str | None = None) -> None:
    open_ui(page, f"{ui.url}/assets/{asset}" + (f"?view={view}" if view else ""))
    page.get_by_text(asset, exact=True).first.wait_for()


def section_lines(text: str, start: str, stop: str) -> list[str]:
    """The non-empty lines of ``text`` between the line ``start`` and the next line ``stop``."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    i = lines.index(start)
    j = lines.index(stop, i + 1)
    return lines[i + 1 : j]


def graph_nodes_and_edges(page) -> tuple[dict[str, dict], set[tuple[str, str]]]:
    """Asset nodes (name -> box) and edges of the lineage graph, read from its SVG: every edge is a path whose start
    touches the right side of its upstream node and whose end touches the left side of its downstream node."""
    data = page.evaluate(
        """(names) => {
          const svg = [...document.querySelectorAll('svg')].find(s => s.querySelector('foreignObject'));
          if (!svg) return {nodes: [], paths: []};
          const nodes = [];
          for (const fo of svg.querySelectorAll('foreignObject')) {
            const tips = [...fo.querySelectorAll('[data-tooltip]')].map(e => e.getAttribute('data-tooltip'));
            const name = names.find(n => tips.includes(n)) || names.find(n => (fo.textContent || '').startsWith(n));
            if (!name) continue;
            nodes.push({name, x: +fo.getAttribute('x'), y: +fo.getAttribute('y'),
                        w: +fo.getAttribute('width'), h: +fo.getAttribute('height')});
          }
          const paths = [...svg.querySelectorAll('path[marker-end]')].map(p => p.getAttribute('d'));
          return {nodes, paths};
        }""",
        list(ASSETS),
    )
    nodes = {n["name"]: n for n in data["nodes"]}
    edges = set()
    for d in data["paths"]:
        nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", d)]
        if len(nums) < 4:
            continue
        (x1, y1), (x2, y2) = nums[:2], nums[-2:]
        src = [n for n, b in nodes.items() if abs(b["x"] + b["w"] - x1) <= 30 and b["y"] <= y1 <= b["y"] + b["h"]]
        dst = [n for n, b in nodes.items() if abs(b["x"] - x2) <= 30 and b["y"] <= y2 <= b["y"] + b["h"]]
        if len(src) == 1 and len(dst) == 1:
            edges.add((src[0], dst[0]))
        else:
            edges.add(("?", d))
    return nodes, edges


def graphql(ui, query: str, variables: dict | None = None) -> dict:
    """Diagnostics only (failure messages); every assertion about the UI reads the rendered pages."""
    req = urllib.request.Request(
        f"{ui.url}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def failure_details(ui, backfill_id: str) -> str:
    """Failed steps and their errors of the backfill's runs, for the assertion message."""
    try:
        runs = graphql(
            ui,
            """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
                 ... on Runs { results { runId status } } } }""",
            {"id": backfill_id},
        )["data"]["runsOrError"]["results"]
        out = []
        for run in runs:
            logs = graphql(
                ui,
                """query($id: ID!) { logsForRun(runId: $id, limit: 5000) { ... on EventConnection { events {
                     __typename ... on ExecutionStepFailureEvent { stepKey error { message } }
                     ... on RunFailureEvent { message } } } } }""",
                {"id": run["runId"]},
            )["data"]["logsForRun"]["events"]
            out.append(f"run {run['runId']} {run['status']}")
            for e in logs:
                if e["__typename"] == "ExecutionStepFailureEvent":
                    out.append(f"  step {e['stepKey']} failed: {(e['error'] or {}).get('message', '')[:1500]}")
                elif e["__typename"] == "RunFailureEvent":
                    out.append(f"  run failure: {e['message'][:500]}")
        return "\n".join(out)
    except Exception as exc:  # diagnostics must not mask the real failure
        return f"(could not read the runs: {exc})"


# ------------------------------------------------------------------------------------------------ the backfill


@dataclass(frozen=True)
class Backfill:
    id: str
    status: str  # the Status shown on the backfill page when it stopped running
    page_text: str  # the backfill page's text at that moment
    seconds: float  # launch -> terminal status


def launch_backfill_from_ui(page, ui, days: tuple[str, str]) -> str:
    """Materialize all -> partition selection -> the two sample dates -> preview -> launch; returns the id."""
    open_ui(page, f"{ui.url}/asset-groups/{GROUP}")
    button(page, "Materialize all", prefix=True).click()
    dialog = page.get_by_role("dialog").filter(has_text="Partition selection")
    dialog.get_by_text(f"Launch runs to materialize {len(ASSETS)} assets").wait_for()
    show_all = dialog.get_by_text("Show all partitions")
    if show_all.count():  # only when the sample dates fall outside the default window
        show_all.click()
    box = dialog.get_by_role("textbox").first
    day1, day2 = days
    box.fill(f"[{day1}...{day2}]")
    box.press("Enter")
    dialog.get_by_text("2 partitions", exact=True).wait_for()
    shot(page, "02-backfill-dialog")

    button(dialog, "Preview").click()
    preview = page.get_by_role("dialog").filter(has_text="Backfill preview")
    preview.get_by_text("Partitions to launch").wait_for()
    text = preview.inner_text()
    shot(page, "03-backfill-preview")
    # Every asset runs its whole range in one run (one Ray session, one model load for the GPU step).
    assert text.count("Backfills all partitions in a single run") == len(ASSETS), text
    assert text.count(f"{day1}...{day2}") == len(ASSETS), text
    button(preview, "OK").click()

    button(dialog, "Launch backfill").click()
    toast = page.get_by_text(re.compile(r"Created backfill \w+"))
    toast.wait_for(timeout=60_000)
    backfill_id = re.search(r"Created backfill (\w+)", toast.inner_text()).group(1)
    shot(page, "04-backfill-launched")
    return backfill_id


def wait_for_backfill(page, ui, backfill_id: str, timeout_s: float = BACKFILL_TIMEOUT_S) -> tuple[str, str]:
    """Poll the backfill's page (as a user would, reloading) until its Status leaves the running states."""
    deadline = time.monotonic() + timeout_s
    status, text = "", ""
    n = 0
    while time.monotonic() < deadline:
        ui.remember_children()  # run workers and their Ray daemons, so teardown can stop even orphaned ones
        open_ui(page, f"{ui.url}/runs/b/{backfill_id}")
        page.get_by_text("Partition selection").wait_for()
        page.get_by_text("Status", exact=True).wait_for()
        text = page.inner_text("body")
        m = re.search(r"\nStatus\n+([^\n]+)", text)
        status = m.group(1).strip() if m else ""
        if n % 10 == 0:
            shot(page, "05-backfill-progress")
        n += 1
        if status and status not in RUNNING_STATES:
            return status, text
        if ui.proc.poll() is not None:
            raise AssertionError(f"dagster dev exited while the backfill ran:\n{ui.log_tail()}")
        time.sleep(15)
    raise AssertionError(f"backfill {backfill_id} still '{status}' after {timeout_s:.0f}s:\n{text[-2000:]}")


@pytest.fixture(scope="module")
def backfill(browser, dagster_ui, sample_data) -> Backfill:
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    try:
        t0 = time.monotonic()
        backfill_id = launch_backfill_from_ui(page, dagster_ui, sample_data.days)
        status, text = wait_for_backfill(page, dagster_ui, backfill_id)
        shot(page, "06-backfill-done")
        seconds = time.monotonic() - t0
        print(f"\nbackfill {backfill_id}: {status} after {seconds:.0f}s")
        return Backfill(id=backfill_id, status=status, page_text=text, seconds=seconds)
    except BaseException:
        try:
            shot(page, "FAILED-backfill")
            (ARTIFACTS / "FAILED-backfill.html").write_text(page.content())
        except Exception:
            pass
        raise
    finally:
        ctx.close()


# ------------------------------------------------------------------------------------------------ tests


def test_asset_graph_shows_the_four_assets_and_their_edges(page, dagster_ui):
    open_ui(page, f"{dagster_ui.url}/asset-groups/{GROUP}")
    for asset in ASSETS:
        page.locator("svg foreignObject").filter(has_text=asset).first.wait_for()
    page.locator("svg path[marker-end]").nth(len(EDGES) - 1).wait_for(state="attached")
    shot(page, "01-asset-graph")
    nodes, edges = graph_nodes_and_edges(page)
    assert set(nodes) == set(ASSETS)
    assert edges == EDGES
    # The graph is a chain left to right in pipeline order.
    xs = [nodes[a]["x"] for a in ASSETS]
    assert xs == sorted(xs) and len(set(xs)) == len(ASSETS)


def test_asset_pages_show_description_group_kinds_owners_columns_and_lineage(page, dagster_ui):
    import dagster as dg

    from videolake.platform.schemas import TABLES

    graph = _definitions().resolve_asset_graph()
    upstream = {dst: src for src, dst in EDGES}
    downstream = {src: dst for src, dst in EDGES}
    for asset in ASSETS:
        # Descriptions render as markdown: inline code (`...`) shows without its backticks.
        description = graph.get(dg.AssetKey(asset)).description.replace("`", "")
        asset_page(page, dagster_ui, asset)
        page.get_by_text("Description", exact=True).first.wait_for()
        page.get_by_text("Column name").wait_for()
        page.get_by_text("Kinds", exact=True).wait_for()
        page.get_by_text("Upstream assets", exact=True).wait_for()
        shot(page, f"07-definition-{asset}")
        text = page.inner_text("body")
        shown = " ".join(section_lines(text, "Description", "Columns"))
        assert shown == description, f"{asset}: the UI shows the description as {shown!r}"
        assert section_lines(text, "Group", "Code location") == [GROUP], asset
        assert section_lines(text, "Owners", "Kinds") == [OWNER], asset
        assert {k.lower() for k in section_lines(text, "Kinds", "Tags")} == KINDS[asset], asset
        # Column schema (dagster/column_schema): every column of the Delta table, its type and its description.
        columns = set(section_lines(text, "Columns", "Metadata"))
        for field in TABLES[asset]:
            assert field.name in columns, f"{asset}: column {field.name} not shown"
            assert str(field.type) in columns, f"{asset}: type {field.type} of {field.name} not shown"
            doc = (field.metadata or {}).get(b"description", b"").decode().replace("`", "")
            if doc:
                assert doc in columns, f"{asset}: description of {field.name} not shown"
        # Lineage: the upstream and downstream asset of each page.
        ups = section_lines(text, "Upstream assets", "Downstream assets")
        downs = section_lines(text[text.index("Downstream assets") :], "Downstream assets", "Definition")
        assert (upstream.get(asset) in ups) if asset in upstream else not set(ups) & set(ASSETS), (asset, ups)
        assert (downstream.get(asset) in downs) if asset in downstream else not set(downs) & set(ASSETS), (asset, downs)


def test_backfill_launched_from_the_ui_succeeds_for_every_asset(backfill, dagster_ui):
    assert backfill.status == "Succeeded", backfill.page_text[-3000:] + "\n" + failure_details(dagster_ui, backfill.id)
    for asset in ASSETS:
        m = re.search(rf"\n{asset}\n(?:{asset}\n)?(\d+)% completed\n(\d+)\n(\d+)\n(\d+)\n(\d+)", backfill.page_text)
        assert m, f"{asset} missing from the backfill page"
        pct, targeted, in_progress, succeeded, failed = map(int, m.groups())
        assert (pct, targeted, in_progress, succeeded, failed) == (100, 2, 0, 2, 0), asset


def test_partitions_are_materialized_with_per_partition_metadata(page, dagster_ui, backfill, sample_data):
    assert backfill.status == "Succeeded", failure_details(dagster_ui, backfill.id)
    rows: dict[str, dict[str, int]] = {}
    passed: dict[str, int] = {}  # filtered_clips' passed clips per day
    for asset in ASSETS:
        asset_page(page, dagster_ui, asset, "partitions")
        page.get_by_text("Materialized (2)").wait_for()
        assert page.get_by_text("Failed (0)").count() == 1, asset
        rows[asset] = {}
        day1, day2 = sample_data.days
        for day in (day1, day2):
            page.get_by_title(day, exact=True).first.click()
            # The detail pane of that partition: its header (the key with a Materialized tag) and its metadata.
            header = page.locator(f'[data-tooltip="{day}"]').filter(has_text="Materialized")
            header.wait_for()
            pane = header.locator("xpath=ancestor::div[.//table][1]")
            pane.get_by_text("dagster/row_count").wait_for()
            text = pane.inner_text()
            m = re.search(r"(?:^|\n)rows\s+(\d+)\s", text)
            assert m, (asset, day, text[:2000])
            rows[asset][day] = int(m.group(1))
            m = re.search(r"(?:^|\n)dagster/row_count\s+(\d+)\s", text)
            assert m and int(m.group(1)) == rows[asset][day], (asset, day)
            m = re.search(r"(?:^|\n)partitions\s+([^\n]+)\n", text)
            assert m and m.group(1).strip() == f"{day1}, {day2}", (asset, day)  # written by one single-run step
            if asset == "filtered_clips":
                m = re.search(r"(?:^|\n)passed\s+(\d+)\s", text)
                assert m, (asset, day, text[:2000])
                passed[day] = int(m.group(1))
            if day == day2:
                shot(page, f"08-partition-{asset}")
    # Exact per-partition counts: every landed file is a raw_videos row; every ok video's scenes are scene clips.
    assert rows["raw_videos"] == sample_data.expected_videos
    assert rows["scene_clips"] == sample_data.expected_clips
    assert rows["filtered_clips"] == sample_data.expected_clips
    # One caption row per passed clip, per day; and the sample has passing clips on both days.
    assert rows["clip_captions"] == passed, (rows, passed)
    assert all(passed[d] > 0 for d in sample_data.days), passed


def test_every_gate_passed_for_both_partitions(page, dagster_ui, backfill):
    assert backfill.status == "Succeeded", failure_details(dagster_ui, backfill.id)
    for asset in ASSETS:
        expected = gate_names(asset)
        warn_only = lenient_gates(asset)
        asset_page(page, dagster_ui, asset, "checks")
        page.get_by_text(f"Checks ({len(expected)})").wait_for()
        for gate in expected:
            row = page.get_by_title(gate, exact=True).first.locator("xpath=ancestor::div[.//*[@role='img']][1]")
            row.wait_for()
            text = row.inner_text()
            icon = row.get_by_role("img").first.get_attribute("aria-label")
            status = text.strip().splitlines()[-1].strip().lower()
            if gate in warn_only:
                # Content gates of the random-weight test model are warnings: passed, or failed with a warning.
                assert status == "succeeded" or (status == "failed" and icon.startswith("warning")), (asset, gate, text)
            else:
                assert status == "succeeded", (asset, gate, text, icon)
        shot(page, f"09-checks-{asset}")
    # One gate in detail: its latest evaluation covered both partitions of the single-run step, and passed.
    asset_page(page, dagster_ui, "scene_clips", "checks")
    page.get_by_title("clips_ordered_non_overlapping", exact=True).first.click()
    page.get_by_text("scene_clips.clips_ordered_non_overlapping passed in all 2 partitions").wait_for()
    page.get_by_text("This is a blocking asset check.").first.wait_for()
    shot(page, "10-check-detail")


def test_asset_pages_plot_numeric_metadata_by_partition(page, dagster_ui, backfill):
    assert backfill.status == "Succeeded", failure_details(dagster_ui, backfill.id)
    for asset, labels in PLOTTED.items():
        asset_page(page, dagster_ui, asset)
        button(page, "Plots").click()
        button(page, "Partitions").first.wait_for()
        page.get_by_text("When graphing values by partition").wait_for()
        for label in labels:
            heading = page.get_by_text(label, exact=True).first
            heading.wait_for()
            canvas = heading.locator("xpath=ancestor::div[.//canvas][1]//canvas").first
            canvas.wait_for()
            box = canvas.bounding_box()
            assert box and box["width"] > 100 and box["height"] > 100, (asset, label, box)
        page.get_by_text(labels[1], exact=True).first.scroll_into_view_if_needed()
        shot(page, f"11-plots-{asset}")


def test_caption_preview_links_back_to_clip_video_and_source(page, dagster_ui, backfill, sample_data):
    assert backfill.status == "Succeeded", failure_details(dagster_ui, backfill.id)
    asset_page(page, dagster_ui, "clip_captions")
    button(page, "Table").click()
    page.get_by_text("preview", exact=True).first.wait_for()
    preview = page.get_by_text("preview", exact=True).first.locator("xpath=ancestor::tr[1]")
    text = preview.inner_text()
    preview.scroll_into_view_if_needed()
    shot(page, "12-captions-metadata")
    for column in ("clip_id", "video_id", "source_uri", "status", "caption"):
        assert column in text, f"preview lacks {column}: {text}"
    # Full ids and uris (not shortened): the clip's video is a sha256 and its source a landed object of the day.
    assert re.search(r"\b[0-9a-f]{64}\b", text), text
    assert re.search(rf"landing/({'|'.join(sample_data.days)})/\S+\.mp4", text), text
