"""Durations in whole milliseconds: one rounding, to the nearest with a half going up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from conversations.domain.timing import duration_ms, milliseconds

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("microseconds", "expected"),
    [
        (0, 0),
        (400, 0),
        (499, 0),
        (500, 1),
        (1_499, 1),
        (1_500, 2),
        (2_500, 3),  # a half goes up, not to the even neighbour as round() would
        (999_999, 1_000),
        (90_061_234, 90_061),
    ],
)
def test_a_duration_is_rounded_to_the_nearest_millisecond(microseconds, expected):
    finished = START + timedelta(microseconds=microseconds)
    assert duration_ms(START, finished) == expected


def test_an_unknown_end_or_start_has_no_duration():
    assert duration_ms(START, None) is None
    assert duration_ms(None, START) is None
    assert duration_ms(None, None) is None


def test_a_clock_that_went_back_gives_zero_not_a_negative_duration():
    assert duration_ms(START, START - timedelta(milliseconds=3)) == 0


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0.0, 0), (0.0004, 0), (0.0015, 2), (0.0025, 3), (1.2344, 1234), (-0.002, 0)],
)
def test_elapsed_seconds_round_the_same_way(seconds, expected):
    assert milliseconds(seconds) == expected
