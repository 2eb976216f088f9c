"""Small helpers of the hand-written SQL statements: quoted table names and primary key values."""

from __future__ import annotations

from typing import Any

from django.db import connection


def table(model: Any) -> str:
    """The quoted name of ``model``'s table on the default connection."""
    return str(connection.ops.quote_name(model._meta.db_table))


def pk(model: Any, value: Any) -> Any:
    """``value`` as the database stores ``model``'s primary key."""
    return model._meta.pk.get_db_prep_value(value, connection)
