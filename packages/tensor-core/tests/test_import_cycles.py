"""No import cycles among flambeau's modules (issue 12): imports point one way, down the layers.

The graph is read from the sources of every distribution (``packages/*/src``) with ``ast``, so
nothing is imported. A module imports another at module level with ``import a.b`` or ``from a.b
import c`` (``a.b.c`` when that is a module) anywhere in its body, class bodies, ``try`` and ``if``
blocks included, except under ``if TYPE_CHECKING:``; imports inside functions run later and do not
count. A cycle of module-level imports makes the import order matter and half-initialised modules
visible, so the first test forbids any.

Issue 12's four circles were held together by imports inside functions; the second test keeps them
gone, counting those imports too. Two kinds of edge are left out there because they are one-way by
design: importing the root package ``flambeau`` (the public API, which imports everything: code that
uses ``fl.<op>`` in a function is above it) and the autograd seam's ``load_engine``, which imports
the optional flambeau-autograd distribution on first use.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2]

# issue 12's circles (modules that no longer exist are skipped)
CIRCLES = {
    "tensor core": ("flambeau._tensor", "flambeau._factories", "flambeau._ops.core", "flambeau._storage",
                    "flambeau._sharing"),
    "cuda": ("flambeau.cuda", "flambeau.cuda._streams", "flambeau.cuda._allocator", "flambeau._device",
             "flambeau._backends", "flambeau._kernels.cuda", "flambeau._kernels.cuda._cublas",
             "flambeau._kernels.cuda._launch"),
    "activation/elementwise": ("flambeau._ops.activation", "flambeau._ops.elementwise"),
    "autograd": ("flambeau.autograd._engine", "flambeau.autograd._inplace", "flambeau.autograd.forward_ad"),
}
# imports that are lazy by design (see the module docstring): (importer, imported)
PLUGIN_EDGES = {("flambeau._grad_mode", "flambeau.autograd")}


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (source file, is a package) for every module of every distribution under ``root``."""
    mods = {}
    for src in sorted(root.glob("*/src")):
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts.pop()
            mods[".".join(parts)] = (path, is_pkg)
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(body: list):
    """The import statements that run when the module is imported."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level_imports(block)
        elif isinstance(node, (ast.With, ast.ClassDef, ast.For, ast.While)):
            yield from _module_level_imports(node.body)


def _all_imports(tree: ast.Module):
    """Every import statement, those inside functions included (not those under TYPE_CHECKING)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
            yield node


def _targets(node, name: str, is_pkg: bool, mods) -> list[str]:
    """The flambeau modules an import statement of module ``name`` imports (outside ones are dropped)."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        if node.level:
            package = (name if is_pkg else name.rpartition(".")[0]).split(".")
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module
        wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base for alias in node.names]
    found = []
    for target in wanted:
        while target and target not in mods:  # ``import a.b.c`` of an attribute: the module that holds it
            target = target.rpartition(".")[0]
        if target and target != name:
            found.append(target)
    return found


@functools.cache
def _graph(function_level: bool, root: Path = PACKAGES) -> dict[str, frozenset[str]]:
    """Module -> the modules it imports (at module level, or anywhere with ``function_level``)."""
    mods = _modules(root)
    graph = {}
    for name, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        nodes = _all_imports(tree) if function_level else _module_level_imports(tree.body)
        graph[name] = frozenset(t for node in nodes for t in _targets(node, name, is_pkg, mods))
    return graph


def _cycles(graph: dict) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return found


def _a_cycle(graph: dict, component: list[str]) -> str:
    """One cycle through the first module of ``component``, as ``a -> b -> a`` (breadth first: a short one)."""
    members = set(component)
    start = component[0]
    parent = {start: None}
    queue = [start]
    for v in queue:
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return " -> ".join([*reversed(path), start])
            if w in members and w not in parent:
                parent[w] = v
                queue.append(w)
    return " / ".join(component)  # pragma: no cover - a component always has a cycle through each member


def _report(graph, components) -> str:
    return "\n".join(f"  {_a_cycle(graph, c)}" for c in components)


def test_no_module_level_import_cycle():
    graph = _graph(function_level=False)
    assert len(graph) > 100, f"found only {len(graph)} modules under {PACKAGES}"
    cycles = _cycles(graph)
    assert not cycles, ("module-level import cycles (move what both modules need into a module below them, or "
                        "make the dependency one-way):\n" + _report(graph, cycles))


@pytest.mark.parametrize("circle", sorted(CIRCLES))
def test_issue_12_circles_stay_broken(circle):
    graph = {name: {t for t in imports if t != "flambeau" and (name, t) not in PLUGIN_EDGES}
             for name, imports in _graph(function_level=True).items()}
    members = set(CIRCLES[circle])
    bad = [c for c in _cycles(graph) if len(members.intersection(c)) > 1]
    assert not bad, (f"the {circle} modules import one another in a circle again (imports inside functions "
                     "included):\n" + _report(graph, bad))


def test_the_checker_finds_cycles(tmp_path):
    """A module-level cycle is found; imports in functions count only when asked, TYPE_CHECKING ones never."""
    src = tmp_path / "pkg" / "src" / "demo"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "a.py").write_text("from demo import b\n")
    (src / "b.py").write_text("from demo.c import x\n")
    (src / "c.py").write_text("import demo.a\nx = 1\n")
    (src / "d.py").write_text("def f():\n    from demo import e\n")
    (src / "e.py").write_text("import demo.d\n")
    (src / "g.py").write_text("import demo.h\n")
    (src / "h.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from demo import g\n")
    module_level = _graph(function_level=False, root=tmp_path)
    every = _graph(function_level=True, root=tmp_path)
    assert _cycles(module_level) == [["demo.a", "demo.b", "demo.c"]]
    assert _a_cycle(module_level, ["demo.a", "demo.b", "demo.c"]) == "demo.a -> demo.b -> demo.c -> demo.a"
    assert sorted(_cycles(every)) == [["demo.a", "demo.b", "demo.c"], ["demo.d", "demo.e"]]
