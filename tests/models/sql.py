"""Raw SQL for rule tests: rows written past the ORM (no ``save()``, no validation)."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, models
from django.utils import timezone


def _adapt(field: models.Field, value: Any) -> Any:
    if isinstance(field, models.JSONField):
        # Any JSON value, JSON null included, exactly as given.
        if connection.vendor == "postgresql":
            from psycopg.types.json import Jsonb

            return Jsonb(value)
        return json.dumps(value)
    return field.get_db_prep_save(value, connection)


def insert(model: type[models.Model], **values: Any) -> Any:
    """``INSERT`` one row of ``model`` with plain SQL; return its primary key.

    Columns not given take the field default (``now`` for timestamps, ``""``
    for text); foreign
    keys are given by attname (``message_id=...``).
    """
    columns, params = [], []
    for field in model._meta.concrete_fields:
        if isinstance(field, models.AutoField):
            continue
        if field.attname in values:
            value = values.pop(field.attname)
        elif field.has_default():
            value = field.get_default()
        elif isinstance(field, models.DateTimeField) and not field.null:
            value = timezone.now()
        elif isinstance(field, models.CharField | models.TextField) and not field.null:
            value = ""
        else:
            value = None
        columns.append(connection.ops.quote_name(field.column))
        params.append(_adapt(field, value))
    assert not values, f"unknown columns: {sorted(values)}"
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    placeholders = ", ".join(["%s"] * len(params))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders}) RETURNING {pk}",
            params,
        )
        return cursor.fetchone()[0]


def update(model: type[models.Model], pk: Any, **values: Any) -> None:
    """``UPDATE`` one row of ``model`` with plain SQL."""
    assignments, params = [], []
    for attname, value in values.items():
        field = next(f for f in model._meta.concrete_fields if f.attname == attname)
        assignments.append(f"{connection.ops.quote_name(field.column)} = %s")
        params.append(_adapt(field, value))
    table = connection.ops.quote_name(model._meta.db_table)
    pk_field = model._meta.pk
    params.append(pk_field.get_db_prep_value(pk, connection))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {', '.join(assignments)} "
            f"WHERE {connection.ops.quote_name(pk_field.column)} = %s",
            params,
        )


def delete(model: type[models.Model], pk: Any) -> None:
    """``DELETE`` one row of ``model`` with plain SQL."""
    table = connection.ops.quote_name(model._meta.db_table)
    pk_field = model._meta.pk
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE {connection.ops.quote_name(pk_field.column)} = %s",
            [pk_field.get_db_prep_value(pk, connection)],
        )


def db_id(model: type[models.Model], pk: Any) -> Any:
    """A primary key as the database stores it (UUIDs are hex text on SQLite)."""
    return model._meta.pk.get_db_prep_value(pk, connection)
