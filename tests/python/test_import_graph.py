"""No module of python/torchneck imports itself back through others: the
graph of imports between its modules, read from the source (ast), counting
the imports inside functions too (a lazy import hides a cycle from the
interpreter, not from the next reader), has no cycle."""

import ast
import os

import pytest

from conftest import ROOT

pytestmark = pytest.mark.native_only

PACKAGE = os.path.join(ROOT, "python", "torchneck")


def import_graph(folder, package="torchneck"):
    """{module: set of modules of the same package it imports anywhere}."""
    modules = {name[:-3] for name in os.listdir(folder) if name.endswith(".py")}
    graph = {}
    for module in sorted(modules):
        with open(os.path.join(folder, module + ".py")) as f:
            tree = ast.parse(f.read(), module + ".py")
        found = set()
        for node in ast.walk(tree):  # every scope: module level, functions, classes
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == package and len(parts) > 1:
                        found.add(parts[1])
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and node.module is not None:
                    parts = node.module.split(".")
                    if parts[0] != package:
                        continue
                    rest = parts[1:]
                elif node.level == 1:  # from . import x / from .x import y
                    rest = node.module.split(".") if node.module else []
                else:
                    continue
                if rest:
                    found.add(rest[0])
                else:  # from torchneck import a, b: the names that are modules
                    found.update(alias.name for alias in node.names if alias.name in modules)
        graph[module] = {m for m in found if m in modules and m != "__init__"}
    return graph


def find_cycle(graph):
    """One cycle as [a, b, ..., a], or None."""
    state = {}  # module -> "open" while on the path, "done" after

    def visit(node, path):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, path)
                if cycle:
                    return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return None


def test_the_package_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    # the graph is read, not empty: the launcher's own entry imports are in it
    assert "cli" in graph["__main__"] and "errors" in graph["runner"], graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_imports_the_command_line_back():
    graph = import_graph(PACKAGE)
    importers = sorted(m for m, deps in graph.items() if "cli" in deps)
    assert importers == ["__main__"], importers


def test_a_cycle_hidden_in_a_function_is_found(tmp_path):
    # GIVEN a package where a imports b at module level and b imports a lazily
    pkg = tmp_path / "torchneck"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from torchneck.b import thing\n")
    (pkg / "b.py").write_text("thing = 1\n\ndef later():\n    from torchneck import a\n    return a\n")
    (pkg / "c.py").write_text("from . import b\n")
    # WHEN the graph is read THEN the cycle is found, and c is not in it
    graph = import_graph(str(pkg))
    assert graph["c"] == {"b"}
    assert find_cycle(graph) in (["a", "b", "a"], ["b", "a", "b"])
    # AND without the lazy import there is none
    (pkg / "b.py").write_text("thing = 1\n")
    assert find_cycle(import_graph(str(pkg))) is None
