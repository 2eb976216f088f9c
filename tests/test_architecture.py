"""The shape of the package: no import cycles, layers one way, no oversized modules, no Celery in services.

The checks themselves live in ``tests/layout.py`` (``python -m tests.layout`` prints the tree).
"""

from __future__ import annotations

import ast

import pytest

from tests.layout import (
    MAX_LINES,
    PACKAGE,
    find_cycle,
    import_graph,
    imported_names,
    layer_of,
    main,
    modules,
    upward_imports,
)


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_module_imports_a_higher_layer():
    assert upward_imports(import_graph()) == []


def test_the_layer_check_sees_an_upward_import():
    # The domain importing the services would be a layer violation.
    graph = {"conversations.domain.messages": {"conversations.services.loop.runs"}}
    assert upward_imports(graph) == [
        ("conversations.domain.messages", "conversations.services.loop.runs")
    ]
    assert layer_of("conversations.services.loop.runs") > layer_of("conversations.services.usage")
    assert layer_of("conversations.api.ai_sdk.views") > layer_of("conversations.api.sse.views")
    assert layer_of("conversations.mcp.server") > layer_of("conversations.mcp.client")


def test_the_layout_report_prints_the_tree_and_passes(capsys):
    assert main() == 0
    out = capsys.readouterr().out
    assert "  services/  (" in out
    assert "      runs.py  " in out
    assert "no cycle, no upward import" in out


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
