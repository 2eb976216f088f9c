"""Approval of tool calls: the policy, the held turn, decisions, resumption, expiry, cancel."""

from __future__ import annotations

import io
import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone

from conversations import signals
from conversations.domain import Role, ToolCall
from conversations.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalForbidden,
    ApprovalPending,
    InvalidArgumentError,
)
from conversations.models import (
    ApprovalPolicy,
    LanguageModel,
    Profile,
    Provider,
    Run,
    ToolApproval,
    ToolSetting,
)
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import (
    approval_required,
    cancel_run,
    decide_approval,
    execute_run,
    recover_runs,
    run_tool_loop,
)
from conversations.services.approvals import arguments_digest, expire_approvals
from conversations.services.transcript.messages import create_conversation
from conversations.tasks import recover_and_requeue
from conversations.tools import Tool, registry, tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls_made():
    return []


@pytest.fixture
def tools(calls_made):
    with registry.isolated(empty=True) as r:

        @tool(registry=r, requires_approval=True)
        def send_mail(to: str) -> str:
            """Send a mail."""
            calls_made.append(("send_mail", to))
            return f"sent to {to}"

        @tool(registry=r, requires_approval="staff")
        def pay(amount: int) -> str:
            """Pay an amount."""
            calls_made.append(("pay", amount))
            return f"paid {amount}"

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            calls_made.append(("add", a, b))
            return a + b

        yield r


def make_profile(**kwargs):
    provider = Provider.objects.create(slug="p", name="p", adapter=Provider.Adapter.DEMO)
    model = LanguageModel.objects.create(provider=provider, model_id="demo")
    return Profile.objects.create(slug="prof", name="prof", language_model=model, **kwargs)


def held_run(conversation, *calls, profile=None):
    """A run whose first turn asks for ``calls`` (ToolCall values); it waits for approval."""
    provider = ScriptedProvider([scripted_calls(*calls)])
    return run_tool_loop(
        conversation=conversation, content="do it", provider=provider, profile=profile
    )


def tool_texts(conversation):
    return [m.content for m in get_history(conversation=conversation) if m.role is Role.TOOL]


MAIL = ToolCall(id="c_mail", name="send_mail", arguments={"to": "bob@example.com"})
ADD = ToolCall(id="c_add", name="add", arguments={"a": 2, "b": 3})
PAY = ToolCall(id="c_pay", name="pay", arguments={"amount": 10})


# Policy ---------------------------------------------------------------------------------


def test_the_decorator_declares_the_level(tools):
    assert approval_required(profile=None, tool=tools["send_mail"]) == "owner"
    assert approval_required(profile=None, tool=tools["pay"]) == "staff"
    assert approval_required(profile=None, tool=tools["add"]) is None


def test_an_unknown_level_is_refused_at_declaration():
    with pytest.raises(InvalidArgumentError, match="requires_approval"):
        Tool.from_function(lambda: "x", name="x", requires_approval="admins")


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("default", "owner"), ("always", "owner"), ("staff", "staff"), ("never", None)],
)
def test_a_tool_setting_overrides_the_decorator(tools, setting, expected):
    ToolSetting.objects.create(name="send_mail", approval=setting)
    assert approval_required(profile=None, tool=tools["send_mail"]) == expected


@pytest.mark.parametrize(
    ("policy", "expected_mail", "expected_add"),
    [("default", "staff", None), ("always", "owner", "owner"), ("never", None, None)],
)
def test_the_profile_overrides_the_tool_setting(tools, policy, expected_mail, expected_add):
    ToolSetting.objects.create(name="send_mail", approval=ApprovalPolicy.STAFF)
    profile = make_profile(approval=policy)
    assert approval_required(profile=profile, tool=tools["send_mail"]) == expected_mail
    assert approval_required(profile=profile, tool=tools["add"]) == expected_add


def test_the_digest_is_of_the_canonical_arguments():
    assert arguments_digest({"b": 1, "a": "é"}) == arguments_digest({"a": "é", "b": 1})
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})
    assert len(arguments_digest({})) == 64


# The held turn ------------------------------------------------------------------------------


def test_a_turn_with_one_call_needing_approval_is_held_whole(conversation, tools, calls_made):
    requested = []

    def on_request(**kw):
        requested.append(kw["approval"])

    signals.approval_requested.connect(on_request)
    try:
        run = held_run(conversation, MAIL, ADD)
    finally:
        signals.approval_requested.disconnect(on_request)
    assert run.status == Run.Status.AWAITING_APPROVAL
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL and run.claimed_at is None
    assert calls_made == []
    statuses = dict(ToolCallRow.objects.values_list("call_id", "status"))
    assert statuses == {"c_mail": "awaiting_approval", "c_add": "awaiting_approval"}
    (approval,) = ToolApproval.objects.all()
    assert approval.tool_call.call_id == "c_mail" and approval.level == "owner"
    assert approval.arguments_digest == arguments_digest({"to": "bob@example.com"})
    assert approval.decision == "" and approval.expires_at is None
    assert requested == [approval]
    # Recovery never takes the waiting run for dead, and the conversation stays busy.
    assert recover_runs(now=timezone.now() + timedelta(days=30)) == []
    with pytest.raises(ApprovalPending):
        run_tool_loop(conversation=conversation, content="again", provider=ScriptedProvider([]))


def test_after_approval_both_calls_run_and_the_loop_goes_on(conversation, tools, calls_made, user):
    run = held_run(conversation, MAIL, ADD)
    approval = ToolApproval.objects.get()
    provider = ScriptedProvider([scripted_text("Mail sent, 5.")])
    decided = []

    def on_decision(**kw):
        decided.append(kw["approval"])

    signals.approval_decided.connect(on_decision)
    try:
        decision = decide_approval(approval=approval, user=user, approved=True, provider=provider)
    finally:
        signals.approval_decided.disconnect(on_decision)
    assert decision.resumed
    assert decision.run.status == Run.Status.COMPLETED
    assert decision.run.final_content == "Mail sent, 5."
    # The turn's calls run concurrently: which one starts first is the scheduler's choice.
    assert sorted(calls_made) == [("add", 2, 3), ("send_mail", "bob@example.com")]
    assert tool_texts(conversation) == ["sent to bob@example.com", "5"]
    statuses = set(ToolCallRow.objects.values_list("status", flat=True))
    assert statuses == {"succeeded"}
    approval.refresh_from_db()
    assert (approval.decision, approval.decided_by) == ("approved", user)
    assert decided == [approval]
    assert run.pk == decision.run.pk


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("", 'Error: tool "send_mail" was rejected by a reviewer'),
        ("  not to Bob  ", 'Error: tool "send_mail" was rejected by a reviewer: not to Bob'),
    ],
)
def test_a_rejection_is_what_the_model_reads(
    conversation, tools, calls_made, user, reason, expected
):
    held_run(conversation, MAIL, ADD)
    provider = ScriptedProvider([scripted_text("Understood.")])
    decision = decide_approval(
        approval=ToolApproval.objects.get(),
        user=user,
        approved=False,
        reason=reason,
        provider=provider,
    )
    assert decision.run.status == Run.Status.COMPLETED
    assert calls_made == [("add", 2, 3)]
    assert tool_texts(conversation) == [expected, "5"]
    assert provider.requests[0].messages[-2].content == expected
    mail = ToolCallRow.objects.get(call_id="c_mail")
    assert mail.status == ToolCallRow.Status.REJECTED


def test_the_run_resumes_only_after_the_last_approval(conversation, tools, calls_made, user):
    second = ToolCall(id="c_mail2", name="send_mail", arguments={"to": "eve@example.com"})
    held_run(conversation, MAIL, second)
    first, last = ToolApproval.objects.order_by("tool_call__index")
    provider = ScriptedProvider([scripted_text("done")])
    decision = decide_approval(approval=first, user=user, approved=True, provider=provider)
    assert not decision.resumed and decision.run.status == Run.Status.AWAITING_APPROVAL
    assert calls_made == []
    decision = decide_approval(approval=last, user=user, approved=False, provider=provider)
    assert decision.resumed and decision.run.status == Run.Status.COMPLETED
    assert calls_made == [("send_mail", "bob@example.com")]


def test_a_decision_is_final(conversation, tools, user):
    held_run(conversation, MAIL)
    approval = ToolApproval.objects.get()
    decide_approval(
        approval=approval, user=user, approved=True, provider=ScriptedProvider([scripted_text(".")])
    )
    with pytest.raises(ApprovalAlreadyDecided):
        decide_approval(approval=ToolApproval.objects.get(), user=user, approved=False)


def test_the_owner_cannot_decide_a_staff_level_call(
    conversation, tools, calls_made, user, other_user
):
    held_run(conversation, PAY)
    approval = ToolApproval.objects.get()
    assert approval.level == "staff"
    user.user_permissions.add(Permission.objects.get(codename="approve_toolcall"))
    user = type(user).objects.get(pk=user.pk)  # fresh permission cache
    with pytest.raises(ApprovalForbidden):
        decide_approval(approval=approval, user=user, approved=True)
    with pytest.raises(ApprovalForbidden):  # without the permission
        decide_approval(approval=approval, user=other_user, approved=True)
    other_user.user_permissions.add(Permission.objects.get(codename="approve_toolcall"))
    other_user = type(other_user).objects.get(pk=other_user.pk)
    provider = ScriptedProvider([scripted_text("paid")])
    decision = decide_approval(approval=approval, user=other_user, approved=True, provider=provider)
    assert decision.run.status == Run.Status.COMPLETED
    assert calls_made == [("pay", 10)]


def test_someone_else_cannot_decide_an_owner_level_call(conversation, tools, other_user):
    held_run(conversation, MAIL)
    with pytest.raises(ApprovalForbidden):
        decide_approval(approval=ToolApproval.objects.get(), user=other_user, approved=True)


def test_a_profile_turns_approval_off_and_on(conversation, tools, calls_made):
    profile = make_profile(approval=ApprovalPolicy.NEVER)
    provider = ScriptedProvider([scripted_calls(MAIL), scripted_text("sent")])
    run = run_tool_loop(conversation=conversation, content="x", profile=profile, provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert calls_made == [("send_mail", "bob@example.com")]
    profile.approval = ApprovalPolicy.ALWAYS
    profile.save()
    run = held_run(
        conversation,
        ADD.__class__(id="c_add2", name="add", arguments={"a": 1, "b": 1}),
        profile=profile,
    )
    assert run.status == Run.Status.AWAITING_APPROVAL
    assert ToolApproval.objects.get().tool_call.name == "add"
    assert calls_made == [("send_mail", "bob@example.com")]


def test_changed_arguments_are_not_run(conversation, tools, calls_made, user):
    held_run(conversation, MAIL)
    # Only a bug or a hand edit could do this; the digest still refuses to run it.
    ToolCallRow.objects.filter(call_id="c_mail").update(arguments={"to": "mallory@example.com"})
    provider = ScriptedProvider([scripted_text("ok")])
    decide_approval(
        approval=ToolApproval.objects.get(), user=user, approved=True, provider=provider
    )
    assert calls_made == []
    assert tool_texts(conversation) == [
        'Error: tool "send_mail" was not run: its arguments changed after approval'
    ]


# Expiry, cancellation, crashes -----------------------------------------------------------------


def test_an_expired_approval_is_rejected_and_the_run_resumes(
    settings, conversation, tools, calls_made
):
    settings.CONVERSATIONS = {"APPROVAL_TIMEOUT_SECONDS": 60}
    held_run(conversation, MAIL, ADD)
    approval = ToolApproval.objects.get()
    assert approval.expires_at is not None
    assert expire_approvals(now=timezone.now()) == []  # not yet
    # The run resumes with the profile's provider: the demo adapter answers offline.
    Run.objects.update(profile=make_profile())
    (decision,) = expire_approvals(now=timezone.now() + timedelta(seconds=61))
    approval.refresh_from_db()
    assert (approval.decision, approval.reason, approval.decided_by) == (
        "rejected",
        "approval timed out",
        None,
    )
    assert decision.run.status == Run.Status.COMPLETED
    assert calls_made == [("add", 2, 3)]
    assert tool_texts(conversation)[0] == (
        'Error: tool "send_mail" was rejected by a reviewer: approval timed out'
    )


def test_cancel_while_waiting_answers_the_held_calls(conversation, tools, calls_made, user):
    run = held_run(conversation, MAIL, ADD)
    run = cancel_run(run=run)
    assert run.status == Run.Status.CANCELLED
    assert calls_made == []
    assert set(ToolCallRow.objects.values_list("status", flat=True)) == {"cancelled"}
    assert tool_texts(conversation) == [
        'Error: tool "send_mail" was cancelled and did not complete.',
        'Error: tool "add" was cancelled and did not complete.',
    ]
    approval = ToolApproval.objects.get()
    assert (approval.decision, approval.reason) == ("rejected", "run cancelled")
    with pytest.raises(ApprovalAlreadyDecided):
        decide_approval(approval=approval, user=user, approved=True)
    # The conversation is free again.
    run = run_tool_loop(
        conversation=conversation, content="hi", provider=ScriptedProvider([scripted_text("hi")])
    )
    assert run.status == Run.Status.COMPLETED


class Killed(BaseException):
    """Stands for the process dying."""


def test_a_process_killed_between_approval_and_execution(conversation, tools, calls_made, user):
    run = held_run(conversation, MAIL)

    def die(**kwargs):
        raise Killed

    signals.approval_decided.connect(die, weak=False)
    try:
        with pytest.raises(Killed):
            decide_approval(approval=ToolApproval.objects.get(), user=user, approved=True)
    finally:
        signals.approval_decided.disconnect(die)
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.claimed_at is None
    # The lease runs out: recovery answers the call instead of running it.
    (recovered,) = recover_runs(now=timezone.now() + timedelta(days=1))
    assert recovered.status == Run.Status.INTERRUPTED
    assert execute_run(run=run, provider=ScriptedProvider([])).status == Run.Status.INTERRUPTED
    assert calls_made == []
    assert ToolCallRow.objects.get().status == ToolCallRow.Status.INTERRUPTED


def test_a_process_killed_while_the_approved_tool_runs(conversation, tools, calls_made, user):
    held_run(conversation, MAIL)

    def die(**kwargs):
        raise Killed

    signals.tool_call_finished.connect(die, weak=False)
    try:
        with pytest.raises(Killed):
            decide_approval(
                approval=ToolApproval.objects.get(),
                user=user,
                approved=True,
                provider=ScriptedProvider([]),
            )
    finally:
        signals.tool_call_finished.disconnect(die)
    run = Run.objects.get()
    recover_runs(now=timezone.now() + timedelta(days=1))
    assert execute_run(run=run, provider=ScriptedProvider([])).status != Run.Status.RUNNING
    assert calls_made == [("send_mail", "bob@example.com")]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("decisions", [(True, True), (True, False)])
def test_two_approvers_racing_store_one_decision(tools, calls_made, decisions):
    owner = get_user_model().objects.create_user("racer")
    conversation = create_conversation(owner=owner)
    held_run(conversation, MAIL)
    approval = ToolApproval.objects.get()
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def approver(approved):
        from django.db import connection as thread_connection

        try:
            mine = ToolApproval.objects.select_related("run__conversation").get(pk=approval.pk)
            barrier.wait(5)
            outcomes.append(
                decide_approval(
                    approval=mine,
                    user=owner,
                    approved=approved,
                    provider=ScriptedProvider([scripted_text("done")]),
                )
            )
        except ApprovalAlreadyDecided as exc:
            outcomes.append(exc)
        finally:
            thread_connection.close()

    threads = [threading.Thread(target=approver, args=(d,)) for d in decisions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    refused = [o for o in outcomes if isinstance(o, ApprovalAlreadyDecided)]
    (decision,) = [o for o in outcomes if not isinstance(o, ApprovalAlreadyDecided)]
    assert len(refused) == 1
    assert decision.resumed and decision.run.status == Run.Status.COMPLETED
    stored = ToolApproval.objects.get()
    assert stored.decision == decision.approval.decision
    ran = [("send_mail", "bob@example.com")] if stored.decision == "approved" else []
    assert calls_made == ran
    assert ToolCallRow.objects.get().results.count() == 1


def test_recover_runs_rejects_expired_approvals(settings, conversation, tools, calls_made):
    settings.CONVERSATIONS = {"APPROVAL_TIMEOUT_SECONDS": 1}
    held_run(conversation, MAIL)
    Run.objects.update(profile=make_profile())
    ToolApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    out = io.StringIO()
    call_command("recover_runs", stdout=out)
    assert "rejected expired approval" in out.getvalue()
    assert ToolApproval.objects.get().reason == "approval timed out"
    assert Run.objects.get().status == Run.Status.COMPLETED
    assert calls_made == []


def test_the_periodic_task_rejects_expired_approvals(conversation, tools):
    held_run(conversation, MAIL)
    Run.objects.update(profile=make_profile())
    ToolApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert recover_and_requeue(requeue=False) == {"expired": 1, "requeued": 0, "interrupted": 0}
    assert Run.objects.get().status == Run.Status.COMPLETED


@pytest.mark.parametrize("value", [0, -5, "1h", True, 1.5])
def test_a_bad_approval_timeout_is_reported_by_a_check(settings, value):
    from conversations.checks import check_settings

    settings.CONVERSATIONS = {"APPROVAL_TIMEOUT_SECONDS": value}
    (message,) = check_settings()
    assert message.id == "conversations.E001" and "APPROVAL_TIMEOUT_SECONDS" in message.msg


@pytest.mark.parametrize("value", [None, 1, 3600])
def test_a_good_approval_timeout_passes_the_checks(settings, value):
    from conversations.checks import check_settings

    settings.CONVERSATIONS = {"APPROVAL_TIMEOUT_SECONDS": value}
    assert check_settings() == []


def test_the_policy_costs_one_query_and_none_when_the_profile_decides(
    tools, django_assert_num_queries
):
    from conversations.services.approvals import approval_levels

    with django_assert_num_queries(1):
        assert approval_levels(profile=None, tools=tools.all()) == {
            "send_mail": "owner",
            "pay": "staff",
        }
    profile = make_profile(approval=ApprovalPolicy.NEVER)
    with django_assert_num_queries(0):
        assert approval_levels(profile=profile, tools=tools.all()) == {}


def test_a_refused_call_of_a_held_turn_gets_no_approval(conversation, tools, calls_made, user):
    bad = ToolCall(id="c_bad", name="send_mail", arguments={"to": 5})
    held_run(conversation, MAIL, bad)
    (approval,) = ToolApproval.objects.all()
    assert approval.tool_call.call_id == "c_mail"
    provider = ScriptedProvider([scripted_text("ok")])
    decide_approval(approval=approval, user=user, approved=True, provider=provider)
    assert calls_made == [("send_mail", "bob@example.com")]
    assert tool_texts(conversation)[1].startswith('Error: invalid arguments for tool "send_mail"')
