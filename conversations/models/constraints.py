"""Building blocks of the models' check constraints (JSON types, non-empty, non-negative)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from django.db import models
from django.db.models import Q
from django.db.models.lookups import Exact
from django.utils.deconstruct import deconstructible

from conversations.domain.storable import loads_deep

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler

__all__ = [
    "DeepJSONDecoder",
    "JSONTypeOf",
    "is_json",
    "non_negative",
    "not_empty",
    "null_or_json",
]


@deconstructible(path="conversations.models.JSONTypeOf")
class JSONTypeOf(models.Func):
    """The JSON type name of a JSON column: ``object``, ``array``, ``string``, ...

    PostgreSQL spells it ``jsonb_typeof``, SQLite ``json_type``; both answer
    ``object`` and ``array`` alike, which is all the constraints compare with.
    On SQLite text that is not JSON at all yields ``invalid`` instead of an
    error, so the constraint fails cleanly (Django's own ``JSON_VALID`` check
    reports it too).
    """

    function = "JSON_TYPE"
    arity = 1
    output_field = models.CharField()

    def as_postgresql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: Any
    ) -> tuple[str, tuple[Any, ...]]:
        return self.as_sql(compiler, connection, function="JSONB_TYPEOF", **extra_context)

    def as_sqlite(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: Any
    ) -> tuple[str, tuple[Any, ...]]:
        sql, params = compiler.compile(self.get_source_expressions()[0])
        return (
            f"CASE WHEN JSON_VALID({sql}) THEN JSON_TYPE({sql}) ELSE 'invalid' END",
            (*params, *params),
        )


def is_json(field: str, json_type: str) -> Exact:
    """The JSON column ``field`` holds a value of ``json_type``."""
    return Exact(JSONTypeOf(field), json_type)


def null_or_json(field: str, json_type: str) -> Q:
    """The JSON column ``field`` is NULL or holds a value of ``json_type``."""
    # ``Q | lookup`` is a Q at runtime (a lookup is conditional), but the stubs
    # only type ``Q | Q`` and fall back to the lookup's ``__ror__``.
    return cast(Q, Q(**{f"{field}__isnull": True}) | is_json(field, json_type))


def not_empty(*fields: str) -> Q:
    """None of ``fields`` is the empty string."""
    condition = Q()
    for field in fields:
        condition &= ~Q(**{field: ""})
    return condition


def non_negative(*fields: str) -> Q:
    """None of ``fields`` is below zero."""
    # NULL passes a CHECK, so nullable counters need no IS NULL branch.
    condition = Q()
    for field in fields:
        condition &= Q(**{f"{field}__gte": 0})
    return condition


class DeepJSONDecoder(json.JSONDecoder):
    """The JSON fields' decoder: values nested past Python's recursion limit still load.

    Such a value can only come from outside the app (SQL, an older version),
    but one of them must not make every page that reads its row fail.
    """

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().decode(s, *args, **kwargs)
        except RecursionError:
            return loads_deep(s)
