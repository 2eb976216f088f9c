"""``async def`` tools, and the ``concurrent`` and ``timeout`` options of ``@tool``."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Literal

import pytest

from conversations.exceptions import InvalidArgumentError
from conversations.tools import (
    Tool,
    ToolContext,
    ToolRegistry,
    execute,
    execute_async,
    tool,
)


def test_an_async_tool_gets_the_schema_a_plain_one_would(tools: ToolRegistry) -> None:
    @tool(registry=tools)
    async def lookup(
        city: Annotated[str, "A city name"], unit: Literal["c", "f"] = "c", *, ctx: ToolContext
    ) -> dict[str, str]:
        """Look the weather up."""
        return {"city": city, "unit": unit}

    def plain(
        city: Annotated[str, "A city name"], unit: Literal["c", "f"] = "c", *, ctx: ToolContext
    ) -> dict[str, str]:
        """Look the weather up."""
        return {}

    registered = tools["lookup"]
    assert registered.is_async
    assert registered.takes_context
    assert registered.parameters == Tool.from_function(plain).parameters
    assert registered.description == "Look the weather up."
    assert not Tool.from_function(plain).is_async


def test_an_object_with_an_async_call_is_async() -> None:
    class Fetch:
        async def __call__(self, url: str) -> str:
            return url

    made = Tool.from_function(Fetch(), name="fetch", description="")
    assert made.is_async
    assert execute(made, {"url": "u"}) == "u"


def test_execute_runs_an_async_tool_to_its_end() -> None:
    async def double(n: int) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"n": n * 2}

    made = Tool.from_function(double)
    assert execute(made, {"n": 4}) == '{"n":8}'


def test_execute_async_awaits_async_tools_and_calls_plain_ones() -> None:
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    def triple(n: int) -> int:
        return n * 3

    assert asyncio.run(execute_async(Tool.from_function(double), {"n": 4})) == "8"
    assert asyncio.run(execute_async(Tool.from_function(triple), {"n": 4})) == "12"


def test_an_async_tool_raises_what_it_raises() -> None:
    async def broken() -> str:
        raise LookupError("inside")

    with pytest.raises(LookupError, match="inside"):
        execute(Tool.from_function(broken), {})


def test_async_generators_are_refused() -> None:
    async def stream(n: int):  # type: ignore[no-untyped-def]
        yield n

    with pytest.raises(TypeError, match="is an async generator"):
        Tool.from_function(stream)


def test_concurrent_and_timeout_default_and_can_be_set(tools: ToolRegistry) -> None:
    @tool(registry=tools)
    def quick() -> str:
        """Quick."""
        return ""

    @tool(registry=tools, concurrent=False, timeout=2.5)
    def careful() -> str:
        """Careful."""
        return ""

    assert (tools["quick"].concurrent, tools["quick"].timeout) == (True, None)
    assert (tools["careful"].concurrent, tools["careful"].timeout) == (False, 2.5)


@pytest.mark.parametrize("timeout", [0, -1, True, "5", float("inf"), float("nan")])
def test_a_bad_timeout_is_refused_naming_the_field(timeout: object) -> None:
    def f() -> None: ...

    with pytest.raises(InvalidArgumentError) as info:
        Tool.from_function(f, timeout=timeout)  # type: ignore[arg-type]
    assert info.value.field == "timeout"
    assert info.value.code == "invalid_tool_spec"
    assert "timeout must be a positive number of seconds" in info.value.detail


@pytest.mark.parametrize("concurrent", [None, 1, "no"])
def test_a_bad_concurrent_flag_is_refused_naming_the_field(concurrent: object) -> None:
    def f() -> None: ...

    with pytest.raises(InvalidArgumentError) as info:
        Tool.from_function(f, concurrent=concurrent)  # type: ignore[arg-type]
    assert info.value.field == "concurrent"
    assert "concurrent must be True or False" in info.value.detail


def test_execute_runs_an_async_tool_from_a_worker_thread() -> None:
    async def where() -> str:
        await asyncio.sleep(0)
        return "done"

    made = Tool.from_function(where)
    seen: list[str] = []
    worker = threading.Thread(target=lambda: seen.append(execute(made, {})))
    worker.start()
    worker.join()
    assert seen == ["done"]
