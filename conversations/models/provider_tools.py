"""What the provider did with the tools it runs itself, and the sources the answer cites.

Both hang off the assistant turn that reported them and are written with it
(by the tool loop, in the turn's transaction); neither is ever sent to a
model: replay to the adapter that made the turn reads the turn's own
``provider_metadata``, which holds the vendor's items exactly as received.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from conversations.domain import PROVIDER_TOOL_KINDS
from conversations.domain.storable import MAX_NAME_LENGTH

from .constraints import DeepJSONDecoder, is_json, not_empty
from .transcript import Message

__all__ = ["Citation", "ProviderToolCall", "ProviderToolKind"]


class ProviderToolKind(models.TextChoices):
    """The tools a provider may run for a profile (``Profile.provider_tools``)."""

    WEB_SEARCH = "web_search", "Web search"
    CODE_EXECUTION = "code_execution", "Code execution"
    FILE_SEARCH = "file_search", "File search"


assert tuple(ProviderToolKind.values) == PROVIDER_TOOL_KINDS  # one vocabulary


class ProviderToolCall(models.Model):
    """One call of a tool the provider ran while writing an assistant turn."""

    Kind = ProviderToolKind

    message = models.ForeignKey(
        Message, on_delete=models.CASCADE, related_name="provider_tool_calls"
    )
    index = models.PositiveSmallIntegerField(help_text="Order within the assistant turn.")
    kind = models.CharField(max_length=32, choices=ProviderToolKind)
    provider = models.CharField(
        max_length=32, help_text="The adapter that made the turn (its provider_metadata key)."
    )
    provider_call_id = models.CharField(
        max_length=MAX_NAME_LENGTH, blank=True, help_text="The provider's id of the call, if any."
    )
    status = models.CharField(max_length=32, help_text="As the provider reported it.")
    query = models.TextField(blank=True)
    code = models.TextField(blank=True)
    result_summary = models.TextField(blank=True)
    provider_metadata = models.JSONField(
        default=dict, blank=True, decoder=DeepJSONDecoder, help_text="The raw items, as received."
    )

    class Meta:
        ordering = ["message_id", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["message", "index"], name="conversations_providertoolcall_index_unique"
            ),
            models.CheckConstraint(
                condition=Q(kind__in=ProviderToolKind.values),
                name="conversations_providertoolcall_kind_valid",
            ),
            models.CheckConstraint(
                condition=not_empty("provider", "status"),
                name="conversations_providertoolcall_provider_status_not_empty",
            ),
            models.CheckConstraint(
                condition=is_json("provider_metadata", "object"),
                name="conversations_providertoolcall_metadata_object",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} [{self.provider_call_id or self.provider}]"


class Citation(models.Model):
    """A passage of an assistant turn's text (``content[start_offset:end_offset]``) and its source."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="citations")
    index = models.PositiveSmallIntegerField(help_text="Order within the assistant turn.")
    start_offset = models.PositiveIntegerField()
    end_offset = models.PositiveIntegerField()
    url = models.TextField()
    title = models.TextField(blank=True)
    source_id = models.CharField(
        max_length=MAX_NAME_LENGTH, blank=True, help_text="The provider's id of the source, if any."
    )

    class Meta:
        ordering = ["message_id", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["message", "index"], name="conversations_citation_index_unique"
            ),
            models.CheckConstraint(
                condition=Q(end_offset__gte=F("start_offset")),
                name="conversations_citation_span_ordered",
                violation_error_message="A citation cannot end before it starts.",
            ),
            models.CheckConstraint(
                condition=not_empty("url"), name="conversations_citation_url_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.url
