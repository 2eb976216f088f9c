"""The approvals inbox: pending calls with what an approver needs, and its two actions."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.domain import ToolCall
from conversations.models import Conversation, Run, ToolApproval, ToolSetting
from conversations.providers.scripted import ScriptedProvider, scripted_calls
from conversations.services import run_tool_loop
from conversations.tools import registry, tool

from .conftest import admin_url

pytestmark = pytest.mark.django_db

MAIL = ToolCall(id="c_mail", name="send_mail", arguments={"to": "<b>bob</b>@example.com"})
PAY = ToolCall(id="c_pay", name="pay", arguments={"amount": 10})


@pytest.fixture
def calls_made():
    return []


@pytest.fixture(autouse=True)
def tools(calls_made):
    with registry.isolated(empty=True) as r:

        @tool(registry=r, requires_approval=True)
        def send_mail(to: str) -> str:
            """Send a mail to someone outside."""
            calls_made.append("send_mail")
            return "sent"

        @tool(registry=r, requires_approval="staff")
        def pay(amount: int) -> str:
            """Pay an amount."""
            calls_made.append("pay")
            return "paid"

        yield r


def hold(owner, profile, *calls):
    conversation = Conversation.objects.create(owner=owner, profile=profile)
    provider = ScriptedProvider([scripted_calls(*calls)])
    run = run_tool_loop(conversation=conversation, content="please <i>go</i>", provider=provider)
    assert run.status == Run.Status.AWAITING_APPROVAL
    return conversation


def page(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def act(client, action, approvals, query=""):
    response = client.post(
        admin_url(ToolApproval, "changelist") + query,
        {"action": action, "_selected_action": [a.pk for a in approvals]},
        follow=True,
    )
    return page(response)


def test_the_inbox_lists_pending_calls(admin_client, admin_user, user, profile):
    hold(admin_user, profile, MAIL)
    listing = page(admin_client.get(admin_url(ToolApproval, "changelist")))
    assert "send_mail" in listing and "Pending" in listing
    approval = ToolApproval.objects.get()
    detail = page(admin_client.get(admin_url(approval)))
    assert "Send a mail to someone outside." in detail
    assert "&lt;b&gt;bob&lt;/b&gt;@example.com" in detail  # arguments, escaped
    assert "please &lt;i&gt;go&lt;/i&gt;" in detail  # the last messages, escaped
    assert "<b>bob</b>" not in detail


def test_the_approve_action_resumes_the_run(admin_client, admin_user, profile, calls_made):
    conversation = hold(admin_user, profile, MAIL)
    result = act(admin_client, "approve_calls", ToolApproval.objects.all())
    assert "Approved 1 tool call(s)." in result
    assert calls_made == ["send_mail"]
    assert conversation.runs.get().status == Run.Status.COMPLETED
    approval = ToolApproval.objects.get()
    assert (approval.decision, approval.decided_by) == ("approved", admin_user)
    # A decided approval leaves the default (pending) view.
    assert "send_mail" not in page(admin_client.get(admin_url(ToolApproval, "changelist")))


def test_the_reject_action(admin_client, user, profile, calls_made):
    conversation = hold(user, profile, PAY)  # staff-level, someone else's: the admin may decide
    result = act(admin_client, "reject_calls", ToolApproval.objects.all())
    assert "Rejected 1 tool call(s)." in result
    assert calls_made == []
    answer = conversation.messages.get(role="tool")
    assert answer.content == 'Error: tool "pay" was rejected by a reviewer'


def test_an_action_refuses_what_the_user_may_not_decide(admin_client, admin_user, user, profile):
    hold(user, profile, MAIL)  # owner-level: only its owner decides
    hold(admin_user, profile, PAY.__class__(id="c_pay2", name="pay", arguments={"amount": 1}))
    result = act(admin_client, "approve_calls", ToolApproval.objects.all())
    assert "(c_mail): only the conversation&#x27;s owner may decide" in result
    assert "(c_pay2): only a holder of the approve permission, not the conversation" in result
    assert set(ToolApproval.objects.values_list("decision", flat=True)) == {""}


def test_the_tool_list_shows_and_edits_the_approval_policy(admin_client):
    listing = page(admin_client.get(admin_url(ToolSetting, "changelist")))
    assert "the owner" in listing and "staff" in listing
    setting = ToolSetting.objects.get(name="send_mail")
    response = admin_client.post(
        admin_url(setting), {"enabled": "on", "approval": "never"}, follow=True
    )
    assert response.status_code == 200
    setting.refresh_from_db()
    assert setting.approval == "never"


def test_the_profile_form_sets_the_approval_policy(admin_client, profile):
    page(admin_client.get(admin_url(profile)))
    data = {
        "name": profile.name,
        "slug": profile.slug,
        "language_model": str(profile.language_model_id),
        "system_prompt": "",
        "temperature": "",
        "max_tokens": "",
        "max_iterations": "4",
        "allowed_tools": "",
        "tool_choice": "auto",
        "approval": "always",
        "context_strategy": "truncate",
        "is_active": "on",
    }
    assert admin_client.post(admin_url(profile), data).status_code == 302
    profile.refresh_from_db()
    assert profile.approval == "always"


def test_the_cancel_action_ends_a_waiting_run(admin_client, admin_user, profile, calls_made):
    conversation = hold(admin_user, profile, MAIL)
    run = conversation.runs.get()
    response = admin_client.post(
        admin_url(Run, "changelist"),
        {"action": "cancel_runs", "_selected_action": [run.pk]},
        follow=True,
    )
    assert "Asked 1 run(s) to stop" in page(response)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert calls_made == []


def test_a_bulk_action_on_a_mix_decides_only_what_the_user_may_and_reports_the_rest(
    admin_client, admin_user, user, profile, calls_made
):
    hold(user, profile, MAIL)  # owner-level, someone else's: not the admin's to decide
    mine = hold(admin_user, profile, ToolCall(id="c_mine", name="send_mail", arguments={"to": "a"}))
    hold(user, profile, PAY)  # staff-level, someone else's: the admin decides it
    decided = ToolApproval.objects.get(tool_call__call_id="c_pay")

    result = act(admin_client, "approve_calls", ToolApproval.objects.all())

    assert "Approved 2 tool call(s)." in result
    assert (
        "Skipped 1 tool call(s): send_mail (c_mail): only the conversation&#x27;s owner "
        "may decide this call." in result
    )
    assert sorted(calls_made) == ["pay", "send_mail"]
    assert mine.runs.get().status == Run.Status.COMPLETED
    assert ToolApproval.objects.get(tool_call__call_id="c_mail").decision == ""

    # Selected in the list of all, a call decided before is skipped as such, never an error.
    result = act(
        admin_client, "reject_calls", ToolApproval.objects.filter(pk=decided.pk), "?state=all"
    )
    assert "Skipped 1 tool call(s): pay (c_pay): already decided." in result
    assert ToolApproval.objects.get(pk=decided.pk).decision == "approved"


def test_a_calls_page_offers_approve_and_reject_only_to_who_may_decide_it(
    admin_client, admin_user, user, profile
):
    hold(user, profile, MAIL)
    hold(admin_user, profile, ToolCall(id="c_mine", name="send_mail", arguments={"to": "a"}))
    theirs = ToolApproval.objects.get(tool_call__call_id="c_mail")
    mine = ToolApproval.objects.get(tool_call__call_id="c_mine")

    assert 'value="approve"' not in page(admin_client.get(admin_url(theirs)))
    detail = page(admin_client.get(admin_url(mine)))
    assert 'value="approve"' in detail and 'value="reject"' in detail


def test_the_reject_button_decides_the_call_with_its_reason(
    admin_client, admin_user, profile, calls_made
):
    conversation = hold(admin_user, profile, MAIL)
    approval = ToolApproval.objects.get()
    url = reverse("admin:conversations_toolapproval_decide", args=[approval.pk])

    response = admin_client.post(url, {"decision": "reject", "reason": "Not today"}, follow=True)

    assert "Rejected send_mail." in page(response)
    approval.refresh_from_db()
    assert (approval.decision, approval.reason) == ("rejected", "Not today")
    assert calls_made == []
    assert conversation.runs.get().status == Run.Status.COMPLETED
    # Decided: the page no longer offers the buttons, and the URL refuses a second decision.
    assert 'value="approve"' not in page(admin_client.get(admin_url(approval)))
    response = admin_client.post(url, {"decision": "approve"}, follow=True)
    assert "Not decided:" in page(response)
    assert ToolApproval.objects.get().decision == "rejected"


def test_the_decide_url_refuses_another_users_owner_level_call(admin_client, user, profile):
    hold(user, profile, MAIL)
    approval = ToolApproval.objects.get()
    url = reverse("admin:conversations_toolapproval_decide", args=[approval.pk])

    page(admin_client.post(url, {"decision": "approve"}, follow=True))

    assert ToolApproval.objects.get().decision == ""
    assert admin_client.get(url).status_code == 405
