"""The approvals inbox: held tool calls with what an approver needs, approve and reject.

Each decision goes through ``decide_approval`` (the same rules as the API: an
owner-level call is decided by the conversation's owner, a staff-level one by
a holder of ``conversations.approve_toolcall`` who does not own the
conversation). Decisions are final, so the rows themselves are read-only.

The inbox offers only what the viewer can do: the bulk actions decide the
selected calls the viewer may decide and report the others as skipped, with
why; a call's page has Approve and Reject buttons only while it is pending
and the viewer may decide it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from conversations.exceptions import ConversationsError
from conversations.models import ToolApproval
from conversations.services import decide_approval
from conversations.services.approvals import can_decide
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
    change_form_template = "conversations/admin/toolapproval_change_form.html"

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
        done, skipped = 0, []
        for approval in queryset.select_related("tool_call", "run__conversation"):
            label = f"{approval.tool_call.name} ({approval.tool_call.call_id})"
            why = _why_not(approval, request.user)
            if why is None:
                try:
                    decide_approval(approval=approval, user=request.user, approved=approved)
                except ConversationsError as exc:  # decided meanwhile, by someone else
                    why = exc.detail
                else:
                    done += 1
                    continue
            skipped.append(f"{label}: {why}")
        verb = "Approved" if approved else "Rejected"
        if done:
            self.message_user(request, f"{verb} {done} tool call(s).")
        if skipped:
            self.message_user(
                request,
                f"Skipped {len(skipped)} tool call(s): " + "; ".join(skipped) + ".",
                messages.WARNING,
            )

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        approval = self.get_object(request, object_id)
        decidable = approval is not None and _why_not(approval, request.user) is None
        context = {**(extra_context or {}), "can_decide": decidable}
        return super().change_view(request, object_id, form_url, context)

    def get_urls(self) -> list[URLPattern]:
        decide = path(
            "<path:object_id>/decide/",
            self.admin_site.admin_view(require_POST(self.decide_view)),
            name="conversations_toolapproval_decide",
        )
        return [decide, *super().get_urls()]

    def decide_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Approve or reject one call from its page (``decision``: ``approve`` or ``reject``)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        approval = self.get_object(request, object_id)
        if approval is None:
            raise Http404("No such approval.")
        decision = request.POST.get("decision")
        if decision not in ("approve", "reject"):
            self.message_user(request, "decision must be approve or reject.", messages.ERROR)
        else:
            try:
                decide_approval(
                    approval=approval,
                    user=request.user,
                    approved=decision == "approve",
                    reason=request.POST.get("reason", "").strip(),
                )
            except ConversationsError as exc:
                self.message_user(request, f"Not decided: {exc.detail}", messages.ERROR)
            else:
                verb = "Approved" if decision == "approve" else "Rejected"
                self.message_user(request, f"{verb} {approval.tool_call.name}.")
        url = reverse("admin:conversations_toolapproval_change", args=[approval.pk])
        return HttpResponseRedirect(url)

    @admin.action(description="Approve the selected tool calls")
    def approve_calls(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, approved=True)

    @admin.action(description="Reject the selected tool calls")
    def reject_calls(self, request: HttpRequest, queryset: Any) -> None:
        self._decide(request, queryset, approved=False)


def _why_not(approval: ToolApproval, user: Any) -> str | None:
    """Why ``user`` cannot decide ``approval`` now; ``None`` when they can."""
    if approval.decision:
        return "already decided"
    if can_decide(approval=approval, user=user):
        return None
    if approval.level == ToolApproval.Level.OWNER:
        return "only the conversation's owner may decide this call"
    return (
        "only a holder of the approve permission, not the conversation's owner, "
        "may decide this call"
    )
