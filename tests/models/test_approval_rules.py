"""The approval rules, broken through raw SQL: the database must refuse each (both vendors).

A call whose approval is pending or rejected cannot become ``running`` or
``succeeded``; a decided approval never changes (but for its reason, cleared by
redaction). Each failing statement runs in its own savepoint so the test's
transaction stays usable.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.models import Run, ToolApproval, ToolCall

from . import sql

pytestmark = pytest.mark.django_db

DIGEST = "0" * 64


@contextmanager
def refused(*names):
    pattern = "|".join(re.escape(name) for name in names)
    with pytest.raises(IntegrityError, match=pattern), transaction.atomic():
        yield


@pytest.fixture
def run(conversation):
    return Run.objects.create(
        conversation=conversation, status=Run.Status.AWAITING_APPROVAL, max_iterations=3
    )


@pytest.fixture
def held_call(open_turn):
    _, call = open_turn
    sql.update(ToolCall, call.pk, status="awaiting_approval")
    return call


def insert_approval(call, run, **values):
    values.setdefault("level", "owner")
    values.setdefault("arguments_digest", DIGEST)
    return sql.insert(ToolApproval, tool_call_id=call.pk, run_id=sql.db_id(Run, run.pk), **values)


@pytest.mark.parametrize("status", ["running", "succeeded"])
@pytest.mark.parametrize("decision", ["", "rejected"])
def test_a_call_without_granted_approval_cannot_run(held_call, run, status, decision):
    decided = {"decided_at": timezone.now()} if decision else {}
    insert_approval(held_call, run, decision=decision, **decided)
    with refused("conversations_toolcall_approval_required"):
        sql.update(ToolCall, held_call.pk, status=status)


@pytest.mark.parametrize("status", ["rejected", "cancelled", "interrupted", "failed"])
def test_a_call_without_granted_approval_may_end_otherwise(held_call, run, status):
    insert_approval(held_call, run)
    sql.update(ToolCall, held_call.pk, status=status)
    assert ToolCall.objects.get(pk=held_call.pk).status == status


def test_an_approved_call_may_run(held_call, run):
    insert_approval(held_call, run, decision="approved", decided_at=timezone.now())
    sql.update(ToolCall, held_call.pk, status="running")
    sql.update(ToolCall, held_call.pk, status="succeeded")
    assert ToolCall.objects.get(pk=held_call.pk).status == "succeeded"


def test_a_call_without_an_approval_row_is_not_concerned(held_call):
    sql.update(ToolCall, held_call.pk, status="running")
    assert ToolCall.objects.get(pk=held_call.pk).status == "running"


def test_a_pending_approval_can_be_decided(held_call, run):
    pk = insert_approval(held_call, run)
    sql.update(ToolApproval, pk, decision="approved", decided_at=timezone.now())
    assert ToolApproval.objects.get(pk=pk).decision == "approved"


@pytest.mark.parametrize(
    "change",
    [
        {"decision": "rejected"},
        {"decision": ""},
        {"reason": "changed my mind"},
        {"arguments_digest": "1" * 64},
    ],
)
def test_a_decided_approval_never_changes(held_call, run, change):
    pk = insert_approval(held_call, run, decision="approved", decided_at=timezone.now())
    with refused("conversations_toolapproval_decision_final"):
        sql.update(ToolApproval, pk, **change)


def test_the_orm_cannot_change_a_decision_either(held_call, run):
    pk = insert_approval(held_call, run, decision="rejected", decided_at=timezone.now())
    with refused("conversations_toolapproval_decision_final"):
        ToolApproval.objects.filter(pk=pk).update(decision="approved")


@pytest.mark.parametrize(
    ("values", "constraint"),
    [
        ({"level": "admin"}, "conversations_toolapproval_level_valid"),
        ({"decision": "maybe", "decided_at": timezone.now()}, "decision_valid"),
        ({"decision": "approved"}, "conversations_toolapproval_decided_at"),
        ({"decided_at": timezone.now()}, "conversations_toolapproval_decided_at"),
        ({"reason": "why"}, "conversations_toolapproval_reason_on_rejection"),
        ({"arguments_digest": "abc"}, "conversations_toolapproval_digest_sha256"),
    ],
)
def test_approval_row_checks(held_call, run, values, constraint):
    with refused(constraint):
        insert_approval(held_call, run, **values)


def test_one_approval_per_call(held_call, run):
    insert_approval(held_call, run)
    with refused("tool_call_id", "conversations_toolapproval_tool_call_id"):
        insert_approval(held_call, run)


def test_a_waiting_run_holds_its_conversation(run, conversation):
    with refused("conversations_run_one_running", "conversation_id"):
        Run.objects.create(conversation=conversation, max_iterations=3)


def test_a_decided_approval_keeps_its_decider_unless_the_user_is_deleted(
    held_call, run, django_user_model
):
    reviewer = django_user_model.objects.create_user(username="reviewer")
    other = django_user_model.objects.create_user(username="other")
    pk = insert_approval(
        held_call, run, decision="approved", decided_at=timezone.now(), decided_by_id=reviewer.pk
    )
    with refused("conversations_toolapproval_decision_final"):
        sql.update(ToolApproval, pk, decided_by_id=other.pk)
    reviewer.delete()  # on_delete SET_NULL: the decision stays
    approval = ToolApproval.objects.get(pk=pk)
    assert (approval.decision, approval.decided_by_id) == ("approved", None)


def test_a_rejection_reason_may_be_cleared_for_redaction_and_changed_no_other_way(held_call, run):
    pk = insert_approval(
        held_call, run, decision="rejected", decided_at=timezone.now(), reason="Too risky"
    )
    with refused("conversations_toolapproval_decision_final"):
        sql.update(ToolApproval, pk, reason="[redacted] and more")
    with refused("conversations_toolapproval_decision_final"):
        sql.update(ToolApproval, pk, reason="", decision="approved")
    sql.update(ToolApproval, pk, reason="")
    approval = ToolApproval.objects.get(pk=pk)
    assert (approval.decision, approval.reason) == ("rejected", "")
    with refused("conversations_toolapproval_decision_final"):
        sql.update(ToolApproval, pk, reason="Put back")
