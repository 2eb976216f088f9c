"""Durations in whole milliseconds: the one rounding every stored and shown duration uses."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

__all__ = ["duration_ms", "milliseconds"]

_MICROSECOND = timedelta(microseconds=1)


def milliseconds(seconds: float) -> int:
    """``seconds`` in whole milliseconds, to the nearest (a half rounds up), never below 0.

    Truncating would report every call under a millisecond as 0 ms and make
    sums drift low; Python's ``round`` rounds a half to even (2.5 ms to 2).
    """
    return max(0, math.floor(seconds * 1000 + 0.5))


def duration_ms(started: datetime | None, finished: datetime | None) -> int | None:
    """Milliseconds from ``started`` to ``finished`` as :func:`milliseconds` rounds them.

    ``None`` when either instant is missing (a call or run not finished yet).
    Computed on whole microseconds, so no float error decides a half.
    """
    if started is None or finished is None:
        return None
    microseconds = (finished - started) // _MICROSECOND
    return max(0, (microseconds + 500) // 1000)
