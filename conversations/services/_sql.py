"""Small helpers of the hand-written SQL statements: quoted table names, primary key values,
and the insert of new rows the loop makes every round."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, models
from django.db.models import AutoField, Model


def table(model: Any) -> str:
    """The quoted name of ``model``'s table on the default connection."""
    return str(connection.ops.quote_name(model._meta.db_table))


def pk(model: Any, value: Any) -> Any:
    """``value`` as the database stores ``model``'s primary key."""
    return model._meta.pk.get_db_prep_value(value, connection)


# Inserting new rows ----------------------------------------------------------------

_COLUMNS: dict[type[Model], tuple[list[Any], list[Any], Any]] = {}
_STATEMENTS: dict[tuple[type[Model], int, str], str] = {}


def insert(objs: Sequence[Model]) -> None:
    """Insert new instances of one model as ``Model.objects.bulk_create(objs)`` would.

    The same columns, values (each field's ``pre_save`` and
    ``get_db_prep_save``), one multi-row ``INSERT ... RETURNING`` of the
    primary keys, and the instances left as ``bulk_create`` leaves them
    (keys set, saved); like ``bulk_create``, it sends no signal. What the ORM
    spends building and compiling the statement each time is done once per
    model and row count: the statement is kept. Anything the fast way does
    not cover (a key already set, an expression as a value, an unsaved
    related object, a field with a placeholder of its own, more rows than one
    statement takes) goes through ``bulk_create`` itself.
    """
    if not objs:
        return
    model = type(objs[0])
    fields, relations, key = _columns(model)
    if not _plain(objs, model, fields, relations, key):
        model._default_manager.bulk_create(objs)
        return
    params: list[Any] = []
    for obj in objs:
        for field in relations:
            related = field.get_cached_value(obj, None)
            if related is not None and getattr(obj, field.attname) is None:
                setattr(obj, field.attname, related.pk)  # saved after it was assigned
        for field, plain, adapt in fields:
            if plain is not None:
                value = getattr(obj, field.attname)
                if value is None:
                    params.append(None)
                    continue
                if type(value) is plain:  # what the field's preparation makes of it
                    params.append(value if adapt is None else adapt(value))
                    continue
            params.append(field.get_db_prep_save(field.pre_save(obj, True), connection))
    if any(hasattr(value, "resolve_expression") for value in params):
        model._default_manager.bulk_create(objs)
        return
    rows, width = len(objs), len(fields)
    if rows > 1 and connection.vendor == "postgresql":
        # As Django's own multi-row insert there: one array per column, so the
        # statement and its parameters do not grow with the rows (psycopg keeps
        # the parsed statement of at most 50 parameters).
        params = [params[column::width] for column in range(width)]
        sql = _statement(model, 0, fields, key)
    else:
        sql = _statement(model, rows, fields, key)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        returned = cursor.fetchall()
    alias = connection.alias
    for obj, (value,) in zip(objs, returned, strict=True):
        setattr(obj, key.attname, value)
        obj._state.adding = False
        obj._state.db = alias


def _columns(model: type[Model]) -> tuple[list[_Column], list[Any], Any]:
    """The fields ``bulk_create`` inserts for rows without a key (see :data:`_PLAIN`), the
    relations among them, the key."""
    found = _COLUMNS.get(model)
    if found is None:
        opts = model._meta
        fields = [
            f for f in opts.concrete_fields if not f.generated and not isinstance(f, AutoField)
        ]
        relations = [f for f in fields if f.is_relation]
        found = _COLUMNS[model] = ([(f, *_plain_type(f)) for f in fields], relations, opts.pk)
    return found


_Column = tuple[Any, type | None, Any]
"""A field, the type of value it sends as it is (or ``None``), and how the backend adapts it."""

_INTEGERS = (
    models.IntegerField,
    models.BigIntegerField,
    models.SmallIntegerField,
    models.PositiveIntegerField,
    models.PositiveBigIntegerField,
    models.PositiveSmallIntegerField,
)
_PLAIN: dict[type, type] = {
    **dict.fromkeys((models.CharField, models.TextField), str),
    **dict.fromkeys(_INTEGERS, int),
    **dict.fromkeys((models.BigAutoField, models.AutoField), int),
    models.BooleanField: bool,
}
"""Field classes (exactly these, not subclasses) whose ``pre_save`` reads the attribute and
whose ``get_db_prep_save`` gives ``None`` for ``None`` and, for a value of exactly this type,
the value itself, but for integer fields on PostgreSQL (``adapt_integerfield_value`` wraps
it in psycopg's type of the column's size, which :func:`_plain_type` returns)."""


def _plain_type(field: Any) -> tuple[type | None, Any]:
    if field.is_relation:
        # A key: its target's preparation (an auto key's is the value itself).
        target = field.target_field
        plain = _PLAIN.get(type(target)) if type(field) is models.ForeignKey else None
        return (plain, None) if isinstance(target, AutoField) else (None, None)
    plain = _PLAIN.get(type(field))
    if plain is None or isinstance(field, AutoField):
        return None, None
    types = getattr(connection.ops, "integerfield_type_map", None)
    if isinstance(field, _INTEGERS) and types is not None:
        return plain, types[field.get_internal_type()]
    return plain, None


def _plain(
    objs: Sequence[Model], model: type[Model], fields: list[_Column], relations: list[Any], key: Any
) -> bool:
    if not connection.features.can_return_rows_from_bulk_insert:
        return False
    if not isinstance(key, AutoField) or any(hasattr(f[0], "get_placeholder") for f in fields):
        return False
    if connection.ops.bulk_batch_size([f[0] for f in fields], objs) < len(objs):
        return False
    if len(objs) > 1 and connection.vendor == "postgresql" and not _arrays(model, fields):
        return False  # a column UNNEST cannot take (as Django's own check)
    for obj in objs:
        if type(obj) is not model or getattr(obj, key.attname) is not None:
            return False
        for field in relations:
            related = field.get_cached_value(obj, None)
            if related is not None and (
                related.pk is None or getattr(obj, field.attname) not in (None, related.pk)
            ):
                return False  # bulk_create raises, or drops the stale cached object
    return True


_ARRAYS: dict[type[Model], bool] = {}


def _arrays(model: type[Model], fields: list[_Column]) -> bool:
    """Whether every column can be sent as an array of its type (PostgreSQL)."""
    found = _ARRAYS.get(model)
    if found is None:
        found = _ARRAYS[model] = all(
            f.db_type(connection) is not None
            and (f.target_field if f.is_relation else f).get_internal_type()
            in connection.data_types
            for f, _plain, _adapt in fields
        )
    return found


def _statement(model: type[Model], rows: int, fields: list[Any], key: Any) -> str:
    """The ``INSERT`` of ``rows`` rows; 0: of one array per column (PostgreSQL)."""
    cache_key = (model, rows, connection.vendor)
    sql = _STATEMENTS.get(cache_key)
    if sql is None:
        quote = connection.ops.quote_name
        table_name = quote(model._meta.db_table)
        if rows:
            row = "(" + ", ".join(["%s"] * len(fields)) + ")"
            values = f"VALUES {', '.join([row] * rows)}"
        else:  # PostgreSQL's arrays; the type without its modifiers, as Django does
            types = (f[0].db_type(connection).split("(")[0] for f in fields)
            values = f"SELECT * FROM UNNEST({', '.join(f'(%s)::{t}[]' for t in types)})"
        sql = _STATEMENTS[cache_key] = (
            f"INSERT INTO {table_name} ({', '.join(quote(f[0].column) for f in fields)}) "
            f"{values} RETURNING {table_name}.{quote(key.column)}"
        )
    return sql
