"""OpenAPI helpers: the views' schema class, ``document``, shared headers and media types.

:class:`ConversationsAutoSchema` adds what every operation can answer and no
view should have to repeat: 503 ``service_unavailable`` when the database's
connection pool has no connection to give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from conversations.database import RETRY_AFTER_SECONDS

from .fields import NamedChoiceField
from .serializers import ErrorSerializer

__all__ = [
    "CREATED_LOCATION",
    "EVENT_STREAM",
    "ConversationsAutoSchema",
    "NamedChoiceField",
    "document",
]

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


DATABASE_BUSY = (
    "No database connection was free in time (`service_unavailable`); see `Retry-After`."
)
"""How the schema describes the 503 any operation can answer when the pool is exhausted."""

_RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    OpenApiTypes.INT,
    OpenApiParameter.HEADER,
    response=[503],
    description=f"Seconds to wait before trying again: {RETRY_AFTER_SECONDS} when no database "
    "connection was free; a rate-limited provider's own wait, when it gave one.",
)


class ConversationsAutoSchema(AutoSchema):
    """drf-spectacular's schema of an operation, plus the 503 of an exhausted connection pool.

    Every operation needs a database connection, so every one can answer 503
    ``service_unavailable``; where a view already documents a 503 of its own,
    the description says both.
    """

    def get_override_parameters(self) -> list[Any]:
        return [*super().get_override_parameters(), _RETRY_AFTER]

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        if "503" in responses:
            responses["503"]["description"] += f" {DATABASE_BUSY}"
        else:
            busy = OpenApiResponse(ErrorSerializer, description=DATABASE_BUSY)
            # drf-spectacular's own builder (untyped): content types and headers as for the rest.
            responses["503"] = self._get_response_for_code(  # type: ignore[no-untyped-call]
                busy, "503", direction=direction
            )
        return responses


def document(**kwargs: Any) -> Callable[[_View], _View]:
    """``extend_schema`` that works without the host's ``DEFAULT_SCHEMA_CLASS``.

    drf-spectacular builds a method's schema class on top of DRF's global
    default unless the function already names one; naming
    :class:`ConversationsAutoSchema` here keeps a host's REST_FRAMEWORK
    settings out of it.
    """
    from drf_spectacular.utils import extend_schema

    def decorator(func: _View) -> _View:
        marked: Any = func  # gains a ``schema`` attribute, which no callable type declares
        if not hasattr(marked, "schema") and "schema" not in getattr(marked, "kwargs", {}):
            marked.schema = ConversationsAutoSchema
        return extend_schema(**kwargs)(func)

    return decorator
