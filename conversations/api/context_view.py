"""The ``context_view`` of an assistant message: what its model call was sent of the history."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.models import Message

__all__ = ["ContextViewField", "ContextViewSerializer"]


class ContextViewSerializer(serializers.Serializer[Any]):
    """What one model call was sent of the stored history (see docs/context.md)."""

    first_position = serializers.IntegerField(
        help_text="The first stored position sent (0: the whole history; the earlier messages "
        "were left out to fit the model's context window)."
    )
    summarized = serializers.BooleanField(
        help_text="The messages before first_position were sent as a summary."
    )


@extend_schema_field(ContextViewSerializer(allow_null=True))
class ContextViewField(serializers.Field):  # type: ignore[type-arg]
    """Null except on an assistant message whose model call recorded its view.

    Reads ``message.model_call`` (select it with the messages, as the API's
    selectors do); its summary only by id, so no query is added.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "On an assistant message: what the model call that produced it was sent of the "
            "history (null when not recorded).",
        )
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Message) -> dict[str, Any] | None:
        if value.role != Message.Role.ASSISTANT:
            return None
        try:
            call = value.model_call
        except ObjectDoesNotExist:
            return None
        if call is None or call.first_position is None:
            return None
        return {
            "first_position": call.first_position,
            "summarized": call.context_summary_id is not None,
        }
