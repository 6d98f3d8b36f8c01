"""The import graph of the videolake package: no import cycle, and the engine depends on nothing around it.

Read from the source (an AST walk, nothing imported), so the test costs milliseconds and sees every import: module
level, inside functions and under ``TYPE_CHECKING``. A function-level import is still a dependency, and a circle of
them (``captioning.pipeline`` <-> ``captioning.stage`` was one) means two modules that cannot be understood, moved
or tested apart. An import of ``a.b.c`` counts as an edge to ``a.b.c`` only, not to the packages ``a`` and ``a.b``
it initialises on the way: a package's ``__init__`` that re-exports its own modules is the usual pattern.

Layering (docs/ARCHITECTURE.md): the engine, ``videolake.platform``, imports no other part of videolake; the
tooling beside it (``benchmarks``, ``evaluation``, ``synth``) may import the engine but never the Dagster side.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "videolake"
ENGINE = "videolake.platform"
TOOLING = ("videolake.benchmarks", "videolake.evaluation", "videolake.synth")
DAGSTER_SIDE = (
    "videolake.assets",
    "videolake.resources",
    "videolake.definitions",
    "videolake.commands",
    "videolake.cli",
)


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _within(name: str, prefixes: tuple[str, ...] | str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in ((prefixes,) if isinstance(prefixes, str) else prefixes))


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported videolake module: line of its first import}."""
    mods = _modules()

    def resolve(name: str) -> str | None:  # the longest prefix that is a module: `from pkg import name` may be either
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = resolve(name)
                if target is not None and target != mod:
                    graph[mod].setdefault(target, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert "videolake.platform.scenes.luma" in graph
    assert "videolake.platform.scenes.sweep" in graph["videolake.platform.scenes.luma"]  # a module-level import
    assert "videolake.platform.captioning.stage" in graph["videolake.platform.captioning.pipeline"]  # in a function


def test_cycles_are_found():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"e": 5}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_in_videolake():
    graph = import_graph()
    report = [
        "\n".join(f"  {a} -> {b} (line {graph[a][b]})" for a in component for b in graph[a] if b in component)
        for component in cycles(graph)
    ]
    assert not report, "import cycles:\n" + "\n".join(report)


def test_the_engine_imports_nothing_around_it():
    graph = import_graph()
    outside = [f"{m} -> {t}" for m in graph if _within(m, ENGINE) for t in graph[m] if not _within(t, ENGINE)]
    assert not outside, "videolake.platform imports outside the engine (benchmarks, evaluation, synth and the "
    "Dagster side build on it, never the reverse):\n" + "\n".join(outside)


def test_the_tooling_does_not_import_the_dagster_side():
    graph = import_graph()
    wrong = [f"{m} -> {t}" for m in graph if _within(m, TOOLING) for t in graph[m] if _within(t, DAGSTER_SIDE)]
    assert not wrong, "\n".join(wrong)
