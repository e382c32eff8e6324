"""No import circle among the project's own modules.

Every import of a first-party module is an edge, also one inside a function (a
circle hidden in a function body still ties the two modules together); a module
imports its package's ``__init__`` implicitly, which is not counted. A circle
fails with the modules on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("admission", "common", "devstack", "insight", "nodeadmit", "remediator", "sync")
# The product's folders install as fedplace.<folder> (pyproject.toml's package-dir); the devstack as itself.
PRODUCT = {"admission", "common", "insight", "nodeadmit", "remediator", "sync"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in PRODUCT:
        parts.insert(0, "fedplace")
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The first-party modules ``name`` imports (``from x import y`` counts x.y when it is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in out if m in known and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_circle_and_only_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle() -> None:
    mods = modules()
    known = set(mods)
    graph = {name: imported(name, path, known) for name, path in mods.items()}
    # a module importing its own package's __init__ (implicit in Python) is no circle
    graph = {name: {m for m in deps if not name.startswith(m + ".")} for name, deps in graph.items()}
    assert len(graph) > 50
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])
