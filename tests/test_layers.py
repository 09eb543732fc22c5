"""The layer order of dpopt, checked on the import graph built from the source.

Every ``import`` and ``from … import`` of every module under dpopt/ — module-level and inside
functions — is an edge from the importing module to the imported one (``from pkg import name``
points at ``pkg.name`` when that is a module, else at ``pkg``). Two checks:

* no cycle: the graph restricted to dpopt's modules has no strongly connected component of more
  than one module (a package's ``__init__`` counts as the module ``pkg``);
* layers: a module imports only modules of its own layer or below, bottom to top
  core (incl. :mod:`dpopt.measurements` and :mod:`dpopt.hierarchy`) → records → privacy models
  (:mod:`dpopt.privacy`, the ``user`` model and its library in :mod:`dpopt.privacy.user`) → estimation
  → writers → front doors (:mod:`dpopt.release`, :mod:`dpopt.experiments`, the package ``dpopt`` itself) → the
  command line (:mod:`dpopt.cli`, every sub-command and the demo, and ``python -m dpopt``).
  :mod:`dpopt.datasets` (bundled data) sits with records. A module's layer is its top-level
  part's, whatever its file name: nothing of a library package is exempt.
* inside the privacy layer, the ``user`` model's library (:data:`USER_LIBRARY`: bounding,
  sensitivity, mechanism, selection …) sits below the model (its options, engine and strategies):
  it imports of :mod:`dpopt.privacy` only its own modules.

The test builds the graph with :mod:`ast` only (nothing is imported), so it also sees imports that
run only inside functions.
"""

from __future__ import annotations

import pytest

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "dpopt"

#: layer of each top-level part of dpopt (absent: core = 0)
LAYERS = {"records": 1, "datasets": 1, "privacy": 2, "estimation": 3, "writers": 4,
          "release": 5, "experiments": 5, "": 5, "cli": 6, "__main__": 6}
#: the ``user`` model's library in the privacy layer, below the model's options, engine and strategies
USER_LIBRARY = {f"dpopt.privacy.user.{name}" for name in (
    "_thresholding", "bounding", "bounds", "levels", "mechanism", "partitions", "place_bounds", "place_shares",
    "predict", "priority", "record_cap", "select_levels", "sensitivity", "split")}
LAYER_NAMES = ["core", "records", "privacy", "estimation", "writers", "front door", "command line"]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_graph() -> dict[str, set[str]]:
    """module → the dpopt modules it imports (anywhere in its source)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:  # `import dpopt.a.b` where b is a name: the module a
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1] if len(parts) > 1 else "", 0)


@pytest.mark.slow
def test_graph_sees_function_level_imports():
    graph = import_graph()
    # dpopt.cli.release imports dpopt.release.release inside run() only
    assert "dpopt.release.release" in graph["dpopt.cli.release"]
    # dpopt.privacy.user.options imports the priority order inside _ranks() only
    assert "dpopt.privacy.user.priority" in graph["dpopt.privacy.user.options"]


@pytest.mark.slow
def test_no_import_cycle():
    cycles = _cycles(import_graph())
    assert cycles == [], "import cycles in dpopt/: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_layers_import_only_downward():
    graph = import_graph()
    bad = sorted(f"{m} ({LAYER_NAMES[layer(m)]}) imports {t} ({LAYER_NAMES[layer(t)]})"
                 for m, ts in graph.items() for t in ts if layer(t) > layer(m))
    assert bad == [], "imports climbing a layer:\n" + "\n".join(bad)


def test_user_model_library_sits_below_the_model():
    graph = import_graph()
    assert USER_LIBRARY <= set(graph)
    bad = sorted(f"{m} imports {t}" for m in USER_LIBRARY for t in graph[m]
                 if (t == "dpopt.privacy" or t.startswith("dpopt.privacy.")) and t not in USER_LIBRARY)
    assert bad == [], "the user model's library imports the model:\n" + "\n".join(bad)
    assert graph["dpopt.privacy.user.engine"] & USER_LIBRARY  # the model does import its library


def test_only_the_command_line_imports_it():
    graph = import_graph()
    cli = {m for m in graph if m == "dpopt.cli" or m.startswith("dpopt.cli.")}
    assert {"dpopt.cli.main", "dpopt.cli.common", "dpopt.cli.release", "dpopt.cli.demo"} <= cli
    importers = {m for m, ts in graph.items() if ts & cli} - cli
    assert importers == {"dpopt.__main__"}


def test_cycle_finder_finds_cycles():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
