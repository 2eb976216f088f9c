"""Validating a model's arguments, calling a tool, encoding and bounding its result."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import re
import uuid
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conversations.exceptions import InvalidArgumentError
from conversations.tools import (
    TRUNCATION_MARKER,
    Tool,
    ToolContext,
    call_tool,
    encode_result,
    execute,
    truncate_result,
    validate_arguments,
)


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


def make(func: Any, **kwargs: Any) -> Tool:
    return Tool.from_function(func, **kwargs)


def forecast(
    city: Annotated[str, "City name"],
    days: Annotated[int, {"minimum": 1, "maximum": 7}] = 1,
    unit: Unit = Unit.CELSIUS,
    tags: list[Literal["wind", "rain"]] | None = None,
) -> dict[str, Any]:
    """A tool with a little of everything."""
    return {"city": city, "days": days, "unit": unit, "tags": tags}


FORECAST = make(forecast)


# --- validate_arguments ----------------------------------------------------------------


def test_valid_arguments_give_no_violations() -> None:
    assert validate_arguments(FORECAST, {"city": "Leipzig"}) == []
    assert validate_arguments(FORECAST, {"city": "Leipzig", "days": 7, "tags": None}) == []


def test_violations_are_paths_and_messages_sorted() -> None:
    violations = validate_arguments(
        FORECAST,
        {"days": 9, "unit": "kelvin", "tags": ["wind", "snow"], "extra": True},
    )
    assert violations == [
        "$.days: 9 is greater than the maximum of 7",
        "$.tags[1]: 'snow' is not one of ['wind', 'rain']",
        "$.unit: 'kelvin' is not one of ['celsius', 'fahrenheit']",
        "$: 'city' is a required property",
        "$: Additional properties are not allowed ('extra' was unexpected)",
    ]
    assert violations == sorted(violations)


def test_violations_are_deterministic() -> None:
    arguments = {"days": "x", "unit": 3, "city": 5, "a": 1, "b": 2}
    first = validate_arguments(FORECAST, arguments)
    assert all(
        validate_arguments(FORECAST, dict(reversed(arguments.items()))) == first for _ in range(3)
    )


def test_wrong_types_are_explained() -> None:
    assert validate_arguments(FORECAST, {"city": 3, "days": True}) == [
        "$.city: 3 is not of type 'string'",
        "$.days: True is not of type 'integer'",
    ]


def test_arguments_that_are_not_an_object() -> None:
    assert validate_arguments(FORECAST, [1, 2]) == [  # type: ignore[arg-type]
        "$: [1, 2] is not of type 'object'"
    ]


def test_a_huge_wrong_value_is_not_echoed_in_full() -> None:
    (violation,) = validate_arguments(FORECAST, {"city": "x" * 100_000, "days": "y" * 100_000})
    assert violation.startswith("$.days: 'yyy")
    assert violation.endswith("…")
    assert len(violation) == 300


def test_a_lax_explicit_schema_is_backed_by_the_signature() -> None:
    def f(city: str, days: int = 1) -> str:
        return city

    # No "required", no "additionalProperties": the schema would let anything by.
    tool = make(f, parameters={"type": "object", "properties": {"city": {}, "days": {}}})
    assert validate_arguments(tool, {"city": "x"}) == []
    assert validate_arguments(tool, {"town": "x"}) == [
        "$: unexpected argument 'town'",
        "$: missing required argument 'city'",
    ]


def test_the_context_parameter_cannot_be_passed_by_the_model() -> None:
    def f(context: ToolContext) -> str:
        return str(context.run_id)

    tool = make(f, parameters={"type": "object", "properties": {}})
    assert validate_arguments(tool, {"context": {"run_id": 1}}) == [
        "$: unexpected argument 'context'"
    ]


# --- calling ----------------------------------------------------------------------------------


def test_execute_calls_with_keywords_and_encodes_json() -> None:
    text = execute(FORECAST, {"city": "Zürich", "days": 2, "tags": ["rain"]})
    assert json.loads(text) == {"city": "Zürich", "days": 2, "unit": "celsius", "tags": ["rain"]}
    assert "Zürich" in text  # ensure_ascii=False


def test_enum_arguments_arrive_as_enum_members() -> None:
    seen: list[Any] = []

    def f(
        unit: Unit, units: list[Unit] | None = None, by_name: dict[str, Unit] | None = None
    ) -> None:
        seen.extend([unit, units, by_name])

    call_tool(make(f), {"unit": "fahrenheit", "units": ["celsius"], "by_name": {"a": "celsius"}})
    assert seen == [Unit.FAHRENHEIT, [Unit.CELSIUS], {"a": Unit.CELSIUS}]


def test_optional_enum_left_out_or_null_arrives_as_none() -> None:
    seen: list[Any] = []

    def f(unit: Unit | None, other: Unit | None = None) -> None:
        seen.extend([unit, other])

    call_tool(make(f), {})
    call_tool(make(f), {"unit": None, "other": "celsius"})
    assert seen == [None, None, None, Unit.CELSIUS]


def test_integral_floats_arrive_as_int_for_int_parameters() -> None:
    # JSON Schema counts 3.0 as an integer; the function was promised an int.
    seen: list[Any] = []

    def f(n: int, ns: list[int]) -> None:
        seen.extend([n, ns])

    call_tool(make(f), {"n": 3.0, "ns": [1.0, 2]})
    assert seen == [3, [1, 2]]
    assert type(seen[0]) is int


def test_defaults_apply_when_arguments_are_left_out() -> None:
    result = call_tool(FORECAST, {"city": "Paris"})
    assert result == {"city": "Paris", "days": 1, "unit": Unit.CELSIUS, "tags": None}


def test_the_function_gets_a_copy_of_the_arguments() -> None:
    def f(items: list[int]) -> int:
        items.append(99)
        return len(items)

    arguments = {"items": [1, 2]}
    assert execute(make(f), arguments) == "3"
    assert arguments == {"items": [1, 2]}


def test_invalid_arguments_are_refused_without_calling() -> None:
    calls: list[int] = []

    def f(n: int) -> None:
        calls.append(n)

    with pytest.raises(InvalidArgumentError) as info:
        execute(make(f), {"n": "one"})
    assert info.value.code == "invalid_tool_arguments"
    assert (
        info.value.detail == "invalid arguments for tool \"f\": $.n: 'one' is not of type 'integer'"
    )
    assert calls == []


def test_exceptions_of_the_tool_propagate_unchanged() -> None:
    class Boom(Exception):
        pass

    def f() -> None:
        raise Boom("secret: sk-123")

    with pytest.raises(Boom, match="sk-123"):
        execute(make(f), {})


def test_context_is_passed_when_asked_for() -> None:
    def f(city: str, ctx: ToolContext) -> dict[str, Any]:
        return {"city": city, "run": ctx.run_id, "call": ctx.call_id, "conv": ctx.conversation_id}

    tool = make(f)
    context = ToolContext(conversation_id=7, run_id=uuid.UUID(int=1), call_id="call_1")
    assert json.loads(execute(tool, {"city": "Oslo"}, context)) == {
        "city": "Oslo",
        "run": "00000000-0000-0000-0000-000000000001",
        "call": "call_1",
        "conv": 7,
    }
    # Outside a run the tool still gets a context, with every id None.
    assert json.loads(execute(tool, {"city": "Oslo"})) == {
        "city": "Oslo",
        "run": None,
        "call": None,
        "conv": None,
    }


def test_context_is_not_passed_to_tools_that_do_not_ask() -> None:
    def f() -> str:
        return "ok"

    assert execute(make(f), {}, ToolContext(run_id=1)) == "ok"


# --- encoding results ---------------------------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text, as is", "plain text, as is"),
        ("", ""),
        ('"quoted"', '"quoted"'),
        (None, "null"),
        (True, "true"),
        (42, "42"),
        (1.5, "1.5"),
        ([1, "ä"], '[1,"ä"]'),
        ({"b": 1, "a": [None]}, '{"b":1,"a":[null]}'),
        (Unit.CELSIUS, '"celsius"'),
        ({3, 1, 2}, "[1,2,3]"),
        (Point(1, 2), '{"x":1,"y":2}'),
        (decimal.Decimal("1.10"), '"1.10"'),
        (dt.date(2025, 1, 2), '"2025-01-02"'),
        (uuid.UUID(int=0), '"00000000-0000-0000-0000-000000000000"'),
        ((1, 2), "[1,2]"),
    ],
)
def test_encode_result(value: Any, text: str) -> None:
    assert encode_result(value) == text


@pytest.mark.parametrize(
    ("value", "error"), [(b"bytes", TypeError), (float("nan"), ValueError), (object(), TypeError)]
)
def test_values_json_cannot_hold_raise(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        encode_result(value)


def test_lone_surrogates_are_replaced() -> None:
    assert encode_result("a\udcffb") == "a\ufffdb"
    assert encode_result({"k": "\ud800"}) == '{"k":"\ufffd"}'


# --- truncate_result ----------------------------------------------------------------------------

MARKER = TRUNCATION_MARKER.format(max_bytes=50_000)


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def test_marker_text() -> None:
    assert MARKER == "\n…[tool result truncated at 50000 bytes]"


def test_exactly_50000_bytes_is_unchanged() -> None:
    text = "a" * 50_000
    assert truncate_result(text) is text


def test_50001_bytes_is_cut_to_exactly_50000() -> None:
    result = truncate_result("a" * 50_001)
    assert size(result) == 50_000
    assert result == "a" * (50_000 - size(MARKER)) + MARKER


def test_60005_bytes_is_cut_with_the_marker() -> None:
    text = "b" * 60_005
    result = truncate_result(text)
    assert size(result) == 50_000
    assert result.endswith(MARKER)
    assert text.startswith(result.removesuffix(MARKER))


@pytest.mark.parametrize("char", ["é", "€", "😀"])
@pytest.mark.parametrize("shift", [0, 1, 2, 3])
def test_multibyte_characters_at_the_cut_are_never_split(char: str, shift: int) -> None:
    # ``shift`` ASCII bytes move the character boundaries across the cut.
    text = "x" * shift + char * 30_000
    result = truncate_result(text)
    body = result.removesuffix(MARKER)
    assert result.endswith(MARKER)
    assert size(result) <= 50_000
    assert size(result) > 50_000 - len(char.encode("utf-8"))  # nothing more would fit
    assert text.startswith(body)
    assert body.encode("utf-8").decode("utf-8") == body


def test_60005_bytes_of_multibyte_text() -> None:
    text = "€" * 20_001 + "ab"  # 60,005 bytes
    assert size(text) == 60_005
    result = truncate_result(text)
    assert size(result) <= 50_000
    assert result.removesuffix(MARKER) == "€" * ((50_000 - size(MARKER)) // 3)


def test_the_marker_names_the_bound_given() -> None:
    result = truncate_result("z" * 500, max_bytes=100)
    assert result.endswith("\n…[tool result truncated at 100 bytes]")
    assert size(result) == 100


def test_a_bound_too_small_for_the_marker_cuts_without_it() -> None:
    assert truncate_result("äbcdef", max_bytes=3) == "äb"
    assert truncate_result("äbcdef", max_bytes=1) == ""
    assert truncate_result("abc", max_bytes=0) == ""


@pytest.mark.parametrize("bound", [-1, 1.5, True, "10"])
def test_bad_bounds_are_refused(bound: Any) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        truncate_result("abc", max_bytes=bound)


def test_truncation_also_replaces_lone_surrogates() -> None:
    assert truncate_result("a\udcff") == "a\ufffd"


@given(text=st.text(), max_bytes=st.integers(min_value=0, max_value=200))
def test_truncation_properties(text: str, max_bytes: int) -> None:
    result = truncate_result(text, max_bytes)
    clean = re.sub("[\ud800-\udfff]", "\ufffd", text)
    assert size(result) <= max_bytes
    if size(clean) <= max_bytes:
        assert result == clean
        return
    marker = TRUNCATION_MARKER.format(max_bytes=max_bytes)
    body = result.removesuffix(marker) if size(marker) <= max_bytes else result
    assert clean.startswith(body)
    # Maximal: the next character would not have fitted.
    next_char = clean[len(body)]
    assert size(result) + size(next_char) > max_bytes
