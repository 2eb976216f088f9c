"""Path converters of the API's URLs."""

from __future__ import annotations

from typing import Final

__all__ = ["RowIdConverter"]

MAX_ROW_ID: Final = 2**63 - 1
"""The largest primary key a ``BigAutoField`` can hold (a signed 64-bit integer)."""


class RowIdConverter:
    """A row's primary key: digits naming a value the database can hold.

    A larger number cannot name a row; refusing it here makes the path match
    nothing (a JSON 404) instead of reaching the database, which would fail on
    the out-of-range parameter.
    """

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 0 < number <= MAX_ROW_ID:
            raise ValueError(f"{value} is not a row id")
        return number

    def to_url(self, value: int) -> str:
        return str(value)
