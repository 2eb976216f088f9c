"""Serializer fields of the API's bodies: storable JSON, profiles named by slug, named choices.

drf-spectacular names an enum after the field holding it, so a run's
``status`` and a tool call's ``status`` collide; fixing that would take a
global ``ENUM_NAME_OVERRIDES`` setting. A :class:`NamedChoiceField` names its
own component instead, so the host's settings stay untouched.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from django.core.validators import slug_re
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.models import Profile

from .errors import APIError, error_item, json_pointer

__all__ = ["JSONObjectField", "NamedChoiceField", "ProfileSlugField", "check_storable"]


def _unstorable(
    value: Any, path: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """Where ``value`` holds something no database column can store, and why.

    PostgreSQL refuses NUL characters in text and JSON, both databases refuse
    strings that are not valid Unicode (lone surrogates), and ``1e400`` parses
    to infinity, which is not JSON. Caught here, they are a 400, not a 500.
    """
    if isinstance(value, str):
        if "\x00" in value:
            yield path, "null_characters_not_allowed", "Null characters are not allowed."
        else:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                yield (
                    path,
                    "surrogate_characters_not_allowed",
                    "Surrogate characters are not allowed.",
                )
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield path, "invalid_number", "Numbers must be finite."
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _unstorable(key, (*path, key))
            yield from _unstorable(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unstorable(item, (*path, index))


def check_storable(value: Any, *, field: str | tuple[str | int, ...]) -> None:
    """Raise a 400 naming the first part of ``value`` (at ``field``) that cannot be stored."""
    prefix = (field,) if isinstance(field, str) else field
    for path, code, detail in _unstorable(value, ()):
        raise APIError(
            detail,
            code="invalid",
            errors=[error_item(code, detail, pointer=json_pointer((*prefix, *path)))],
        )


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.JSONField):
    """A JSON object (a dict), storable in PostgreSQL and SQLite."""

    default_error_messages = {"not_an_object": "Must be a JSON object."}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_an_object")
        return value


class ProfileSlugField(serializers.SlugRelatedField[Profile]):
    """An active profile, named by its slug."""

    default_error_messages = {
        # DRF's own says "Object with slug=nope does not exist.": which object?
        "does_not_exist": 'No profile with slug "{value}".',
        "invalid": "Must be a profile's slug (a string).",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("queryset", Profile.objects.filter(is_active=True))
        super().__init__(slug_field="slug", **kwargs)

    def to_internal_value(self, data: Any) -> Profile:
        # Only slug-shaped text reaches the database (NUL would be a 500 there).
        if not isinstance(data, str) or not slug_re.fullmatch(data):
            self.fail("does_not_exist", slug_name=self.slug_field, value=str(data)[:100])
        return super().to_internal_value(data)


class NamedChoiceField(serializers.ChoiceField):
    """A choice field whose choices form the schema component ``component_name``."""

    def __init__(self, *, component_name: str, **kwargs: Any) -> None:
        self.component_name = component_name
        super().__init__(**kwargs)


class NamedChoiceFieldExtension(OpenApiSerializerFieldExtension):
    """Publishes a :class:`NamedChoiceField`'s choices as one named enum component."""

    target_class = NamedChoiceField

    def get_name(self) -> str:
        target: NamedChoiceField = self.target
        return target.component_name

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.target.choices)}
