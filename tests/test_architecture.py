"""The shape of the package: no import cycles, no oversized modules, services free of Celery."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "conversations"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
MAX_LINES = 500


# Being split on another branch; strict, so this list fails once they are short.
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


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_cycles_and_resolves_relative_imports():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    # ``from .messages import ...`` in a services module is an edge to that sibling.
    assert "conversations.services.transcript.messages" in imported_names(
        "conversations.services.loop.runs"
    )
    # A function-level import counts too.
    assert "conversations.publishing" in imported_names("conversations.services.loop.executors")
    # The services package re-exporting its modules is not an edge of the graph.
    assert not any(
        t.startswith("conversations.services.") for t in import_graph()["conversations.services"]
    )


@pytest.mark.parametrize(
    "name",
    sorted(n for n in modules() if ".migrations" not in n),
    ids=str,
)
def test_no_module_is_longer_than_the_limit(name):
    lines = modules()[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines (at most {MAX_LINES}); split it"


def test_services_never_import_celery_or_the_tasks():
    """The executor publishes by name; the task module imports the services, never back."""
    for name, path in modules().items():
        if not name.startswith(f"{PACKAGE}.services"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            assert not any(t.split(".")[0] == "celery" for t in targets), f"{name} imports Celery"
        # Relative or absolute, at module level or in a function.
        assert f"{PACKAGE}.tasks" not in imported_names(name), f"{name} imports the tasks"


def test_the_public_use_cases_are_importable_from_services():
    from conversations import services

    for name in (
        "run_tool_loop",
        "start_run",
        "execute_run",
        "recover_runs",
        "cancel_run",
        "claim_run",
        "append_messages",
        "create_conversation",
        "delete_conversation",
        "MessageDetails",
    ):
        assert callable(getattr(services, name)), name
        assert name in services.__all__
