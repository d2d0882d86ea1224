"""The package's layering, read from the source with `ast` (nothing imported):

- no import cycle between torchnumlint's modules, counting imports under `TYPE_CHECKING` and
  imports inside functions (a cycle hidden behind either still couples the two modules);
- the reporters and the run's plain data never reach libcst, so a reporter can be used (and
  tested) without the engine;
- the runtime side (`torchnumlint.runtime_check`, reproductions and checks) reaches neither
  libcst nor the linter at module level: it runs where only torch is installed.
"""

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parent.parent / "torchnumlint"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _absolute(name: str, node: ast.ImportFrom, path: Path) -> str:
    if not node.level:
        return node.module or ""
    base = _module_name(path).split(".")
    if path.name != "__init__.py":
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path, modules: Dict[str, Path], top_level_only: bool) -> Set[str]:
    """The torchnumlint modules `path` imports (`from pkg import mod` counts as mod)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: Set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node.module or "", node, path)
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules)
    own = _module_name(path)
    return {n for n in found if n != own and (n in modules or n.split(".")[0] in ("libcst", "torch"))}


def _graph(top_level_only: bool = False) -> Dict[str, Set[str]]:
    modules = _modules()
    return {name: _imports(path, modules, top_level_only) for name, path in modules.items()}


def _reach(graph: Dict[str, Set[str]], start: str) -> Set[str]:
    seen: Set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        for dep in graph.get(name, ()):
            parent = dep.rsplit(".", 1)[0]
            for found in (dep, parent) if parent in graph and parent != name else (dep,):
                if found not in seen:
                    seen.add(found)
                    todo.append(found)
    return seen


def _cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import cycle among the package's modules, or []. A package's `__init__` importing its
    own submodules is how a package registers them, not a cycle."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(name: str) -> List[str]:
        state[name] = 1
        stack.append(name)
        for dep in sorted(graph.get(name, ())):
            if dep not in graph or dep.startswith(name + "."):
                continue
            if state.get(dep) == 1:
                return stack[stack.index(dep) :] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[name] = 2
        return []

    for name in sorted(graph):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return []


def test_no_import_cycles():
    assert _cycle(_graph()) == []


def test_reporters_do_not_reach_libcst():
    graph = _graph()
    for name in [m for m in graph if m.startswith("torchnumlint.report")] + ["torchnumlint.results"]:
        reached = _reach(graph, name)
        assert "libcst" not in {r.split(".")[0] for r in reached}, name
        assert "torchnumlint.engine" not in reached, name


def test_runtime_side_needs_only_torch_at_import():
    graph = _graph(top_level_only=True)
    for name in [m for m in graph if m.startswith("torchnumlint.runtime_check")]:
        reached = _reach(graph, name)
        assert "libcst" not in {r.split(".")[0] for r in reached}, name
        assert not any(r.startswith("torchnumlint.rules") or r == "torchnumlint.engine" for r in reached), name


def test_the_checks_see_a_cycle():
    """The cycle finder is not vacuous: a graph with a loop is caught, a package's own import of
    its submodule is not one."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"p": {"p.m"}, "p.m": set()}) == []
