"""The stored history in the admin: conversations, runs, tool calls and messages, read-only.

Nothing here can edit a message or a tool call: an edit could break a call /
result pair (and the database triggers would refuse most of them anyway).
State changes go through services, as admin actions.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import actions as admin_actions
from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from conversations.exceptions import RunNotRunning
from conversations.models import Conversation, Message, Run, RunStatus, ToolCall
from conversations.services.recovery import answer_open_calls, recover_runs
from conversations.services.runs import cancel_run
from conversations.tools import registry

from .display import (
    build_transcript,
    count_of,
    duration_ms,
    format_duration,
    last_run_status,
    object_link,
    pretty_json,
    render_runs,
    render_transcript,
)

__all__ = ["ConversationAdmin", "MessageAdmin", "RunAdmin", "ToolCallAdmin"]


def _has_running_run() -> Exists:
    return Exists(Run.objects.filter(conversation=OuterRef("pk"), status=RunStatus.RUNNING))


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only: no add, change or delete, whatever the user's permissions.

    Django then renders change pages without a save button and answers a POST
    to them with 403.
    """

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """May run the actions that change state through services (recover, answer).

        The model's real ``change`` permission, which the read-only page itself ignores.
        """
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")


# Filters -------------------------------------------------------------------------


class LastRunStatusFilter(admin.SimpleListFilter):
    """Conversations by the status of their most recent run."""

    title = "last run status"
    parameter_name = "last_run"

    def lookups(self, request, model_admin):
        return [("none", "No run yet"), *RunStatus.choices]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value == "none":
            return queryset.filter(last_run_status__isnull=True)
        return queryset.filter(last_run_status=value)


class ToolNameFilter(admin.SimpleListFilter):
    """By tool name: the registered tools plus any name a model ever called."""

    title = "tool"
    parameter_name = "tool"

    def lookups(self, request, model_admin):
        called = ToolCall.objects.order_by().values_list("name", flat=True).distinct()
        names = set(registry.names()) | set(called)
        return [(name, name) for name in sorted(names)]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return self.filter_by_name(queryset, value)

    def filter_by_name(self, queryset, name):
        return queryset.filter(name=name)


class RunToolFilter(ToolNameFilter):
    """Runs that made at least one call to the chosen tool."""

    title = "called tool"

    def filter_by_name(self, queryset, name):
        calls = ToolCall.objects.filter(message__run=OuterRef("pk"), name=name)
        return queryset.filter(Exists(calls))


class ErrorCodeFilter(admin.SimpleListFilter):
    """Runs by the code of the error that ended them (the termination detail)."""

    title = "error code"
    parameter_name = "error_code"

    def lookups(self, request, model_admin):
        codes = (
            Run.objects.exclude(error_code="")
            .order_by("error_code")
            .values_list("error_code", flat=True)
            .distinct()
        )
        return [("none", "No error"), *((code, code) for code in codes)]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(error_code="" if value == "none" else value)


# Conversations ------------------------------------------------------------------------


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    """Conversations, read-only, with the transcript (each call beside its result).

    Deleting is left to superusers: it removes the conversation with all its
    messages, calls and runs, so whole call/result pairs go together and the
    grammar of no other conversation is touched. A conversation with a run in
    progress cannot be deleted (the loop would fail half-way through a step).
    """

    list_display = (
        "display_title",
        "owner",
        "profile",
        "message_count",
        "last_activity",
        "last_run",
    )
    list_select_related = ("owner", "profile")
    list_filter = ("profile", LastRunStatusFilter, "created_at")
    search_fields = ("title", f"owner__{get_user_model().USERNAME_FIELD}", "id")
    search_help_text = "Title, owner's user name or conversation id."
    actions = ("answer_open_calls_as_interrupted", "delete_selected")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "owner",
                    "title",
                    "profile",
                    "created_at",
                    "updated_at",
                    "metadata_json",
                )
            },
        ),
        ("Runs", {"fields": ("runs_table",)}),
        ("Transcript", {"fields": ("transcript",)}),
    )
    readonly_fields = (
        "id",
        "owner",
        "title",
        "profile",
        "created_at",
        "updated_at",
        "metadata_json",
        "runs_table",
        "transcript",
    )

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                message_count=count_of(
                    Message.objects.filter(conversation=OuterRef("pk")), "conversation"
                ),
                last_run_status=last_run_status(),
                has_running_run=_has_running_run(),
            )
        )

    def has_delete_permission(self, request, obj=None):
        if not request.user.is_superuser:
            return False
        return not (obj is not None and self._is_busy(obj))

    @staticmethod
    def _is_busy(conversation: Conversation) -> bool:
        busy = getattr(conversation, "has_running_run", None)
        if busy is None:
            busy = Run.objects.filter(conversation=conversation, status=RunStatus.RUNNING).exists()
        return bool(busy)

    def get_deleted_objects(self, objs, request):
        # The history admins refuse deleting single rows (that could break a
        # pair); going with their whole conversation, they need no permission.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        history = {m._meta.verbose_name for m in (Message, ToolCall, Run)}
        return deleted, counts, perms_needed - history, protected

    def delete_queryset(self, request, queryset):
        # Also guards a run that started between confirmation and deletion.
        super().delete_queryset(request, queryset.exclude(_has_running_run()))

    @admin.action(
        description="Delete selected conversations (with their whole history)",
        permissions=["delete"],
    )
    def delete_selected(self, request, queryset):
        """Django's bulk delete, minus the conversations that have a run in progress."""
        busy = queryset.filter(_has_running_run()).count()
        if busy:
            self.message_user(
                request,
                f"{busy} conversation(s) with a run in progress are not deleted.",
                messages.WARNING,
            )
        deletable = queryset.exclude(_has_running_run())
        if not deletable.exists():
            return None
        return admin_actions.delete_selected(self, request, deletable)

    @admin.display(description="title", ordering="title")
    def display_title(self, obj):
        return str(obj)

    @admin.display(description="messages", ordering="message_count")
    def message_count(self, obj):
        return obj.message_count

    @admin.display(description="last activity", ordering="updated_at")
    def last_activity(self, obj):
        return obj.updated_at

    @admin.display(description="last run", ordering="last_run_status")
    def last_run(self, obj):
        status = obj.last_run_status
        return RunStatus(status).label if status in RunStatus.values else "-"

    @admin.display(description="metadata")
    def metadata_json(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.metadata))

    @admin.display(description="runs")
    def runs_table(self, obj) -> SafeString:
        return render_runs(list(obj.runs.order_by("-started_at")), site=self.admin_site.name)

    @admin.display(description="transcript")
    def transcript(self, obj) -> SafeString:
        # Two queries whatever the length: the messages, then every call.
        rows = list(obj.messages.order_by("position"))
        calls = list(ToolCall.objects.filter(conversation=obj))
        results = {m.tool_call_id: m for m in rows if m.tool_call_id is not None}
        entries = build_transcript(rows, calls, results, site=self.admin_site.name)
        return render_transcript(entries, empty="No messages yet.")

    @admin.action(description="Answer open tool calls as interrupted", permissions=["operate"])
    def answer_open_calls_as_interrupted(self, request, queryset):
        """Through ``services.recovery.answer_open_calls``; skips conversations with a live run."""
        answered = skipped = 0
        for conversation in queryset:
            if self._is_busy(conversation):
                skipped += 1
                continue
            answered += len(
                answer_open_calls(conversation=conversation, status=ToolCall.Status.INTERRUPTED)
            )
        self.message_user(request, f"Answered {answered} open tool call(s) as interrupted.")
        if skipped:
            self.message_user(
                request,
                f"Skipped {skipped} conversation(s) with a run in progress: its calls may "
                'still be executing. Use "Recover interrupted runs" on the run instead.',
                messages.WARNING,
            )


# Runs --------------------------------------------------------------------------------


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    """Tool-loop runs: how each ended, what it cost, and its trace."""

    list_display = (
        "started_at",
        "conversation_link",
        "status",
        "termination",
        "iterations_display",
        "call_count",
        "tokens",
        "duration",
        "provider",
        "model",
    )
    list_display_links = ("started_at",)
    list_select_related = ("conversation",)
    list_filter = ("status", ErrorCodeFilter, "profile", RunToolFilter, "started_at")
    search_fields = ("=id", "conversation__title", "model", "provider")
    search_help_text = "Run id (exact), conversation title, model or provider."
    date_hierarchy = "started_at"
    actions = ("recover_interrupted_runs", "cancel_runs")
    readonly_fields = (
        "id",
        "conversation_link",
        "profile",
        "status",
        "termination",
        "error_code",
        "error_message",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "claimed_at",
        "worker",
        "duration",
        "iterations_display",
        "call_count",
        "token_detail",
        "provider",
        "model",
        "cancel_requested",
        "final_answer",
        "trace",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "conversation_link",
                    "profile",
                    ("provider", "model"),
                    ("status", "termination"),
                    "error_message",
                    ("started_at", "finished_at", "heartbeat_at"),
                    ("claimed_at", "worker"),
                    "duration",
                    ("iterations_display", "call_count"),
                    "token_detail",
                    "cancel_requested",
                    "final_answer",
                )
            },
        ),
        ("Trace", {"fields": ("trace",)}),
    )

    def get_queryset(self, request):
        calls = ToolCall.objects.filter(message__run=OuterRef("pk"))
        return (
            super()
            .get_queryset(request)
            .select_related("conversation", "profile")
            .annotate(call_count=count_of(calls, "message__run"))
        )

    @admin.display(description="conversation", ordering="conversation__title")
    def conversation_link(self, obj):
        return object_link(obj.conversation, site=self.admin_site.name)

    @admin.display(description="termination")
    def termination(self, obj):
        if obj.status == RunStatus.RUNNING:
            return "-"
        label = obj.get_status_display()
        return f"{label}: {obj.error_code}" if obj.error_code else label

    @admin.display(description="iterations", ordering="iterations")
    def iterations_display(self, obj):
        return f"{obj.iterations} / {obj.max_iterations}"

    @admin.display(description="calls", ordering="call_count")
    def call_count(self, obj):
        return obj.call_count

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, obj):
        return format_html(
            '<span title="{} in / {} out">{}</span>',
            obj.prompt_tokens,
            obj.completion_tokens,
            obj.total_tokens,
        )

    @admin.display(description="tokens")
    def token_detail(self, obj):
        return (
            f"{obj.prompt_tokens} in ({obj.cached_prompt_tokens} cached) / "
            f"{obj.completion_tokens} out ({obj.reasoning_tokens} reasoning) / "
            f"{obj.total_tokens} total"
        )

    @admin.display(description="duration")
    def duration(self, obj):
        return format_duration(duration_ms(obj.started_at, obj.finished_at)) or "-"

    @admin.display(description="final answer")
    def final_answer(self, obj):
        # ``final_content`` is being added to the model; show it once it exists.
        content = getattr(obj, "final_content", "") or ""
        return format_html("<pre>{}</pre>", content) if content else "-"

    @admin.display(description="trace")
    def trace(self, obj) -> SafeString:
        # Three queries: the run's messages, its calls, and the answers to them
        # (an answer can belong to no run, e.g. one written by recovery).
        rows = list(obj.messages.select_related("tool_call").order_by("position"))
        calls = list(ToolCall.objects.filter(message__run=obj))
        results = {
            m.tool_call_id: m for m in Message.objects.filter(tool_call__in=[c.pk for c in calls])
        }
        entries = build_transcript(rows, calls, results, site=self.admin_site.name, link_runs=False)
        return render_transcript(entries, empty="This run wrote no messages.")

    @admin.action(
        description="Recover interrupted runs (heartbeat expired)", permissions=["operate"]
    )
    def recover_interrupted_runs(self, request, queryset):
        """Through ``services.recovery.recover_runs``: only runs whose lease expired change."""
        running = list(queryset.filter(status=RunStatus.RUNNING).select_related("conversation"))
        recovered = []
        for run in running:
            recovered += recover_runs(conversation=run.conversation)
        alive = len(running) - len(recovered)
        self.message_user(
            request,
            f"Recovered {len(recovered)} run(s): marked interrupted, open calls answered.",
        )
        if alive:
            self.message_user(
                request,
                f"{alive} running run(s) still have a live heartbeat and were left alone.",
                messages.WARNING,
            )

    @admin.action(description="Cancel the selected running runs", permissions=["operate"])
    def cancel_runs(self, request, queryset):
        """Through ``services.runs.cancel_run``: each stops at its next step boundary."""
        cancelled = 0
        for run in queryset.filter(status=RunStatus.RUNNING):
            try:
                cancel_run(run=run)
            except RunNotRunning:
                continue  # it ended meanwhile
            cancelled += 1
        self.message_user(
            request,
            f"Asked {cancelled} run(s) to stop: each ends at its next step boundary "
            "(a run still waiting for a worker ends now).",
        )


# Tool calls --------------------------------------------------------------------------


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
        return (
            super()
            .get_queryset(request)
            .select_related("conversation", "message__run")
            .alias(arguments_text=Cast("arguments", output_field=TextField()))
        )

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
    search_fields = ("content",)
    readonly_fields = (
        "conversation_link",
        "position",
        "role",
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
        return super().get_queryset(request).select_related("conversation", "tool_call", "run")

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
