"""The ``@tool`` decorator, the registry, duplicate detection and autodiscovery."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from django.core.exceptions import ImproperlyConfigured

from conversations.exceptions import InvalidArgumentError
from conversations.tools import Tool, ToolRegistry, autodiscover, registry, tool

DEMO_TOOLS = ("get_current_time", "calculate", "get_weather")


# --- the decorator -------------------------------------------------------------------


def test_bare_decorator_registers_and_returns_the_function(tools: ToolRegistry) -> None:
    def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    decorated = tool(registry=tools)(double)
    assert decorated is double  # still plain Python
    assert double(2) == 4
    registered = tools["double"]
    assert registered.func is double
    assert registered.description == "Double a number."


def test_bare_decorator_uses_the_default_registry() -> None:
    with registry.isolated():

        @tool
        def shout(text: str) -> str:
            return text.upper()

        assert registry["shout"].func is shout
    assert "shout" not in registry


def test_decorator_arguments_override_derivation(tools: ToolRegistry) -> None:
    @tool(
        name="weather-v2",
        description="Weather, explicitly.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        registry=tools,
    )
    def lookup(city: str = "Leipzig") -> str:
        """Ignored docstring."""
        return city

    spec = tools["weather-v2"].spec
    assert spec.description == "Weather, explicitly."
    assert spec.parameters == {"type": "object", "properties": {"city": {"type": "string"}}}
    assert tools.get("lookup") is None


def test_decorator_refuses_non_callables() -> None:
    with pytest.raises(TypeError, match=r"@tool\(name=...\)"):
        tool("calculate")  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "name", ["", "has space", "dots.not.allowed", "ümlaut", "x" * 65, "semi;colon"]
)
def test_bad_names_are_refused(tools: ToolRegistry, name: str) -> None:
    def f() -> None: ...

    with pytest.raises(InvalidArgumentError) as info:
        tool(name=name, registry=tools)(f)
    assert info.value.code == "invalid_tool_name"
    assert "^[a-zA-Z0-9_-]{1,64}$" in info.value.detail
    assert len(tools) == 0


@pytest.mark.parametrize("name", ["a", "get_weather", "A-1_b", "x" * 64])
def test_good_names_are_accepted(tools: ToolRegistry, name: str) -> None:
    def f() -> None: ...

    tool(name=name, registry=tools)(f)
    assert tools.names() == (name,)


def test_a_function_whose_name_is_not_a_valid_tool_name_needs_an_explicit_name(
    tools: ToolRegistry,
) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        tool(registry=tools)(lambda: None)
    assert info.value.code == "invalid_tool_name"
    assert "<lambda>" in info.value.detail


# --- duplicates ---------------------------------------------------------------------------


def test_same_name_from_two_functions_names_both(tools: ToolRegistry) -> None:
    @tool(name="lookup", registry=tools)
    def first(city: str) -> str:
        return city

    def second(city: str) -> str:
        return city

    with pytest.raises(ImproperlyConfigured) as info:
        tool(name="lookup", registry=tools)(second)
    message = str(info.value)
    assert 'Two tools are named "lookup"' in message
    assert "test_same_name_from_two_functions_names_both.<locals>.first" in message
    assert "test_same_name_from_two_functions_names_both.<locals>.second" in message
    assert tools["lookup"].func is first  # the first one stays


def test_registering_the_same_tool_again_is_idempotent(tools: ToolRegistry) -> None:
    def f() -> None: ...

    tool(registry=tools)(f)
    tool(registry=tools)(f)
    assert tools.names() == ("f",)


@pytest.fixture
def make_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., ModuleType]]:
    """Write and import a throw-away module; it is removed from ``sys.modules`` afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    created: list[str] = []

    def make(dotted: str, source: str) -> ModuleType:
        path = tmp_path.joinpath(*dotted.split("."))
        for parent in reversed(path.relative_to(tmp_path).parents[:-1]):
            package = tmp_path / parent
            package.mkdir(exist_ok=True)
            (package / "__init__.py").touch()
        path.with_suffix(".py").write_text(textwrap.dedent(source), encoding="utf-8")
        importlib.invalidate_caches()
        created.append(dotted)
        return importlib.import_module(dotted)

    yield make
    for name in list(sys.modules):
        if any(name == c or c.startswith(name + ".") for c in created):
            del sys.modules[name]


TOOL_SOURCE = """
    from conversations.tools import tool

    @tool(name="lookup")
    def lookup(city: str) -> str:
        \"\"\"Find {what}.\"\"\"
        return city
"""


def test_reimporting_a_module_is_idempotent(make_module: Callable[..., ModuleType]) -> None:
    with registry.isolated(empty=True):
        module = make_module("pkg_reload.llm_tools", TOOL_SOURCE.format(what="a city"))
        before = registry["lookup"]
        importlib.reload(module)  # a new function object with the same module.qualname
        after = registry["lookup"]
        assert registry.names() == ("lookup",)
        assert after is not before
        assert after.func is module.lookup


def test_same_name_in_two_apps_stops_startup_naming_both(
    make_module: Callable[..., ModuleType],
) -> None:
    with registry.isolated(empty=True):
        make_module("app_one.llm_tools", TOOL_SOURCE.format(what="a city"))
        with pytest.raises(ImproperlyConfigured) as info:
            make_module("app_two.llm_tools", TOOL_SOURCE.format(what="a town"))
    message = str(info.value)
    assert "app_one.llm_tools.lookup" in message
    assert "app_two.llm_tools.lookup" in message


def test_nested_functions_with_the_same_qualname_are_not_taken_for_a_reimport(
    tools: ToolRegistry,
) -> None:
    def make() -> Callable[[], None]:
        def inner() -> None: ...

        return inner

    tool(registry=tools)(make())
    with pytest.raises(ImproperlyConfigured):
        tool(registry=tools)(make())


# --- the registry ---------------------------------------------------------------------------


def _tool(name: str) -> Tool:
    def f() -> None: ...

    return Tool.from_function(f, name=name)


def test_registry_lookup_and_order() -> None:
    tools = ToolRegistry([_tool("b"), _tool("a"), _tool("c")])
    assert tools.names() == ("b", "a", "c")
    assert [t.name for t in tools.all()] == ["b", "a", "c"]
    assert [t.name for t in tools] == ["b", "a", "c"]
    assert len(tools) == 3
    assert "a" in tools and "z" not in tools
    assert tools.get("z") is None
    with pytest.raises(KeyError):
        tools["z"]
    assert "ToolRegistry" in repr(tools)


def test_specs_all_or_filtered_in_registration_order() -> None:
    tools = ToolRegistry([_tool("b"), _tool("a"), _tool("c")])
    assert [s.name for s in tools.specs()] == ["b", "a", "c"]
    assert [s.name for s in tools.specs(["c", "b", "unknown"])] == ["b", "c"]
    assert tools.specs([]) == ()


def test_unregister() -> None:
    tools = ToolRegistry([_tool("a")])
    tools.unregister("a")
    assert len(tools) == 0
    with pytest.raises(KeyError):
        tools.unregister("a")


def test_isolated_restores_the_previous_tools() -> None:
    tools = ToolRegistry([_tool("a")])
    with tools.isolated() as inside:
        assert inside is tools
        inside.register(_tool("b"))
        inside.unregister("a")
        assert tools.names() == ("b",)
    assert tools.names() == ("a",)
    with tools.isolated(empty=True):
        assert tools.names() == ()
    assert tools.names() == ("a",)


def test_isolated_restores_even_after_an_error() -> None:
    tools = ToolRegistry([_tool("a")])
    with pytest.raises(RuntimeError), tools.isolated(empty=True):
        raise RuntimeError
    assert tools.names() == ("a",)


# --- autodiscovery ---------------------------------------------------------------------------


def test_startup_discovered_the_demo_tools() -> None:
    # django.setup() ran ConversationsConfig.ready(), which ran autodiscover().
    for name in DEMO_TOOLS:
        assert registry[name].origin == f"project.demo_tools.llm_tools.{name}"


def test_autodiscover_imports_each_installed_apps_llm_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Forget the module so that discovery has to import it again; monkeypatch
    # puts the original back afterwards (in sys.modules and on the package).
    import project.demo_tools

    monkeypatch.setattr(
        project.demo_tools, "llm_tools", sys.modules["project.demo_tools.llm_tools"]
    )
    monkeypatch.delitem(sys.modules, "project.demo_tools.llm_tools")
    with registry.isolated(empty=True):
        autodiscover()
        assert set(DEMO_TOOLS) <= set(registry.names())
    assert set(DEMO_TOOLS) <= set(registry.names())


def test_autodiscover_twice_changes_nothing() -> None:
    before = registry.all()
    autodiscover()
    assert registry.all() == before
