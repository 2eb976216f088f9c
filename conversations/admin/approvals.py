"""The approvals inbox: held tool calls with what an approver needs, approve and reject.

Each decision goes through ``decide_approval`` (the same rules as the API: an
owner-level call is decided by the conversation's owner, a staff-level one by
a holder of ``conversations.approve_toolcall`` who does not own the
conversation). Decisions are final, so the rows themselves are read-only.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from conversations.exceptions import ConversationsError
from conversations.models import ToolApproval
from conversations.services import decide_approval
from conversations.tools import registry

from .display import ReadOnlyAdmin, object_link, pretty_json

__all__ = ["PendingFilter", "ToolApprovalAdmin"]

LAST_MESSAGES = 6
"""How many of the conversation's last messages the approval page shows."""


class PendingFilter(admin.SimpleListFilter):
    """Pending approvals first: the inbox opens on what waits for a decision."""

    title = "decision"
    parameter_name = "state"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [("all", "All"), ("approved", "Approved"), ("rejected", "Rejected")]

    def choices(self, changelist: Any) -> Any:
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "Pending",
        }
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request: Any, queryset: Any) -> Any:
        value = self.value()
        if value is None:
            return queryset.filter(decision="")
        if value == "all":
            return queryset
        return queryset.filter(decision=value)


@admin.register(ToolApproval)
class ToolApprovalAdmin(ReadOnlyAdmin):
    """Tool calls waiting for (or given) a human decision."""

    list_display = (
        "tool_name",
        "level",
        "decision_label",
        "conversation_link",
        "owner",
        "requested_at",
        "expires_at",
        "decided_by",
    )
    list_select_related = ("tool_call", "run__conversation__owner", "decided_by")
    list_filter = (PendingFilter, "level")
    ordering = ("requested_at", "id")
    actions = ("approve_calls", "reject_calls")
    readonly_fields = (
        "tool_name",
        "description",
        "arguments",
        "arguments_digest",
        "level",
        "decision_label",
        "reason",
        "decided_by",
        "decided_at",
        "requested_at",
        "expires_at",
        "conversation_link",
        "last_messages",
    )
    fields = readonly_fields

    @admin.display(description="tool", ordering="tool_call__name")
    def tool_name(self, obj: ToolApproval) -> str:
        return obj.tool_call.name

    @admin.display(description="what the tool does")
    def description(self, obj: ToolApproval) -> str:
        tool = registry.get(obj.tool_call.name)
        return format_html("<pre>{}</pre>", tool.description) if tool else "(not registered)"

    @admin.display(description="arguments")
    def arguments(self, obj: ToolApproval) -> str:
        return format_html("<pre>{}</pre>", pretty_json(obj.tool_call.arguments))

    @admin.display(description="decision", ordering="decision")
    def decision_label(self, obj: ToolApproval) -> str:
        return obj.get_decision_display()

    @admin.display(description="conversation")
    def conversation_link(self, obj: ToolApproval) -> str:
        return object_link(obj.run.conversation)

    @admin.display(description="owner", ordering="run__conversation__owner")
    def owner(self, obj: ToolApproval) -> str:
        return str(obj.run.conversation.owner)

    @admin.display(description="the conversation's last messages")
    def last_messages(self, obj: ToolApproval) -> str:
        rows = list(obj.run.conversation.messages.order_by("-position")[:LAST_MESSAGES])[::-1]
        return format_html(
            "<dl>{}</dl>",
            format_html_join(
                "",
                "<dt>#{} {}</dt><dd><pre>{}</pre></dd>",
                ((m.position, m.role, m.content) for m in rows),
            ),
        )

    def _decide(self, request: HttpRequest, queryset: Any, *, approved: bool) -> None:
        done = 0
        for approval in queryset.select_related("tool_call", "run__conversation"):
            try:
                decide_approval(approval=approval, user=request.user, approved=approved)
            except ConversationsError as exc:
                label = f"{approval.tool_call.name} ({approval.tool_call.call_id})"
                self.message_user(request, f"{label}: {exc.detail}", messages.ERROR)
            else:
                done += 1
        verb = "Approved" if approved else "Rejected"
        if done:
            self.message_user(request, f"{verb} {done} tool call(s).")

    @admin.action(description="Approve the selected tool calls")
    def approve_calls(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, approved=True)

    @admin.action(description="Reject the selected tool calls")
    def reject_calls(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, approved=False)
