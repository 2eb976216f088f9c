"""The stored history in the admin: conversations and runs, read-only.

Nothing here can edit a message or a tool call: an edit could break a call /
result pair (and the database triggers would refuse most of them anyway).
State changes go through services, as admin actions; deleting a conversation
goes through the same service as the API's delete.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import actions as admin_actions
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

from conversations import selectors
from conversations.domain.timing import duration_ms
from conversations.exceptions import ConversationBusy, RunNotRunning
from conversations.models import BUSY_RUN_STATUSES, Conversation, Message, Run, RunStatus, ToolCall
from conversations.selectors.search import matching_conversations
from conversations.services import cancel_run, delete_conversation, recover_runs
from conversations.services.loop import answer_open_calls

from .agents import cost_with_agents, run_tree
from .columns import compact_count, titled
from .display import (
    ReadOnlyAdmin,
    build_transcript,
    format_duration,
    object_link,
    pretty_json,
    render_runs,
    render_transcript,
)
from .family import render_family
from .feedback import FeedbackTagFilter, FeedbackValueFilter
from .filters import ErrorCodeFilter, LastRunStatusFilter, RunToolFilter

__all__ = ["ConversationAdmin", "RunAdmin"]


# Conversations ------------------------------------------------------------------------


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    """Conversations, read-only, with the transcript (each call beside its result).

    Deleting is left to superusers: it removes the conversation with all its
    messages, calls and runs, so whole call/result pairs go together and the
    grammar of no other conversation is touched. It goes through
    ``services.delete_conversation``, like the API: a run whose process died
    is recovered first, and a conversation with a live run is not deleted (the
    loop would fail half-way through a step).
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
    list_filter = (
        "profile",
        LastRunStatusFilter,
        "kind",
        FeedbackValueFilter,
        FeedbackTagFilter,
        "created_at",
    )
    search_fields = ("title", f"owner__{get_user_model().USERNAME_FIELD}", "id")
    search_help_text = (
        "Title, owner's user name, conversation id, or words in its messages, tool names, "
        "tool arguments or tool results."
    )
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
        ("Branches", {"fields": ("family",)}),
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
        "family",
        "runs_table",
        "transcript",
    )

    def get_search_results(self, request, queryset, search_term):
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if not search_term.strip():
            return found, duplicates
        by_content = matching_conversations(conversations=queryset, query=search_term)
        return found | by_content, duplicates

    def get_queryset(self, request):
        return selectors.admin_conversations(conversations=super().get_queryset(request))

    def has_delete_permission(self, request, obj=None):
        if not request.user.is_superuser:
            return False
        return not (obj is not None and self._is_live(obj))

    @staticmethod
    def _is_busy(conversation: Conversation) -> bool:
        """A run is running on it (alive or not: its calls may still be executing)."""
        busy = getattr(conversation, "has_running_run", None)
        if busy is None:
            busy = Run.objects.filter(conversation=conversation, status=RunStatus.RUNNING).exists()
        return bool(busy)

    @staticmethod
    def _is_live(conversation: Conversation) -> bool:
        """A run with a live heartbeat holds it: deleting would cut a step in half."""
        return (
            Conversation.objects.filter(pk=conversation.pk)
            .filter(selectors.has_live_run())
            .exists()
        )

    def get_deleted_objects(self, objs, request):
        # The history admins refuse deleting single rows (that could break a
        # pair); going with their whole conversation, they need no permission.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        history = {m._meta.verbose_name for m in (Message, ToolCall, Run)}
        return deleted, counts, perms_needed - history, protected

    def delete_model(self, request, obj):
        try:
            delete_conversation(conversation=obj)
        except ConversationBusy as exc:
            # A run started between confirmation and deletion.
            raise PermissionDenied(exc.detail) from None

    def delete_queryset(self, request, queryset):
        busy = 0
        for conversation in queryset:
            try:
                delete_conversation(conversation=conversation)
            except ConversationBusy:
                busy += 1  # a run started between confirmation and deletion
        if busy:
            self.message_user(
                request,
                f"{busy} conversation(s) with a run in progress are not deleted.",
                messages.WARNING,
            )

    @admin.action(
        description="Delete selected conversations (with their whole history)",
        permissions=["delete"],
    )
    def delete_selected(self, request, queryset):
        """Django's bulk delete, minus the conversations that have a live run."""
        live = selectors.has_live_run()
        busy = queryset.filter(live).count()
        if busy:
            self.message_user(
                request,
                f"{busy} conversation(s) with a run in progress are not deleted.",
                messages.WARNING,
            )
        deletable = queryset.exclude(live)
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

    @admin.display(description="family")
    def family(self, obj) -> SafeString:
        members = list(
            selectors.conversation_family(
                conversations=Conversation.objects.all(), conversation=obj
            )
        )
        return render_family(members, current=obj, site=self.admin_site.name)

    @admin.display(description="runs")
    def runs_table(self, obj) -> SafeString:
        return render_runs(list(obj.runs.order_by("-started_at")), site=self.admin_site.name)

    @admin.display(description="transcript")
    def transcript(self, obj) -> SafeString:
        rows, calls, results = selectors.conversation_transcript(conversation=obj)
        entries = build_transcript(rows, calls, results, site=self.admin_site.name)
        return render_transcript(entries, empty="No messages yet.")

    @admin.action(description="Answer open tool calls as interrupted", permissions=["operate"])
    def answer_open_calls_as_interrupted(self, request, queryset):
        """Through ``services.answer_open_calls``; skips conversations with a running run."""
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

    # Few, narrow columns in a fixed layout: the list fits 1280 px beside the navigation and
    # the filters. The duration, the provider and the token detail are on the run's page.
    change_list_template = "conversations/admin/run_change_list.html"
    list_display = (
        "started",
        "conversation_link",
        "outcome",
        "rounds",
        "tokens",
        "model_name",
    )
    list_display_links = ("started",)
    list_select_related = ("conversation",)
    list_filter = (
        "status",
        ErrorCodeFilter,
        "profile",
        RunToolFilter,
        FeedbackValueFilter,
        FeedbackTagFilter,
        "started_at",
        ("output_schema", admin.RelatedOnlyFieldListFilter),
    )
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
        "output_schema_link",
        "structured_output",
        "agent_costs",
        "agent_tree",
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
        (
            "Structured output",
            {
                "fields": (("structured_output", "output_schema_link"),),
                "description": "The validated JSON the run ended in, beside the schema it "
                "satisfies; a repair turn, when there was one, is the user message in the trace.",
            },
        ),
        (
            "Agents",
            {
                "fields": ("agent_costs", "agent_tree"),
                "description": "The runs its agent calls started (and the run whose call "
                "started it), with what each cost.",
            },
        ),
        ("Trace", {"fields": ("trace",)}),
    )

    def get_queryset(self, request):
        return selectors.admin_runs(runs=super().get_queryset(request))

    @admin.display(description="conversation", ordering="conversation__title")
    def conversation_link(self, obj):
        title = str(obj.conversation)
        return object_link(obj.conversation, text=titled(title), site=self.admin_site.name)

    @admin.display(description="started", ordering="started_at")
    def started(self, obj):
        when = timezone.localtime(obj.started_at)
        return titled(date_format(when, "M j, H:i"), date_format(when, "DATETIME_FORMAT"))

    @admin.display(description="status", ordering="status")
    def outcome(self, obj):
        if obj.status == RunStatus.RUNNING:
            return titled(obj.get_status_display())
        return titled(self.termination(obj))

    @admin.display(description="rounds · calls", ordering="iterations")
    def rounds(self, obj):
        return titled(
            f"{obj.iterations}/{obj.max_iterations} · {obj.call_count}",
            f"{obj.iterations} of at most {obj.max_iterations} rounds, "
            f"{obj.call_count} tool call(s)",
        )

    @admin.display(description="model", ordering="model")
    def model_name(self, obj):
        return titled(obj.model or "-", f"{obj.provider} / {obj.model}")

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
        return titled(
            compact_count(obj.total_tokens),
            f"{obj.total_tokens} ({obj.prompt_tokens} in / {obj.completion_tokens} out)",
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

    @admin.display(description="schema")
    def output_schema_link(self, obj):
        schema = obj.output_schema
        if schema is None:
            return "-"
        link = object_link(schema, site=self.admin_site.name)
        return format_html("{}<pre>{}</pre>", link, pretty_json(schema.schema))

    @admin.display(description="cost")
    def agent_costs(self, obj):
        return cost_with_agents(obj)

    @admin.display(description="run tree")
    def agent_tree(self, obj):
        return run_tree(obj, site=self.admin_site.name)

    @admin.display(description="output")
    def structured_output(self, obj):
        if obj.output_schema_id is None or obj.status != RunStatus.COMPLETED:
            return "-"
        return format_html("<pre>{}</pre>", pretty_json(obj.output))

    @admin.display(description="trace")
    def trace(self, obj) -> SafeString:
        rows, calls, results = selectors.run_trace(run=obj)
        entries = build_transcript(rows, calls, results, site=self.admin_site.name, link_runs=False)
        return render_transcript(entries, empty="This run wrote no messages.")

    @admin.action(
        description="Recover interrupted runs (heartbeat expired)", permissions=["operate"]
    )
    def recover_interrupted_runs(self, request, queryset):
        """Through ``services.recover_runs``: only runs whose lease expired change."""
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
        """Through ``services.cancel_run``: each stops at its next step boundary."""
        cancelled = 0
        # A run waiting for approvals ends at once (its held calls are answered cancelled).
        for run in queryset.filter(status__in=BUSY_RUN_STATUSES):
            try:
                cancel_run(run=run)
            except RunNotRunning:
                continue  # it ended meanwhile
            cancelled += 1
        self.message_user(
            request,
            f"Asked {cancelled} run(s) to stop: each ends at its next step boundary "
            "(a run still waiting for a worker or an approval ends now).",
        )
