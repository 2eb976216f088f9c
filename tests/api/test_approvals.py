"""The approval endpoints: listing, approving, rejecting, and their 404/403/409 answers."""

from __future__ import annotations

import base64
import json

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from conversations.domain import ToolCall
from conversations.models import Run, ToolApproval
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls
from conversations.services import run_tool_loop
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db

MAIL = ToolCall(id="c_mail", name="send_mail", arguments={"to": "bob@example.com"})
NOW = ToolCall(id="c_now", name="clock", arguments={})
PAY = ToolCall(id="c_pay", name="pay", arguments={"amount": 10})


@pytest.fixture
def calls_made():
    return []


@pytest.fixture(autouse=True)
def tools(calls_made):
    with registry.isolated(empty=True) as r:

        @tool(registry=r, requires_approval=True)
        def send_mail(to: str) -> str:
            """Send a mail to someone."""
            calls_made.append("send_mail")
            return "sent"

        @tool(registry=r, requires_approval="staff")
        def pay(amount: int) -> str:
            """Pay an amount."""
            calls_made.append("pay")
            return "paid"

        @tool(registry=r)
        def clock() -> str:
            """The time."""
            calls_made.append("clock")
            return "12:00"

        yield r


def hold(conversation, *calls):
    run = run_tool_loop(
        conversation=conversation, content="go", provider=ScriptedProvider([scripted_calls(*calls)])
    )
    assert run.status == Run.Status.AWAITING_APPROVAL
    return run


def row(call_id):
    return ToolCallRow.objects.get(call_id=call_id)


def approve_url(call_id):
    return f"/api/tool-calls/{row(call_id).pk}/approve/"


def reject_url(call_id):
    return f"/api/tool-calls/{row(call_id).pk}/reject/"


def staff_client(django_user_model):
    approver = django_user_model.objects.create_user(username="reviewer")
    approver.user_permissions.add(Permission.objects.get(codename="approve_toolcall"))
    client = APIClient()
    client.force_authenticate(django_user_model.objects.get(pk=approver.pk))
    return client


def test_the_pending_approvals_are_listed_for_their_decider(api, other_api, demo_conversation):
    run = hold(demo_conversation, MAIL, NOW)
    body = api.get("/api/approvals/").json()
    (item,) = body["results"]
    assert item["tool_call"]["id"] == "c_mail" and item["tool_call"]["pk"] == row("c_mail").pk
    assert item["tool_call"]["arguments"] == {"to": "bob@example.com"}
    assert item["tool_call"]["status"] == "awaiting_approval"
    assert item["description"] == "Send a mail to someone."
    assert item["run"] == str(run.pk) and item["level"] == "owner"
    assert item["decision"] == "" and item["decided_by"] is None
    assert other_api.get("/api/approvals/").json()["results"] == []
    # The run's calls show the pk the endpoints take.
    calls = api.get(f"/api/runs/{run.pk}/").json()["tool_calls"]
    assert [(c["id"], c["pk"], c["status"]) for c in calls] == [
        ("c_mail", row("c_mail").pk, "awaiting_approval"),
        ("c_now", row("c_now").pk, "awaiting_approval"),
    ]


def test_a_new_message_while_waiting_is_409_approval_pending(api, demo_conversation):
    hold(demo_conversation, MAIL)
    response = api.post(
        f"/api/conversations/{demo_conversation.pk}/messages/", {"content": "hi"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["code"] == "approval_pending"


def test_approving_resumes_the_run_in_the_request(api, demo_conversation, calls_made):
    hold(demo_conversation, MAIL, NOW)
    response = api.post(approve_url("c_mail"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["approval"]["decision"] == "approved"
    assert body["approval"]["decided_by"] == "alice"
    assert body["run"]["status"] == "completed"
    # The two calls of the resumed turn run concurrently: either may start first.
    assert sorted(calls_made) == ["clock", "send_mail"]
    assert api.get("/api/approvals/").json()["results"] == []


def test_rejecting_with_a_reason(api, demo_conversation, calls_made):
    hold(demo_conversation, MAIL)
    response = api.post(reject_url("c_mail"), {"reason": "wrong person"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["approval"]["reason"] == "wrong person"
    assert calls_made == []
    answer = demo_conversation.messages.get(tool_call=row("c_mail"))
    assert answer.content == 'Error: tool "send_mail" was rejected by a reviewer: wrong person'


def test_rejecting_without_a_body(api, demo_conversation):
    hold(demo_conversation, MAIL)
    assert api.post(reject_url("c_mail")).status_code == 200
    answer = demo_conversation.messages.get(tool_call=row("c_mail"))
    assert answer.content == 'Error: tool "send_mail" was rejected by a reviewer'


def test_a_bad_reason_is_400_located(api, demo_conversation):
    hold(demo_conversation, MAIL)
    response = api.post(reject_url("c_mail"), {"reason": "x" * 2001}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/reason"
    assert ToolApproval.objects.get().decision == ""


def test_deciding_twice_is_409_already_decided(api, demo_conversation):
    hold(demo_conversation, MAIL)
    assert api.post(approve_url("c_mail")).status_code == 200
    for url in (approve_url("c_mail"), reject_url("c_mail")):
        response = api.post(url)
        assert response.status_code == 409
        assert response.json()["code"] == "already_decided"


def test_another_users_call_is_404(other_api, demo_conversation):
    hold(demo_conversation, MAIL)
    for url in (approve_url("c_mail"), reject_url("c_mail"), "/api/tool-calls/999999/approve/"):
        response = other_api.post(url)
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
    assert ToolApproval.objects.get().decision == ""


def test_a_call_needing_no_approval_is_409_no_approval(api, demo_conversation):
    hold(demo_conversation, MAIL, NOW)
    response = api.post(approve_url("c_now"))
    assert response.status_code == 409 and response.json()["code"] == "no_approval"


def test_a_staff_level_call_is_403_for_its_owner(
    api, demo_conversation, django_user_model, calls_made
):
    hold(demo_conversation, PAY)
    response = api.post(approve_url("c_pay"))
    assert response.status_code == 403
    assert response.json()["code"] == "approval_forbidden"
    assert api.get("/api/approvals/").json()["results"] == []
    reviewer = staff_client(django_user_model)
    (item,) = reviewer.get("/api/approvals/").json()["results"]
    assert item["level"] == "staff"
    response = reviewer.post(approve_url("c_pay"))
    assert response.status_code == 200, response.content
    assert calls_made == ["pay"]


def test_the_permission_does_not_reach_owner_level_calls(demo_conversation, django_user_model):
    hold(demo_conversation, MAIL)
    reviewer = staff_client(django_user_model)
    assert reviewer.get("/api/approvals/").json()["results"] == []
    assert reviewer.post(approve_url("c_mail")).status_code == 404


def test_anonymous_is_refused(anonymous, demo_conversation):
    hold(demo_conversation, MAIL)
    assert anonymous.post(approve_url("c_mail")).status_code in (401, 403)
    assert anonymous.get("/api/approvals/").status_code in (401, 403)


# The run's event stream --------------------------------------------------------------------


def test_the_event_stream_shows_requests_then_decisions(api, demo_conversation):
    from conversations.api.sse.views import STRIDE, RunEventStream

    run = hold(demo_conversation, MAIL, NOW)
    stream = RunEventStream(run.pk)
    waiting = stream.poll()
    assert [(e.id, e.type) for e in waiting] == [
        (0, "run_started"),
        (STRIDE + 1, "assistant_turn"),
        (STRIDE + 33_000, "approval.requested"),
    ]
    request = waiting[-1].data
    assert request["position"] == 1 and request["approval"]["tool_call"]["id"] == "c_mail"
    assert request["approval"]["decision"] == ""
    assert not stream.finished  # a waiting run has not ended
    assert stream.poll() == []
    api.post(approve_url("c_mail"))
    after = stream.poll()
    kinds = [e.type for e in after]
    assert kinds[:3] == ["approval.decided", "tool_call_finished", "tool_call_finished"]
    assert after[0].id == STRIDE + 66_000
    assert after[0].data["approval"]["decision"] == "approved"
    assert kinds[-1] == "run_finished" and stream.finished
    # Ids only grow, and a client resuming after any of them gets exactly the rest.
    everything = RunEventStream(run.pk).poll()
    assert [e.id for e in everything] == sorted(e.id for e in everything)
    assert [e.id for e in everything] == [e.id for e in waiting + after]
    for event in everything:
        rest = RunEventStream(run.pk, after=event.id).poll()
        assert [e.id for e in rest] == [e.id for e in everything if e.id > event.id]


def test_listing_approvals_costs_the_same_for_one_or_many(
    api, user, profile, django_assert_max_num_queries
):
    from conversations.models import Conversation

    for n in range(5):
        conversation = Conversation.objects.create(owner=user, profile=profile)
        call = ToolCall(id=f"c_mail_{n}", name="send_mail", arguments={"to": f"{n}@example.com"})
        hold(conversation, call)
    with django_assert_max_num_queries(4):
        body = api.get("/api/approvals/").json()["results"]
    assert [item["tool_call"]["id"] for item in body] == [f"c_mail_{n}" for n in range(5)]


@pytest.mark.parametrize("tool_call_id", ["0", str(2**63), "9" * 19, "99999999999999999999"])
def test_an_id_no_row_can_have_is_the_json_404(api, tool_call_id):
    for action in ("approve", "reject"):
        response = api.post(f"/api/tool-calls/{tool_call_id}/{action}/", {}, format="json")
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_reviewers_answer_is_the_decision_and_the_call_not_the_owners_run(
    api, demo_conversation, django_user_model, decision
):
    hold(demo_conversation, PAY)
    reviewer = staff_client(django_user_model)
    url = approve_url("c_pay") if decision == "approve" else reject_url("c_pay")
    response = reviewer.post(url, {"reason": "no"} if decision == "reject" else None, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"approval"}
    assert body["approval"]["decision"] == ("approved" if decision == "approve" else "rejected")
    assert body["approval"]["tool_call"]["id"] == "c_pay"
    # Nothing of the owner's messages: no user text, no answer, no other call.
    assert "go" not in json.dumps(body) and "messages" not in json.dumps(body)


def test_the_owners_answer_keeps_the_run(api, demo_conversation):
    hold(demo_conversation, MAIL)
    body = api.post(approve_url("c_mail")).json()
    assert set(body) == {"approval", "run"}
    assert body["run"]["status"] == "completed"
    assert body["approval"]["decision"] == "approved"


def test_the_approvals_are_paginated_oldest_first(api, user, profile):
    from conversations.models import Conversation

    for n in range(3):
        conversation = Conversation.objects.create(owner=user, profile=profile)
        hold(conversation, ToolCall(id=f"c_{n}", name="send_mail", arguments={"to": f"{n}@x"}))
    first = api.get("/api/approvals/", {"page_size": 2}).json()
    assert [item["tool_call"]["id"] for item in first["results"]] == ["c_0", "c_1"]
    assert first["previous"] is None and first["next"]
    second = api.get(first["next"]).json()
    assert [item["tool_call"]["id"] for item in second["results"]] == ["c_2"]
    assert second["next"] is None and second["previous"]


def test_a_forged_approvals_cursor_is_a_400_naming_it(api):
    forged = base64.b64encode(b"p=not-a-time").decode()
    response = api.get("/api/approvals/", {"cursor": forged})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_cursor"
    assert body["errors"][0]["parameter"] == "cursor"
    assert body["detail"].startswith('Parameter "cursor": ')
