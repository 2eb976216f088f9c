"""OpenAPI helpers: choice sets published as named components.

drf-spectacular names an enum after the field holding it, so a run's
``status`` and a tool call's ``status`` collide; fixing that would take a
global ``ENUM_NAME_OVERRIDES`` setting. A :class:`NamedChoiceField` names its
own component instead, so the host's settings stay untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

__all__ = ["CREATED_LOCATION", "EVENT_STREAM", "NamedChoiceField"]

_View = TypeVar("_View", bound=Callable[..., Any])


CREATED_LOCATION = OpenApiParameter(
    "Location",
    OpenApiTypes.URI,
    OpenApiParameter.HEADER,
    response=[201, 202],
    description="The URL of what was created (the new conversation, or the run).",
)
"""The ``Location`` header of the API's 201 and 202 answers, for the schema."""

EVENT_STREAM = "text/event-stream"
"""The media type of Server-Sent Events (an answer documented beside the JSON ones)."""


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


def document(**kwargs: Any) -> Callable[[_View], _View]:
    """``extend_schema`` that works without the host's ``DEFAULT_SCHEMA_CLASS``.

    drf-spectacular builds a method's schema class on top of DRF's global
    default unless the function already names one; naming spectacular's
    ``AutoSchema`` here keeps a host's REST_FRAMEWORK settings out of it.
    """
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import extend_schema

    def decorator(func: _View) -> _View:
        marked: Any = func  # gains a ``schema`` attribute, which no callable type declares
        if not hasattr(marked, "schema") and "schema" not in getattr(marked, "kwargs", {}):
            marked.schema = AutoSchema
        return extend_schema(**kwargs)(func)

    return decorator
