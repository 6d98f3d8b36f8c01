"""The Dagster UI as an ML team meets it, driven in headless Chromium: the asset graph, the asset pages, a backfill
of two daily partitions launched from the UI and run by the daemon, the materialized partitions, the gates and the
metadata plots; then a second two-day backfill in which one day fails raw_videos' blocking reject_rate gate, and what
the graph, the check list and the check's Partitions tab show for each day. The same facts are read back through the
webserver's GraphQL API. Screenshots of every step go to test-artifacts/browser/ (not committed).

The tests run in file order and share one `dagster dev` and one browser page (tests/browser/conftest.py), in which
the app is loaded once and each test moves through it by the app's own router, as a user following links does
(``open_ui``). The backfills are module fixtures, launched in that page: the first test that needs one launches it from the UI and waits for the daemon to finish it (the captioning
step sends its clips to the suite's vLLM API server with the tiny random-weight VLM on CPU, tests/vllm_server.py;
the whole backfill takes minutes on a small machine; the gate backfill stops after raw_videos' gates).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"  # as in conftest.py
# The README's and the docs site's picture of the lineage graph (committed; every run of the graph test renews it).
DOCS_LINEAGE_PNG = Path(__file__).resolve().parents[2] / "docs" / "images" / "lineage.png"
DOCS_PNG_MAX_BYTES = 150_000

pytestmark = pytest.mark.timeout(2700)

ASSETS = ("raw_videos", "scene_clips", "filtered_clips", "clip_captions", "training_shards")
EDGES = {
    ("raw_videos", "scene_clips"),
    ("scene_clips", "filtered_clips"),
    ("filtered_clips", "clip_captions"),
    ("clip_captions", "training_shards"),
}
# Every table feeds the dataset_release asset (group "releases"), drawn on the group's page as a link node.
RELEASE_NODE = "dataset_release"
RELEASE_EDGES = {(asset, RELEASE_NODE) for asset in ASSETS}
KINDS = {
    "raw_videos": {"delta lake", "ray"},
    "scene_clips": {"delta lake", "ray"},
    "filtered_clips": {"delta lake", "ray"},
    "clip_captions": {"delta lake", "ray", "vllm"},
    "training_shards": {"delta lake", "ray"},
}
OWNER = "ml-data"  # owners=["team:ml-data"]: the UI shows the team name
GROUP = "videolake"
# Metadata that must never be plotted: constants, per-actor series, yes/no values, timings (issue 12).
NOT_PLOTTED = ("delta_version", "accelerator_is_gpu", "idle_actors", "actor_0_captions", "seconds", "bytes", "rows")
BACKFILL_TIMEOUT_S = 35 * 60
RUNNING_STATES = {"Requested", "In progress", "Queued", "Canceling"}
# The same states as the GraphQL API names them (BulkActionStatus): the backfill still plans or runs its runs.
BACKFILL_RUNNING = {"REQUESTED", "CANCELING", "FAILING"}
POLL_S = 2.0  # how often the test asks the API whether the backfill is done
PAGE_POLL_S = 5.0  # how often it reloads the backfill page until the page shows the final status


def plotted() -> dict[str, tuple[str, ...]]:
    """The numeric metadata each asset page must plot over partitions, and nothing else."""
    from videolake.assets.metadata import PLOTTED, UNIT_COUNTS
    from videolake.platform.lake.figures import TABLE_ROW_COUNT

    # the table's own size over its materializations (dagster/row_count) is numeric too
    return {asset: (*labels, TABLE_ROW_COUNT, *UNIT_COUNTS) for asset, labels in PLOTTED.items() if asset in ASSETS}


def _definitions():
    """The asset definitions as the code location declares them (descriptions, gate names)."""
    from videolake.definitions import defs

    return defs()


def gate_names(table: str) -> list[str]:
    from videolake.platform.gates import gate_names as names

    return list(names(table))


def check_count(table: str) -> int:
    """Checks the asset page lists: the table's gates, plus raw_videos' non-blocking landing-day check (a WARN
    check, not a gate: its own tests are tests/assets/test_landing.py)."""
    return len(gate_names(table)) + (1 if table == "raw_videos" else 0)


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


def docs_shot(page, path: Path, width: int = 1000, colours: int = 64, margin: int = 24) -> int:
    """The lineage graph as a small PNG for the docs: the box around its nodes (once their status has loaded),
    scaled to at most ``width`` pixels and reduced to a palette of ``colours``, so the committed picture stays well
    under DOCS_PNG_MAX_BYTES. Returns its size in bytes."""
    from io import BytesIO

    from PIL import Image

    page.wait_for_function(
        """() => ![...document.querySelectorAll('svg foreignObject')].some(f => f.textContent.includes('Loading'))"""
    )
    box = page.evaluate(
        """(margin) => {
          const rs = [...document.querySelectorAll('svg foreignObject')].map(f => f.getBoundingClientRect());
          const x = Math.max(Math.min(...rs.map(r => r.left)) - margin, 0);
          const y = Math.max(Math.min(...rs.map(r => r.top)) - margin, 0);
          return {x, y, width: Math.min(Math.max(...rs.map(r => r.right)) + margin, window.innerWidth) - x,
                  height: Math.min(Math.max(...rs.map(r => r.bottom)) + margin, window.innerHeight) - y};
        }""",
        margin,
    )
    img = Image.open(BytesIO(page.screenshot(clip=box))).convert("RGB")
    if img.width > width:
        img = img.resize((width, round(img.height * width / img.width)), Image.Resampling.LANCZOS)
    img = img.quantize(colors=colours, method=Image.Quantize.MEDIANCUT)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format="PNG", optimize=True)
    return path.stat().st_size


# Client-side navigation, what a click on one of the app's links does: the URL changes and the app's router (which
# listens to popstate) renders the new page in the page already loaded.
_ROUTER_PUSH = """(path) => {
  window.history.pushState({}, '', path);
  window.dispatchEvent(new PopStateEvent('popstate', {state: {}}));
}"""


def open_ui(page, url: str) -> None:
    """Show ``url`` and wait for the navigation (the instance has seen the community dialog: see conftest).

    A page that shows the Dagster app at another path moves there through the app's router, as a user following a
    link does, and waits until the document title has changed (every page the tests open titles itself after its
    path: "Assets | scene_clips"), so no wait below can match the page it left. Any other page (a new one,
    about:blank, the same path with another query) is loaded. Loading the app again for every page ran its scripts
    again: 1.3 CPU-s of Chromium per asset page against 0.4 through the router, measured on this machine."""
    here, there = urlsplit(page.url), urlsplit(url)
    if here.netloc == there.netloc and here.scheme == there.scheme and here.path != there.path:
        left = page.title()
        page.evaluate(_ROUTER_PUSH, there.path + (f"?{there.query}" if there.query else ""))
        page.wait_for_function("(left) => document.title !== left", arg=left)
    else:
        page.goto(url)
    page.get_by_role("link", name=re.compile(r"\bCatalog$")).first.wait_for()


def open_group(page, ui) -> None:
    """The pipeline's asset graph: the group's own page in its code location (the global lineage shows each group as
    one collapsed node once there are two: ``videolake`` and ``releases``)."""
    open_ui(page, f"{ui.url}/locations/{GROUP}/asset-groups/{GROUP}")
    page.locator("svg foreignObject").filter(has_text="raw_videos").first.wait_for()


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
        [*ASSETS, RELEASE_NODE],
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


# True when the element's box lies inside the viewport and inside every ancestor that clips or scrolls sideways.
FULLY_VISIBLE = """el => {
  const r = el.getBoundingClientRect();
  if (r.left < 0 || r.right > window.innerWidth) return false;
  for (let a = el.parentElement; a; a = a.parentElement) {
    if (/(auto|scroll|hidden|clip)/.test(getComputedStyle(a).overflowX)) {
      const ar = a.getBoundingClientRect();
      if (r.left < ar.left - 1 || r.right > ar.right + 1) return false;
    }
  }
  return true;
}"""

PARTITION_STATUSES = ("Missing", "Passed", "Failed", "Execution Failed", "Skipped", "In Progress")


def open_check_partitions(page, ui, asset: str, check: str) -> None:
    """The check's page (asset -> Checks -> the check) on its Partitions tab."""
    open_ui(page, f"{ui.url}/assets/{asset}?view=checks&checkDetail={check}")
    page.get_by_text(check, exact=True).first.wait_for()
    page.get_by_role("tab", name="Partitions").last.click()
    page.get_by_text(re.compile(r"^[\d,]+ Partitions Selected$")).wait_for()


def partition_counts(page) -> dict[str, int | None]:
    """The per-status counts of the Partitions tab's status filter ("Passed (2)", ...); Missing (every day of the
    definition not run) as None."""
    text = page.inner_text("body")
    out: dict[str, int | None] = {}
    for status in PARTITION_STATUSES:
        pattern = r"(?<!Execution )Failed" if status == "Failed" else re.escape(status)
        m = re.search(rf"(?:^|\n|\t){pattern} \(([\d,]+)\)", text)
        if m:
            out[status] = None if status == "Missing" else int(m.group(1).replace(",", ""))
    return out


def check_partition_detail(page, day: str) -> dict:
    """Click ``day`` in the Partitions tab and read its detail pane: status tag, description, metadata."""
    search = page.get_by_placeholder("Filter by partition…")
    search.fill(day)
    page.locator(f'[data-tooltip="{day}"]').first.click()
    pane = (
        page.locator("div")
        .filter(has=page.get_by_text("Target materialization", exact=True))
        .filter(has=page.get_by_text("Metadata", exact=True))
        .last
    )
    pane.get_by_text(day).first.wait_for()
    lines = [ln.strip() for ln in pane.inner_text().splitlines() if ln.strip()]
    status = next(ln for ln in lines[lines.index(day) :] if ln != day)  # the status tag after the heading
    description = lines[lines.index("Description") + 1] if "Description" in lines else None
    metadata: dict[str, str] = {}
    for row in pane.locator("table tr").all():
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        if len(cells) >= 2:
            metadata[cells[0]] = cells[1]
    search.fill("")
    return {"day": day, "status": status, "description": description, "metadata": metadata, "text": lines}


def graph_check_summary(page, asset: str) -> tuple[str, str | None]:
    """The Checks row of ``asset``'s node in the asset graph: ("<passed> / <total> Passed", its icon's name)."""
    node = page.locator("svg foreignObject").filter(has_text=asset).first
    summary = node.get_by_text(re.compile(r"^\d+ / \d+ Passed$")).first
    summary.wait_for()
    icon = summary.locator("xpath=..").get_by_role("img").first.get_attribute("aria-label")
    return summary.inner_text().strip(), icon


def graphql(ui, query: str, variables: dict | None = None) -> dict:
    """The webserver's GraphQL API: diagnostics, and the second reading of what the rendered pages showed."""
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


ONE_DAY_PER_RUN = "Backfills in multiple runs, with a maximum of 1 partitions per run"


def launch_backfill_from_ui(page, ui, days: tuple[str, str], prefix: str = "") -> str:
    """Materialize all -> partition selection -> the two sample dates -> preview -> launch; returns the id."""
    open_group(page, ui)
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
    shot(page, f"{prefix}02-backfill-dialog")

    button(dialog, "Preview").click()
    preview = page.get_by_role("dialog").filter(has_text="Backfill preview")
    preview.get_by_text("Partitions to launch").wait_for()
    # The header renders before the rows: wait for the last asset's row, then read the whole preview.
    preview.get_by_text(ONE_DAY_PER_RUN).nth(len(ASSETS) - 1).wait_for()
    preview.get_by_text(f"{day1}...{day2}").nth(len(ASSETS) - 1).wait_for()
    text = preview.inner_text()
    shot(page, f"{prefix}03-backfill-preview")
    # Every asset runs one day per run (partitions.backfill_policy): a day that fails fails alone.
    assert text.count(ONE_DAY_PER_RUN) == len(ASSETS), text
    assert text.count(f"{day1}...{day2}") == len(ASSETS), text
    button(preview, "OK").click()

    button(dialog, "Launch backfill").click()
    toast = page.get_by_text(re.compile(r"Created backfill \w+"))
    toast.wait_for(timeout=60_000)
    backfill_id = re.search(r"Created backfill (\w+)", toast.inner_text()).group(1)
    shot(page, f"{prefix}04-backfill-launched")
    return backfill_id


def backfill_status(ui, backfill_id: str) -> str | None:
    """The backfill's status as the webserver's GraphQL API reports it (REQUESTED while its runs are planned or
    running); None when the API did not answer with one."""
    try:
        body = graphql(
            ui,
            """query($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename
                 ... on PartitionBackfill { status } } }""",
            {"id": backfill_id},
        )
    except (OSError, ValueError):
        return None
    return ((body.get("data") or {}).get("partitionBackfillOrError") or {}).get("status")


def wait_for_backfill(
    page, ui, backfill_id: str, timeout_s: float = BACKFILL_TIMEOUT_S, prefix: str = ""
) -> tuple[str, str]:
    """Wait until the backfill stops running, then read its Status from the backfill's page (as a user would,
    reloading until the page shows it). The wait asks the webserver's GraphQL API every POLL_S instead of reloading
    the page every 15 s: the backfill daemon marks a backfill done on its own 30 s loop, and the test should see it
    at once."""
    deadline = time.monotonic() + timeout_s
    status, text = "", ""
    open_ui(page, f"{ui.url}/runs/b/{backfill_id}")
    page.get_by_text("Partition selection").wait_for()
    shot(page, f"{prefix}05-backfill-progress")
    # The page leaves the UI while the API is asked: an open Dagster page re-polls the webserver every second
    # (--live-data-poll-rate) and Chromium re-renders it (Chromium and the webserver: 114 -> 101 CPU-s for the module).
    page.goto("about:blank")
    # A busy webserver that does not answer ends this loop early: the page loop below waits as well, only slower.
    while time.monotonic() < deadline and backfill_status(ui, backfill_id) in BACKFILL_RUNNING:
        ui.remember_children()  # run workers and their Ray daemons, so teardown can stop even orphaned ones
        if ui.proc.poll() is not None:
            raise AssertionError(f"dagster dev exited while the backfill ran:\n{ui.log_tail()}")
        time.sleep(POLL_S)
    n = 0
    while time.monotonic() < deadline:
        ui.remember_children()
        open_ui(page, f"{ui.url}/runs/b/{backfill_id}")
        page.get_by_text("Partition selection").wait_for()
        page.get_by_text("Status", exact=True).wait_for()
        text = page.inner_text("body")
        m = re.search(r"\nStatus\n+([^\n]+)", text)
        status = m.group(1).strip() if m else ""
        if status and status not in RUNNING_STATES:
            return status, text
        if ui.proc.poll() is not None:
            raise AssertionError(f"dagster dev exited while the backfill ran:\n{ui.log_tail()}")
        if n % 10 == 0:
            shot(page, f"{prefix}05-backfill-progress")
        n += 1
        time.sleep(PAGE_POLL_S)
    raise AssertionError(f"backfill {backfill_id} still '{status}' after {timeout_s:.0f}s:\n{text[-2000:]}")


def run_backfill(page, ui, days: tuple[str, str], on_failure, prefix: str = "") -> Backfill:
    """Launch a backfill of ``days`` from the UI in ``page`` and wait until it stops running; on a failure the page
    is saved and left blank (``on_failure``: conftest.save_failure)."""
    try:
        t0 = time.monotonic()
        backfill_id = launch_backfill_from_ui(page, ui, days, prefix)
        status, text = wait_for_backfill(page, ui, backfill_id, prefix=prefix)
        shot(page, f"{prefix}06-backfill-done")
        seconds = time.monotonic() - t0
        print(f"\nbackfill {backfill_id} of {days}: {status} after {seconds:.0f}s")
        return Backfill(id=backfill_id, status=status, page_text=text, seconds=seconds)
    except BaseException:
        on_failure(page, f"{prefix}backfill")
        raise


@pytest.fixture(scope="module")
def backfill(module_page, on_failure, dagster_ui, sample_data, caption_server) -> Backfill:
    """The two sample days, every asset: succeeds."""
    try:
        caption_server.wait_ready()
    except RuntimeError as e:
        pytest.fail(str(e))
    return run_backfill(module_page, dagster_ui, sample_data.days, on_failure)


@pytest.fixture(scope="module")
def gate_backfill(module_page, on_failure, dagster_ui, sample_data, backfill) -> Backfill:
    """The two gate days (after the first backfill): raw_videos' reject_rate gate fails on GATE_FAIL."""
    return run_backfill(module_page, dagster_ui, sample_data.gate_days, on_failure, prefix="g")


# ------------------------------------------------------------------------------------------------ tests


def test_asset_graph_shows_the_five_assets_and_their_edges(page, dagster_ui):
    open_group(page, dagster_ui)
    for asset in ASSETS:
        page.locator("svg foreignObject").filter(has_text=asset).first.wait_for()
    page.locator("svg path[marker-end]").nth(len(EDGES) - 1).wait_for(state="attached")
    shot(page, "01-asset-graph")
    assert docs_shot(page, DOCS_LINEAGE_PNG) < DOCS_PNG_MAX_BYTES
    nodes, edges = graph_nodes_and_edges(page)
    assert set(nodes) == {*ASSETS, RELEASE_NODE}
    assert edges == EDGES | RELEASE_EDGES
    # The graph is a chain left to right in pipeline order.
    xs = [nodes[a]["x"] for a in ASSETS]
    assert xs == sorted(xs) and len(set(xs)) == len(ASSETS)


def test_asset_pages_show_description_group_kinds_owners_columns_and_lineage(page, dagster_ui):
    import dagster as dg

    from videolake.platform.lake.schemas import TABLES

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
        # every section read below, rendered (the lineage panel can arrive after the rest of the page)
        for header in ("Downstream assets", "Owners", "Code location"):
            page.get_by_text(header, exact=True).first.wait_for()
        # The lineage sections show "–" until the asset graph has loaded (seen once): read the page again until the
        # sections name the assets they must, or the deadline passes (the asserts below then say what was shown).
        deadline = time.monotonic() + 30
        while True:
            text = page.inner_text("body")
            ups = section_lines(text, "Upstream assets", "Downstream assets")
            downs = section_lines(text[text.index("Downstream assets") :], "Downstream assets", "Definition")
            loaded = (asset not in upstream or upstream[asset] in ups) and (
                asset not in downstream or downstream[asset] in downs
            )
            if loaded or time.monotonic() > deadline:
                break
            page.wait_for_timeout(500)
        shot(page, f"07-definition-{asset}")
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
            assert doc and doc in columns, f"{asset}: description of {field.name} not shown"
        # Lineage: the upstream and downstream asset of each page.
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
            pane.get_by_text("dagster/partition_row_count").first.wait_for()  # an entry, and a row of `details`
            text = pane.inner_text()
            m = re.search(r"(?:^|\n)dagster/partition_row_count\s+(\d+)\s", text)
            assert m, (asset, day, text[:2000])
            rows[asset][day] = int(m.group(1))
            m = re.search(r"(?:^|\n)partitions\s+([^\n]+)\n", text)
            assert m and m.group(1).strip() == day, (asset, day)  # each day is a run of its own
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


def test_every_gate_passed_for_both_partitions(page, dagster_ui, backfill, sample_data):
    assert backfill.status == "Succeeded", failure_details(dagster_ui, backfill.id)
    for asset in ASSETS:
        expected = gate_names(asset)
        warn_only = lenient_gates(asset)
        asset_page(page, dagster_ui, asset, "checks")
        page.get_by_text(f"Checks ({check_count(asset)})").wait_for()
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
    # One gate in detail: the single-run step recorded it for each day, each with that day's measured values.
    day1, day2 = sample_data.days
    open_check_partitions(page, dagster_ui, "scene_clips", "clips_ordered_non_overlapping")
    assert partition_counts(page) == {
        "Missing": None,
        "Passed": 2,
        "Failed": 0,
        "Execution Failed": 0,
        "Skipped": 0,
        "In Progress": 0,
    }
    for day in (day1, day2):
        pane = check_partition_detail(page, day)
        assert pane["status"] == "Passed", pane
        assert pane["metadata"]["overlapping"] == "0" and pane["metadata"]["failing_ids"] == "none", pane
        assert pane["metadata"]["severity"] == "error", pane
    shot(page, "10-check-partition-detail")


def test_asset_pages_plot_numeric_metadata_by_partition(page, dagster_ui, backfill):
    assert backfill.status == "Succeeded", failure_details(dagster_ui, backfill.id)
    for asset, labels in plotted().items():
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
        # The short list and nothing else: one chart per plotted label.
        assert page.locator("canvas").count() == len(labels), (asset, page.locator("canvas").count())
        for label in NOT_PLOTTED:
            assert page.get_by_text(label, exact=True).count() == 0, (asset, label)
        page.get_by_text(labels[1], exact=True).first.scroll_into_view_if_needed()
        shot(page, f"11-plots-{asset}")


def test_caption_preview_fits_the_screen_and_links_back_to_clip_and_source(page, dagster_ui, backfill, sample_data):
    assert backfill.status == "Succeeded", failure_details(dagster_ui, backfill.id)
    asset_page(page, dagster_ui, "clip_captions")
    button(page, "Table").click()
    page.get_by_text("preview", exact=True).first.wait_for()
    preview = page.get_by_text("preview", exact=True).first.locator("xpath=ancestor::tr[1]")
    preview.scroll_into_view_if_needed()
    shot(page, "12-captions-metadata")
    headers = [h.strip() for h in preview.locator("table thead th").all_inner_texts()]
    assert headers == ["status", "caption", "clip_id", "video_id", "source_uri", "error", "output_tokens"], headers
    # The caption column (header and every cell) is shown whole: inside the 1600 px viewport and not cut off by
    # the scrolling metadata table around it.
    col = headers.index("caption")
    cells = [preview.locator("table thead th").nth(col)] + [
        row.locator("td").nth(col) for row in preview.locator("table tbody tr").all()
    ]
    assert len(cells) > 1, preview.inner_text()
    for cell in cells:
        assert cell.evaluate(FULLY_VISIBLE), (cell.bounding_box(), cell.inner_text())
    # Whole ids, as the table holds them: a clip is <video id>_<start>_<end>, its video that id, its source the
    # landed object, so a person can copy any of them to follow the row back.
    rows = [
        [c.strip().replace("\n", "") for c in row.locator("td").all_inner_texts()]
        for row in preview.locator("table tbody tr").all()
    ]
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{64}_\d{8}_\d{8}", row[2]), row
        assert row[3] == row[2].split("_")[0], row
        assert re.search(rf"/landing/({'|'.join(sample_data.days)})/\S+\.mp4$", row[4]), row
        assert row[0] in ("ok", "failed") and len(row[1]) <= 60, row


# ------------------------------------------------------------------------------------------------ a failing gate
# The second backfill: GATE_PASS passes every raw_videos gate, GATE_FAIL fails the blocking reject_rate gate (4 of 5
# landed files are not videos). Each day is a run of its own (partitions.backfill_policy), so the bad day fails alone:
# - raw_videos: reject_rate Failed for GATE_FAIL and Passed for GATE_PASS; the other four gates passed on both days;
# - GATE_PASS: every asset materialized and every downstream gate passed;
# - GATE_FAIL: its downstream gates never ran (the failed gate stopped its run before scene_clips). Dagster resolves a
#   gate planned in a run that FAILED as "Execution failed" (AssetCheckExecutionRecord.resolve_status).


def junk_ids(day: str, n: int) -> set[str]:
    """video_id (sha256) of the text files landed as .mp4 on a gate day (tests/browser/conftest.py)."""
    import hashlib

    return {hashlib.sha256(f"not a video, file {i} of {day}\n".encode()).hexdigest() for i in range(n)}


def test_gate_backfill_fails_on_the_bad_day_alone(gate_backfill, dagster_ui, sample_data):
    assert gate_backfill.status == "Failed", gate_backfill.page_text[-3000:]
    details = failure_details(dagster_ui, gate_backfill.id)
    assert (
        "step raw_videos_gates failed: dagster._core.errors.DagsterAssetCheckFailedError: 1 blocking asset check failed with ERROR severity:\nraw_videos: reject_rate"
        in details
    ), details
    failed_steps = [ln for ln in details.splitlines() if ln.startswith("  step ")]
    assert len(failed_steps) == 1, details  # no other step failed: the bad day's downstream steps never started
    # the good day went through every asset; the bad day stopped at raw_videos
    ok_day, bad_day = sample_data.gate_days
    for asset in ASSETS:
        m = re.search(
            rf"\n{asset}\n(?:{asset}\n)?(\d+)% completed\n(\d+)\n(\d+)\n(\d+)\n(\d+)", gate_backfill.page_text
        )
        assert m, f"{asset} missing from the backfill page"
        targeted, in_progress, succeeded, failed = map(int, m.groups()[1:])
        assert (targeted, in_progress, succeeded) == (2, 0, 1 if asset != "raw_videos" else 2), (asset, m.groups())


def test_graph_node_shows_the_failed_gate_on_raw_videos(page, dagster_ui, gate_backfill):
    open_group(page, dagster_ui)
    g, n = len(gate_names("raw_videos")), check_count("raw_videos")
    # every gate but reject_rate passed; the non-blocking landing-day check may pass or warn
    assert graph_check_summary(page, "raw_videos") in {
        (f"{g - 1} / {n} Passed", "close"),
        (f"{g} / {n} Passed", "close"),
    }
    shot(page, "g07-graph-failed-gate")
    # Downstream nodes: a gate counts as failed when any day failed; every downstream gate of the bad day was planned
    # in its failed run and never ran ("Execution failed"), though the good day's passed (Partitions tab, below).
    for asset in ASSETS[1:]:
        n = len(gate_names(asset))
        assert graph_check_summary(page, asset) == (f"0 / {n} Passed", "close"), asset


def test_check_list_shows_reject_rate_failed(page, dagster_ui, gate_backfill):
    asset_page(page, dagster_ui, "raw_videos", "checks")
    page.get_by_text(f"Checks ({check_count('raw_videos')})").wait_for()
    for gate in gate_names("raw_videos"):
        row = page.get_by_title(gate, exact=True).first.locator("xpath=ancestor::div[.//*[@role='img']][1]")
        status = row.inner_text().strip().splitlines()[-1].strip().lower()
        icon = row.get_by_role("img").first.get_attribute("aria-label")
        expected = ("failed", "cancel") if gate == "reject_rate" else ("succeeded", "check_circle")
        assert (status, icon) == expected, (gate, status, icon)
    shot(page, "g08-check-list")


def test_check_partitions_tab_shows_each_day(page, dagster_ui, gate_backfill, sample_data):
    day1, day2 = sample_data.days
    ok_day, bad_day = sample_data.gate_days
    open_check_partitions(page, dagster_ui, "raw_videos", "reject_rate")
    counts = partition_counts(page)
    assert {k: v for k, v in counts.items() if k != "Missing"} == {
        "Passed": 3,
        "Failed": 1,
        "Execution Failed": 0,
        "Skipped": 0,
        "In Progress": 0,
    }, counts
    bad = check_partition_detail(page, bad_day)
    shot(page, "g09-check-partition-failed")
    rejected, rows = sample_data.gate_rejected[bad_day]
    assert bad["status"] == "Failed", bad
    assert bad["description"].startswith(
        f"raw_videos.reject_rate failed: reject rate {rejected / rows:.4g} > max 0.5 (e.g. "
    ), bad
    assert set(bad["metadata"]["failing_ids"].split(", ")) == junk_ids(bad_day, rejected), bad  # the rejected files
    assert bad["metadata"]["reject_rate"] == f"{rejected / rows:g}" and bad["metadata"]["rows"] == str(rows), bad
    assert bad["metadata"]["rejected"] == str(rejected), bad
    assert bad["metadata"]["thresholds"] == "max_reject_rate: 0.5, min_rows_for_rate: 5", bad
    assert bad["metadata"]["severity"] == "error", bad
    good = check_partition_detail(page, ok_day)
    rejected, rows = sample_data.gate_rejected[ok_day]
    assert good["status"] == "Passed" and good["metadata"]["reject_rate"] == f"{rejected / rows:g}", good
    assert good["description"] == "reject rate <= 0.5", good
    for day in (day1, day2):  # the first backfill's days (1 of 3 rejected: below the 5 rows the rate needs)
        assert check_partition_detail(page, day)["status"] == "Passed", day
    shot(page, "g10-check-partition-passed")


def test_downstream_gates_ran_for_the_good_day_and_never_for_the_bad_one(page, dagster_ui, gate_backfill, sample_data):
    for asset in ASSETS[1:]:
        gate = gate_names(asset)[0]
        open_check_partitions(page, dagster_ui, asset, gate)
        counts = partition_counts(page)
        assert {k: v for k, v in counts.items() if k != "Missing"} == {
            "Passed": 3,
            "Failed": 0,
            "Execution Failed": 1,
            "Skipped": 0,
            "In Progress": 0,
        }, (asset, counts)
        ok_day, bad_day = sample_data.gate_days
        assert check_partition_detail(page, ok_day)["status"] == "Passed", (asset, ok_day)
        for day in (bad_day,):
            pane = check_partition_detail(page, day)
            # No evaluation was recorded: no description, no metadata, and no "Failed" verdict on the gate.
            assert pane["status"] == "Execution failed" and pane["description"] is None, pane
            assert "No metadata" in pane["text"], pane
        shot(page, f"g11-downstream-{asset}")


def test_graphql_reports_the_same_per_partition_results_and_run_tags(dagster_ui, backfill, gate_backfill, sample_data):
    ok_day, bad_day = sample_data.gate_days
    day1, day2 = sample_data.days

    def check(asset: str, gate: str) -> dict:
        return graphql(
            dagster_ui,
            """query($k: AssetKeyInput!, $c: String!) { assetNodeOrError(assetKey: $k) {
              ... on AssetNode { assetCheckOrError(checkName: $c) { ... on AssetCheck { name blocking
                partitionStatuses { ... on AssetCheckTimePartitionStatuses { ranges { startKey endKey status } } }
            } } } } }""",
            {"k": {"path": [asset]}, "c": gate},
        )["data"]["assetNodeOrError"]["assetCheckOrError"]

    def statuses(asset: str, gate: str) -> dict[str, str]:
        """{day: status} from the check's partition status ranges (runs of days with one status)."""
        import datetime as dt

        out = {}
        for r in check(asset, gate)["partitionStatuses"]["ranges"]:
            day, end = dt.date.fromisoformat(r["startKey"]), dt.date.fromisoformat(r["endKey"])
            while day <= end:
                out[day.isoformat()] = r["status"]
                day += dt.timedelta(days=1)
        return out

    def executions(asset: str, gate: str, day: str) -> list[dict]:
        return graphql(
            dagster_ui,
            """query($k: AssetKeyInput!, $c: String!, $p: String) {
            assetCheckExecutions(assetKey: $k, checkName: $c, partition: $p, limit: 10) { runId status partition
              evaluation { success description partition targetMaterialization { runId }
                metadataEntries { label ... on FloatMetadataEntry { floatValue } ... on IntMetadataEntry { intValue }
                                  ... on TextMetadataEntry { text } } } } }""",
            {"k": {"path": [asset]}, "c": gate, "p": day},
        )["data"]["assetCheckExecutions"]

    assert statuses("raw_videos", "reject_rate") == {
        day1: "SUCCEEDED",
        day2: "SUCCEEDED",
        ok_day: "SUCCEEDED",
        bad_day: "FAILED",
    }
    assert statuses("raw_videos", "video_id_unique") == dict.fromkeys([day1, day2, ok_day, bad_day], "SUCCEEDED")
    for asset in ASSETS[1:]:
        for gate in gate_names(asset):
            got = statuses(asset, gate)
            assert {d: got[d] for d in sample_data.gate_days} == {ok_day: "SUCCEEDED", bad_day: "EXECUTION_FAILED"}
    [bad] = executions("raw_videos", "reject_rate", bad_day)
    rejected, rows = sample_data.gate_rejected[bad_day]
    assert (bad["status"], bad["partition"], bad["evaluation"]["success"]) == ("FAILED", bad_day, False)
    md = {
        m["label"]: m.get("floatValue", m.get("intValue", m.get("text"))) for m in bad["evaluation"]["metadataEntries"]
    }
    assert md["reject_rate"] == round(rejected / rows, 3) and md["rows"] == rows and md["rejected"] == rejected, md
    assert md["thresholds"] == "max_reject_rate: 0.5, min_rows_for_rate: 5", md
    assert set(md["failing_ids"].split(", ")) == junk_ids(bad_day, rejected), md
    assert bad["evaluation"]["targetMaterialization"]["runId"] == bad["runId"]  # judged that run's materialization
    [down] = executions("scene_clips", "coverage", bad_day)
    assert (down["status"], down["evaluation"], down["runId"]) == ("EXECUTION_FAILED", None, bad["runId"])

    # Run tags a user filters the Runs page by.
    runs = graphql(
        dagster_ui,
        """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill",
        value: $id}]}) { ... on Runs { results { runId tags { key value } } } } }""",
        {"id": backfill.id},
    )
    import dagster as dg

    version = _definitions().resolve_asset_graph().get(dg.AssetKey("clip_captions")).code_version
    tags = {
        t["videolake/partitions"]: t
        for t in ({t["key"]: t["value"] for t in r["tags"]} for r in runs["data"]["runsOrError"]["results"])
    }
    assert sorted(tags) == [day1, day2], tags  # one run per day
    for tag in tags.values():  # the local profile captions on CPU actors: not a GPU run
        assert "videolake/gpu" not in tag and tag["videolake/captioner_code_version"] == version, tags
    runs = graphql(
        dagster_ui,
        """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill",
        value: $id}]}) { ... on Runs { results { tags { key value } } } } }""",
        {"id": gate_backfill.id},
    )
    tags = {
        t["videolake/partitions"]: t
        for t in ({t["key"]: t["value"] for t in r["tags"]} for r in runs["data"]["runsOrError"]["results"])
    }
    assert sorted(tags) == [ok_day, bad_day], tags
    assert tags[ok_day]["videolake/captioner_code_version"] == version  # the good day captioned
    assert "videolake/captioner_code_version" not in tags[bad_day]  # the bad day stopped before captioning


# Last in the module: the alert sensors tick at most once a minute (minimum_interval_seconds=60), then post, so the
# tests above run while this one would otherwise wait.
ALERT_WAIT_S = 240


def test_the_failed_gate_and_its_failed_run_are_posted_to_the_webhook_once(gate_backfill, alert_receiver, sample_data):
    """The deployment's alert sensors (default on) post the bad day's blocking gate and its failed run to the
    webhook in VIDEOLAKE_ALERT_WEBHOOK_URL, once each, and nothing for the days whose gates passed. On this instance
    (sqlite, one event database per run) the gate sensor once raised on every tick and never posted."""
    _url, got = alert_receiver
    bad_day = sample_data.gate_days[1]
    rejected, rows = sample_data.gate_rejected[bad_day]

    def failures() -> list[str]:  # the freshness sensor posts to the same webhook: its texts are not failures
        return sorted(m["text"] for m in list(got) if m["text"].startswith((":red_circle:", ":warning:")))

    deadline = time.monotonic() + ALERT_WAIT_S
    while time.monotonic() < deadline and len(failures()) < 2:
        time.sleep(1.0)
    texts = failures()
    assert len(texts) == 2, [m["text"] for m in got]
    run_alert, gate_alert = texts  # ":red_circle: ..." sorts before ":warning: ..."
    assert re.fullmatch(
        rf":red_circle: videolake run [0-9a-f-]{{36}} of __ASSET_JOB failed \(partitions {bad_day}; failed steps: "
        r"raw_videos_gates\): dagster\._core\.errors\.DagsterAssetCheckFailedError: 1 blocking asset check failed .*",
        run_alert,
    ), run_alert
    assert re.match(
        rf":warning: videolake gate raw_videos\.reject_rate failed for partition {bad_day} \(blocking\): "
        rf"raw_videos\.reject_rate failed: reject rate {rejected / rows:g} > max [0-9.]+ ",
        gate_alert,
    ), gate_alert
