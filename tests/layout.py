"""The package's shape, checked: module sizes, import cycles and layers that import only downward.

Run it to see the tree: ``python -m tests.layout`` prints every package and
module of ``conversations`` with its line count, then the problems found (a
cycle, an import that goes up a layer, a module over the line limit) and
exits non-zero if there is one. ``tests/test_architecture.py`` runs the same
checks in the suite.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

PACKAGE = "conversations"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
MAX_LINES = 500

# Each module belongs to the layer of its longest matching prefix; a module
# may import modules of its own layer or lower ones only. Within a layer the
# graph must still be acyclic (checked separately).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("exceptions",),
    ("domain",),
    ("conf", "secrets", "publishing", "database", "signals", "events"),
    ("models", "providers", "tools"),
    ("selectors", "mcp"),
    ("services._sql",),
    ("services.usage", "services.configuration", "services.attachments"),
    ("services.transcript",),
    ("services.loop",),
    ("services.history", "services.approvals", "services.feedback", "services.evaluation"),
    ("services",),
    # What the outside world talks to; each uses the services. The API's
    # shared parts (base view, errors, fields, serializers ...) come first,
    # then the event stream, the resources that answer with it, and the AI
    # SDK protocol that builds on both.
    ("api", "admin", "web", "management", "tasks", "checks", "apps", "mcp.server", "mcp.calls"),
    ("api.sse",),
    ("api.resources",),
    ("api.ai_sdk",),
    ("api.urls", "mcp.urls", "migrations", ""),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (migrations included: they import too)."""
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def imported_names(name: str) -> set[str]:
    """The package's modules ``name`` imports, at module level or inside functions.

    ``from a import b`` counts as importing ``a.b`` when that is a module,
    else ``a``. Relative imports are resolved against ``name``'s package.
    """
    tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
    package = name if is_package(name) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in modules() else base)
    return {target for target in found if target in modules()}


def import_graph() -> dict[str, set[str]]:
    """Edges between the package's modules.

    A package's ``__init__`` re-exporting its own submodules is how a package
    shows its public names, not a dependency between siblings: those edges are
    left out. Two siblings importing each other (directly or through others)
    remain a cycle.
    """
    graph: dict[str, set[str]] = {}
    for name in modules():
        targets = imported_names(name)
        if is_package(name):
            targets = {t for t in targets if not t.startswith(f"{name}.")}
        graph[name] = targets - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a closed path of module names, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def layer_of(name: str) -> int:
    """The index in ``LAYERS`` of the longest prefix matching ``name`` (``conversations.`` off)."""
    relative = name.removeprefix(PACKAGE).removeprefix(".")
    best, best_length = len(LAYERS) - 1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            matches = relative == prefix or relative.startswith(f"{prefix}.") or prefix == ""
            if matches and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` for every import of a module in a higher layer."""
    return sorted(
        (source, target)
        for source, targets in graph.items()
        for target in targets
        if layer_of(target) > layer_of(source)
    )


def line_count(name: str) -> int:
    return modules()[name].read_text(encoding="utf-8").count("\n")


def oversized() -> list[tuple[str, int]]:
    """Modules over ``MAX_LINES`` (migrations are generated, and exempt)."""
    return [
        (name, line_count(name))
        for name in sorted(modules())
        if ".migrations" not in name and line_count(name) > MAX_LINES
    ]


def problems() -> list[str]:
    graph = import_graph()
    found = []
    cycle = find_cycle(graph)
    if cycle:
        found.append("import cycle: " + " -> ".join(cycle))
    for source, target in upward_imports(graph):
        found.append(
            f"upward import: {source} (layer {layer_of(source)}) imports"
            f" {target} (layer {layer_of(target)})"
        )
    for name, lines in oversized():
        found.append(f"too long: {name} has {lines} lines (at most {MAX_LINES})")
    return found


def tree() -> list[str]:
    """The package as an indented tree: packages with their total lines, modules with theirs."""
    totals: dict[str, int] = {}
    for name in modules():
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            if is_package(prefix):
                totals[prefix] = totals.get(prefix, 0) + line_count(name)
    out = []
    for name in sorted(modules(), key=lambda n: n.split(".")):
        if ".migrations." in name:
            continue
        depth = name.count(".")
        label = name.rpartition(".")[2] or name
        lines = line_count(name)
        if is_package(name):
            out.append(f"{'  ' * depth}{label}/  ({totals[name]} lines, layer {layer_of(name)})")
        else:
            out.append(f"{'  ' * depth}{label}.py  {lines}")
    return out


def main() -> int:
    print("\n".join(tree()))
    found = problems()
    print()
    if found:
        print("\n".join(found))
        return 1
    print(f"no cycle, no upward import, no module over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
