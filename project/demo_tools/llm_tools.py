"""The demo tools: current time, a safe calculator and weather over bundled data.

Imported by ``conversations.tools.autodiscover()`` because this app is installed;
that import is all it takes for the ``@tool`` functions below to be offered.
A mistake in the request (division by zero, an unknown time zone or city)
raises :class:`~conversations.tools.ToolError`, whose message the model reads.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo, available_timezones

from conversations.tools import ToolError, tool

from .calculator import evaluate

__all__ = ["calculate", "describe_time", "get_current_time", "get_weather", "weather_data"]

WEATHER_FILE = Path(__file__).with_name("weather.json")


@functools.cache
def _zone_names() -> dict[str, str]:
    # Case-insensitive lookup ("europe/berlin" works) against the names that
    # exist, so a model's arbitrary string never becomes a file path probe.
    return {name.casefold(): name for name in available_timezones()}


def _zone(name: str) -> tzinfo:
    key = _zone_names().get(name.strip().casefold())
    if key is not None:
        return ZoneInfo(key)
    if name.strip().upper() == "UTC":
        return UTC  # even on a system without a time zone database
    raise ToolError(f"unknown time zone {name!r}; use an IANA name such as Europe/Berlin")


def describe_time(moment: datetime, timezone: str) -> dict[str, str]:
    """``moment`` (timezone-aware) as seen in ``timezone``; :class:`ToolError` if unknown."""
    zone = _zone(timezone)
    local = moment.astimezone(zone)
    offset = local.strftime("%z")
    return {
        "timezone": str(zone) if zone is not UTC else "UTC",
        "datetime": local.isoformat(timespec="seconds"),
        "weekday": local.strftime("%A"),
        "utc_offset": f"{offset[:3]}:{offset[3:]}",
        "abbreviation": local.tzname() or "",
    }


@tool
def get_current_time(
    timezone: Annotated[str, "IANA time zone, e.g. Europe/Berlin"] = "UTC",
) -> dict[str, str]:
    """Get the current date and time in a time zone."""
    return describe_time(datetime.now(UTC), timezone)


@tool
def calculate(
    expression: Annotated[
        str,
        "Arithmetic expression with numbers, + - * / // % ** (or ^) and parentheses, "
        "e.g. 2 * (3 + 4)",
    ],
) -> int | float:
    """Evaluate an arithmetic expression exactly as written and return the number.

    Use it for any arithmetic instead of computing in your head.
    """
    try:
        return evaluate(expression)
    except ValueError as exc:
        # The calculator's messages are written for the reader ("division by zero").
        raise ToolError(str(exc)) from None


@functools.cache
def weather_data() -> dict[str, dict[str, Any]]:
    """The bundled weather observations, by city name."""
    data: dict[str, dict[str, Any]] = json.loads(WEATHER_FILE.read_text(encoding="utf-8"))
    return data


@tool
def get_weather(city: Annotated[str, "City name"]) -> dict[str, Any]:
    """Get the current weather for a city (demo data, not a live forecast)."""
    data = weather_data()
    wanted = " ".join(city.split()).casefold()
    for name, observation in data.items():
        if name.casefold() == wanted:
            return {"city": name, **observation}
    # The model can act on this (ask the user, pick a known city).
    known = ", ".join(sorted(data))
    raise ToolError(f'no weather data for "{city}"; known cities: {known}')
