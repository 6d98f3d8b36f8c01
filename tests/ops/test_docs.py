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


# Appended to the snippet in its script: the same reading done independently, and a loader resumed from the state the
# snippet saved, written to results.json for the test to compare.
CHECK = """
import json as _json
from videolake.dataset import open_release as _open_release

_batches = [list(b["__key__"]) for b in _open_release({uri!r}, **{args!r}).loader(num_workers=4)]
_resumed = ds.loader(num_workers=4)
with open("loader.json") as _f:
    _resumed.load_state_dict(_json.load(_f))
with open("results.json", "w") as _f:
    _json.dump({{"step": step, "batches": _batches, "resumed": [k for b in _resumed for k in b["__key__"]]}}, _f)
"""


def test_snippet_runs_as_written_against_a_release(rel, tmp_path):
    """The snippet runs as a training script does: a fresh Python process (whose DataLoader forks its workers from
    a process with no Ray and no test's threads in it), in its own working directory, with no RANK/WORLD_SIZE."""
    import os
    import subprocess
    import sys

    code = python_snippet()
    assert code.count(RELEASE_PATH) == 1
    script = tmp_path / "train.py"
    script.write_text(code.replace(RELEASE_PATH, rel.uri) + CHECK.format(uri=rel.uri, args=SNIPPET_ARGS))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "RAY_ADDRESS")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads((tmp_path / "results.json").read_text())
    batches = out["batches"]
    # the snippet's loop went through every batch of the same reading
    assert sorted(k for b in batches for k in b) == sorted(rel.keys)
    assert out["step"] == len(batches) - 1 >= 1
    # the state it saved at step 0 resumes a loader right after the first batch
    assert sorted(out["resumed"]) == sorted(k for b in batches[1:] for k in b)
