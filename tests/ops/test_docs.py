"""The README as a front page: at most 10 KB, links that resolve, and a training-script snippet that runs.

The snippet is what a new user copies first, so it is run as written against a real release (the tiny release of
tests/unit/test_dataset.py: 11 clips in 2 buckets), with only the release path swapped in. The docs site itself is
checked by `make docs` (mkdocs build --strict: every link and anchor of every page).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_BYTES = 10 * 1024
RELEASE_PATH = "data/store/releases/r1"  # the path the snippet reads: the demo's release r1 in the local store
# the snippet's settings that fix the order of the batches (rank 0 of 1)
SNIPPET_ARGS = {"rank": 0, "world_size": 1, "num_frames": 16, "batch_size": 8, "shuffle_seed": 1234}


def _load_dataset_tests():
    """tests/unit/test_dataset.py under its own name, for its `rel` fixture (a real release built with ffmpeg)."""
    spec = importlib.util.spec_from_file_location("videolake_docs_release_fixture", ROOT / "tests/unit/test_dataset.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rel = _load_dataset_tests().rel  # the fixture, registered here under the same name


def python_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, "the README has one Python snippet: reading a release in a training script"
    return blocks[0]


def test_readme_is_a_front_page_of_at_most_10_kb():
    assert len(README.read_bytes()) <= README_MAX_BYTES


def test_readme_links_resolve():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links into the docs"
    assert [t for t in local if not (ROOT / t).exists()] == []


def test_snippet_imports_only_names_videolake_dataset_has():
    import videolake.dataset

    tree = ast.parse(python_snippet())
    imported = [
        (node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names
    ]
    assert ("videolake.dataset", "open_release") in imported
    assert [name for module, name in imported if not hasattr(importlib.import_module(module), name)] == []
    assert videolake.dataset.open_release.__module__ == "videolake.dataset"


def test_snippet_runs_as_written_against_a_release(rel, tmp_path, monkeypatch):
    import sys

    # A training script's process runs no Ray: one an earlier test left running must not be forked into the
    # DataLoader's workers (a live Ray core worker's threads crash a forked child).
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    code = python_snippet()
    assert code.count(RELEASE_PATH) == 1
    monkeypatch.chdir(tmp_path)  # the snippet writes loader.json into the working directory
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    scope: dict = {}
    exec(compile(code.replace(RELEASE_PATH, rel.uri), "README.md", "exec"), scope)  # noqa: S102 - the README's own code
    # the same reading, done independently: the snippet's loop went through every batch of it
    from videolake.dataset import open_release

    batches = [list(b["__key__"]) for b in open_release(rel.uri, **SNIPPET_ARGS).loader(num_workers=4)]
    assert sorted(k for b in batches for k in b) == sorted(rel.keys)
    assert scope["step"] == len(batches) - 1 >= 1
    # the state it saved at step 0 resumes a loader right after the first batch
    state = json.loads((tmp_path / "loader.json").read_text())
    resumed = scope["ds"].loader(num_workers=4)
    resumed.load_state_dict(state)
    assert sorted(k for b in resumed for k in b["__key__"]) == sorted(k for b in batches[1:] for k in b)
