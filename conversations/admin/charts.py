"""Daily bar charts drawn as SVG on the server: bars, a value axis, date labels, tooltips.

No script and no CDN: the page works offline. The value axis goes from 0 to
a round number at or above the largest day (1, 2, 2.5 or 5 times a power of
ten), labelled at 0, half and the top, with faint grid lines. Every bar has
a tooltip (its day and value): the SVG ``<title>`` the browser shows, and
a label the page shows at once on hover over the bar's whole column, so
that a day with nothing is as easy to read as the largest one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

__all__ = [
    "AXIS_SPACE",
    "CHART_HEIGHT",
    "CHART_WIDTH",
    "LABEL_SPACE",
    "TOP_SPACE",
    "Bar",
    "Chart",
    "Tick",
    "daily_chart",
    "format_value",
    "nice_ceiling",
]

CHART_WIDTH, CHART_HEIGHT = 660, 150
"""The whole drawing, in SVG user units."""
AXIS_SPACE = 52
"""Left of the bars: the value axis' labels."""
TOP_SPACE, LABEL_SPACE = 12, 18
"""Above the bars (room for the top label), below them (the dates)."""
RIGHT_SPACE = 8

Number = Decimal | int | float


@dataclass(frozen=True, slots=True)
class Bar:
    """One day: its bar, its column (where hovering shows the tooltip), and labels."""

    x: float
    y: float
    width: float
    height: float
    column_x: float
    column_width: float
    title: str
    """The tooltip: the day and its value."""
    label: str
    """The date under the bar (empty for most days), centred on it."""
    label_x: float
    tip_x: float
    tip_anchor: str
    """Where the on-page tooltip starts, and how it is aligned (``start``/``middle``/``end``)."""


@dataclass(frozen=True, slots=True)
class Tick:
    """A value on the axis, where it is drawn."""

    y: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything the template draws."""

    width: int
    height: int
    left: int
    """Where the bars begin (the axis line)."""
    right: int
    baseline: float
    """The y of the value 0."""
    label_y: float
    """The y of the date labels."""
    tip_y: float
    """The y of the on-page tooltips (above the bars)."""
    axis_top: float
    """The y of the axis' top value."""
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...]


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value * (1 - 1e-12):
            return step * power
    return 10.0 * power  # pragma: no cover - the loop always returns


def format_value(value: Number) -> str:
    """``"0"``, ``"1,500"``, ``"250k"``, ``"1.2M"``, ``"0.0162"``: short and exact enough."""
    number = float(value)
    if number == 0:
        return "0"
    if abs(number) >= 1_000_000:
        return f"{number / 1_000_000:.3g}M"
    if abs(number) >= 10_000:
        return f"{number / 1000:.3g}k"
    if number == int(number):
        return f"{int(number):,}"
    return f"{number:.4g}" if abs(number) >= 0.0001 else f"{number:.2e}"


def daily_chart(
    values: Sequence[tuple[date, Number]],
    *,
    unit: str = "",
    label_every: int = 5,
    formatter: Callable[[Number], str] = format_value,
) -> Chart:
    """The chart of one value per day (every day gets a column), scaled to a round top."""
    left, right = AXIS_SPACE, CHART_WIDTH - RIGHT_SPACE
    baseline = CHART_HEIGHT - LABEL_SPACE
    plot_height = baseline - TOP_SPACE
    largest = max((float(value) for _day, value in values), default=0.0)
    top = nice_ceiling(largest)
    ticks = tuple(
        Tick(y=round(baseline - share * plot_height, 2), label=format_value(top * share))
        for share in (0.0, 0.5, 1.0)
    )
    slot = (right - left) / len(values) if values else 0.0
    bars = []
    for index, (day, value) in enumerate(values):
        height = float(value) / top * plot_height
        column_x = left + index * slot
        last = index == len(values) - 1
        center = column_x + slot / 2
        anchor = "start" if index < 3 else "end" if index >= len(values) - 3 else "middle"
        tip_x = column_x if anchor == "start" else column_x + slot if anchor == "end" else center
        bars.append(
            Bar(
                x=round(column_x + 1, 2),
                y=round(baseline - height, 2),
                width=round(max(slot - 2, 1), 2),
                height=round(height, 2),
                column_x=round(column_x, 2),
                column_width=round(slot, 2),
                title=f"{day:%a} {day.isoformat()}: {formatter(value)}{unit}",
                label=f"{day:%b} {day.day}" if index % label_every == 0 or last else "",
                label_x=round(center, 2),
                tip_x=round(tip_x, 2),
                tip_anchor=anchor,
            )
        )
    return Chart(
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        left=left,
        right=right,
        baseline=baseline,
        label_y=CHART_HEIGHT - 4,
        tip_y=TOP_SPACE - 2,
        axis_top=TOP_SPACE,
        bars=tuple(bars),
        ticks=ticks,
    )
