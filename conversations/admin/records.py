"""Single tool calls and messages in the admin, read-only, for searching across conversations."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from conversations import selectors
from conversations.domain.timing import duration_ms
from conversations.models import Message, ToolCall
from conversations.selectors.search import matching_messages

from .display import ReadOnlyAdmin, format_duration, object_link, pretty_json
from .filters import ToolNameFilter

__all__ = ["MessageAdmin", "ToolCallAdmin"]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    """Every call a model made, with its arguments, outcome and error detail.

    Search covers the name, the call id and the arguments: the JSON column is
    cast to text (``CAST(... AS text)`` on both SQLite and PostgreSQL), so a
    term matches keys and values as stored. SQLite stores non-ASCII characters
    as ``\\uXXXX`` escapes, so there only ASCII terms match inside arguments.
    """

    list_display = (
        "name",
        "call_id",
        "status",
        "duration",
        "conversation_link",
        "position",
        "started_at",
    )
    list_select_related = ("conversation", "message")
    list_filter = ("status", ToolNameFilter)
    search_fields = ("name", "call_id", "arguments_text", "raw_arguments")
    search_help_text = "Tool name, call id or a piece of the arguments."
    readonly_fields = (
        "conversation_link",
        "position",
        "run_link",
        "index",
        "call_id",
        "name",
        "status",
        "started_at",
        "finished_at",
        "duration",
        "arguments_json",
        "raw_arguments",
        "error_detail",
        "result",
    )
    fields = readonly_fields

    def get_queryset(self, request):
        return selectors.admin_tool_calls(calls=super().get_queryset(request))

    @admin.display(description="conversation", ordering="conversation__title")
    def conversation_link(self, obj):
        return object_link(obj.conversation, site=self.admin_site.name, anchor=f"#call-{obj.pk}")

    @admin.display(description="message", ordering="message__position")
    def position(self, obj):
        return f"#{obj.message.position}"

    @admin.display(description="run")
    def run_link(self, obj):
        return object_link(obj.message.run, site=self.admin_site.name)

    @admin.display(description="duration")
    def duration(self, obj):
        return format_duration(duration_ms(obj.started_at, obj.finished_at)) or "-"

    @admin.display(description="arguments")
    def arguments_json(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.arguments))

    @admin.display(description="error detail (never sent to the model)")
    def error_detail(self, obj):
        return format_html("<pre>{}</pre>", obj.error) if obj.error else "-"

    @admin.display(description="result")
    def result(self, obj):
        answer = obj.results.first()
        if answer is None:
            return "No result yet: the call is open."
        return format_html("#{}<pre>{}</pre>", answer.position, answer.content)


# Messages ----------------------------------------------------------------------------


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    """Single messages, for searching content across conversations; read-only."""

    list_display = (
        "__str__",
        "conversation_link",
        "role",
        "excerpt",
        "model",
        "total_tokens",
        "created_at",
    )
    list_select_related = ("conversation",)
    list_filter = ("role", "created_at")
    # Searched with the same full-text query as the API (see get_search_results).
    search_fields = ("content",)
    search_help_text = "Words in contents, tool names, tool arguments or tool results."
    readonly_fields = (
        "conversation_link",
        "position",
        "role",
        "is_error",
        "content_text",
        "answers",
        "run",
        "model",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cached_prompt_tokens",
        "reasoning_tokens",
        "latency_ms",
        "provider_metadata_json",
        "created_at",
    )
    fields = readonly_fields

    def get_queryset(self, request):
        return selectors.admin_messages(messages=super().get_queryset(request))

    def get_search_results(self, request, queryset, search_term):
        if not search_term.strip():
            return queryset, False
        return matching_messages(messages=queryset, query=search_term), False

    @admin.display(description="conversation", ordering="conversation__title")
    def conversation_link(self, obj):
        return object_link(
            obj.conversation, site=self.admin_site.name, anchor=f"#message-{obj.position}"
        )

    @admin.display(description="content")
    def excerpt(self, obj):
        text = " ".join(obj.content.split())
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description="content")
    def content_text(self, obj):
        return format_html("<pre>{}</pre>", obj.content)

    @admin.display(description="answers call")
    def answers(self, obj):
        return object_link(obj.tool_call, site=self.admin_site.name)

    @admin.display(description="provider metadata")
    def provider_metadata_json(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.provider_metadata))
