"""The demo extension's tools: a safe calculator, weather over bundled data, the time."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from conversations.tools import ToolError, execute, registry, validate_arguments
from project.demo_tools import calculator
from project.demo_tools.calculator import evaluate
from project.demo_tools.llm_tools import (
    calculate,
    describe_time,
    get_current_time,
    get_weather,
    weather_data,
)

# --- calculator -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2", 3),
        ("2 * (3 + 4)", 14),
        ("2 + 3 * 4", 14),  # precedence
        ("(2 + 3) * 4", 20),
        ("10 - 4 - 3", 3),  # left-associative
        ("2 ** 3 ** 2", 512),  # right-associative, like maths
        ("-2 ** 2", -4),  # ** binds tighter than unary minus
        ("2 ^ 3 + 1", 9),  # ^ is power, with ** precedence
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("+5", 5),
        ("--5", 5),
        ("1.5 * 4", 6.0),
        ("2 ** -1", 0.5),
        ("2 ** 0.5", math.sqrt(2)),
        ("1_000 * 3", 3000),
        ("1e3 + 1", 1001.0),
        ("  42  ", 42),
        ("((((1))))", 1),
    ],
)
def test_calculates(expression: str, value: float) -> None:
    assert evaluate(expression) == pytest.approx(value)
    assert type(evaluate(expression)) is type(value)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("x + 1", "names are not allowed: 'x'"),
        ("__import__('os').system('ls')", "function calls are not allowed"),
        ("abs(-1)", "function calls are not allowed"),
        ("(1).real", "attribute access is not allowed"),
        ("().__class__", "attribute access is not allowed"),
        ("[1, 2][0]", "subscripts are not allowed"),
        ("1 < 2", "comparisons are not allowed"),
        ("1 and 2", "boolean operators are not allowed"),
        ("'a' * 3", "strings are not allowed"),
        ("True + 1", "bool values are not allowed"),
        ("1j * 2", "complex values are not allowed"),
        ("lambda: 1", "lambdas are not allowed"),
        ("(x := 1)", "assignments are not allowed"),
        ("1 if 1 else 2", "conditional expressions are not allowed"),
        ("[i for i in (1,)]", "comprehensions are not allowed"),
        ("1 & 2", "operator & is not allowed"),
        ("1 << 2", "operator << is not allowed"),
        ("~1", "operator ~ is not allowed"),
        ("not 1", "operator not is not allowed"),
        ("...", "ellipsis values are not allowed"),
    ],
)
def test_rejects_anything_but_arithmetic(expression: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        evaluate(expression)
    assert str(info.value).startswith(reason)
    assert "only numbers" in str(info.value)


@pytest.mark.parametrize("expression", ["", "   ", "1 +", "1 2", "import os", "1\x00", "(1"])
def test_rejects_what_is_not_an_expression(expression: str) -> None:
    with pytest.raises(ValueError, match=r"empty|not a valid arithmetic expression"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["1 / 0", "1 // 0", "1 % 0", "1.5 / 0.0", "0 ** -1"])
def test_division_by_zero(expression: str) -> None:
    with pytest.raises(ValueError, match="division by zero"):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("9 ** 9 ** 9", "exponent is too large"),
        ("2 ** 100000", "exponent is too large"),
        ("10 ** 5000", "result is too large"),
        ("(10 ** 500) ** 10", "result is too large"),
        ("(10 ** 800) * (10 ** 800)", "result is too large"),
        ("10.0 ** 400", "result is too large"),
        ("1e308 * 10", "result is too large"),
        ("(10 ** 800) / 1", "result is too large"),
        ("(-8) ** 0.5", "not a real number"),
    ],
)
def test_bounds_keep_it_cheap(expression: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        evaluate(expression)


def test_largest_results_still_work() -> None:
    assert evaluate("2 ** 2999") == 2**2999  # 3,000 bits
    with pytest.raises(ValueError, match="too large"):
        evaluate("2 ** 3000")
    assert evaluate("(2 ** 2999) * 1") == 2**2999
    with pytest.raises(ValueError, match="too large"):
        evaluate("(2 ** 2999) * 2")
    assert evaluate("1 ** 10000") == 1


def test_rejects_long_input() -> None:
    limit = calculator.MAX_EXPRESSION_LENGTH
    assert evaluate("1" + "+1" * ((limit - 1) // 2)) == (limit + 1) // 2
    with pytest.raises(ValueError, match=f"longer than {limit} characters"):
        evaluate("1" + "+1" * limit)


def test_rejects_deep_nesting() -> None:
    assert evaluate("-" * 100 + "1") == 1
    with pytest.raises(ValueError, match="nested too deeply"):
        evaluate("-" * 101 + "1")


def test_calculate_tool_through_the_registry() -> None:
    tool = registry["calculate"]
    assert tool.func is calculate
    assert execute(tool, {"expression": "2 * (3 + 4)"}) == "14"
    assert execute(tool, {"expression": "1 / 4"}) == "0.25"
    # A mistake in the expression is a ToolError: its text is meant for the model.
    with pytest.raises(ToolError, match="division by zero"):
        execute(tool, {"expression": "1/0"})
    with pytest.raises(ToolError, match="names are not allowed"):
        execute(tool, {"expression": "x + 1"})
    assert validate_arguments(tool, {}) == ["$: 'expression' is a required property"]


# --- weather ------------------------------------------------------------------------------


def test_bundled_cities() -> None:
    assert {"Leipzig", "Berlin", "Paris", "London", "New York", "Tokyo"} <= set(weather_data())
    for observation in weather_data().values():
        assert set(observation) == {
            "temperature_celsius",
            "conditions",
            "humidity_percent",
            "wind_kph",
        }


@pytest.mark.parametrize("city", ["Leipzig", "leipzig", "  LEIPZIG ", "LeIpZiG"])
def test_weather_lookup_is_case_insensitive(city: str) -> None:
    result = get_weather(city)
    assert result["city"] == "Leipzig"
    assert result["temperature_celsius"] == weather_data()["Leipzig"]["temperature_celsius"]


def test_weather_city_with_a_space_and_non_ascii() -> None:
    assert get_weather("new   york")["city"] == "New York"
    assert get_weather("ZÜRICH")["city"] == "Zürich"


def test_unknown_city_is_a_tool_error_naming_the_known_cities() -> None:
    with pytest.raises(ToolError) as info:
        get_weather("Atlantis")
    message = info.value.message
    assert message.startswith('no weather data for "Atlantis"; known cities: Berlin, ')
    for city in weather_data():
        assert city in message


def test_weather_tool_through_the_registry() -> None:
    text = execute(registry["get_weather"], {"city": "tokyo"})
    assert json.loads(text) == {"city": "Tokyo", **weather_data()["Tokyo"]}


# --- time ----------------------------------------------------------------------------------

SUMMER = datetime(2025, 7, 1, 10, 30, tzinfo=UTC)
WINTER = datetime(2025, 1, 1, 10, 30, tzinfo=UTC)


def test_time_in_a_zone_follows_daylight_saving() -> None:
    assert describe_time(SUMMER, "Europe/Berlin") == {
        "timezone": "Europe/Berlin",
        "datetime": "2025-07-01T12:30:00+02:00",
        "weekday": "Tuesday",
        "utc_offset": "+02:00",
        "abbreviation": "CEST",
    }
    assert describe_time(WINTER, "Europe/Berlin")["utc_offset"] == "+01:00"


def test_time_zone_names_are_case_insensitive() -> None:
    assert describe_time(WINTER, "america/new_york")["timezone"] == "America/New_York"
    assert describe_time(WINTER, "america/new_york")["datetime"] == "2025-01-01T05:30:00-05:00"
    assert describe_time(WINTER, "utc")["timezone"] == "UTC"


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "", "../../etc/passwd", "/etc/localtime"])
def test_unknown_time_zone_raises(zone: str) -> None:
    with pytest.raises(ToolError, match="unknown time zone"):
        describe_time(SUMMER, zone)


def test_current_time_defaults_to_utc_and_is_now() -> None:
    result = get_current_time()
    assert result["timezone"] == "UTC"
    moment = datetime.fromisoformat(result["datetime"])
    assert abs(datetime.now(UTC) - moment) < timedelta(minutes=1)


def test_time_tool_through_the_registry() -> None:
    tool = registry["get_current_time"]
    assert tool.parameters["properties"]["timezone"] == {
        "type": "string",
        "description": "IANA time zone, e.g. Europe/Berlin",
        "default": "UTC",
    }
    assert "required" not in tool.parameters
    assert json.loads(execute(tool, {"timezone": "Asia/Tokyo"}))["utc_offset"] == "+09:00"
    with pytest.raises(ToolError, match="unknown time zone"):
        execute(tool, {"timezone": "Nowhere"})
