"""Sub-agents: a parent's agent calls run as child runs of their own conversations.

The parent is played by a scripted provider; each child profile talks to a
fake provider of its own over HTTP (``tests.fake_provider``), so the child's
loop is the real one, adapter included. That the children of one turn run at
the same time is shown by a tool each of them calls that waits for the other
to be inside it too (a barrier), never by how long anything took.
"""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal

import pytest
from django.db.models import Sum

from conversations.domain import Role, ToolCall, Usage
from conversations.models import (
    Conversation,
    LanguageModel,
    ModelCall,
    Profile,
    Provider,
    Run,
)
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop
from conversations.services.loop.agents import AGENT_PARAMETERS
from conversations.services.loop.rounds import request_setup
from conversations.tools import ToolContext, registry, tool
from tests.fake_provider import FakeAnswer, FakeProviderServer, openai_body, openai_call
from tests.providers.replay import assert_every_adapter_accepts

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 10.0
"""Longest a child's tool waits for the other child's (never reached when they overlap)."""

PRICE = Decimal("1.000000")
"""Per million tokens, in and out, for every model here: each call of 3 + 2 tokens costs 5e-6."""


def priced_model(provider: Provider, model_id: str) -> LanguageModel:
    return LanguageModel.objects.create(
        provider=provider,
        model_id=model_id,
        input_price_per_million=PRICE,
        output_price_per_million=PRICE,
    )


def agent_profile(slug: str, server: FakeProviderServer, **fields) -> Profile:
    """A profile whose model is the fake provider ``server`` (answers whole, not streamed)."""
    record = Provider.objects.create(
        slug=f"fake-{slug}",
        name=f"Fake {slug}",
        adapter=Provider.Adapter.OPENAI_COMPATIBLE,
        base_url=server.base_url,
        api_key_ref="env:AGENTS_TEST_KEY",
    )
    return Profile.objects.create(
        slug=slug,
        name=slug.title(),
        description=f"The {slug} agent.",
        language_model=priced_model(record, f"{slug}-model"),
        stream=False,
        **fields,
    )


def calls_tool(call_id: str, name: str, **arguments) -> FakeAnswer:
    return FakeAnswer.json(
        openai_body(None, tool_calls=[openai_call(call_id, name, json.dumps(arguments))])
    )


def answers(text: str) -> FakeAnswer:
    return FakeAnswer.json(openai_body(text))


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("AGENTS_TEST_KEY", "sk-test")


@pytest.fixture
def parent(language_model):
    language_model.input_price_per_million = PRICE
    language_model.output_price_per_million = PRICE
    language_model.save()
    return Profile.objects.create(
        slug="lead", name="Lead", language_model=language_model, max_iterations=4
    )


@pytest.fixture
def meeting():
    """A tool both children call: it returns only once both are inside it."""
    barrier = threading.Barrier(2, timeout=WAIT)
    inside: list[str] = []
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def meet(who: str) -> str:
            """Wait for the other agent."""
            inside.append(who)
            barrier.wait()
            return f"{who} met the other"

        yield inside


USAGE = Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)
"""What every model call here reports (the fake provider's default too)."""


def wait_for(run, condition):
    """Until ``condition(run)`` holds, reading the run again (at most ``WAIT`` seconds)."""
    deadline = time.monotonic() + WAIT
    while not condition(run) and time.monotonic() < deadline:
        time.sleep(0.05)
        run.refresh_from_db()


def agent_calls(*pairs):
    return scripted_calls(
        *(
            ToolCall(id=f"c_{slug}", name=f"agent_{slug}", arguments={"task": task})
            for slug, task in pairs
        ),
        usage=USAGE,
    )


def test_an_agent_is_offered_as_a_tool_named_after_it(parent):
    with FakeProviderServer() as server:
        child = agent_profile("researcher", server)
    parent.agents.add(child)

    setup = request_setup(profile=parent)

    spec = next(spec for spec in setup.specs if spec.name == "agent_researcher")
    assert spec.description == "The researcher agent."
    assert spec.parameters == AGENT_PARAMETERS


def test_two_agents_of_one_turn_run_at_once_and_answer_the_parents_calls(user, parent, meeting):
    with (
        FakeProviderServer(calls_tool("m_a", "meet", who="alpha"), answers("alpha done")) as a,
        FakeProviderServer(calls_tool("m_b", "meet", who="beta"), answers("beta done")) as b,
    ):
        parent.agents.add(agent_profile("alpha", a), agent_profile("beta", b))
        conversation = Conversation.objects.create(owner=user, profile=parent)
        provider = ScriptedProvider(
            [
                agent_calls(("alpha", "Find A."), ("beta", "Find B.")),
                scripted_text("Both done.", usage=USAGE),
            ]
        )
        run = run_tool_loop(conversation=conversation, content="Go", provider=provider)

    assert run.status == Run.Status.COMPLETED and run.final_content == "Both done."
    assert sorted(meeting) == ["alpha", "beta"]  # the barrier let both through: they overlapped
    # The children's answers are the parent's results, in the order of the calls.
    tool_messages = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    assert [(m.tool_call_id, m.content, m.is_error) for m in tool_messages] == [
        ("c_alpha", "alpha done", False),
        ("c_beta", "beta done", False),
    ]
    # Each child is a conversation of the same owner, linked to the call it answers.
    for slug, task in (("alpha", "Find A."), ("beta", "Find B.")):
        call = ToolCallRow.objects.get(conversation=conversation, call_id=f"c_{slug}")
        child = Conversation.objects.get(parent_tool_call=call)
        assert (child.owner_id, child.profile.slug) == (user.pk, slug)
        history = get_history(conversation=child)
        assert (history[0].role, history[0].content) == (Role.USER, task)
        assert history[-1].content == f"{slug} done"
        child_run = Run.objects.get(conversation=child)
        assert (child_run.parent_run_id, child_run.root_run_id) == (run.pk, run.pk)
        assert child_run.status == Run.Status.COMPLETED
        assert_every_adapter_accepts(history)
    assert_every_adapter_accepts(get_history(conversation=conversation))
    # Costs: each run its own; the ledger rows under the root add up to the whole tree.
    run.refresh_from_db()
    children = Run.objects.filter(parent_run=run)
    assert run.cost == Decimal("0.00001")  # two parent calls
    assert [c.cost for c in children] == [Decimal("0.00001")] * 2  # two calls each
    tree = ModelCall.objects.filter(root_run=run).aggregate(total=Sum("cost"))["total"]
    assert tree == run.cost + sum(c.cost for c in children) == Decimal("0.00003")


def test_a_child_with_an_output_schema_answers_with_its_output(user, parent, meeting):
    from conversations.services import store_output_schema

    schema = store_output_schema(
        schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )
    with FakeProviderServer(answers('{"n": 7}')) as server:
        parent.agents.add(agent_profile("counter", server, output_schema=schema))
        conversation = Conversation.objects.create(owner=user, profile=parent)
        provider = ScriptedProvider([agent_calls(("counter", "Count.")), scripted_text("7.")])
        run_tool_loop(conversation=conversation, content="Go", provider=provider)

    (result,) = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    assert (result.content, result.is_error) == ('{"n": 7}', False)


def test_a_failed_child_answers_the_call_with_an_error_text_and_the_parent_goes_on(
    user, parent, meeting
):
    # The fake provider has nothing to answer: a 500, which fails the child's run.
    with FakeProviderServer() as server:
        parent.agents.add(agent_profile("broken", server, max_iterations=1))
        conversation = Conversation.objects.create(owner=user, profile=parent)
        provider = ScriptedProvider([agent_calls(("broken", "Try.")), scripted_text("Sorry.")])
        run = run_tool_loop(conversation=conversation, content="Go", provider=provider)

    assert run.status == Run.Status.COMPLETED
    (result,) = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    child_run = Run.objects.get(parent_run=run)
    assert child_run.status == Run.Status.FAILED
    assert result.is_error
    assert result.content == (
        f'Error: tool "agent_broken" failed: the agent failed ({child_run.error_code})'
    )


def test_a_childs_conversation_is_not_listed_but_can_be_opened(user, parent, meeting):
    from rest_framework.test import APIClient

    with FakeProviderServer(answers("done")) as server:
        parent.agents.add(agent_profile("helper", server))
        conversation = Conversation.objects.create(owner=user, profile=parent)
        provider = ScriptedProvider([agent_calls(("helper", "Help.")), scripted_text("Ok.")])
        run_tool_loop(conversation=conversation, content="Go", provider=provider)
    child = Conversation.objects.get(parent_tool_call__conversation=conversation)
    client = APIClient()
    client.force_authenticate(user)

    listed = client.get("/api/conversations/").json()["results"]

    assert [item["id"] for item in listed] == [str(conversation.pk)]
    assert client.get(f"/api/conversations/{child.pk}/").status_code == 200
    messages = client.get(f"/api/conversations/{conversation.pk}/messages/").json()["results"]
    (call,) = [c for m in messages for c in m["tool_calls"]]
    assert call["agent_conversation"] == str(child.pk)


def test_the_run_api_shows_the_children_and_the_cost_of_the_whole_tree(user, parent, meeting):
    from rest_framework.test import APIClient

    with (
        FakeProviderServer(
            calls_tool("h_1", "agent_digger", task="Dig."), answers("helped")
        ) as helper_server,
        FakeProviderServer(answers("dug")) as digger_server,
    ):
        helper = agent_profile("helper", helper_server)
        helper.agents.add(agent_profile("digger", digger_server))
        parent.agents.add(helper)
        conversation = Conversation.objects.create(owner=user, profile=parent)
        provider = ScriptedProvider(
            [agent_calls(("helper", "Help.")), scripted_text("Ok.", usage=USAGE)]
        )
        run = run_tool_loop(conversation=conversation, content="Go", provider=provider)
    client = APIClient()
    client.force_authenticate(user)

    body = client.get(f"/api/runs/{run.pk}/").json()

    helper_run = Run.objects.get(parent_run=run)
    digger_run = Run.objects.get(parent_run=helper_run)
    assert digger_run.root_run_id == run.pk
    assert body["cost"] == "0.000010000"  # its own two calls
    # and the helper's two, and the digger's one
    assert body["total_cost"] == "0.000025000"
    tree = ModelCall.objects.filter(root_run=run).aggregate(total=Sum("cost"))["total"]
    assert Decimal(body["total_cost"]) == tree
    assert body["children"] == [
        {
            "id": str(helper_run.pk),
            "conversation": str(helper_run.conversation_id),
            "profile": "helper",
            "status": "completed",
            "error_code": "",
            "cost": "0.000010000",
        }
    ]
    (call,) = body["tool_calls"]
    assert call["agent_conversation"] == str(helper_run.conversation_id)
    helper_body = client.get(f"/api/runs/{helper_run.pk}/").json()
    assert (helper_body["parent_run"], helper_body["root_run"]) == (str(run.pk), str(run.pk))
    assert helper_body["total_cost"] == "0.000015000"
    # Another user sees none of it.
    other = APIClient()
    other.force_authenticate(type(user).objects.create_user(username="eve"))
    assert other.get(f"/api/runs/{helper_run.pk}/").status_code == 404


def test_a_child_stopped_by_a_budget_answers_the_call_with_an_error_and_the_parent_ends(
    user, parent, meeting
):
    from conversations.models import Budget

    # The child's first call spends the budget; its second is refused.
    with FakeProviderServer(calls_tool("x_1", "no_such_tool"), answers("never")) as server:
        child = agent_profile("spender", server)
        Budget.objects.create(
            name="spender",
            scope=Budget.Scope.PROFILE,
            profile=child,
            period=Budget.Period.TOTAL,
            token_limit=1,
        )
        parent.agents.add(child)
        conversation = Conversation.objects.create(owner=user, profile=parent)
        provider = ScriptedProvider(
            [agent_calls(("spender", "Spend.")), scripted_text("It could not.")]
        )
        run = run_tool_loop(conversation=conversation, content="Go", provider=provider)

    child_run = Run.objects.get(parent_run=run)
    assert child_run.status == Run.Status.BUDGET_EXHAUSTED
    assert len(server.requests) == 1
    (result,) = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    assert (result.content, result.is_error) == (
        'Error: tool "agent_spender" failed: the agent was stopped by a budget',
        True,
    )
    assert (run.status, run.final_content) == (Run.Status.COMPLETED, "It could not.")
    assert_every_adapter_accepts(get_history(conversation=child_run.conversation))


def test_cancelling_the_parent_cancels_the_child_and_no_child_tool_starts_after(user, parent):
    from conversations.services import cancel_run
    from conversations.services.loop.runs import CANCEL_CHECK_INTERVAL

    started: list[str] = []
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def hold(context: ToolContext) -> str:
            """Cancel the parent of the run this call belongs to, as its user would."""
            started.append("hold")
            cancel_run(run=Run.objects.get(pk=context.run_id).parent_run)
            # Long enough for the child's next look at its flag.
            time.sleep(CANCEL_CHECK_INTERVAL + 0.2)
            return "held"

        @tool(registry=r, concurrent=False)
        def after() -> str:
            """Runs alone, after the turn's other calls: never, once cancelled."""
            started.append("after")
            return "ran"

        turn = FakeAnswer.json(
            openai_body(
                None,
                tool_calls=[openai_call("k_1", "hold", "{}"), openai_call("k_2", "after", "{}")],
            )
        )
        with FakeProviderServer(turn, answers("never asked")) as server:
            parent.agents.add(agent_profile("worker", server))
            conversation = Conversation.objects.create(owner=user, profile=parent)
            provider = ScriptedProvider([agent_calls(("worker", "Work.")), scripted_text("no")])
            run = run_tool_loop(conversation=conversation, content="Go", provider=provider)

    child_run = Run.objects.get(parent_run=run)
    assert (run.status, child_run.status) == (Run.Status.CANCELLED, Run.Status.CANCELLED)
    assert started == ["hold"]
    assert len(server.requests) == 1 and len(provider.requests) == 1
    statuses = dict(
        ToolCallRow.objects.filter(conversation=child_run.conversation).values_list(
            "call_id", "status"
        )
    )
    assert statuses == {"k_1": "succeeded", "k_2": "cancelled"}
    (result,) = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    assert result.content == 'Error: tool "agent_worker" failed: the agent was cancelled'
    assert_every_adapter_accepts(get_history(conversation=conversation))
    assert_every_adapter_accepts(get_history(conversation=child_run.conversation))


def test_an_agent_past_its_timeout_answers_timed_out_and_its_run_is_cancelled(user, parent):
    release = threading.Event()
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def stall() -> str:
            """Work until released (the test releases it once the parent has ended)."""
            release.wait(WAIT)
            return "late"

        with FakeProviderServer(calls_tool("s_1", "stall"), answers("never asked")) as server:
            parent.agents.add(agent_profile("slow", server, agent_timeout=0.5))
            conversation = Conversation.objects.create(owner=user, profile=parent)
            provider = ScriptedProvider(
                [agent_calls(("slow", "Slowly.")), scripted_text("Gave up.")]
            )
            run = run_tool_loop(conversation=conversation, content="Go", provider=provider)
            child_run = Run.objects.get(parent_run=run)
            wait_for(child_run, lambda r: r.cancel_requested)  # the agent's timeout passed
            release.set()
            wait_for(child_run, lambda r: r.status != Run.Status.RUNNING)

    assert (run.status, run.final_content) == (Run.Status.COMPLETED, "Gave up.")
    (result,) = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    assert result.content == 'Error: tool "agent_slow" timed out after 0.5 s.'
    assert (child_run.cancel_requested, child_run.status) == (True, Run.Status.CANCELLED)
    assert len(server.requests) == 1  # the child asked nothing more once cancelled


def test_an_agents_call_awaiting_approval_holds_the_parent_until_approved(user, parent):
    from rest_framework.test import APIClient

    from conversations.models import ToolApproval
    from conversations.services import decide_approval

    ran: list[str] = []
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def publish() -> str:
            """Publish the findings (the checker's profile asks its owner first)."""
            ran.append("publish")
            return "published"

        with (
            FakeProviderServer(
                calls_tool("l_1", "agent_checker", task="Check and publish."),
                answers("All published."),
            ) as lead_server,
            FakeProviderServer(calls_tool("p_1", "publish"), answers("checked")) as child_server,
        ):
            lead = agent_profile("lead2", lead_server)
            lead.agents.add(agent_profile("checker", child_server, approval="always"))
            conversation = Conversation.objects.create(owner=user, profile=lead)
            run = run_tool_loop(conversation=conversation, content="Go")

            child_run = Run.objects.get(parent_run=run)
            assert (run.status, child_run.status) == ("awaiting_approval", "awaiting_approval")
            agent_call = ToolCallRow.objects.get(conversation=conversation)
            assert agent_call.status == ToolCallRow.Status.AWAITING_APPROVAL
            assert get_history(conversation=conversation)[-1].role is not Role.TOOL
            assert ran == []
            # The inbox shows the call with the chain that led to it.
            client = APIClient()
            client.force_authenticate(user)
            (item,) = client.get("/api/approvals/").json()["results"]
            assert item["tool_call"]["name"] == "publish"
            assert item["agent_chain"] == [
                {
                    "run": str(run.pk),
                    "conversation": str(conversation.pk),
                    "profile": "lead2",
                    "agent_call": "agent_checker",
                },
                {
                    "run": str(child_run.pk),
                    "conversation": str(child_run.conversation_id),
                    "profile": "checker",
                    "agent_call": None,
                },
            ]

            decision = decide_approval(
                approval=ToolApproval.objects.get(run=child_run), user=user, approved=True
            )

    run.refresh_from_db()
    child_run.refresh_from_db()
    assert decision.resumed and ran == ["publish"]
    assert (child_run.status, run.status) == ("completed", "completed")
    assert child_run.finished_at < run.finished_at  # the child first, then the parent
    assert run.final_content == "All published."
    tool_messages = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    assert [(m.tool_call_id, m.content) for m in tool_messages] == [("l_1", "checked")]
    assert len(lead_server.requests) == 2 and len(child_server.requests) == 2
    assert_every_adapter_accepts(get_history(conversation=conversation))
    assert_every_adapter_accepts(get_history(conversation=child_run.conversation))


def test_the_parents_event_stream_carries_the_childs_progress_in_order(user, parent):
    from conversations import events
    from conversations.services import execute_run, start_run
    from tests.fake_provider import WIRES

    wire = WIRES["openai_compatible"]
    streamed = FakeAnswer(
        b"", content_type=wire.content_type, pieces=wire.stream("Fo", "und ", "it.")
    )
    with FakeProviderServer(streamed) as server:
        child = agent_profile("finder", server)
        child.stream = True
        child.save()
        parent.agents.add(child)
        conversation = Conversation.objects.create(owner=user, profile=parent)
        run = start_run(conversation=conversation, content="Go", profile=parent)
        subscription = events.subscribe(run.pk)
        try:
            provider = ScriptedProvider([agent_calls(("finder", "Find.")), scripted_text("Ok.")])
            execute_run(run=run, provider=provider)
            seen = []
            while (event := subscription.get(timeout=0.2)) is not None:
                seen.append(event)
        finally:
            subscription.close()

    child_run = Run.objects.get(parent_run=run)
    agent = [(e.type, e.data) for e in seen if e.type.startswith("agent.")]
    assert {data["run"] for _, data in agent} == {str(child_run.pk)}
    kinds = [kind for kind, _ in agent]
    assert kinds[0] == "agent.started" and kinds[-1] == "agent.finished"
    deltas = [data for kind, data in agent if kind == "agent.text.delta"]
    assert "".join(d["text"] for d in deltas) == "Found it."
    assert [d["seq"] for d in deltas] == sorted(d["seq"] for d in deltas)
    assert "agent.changed" in kinds
    assert (agent[0][1]["profile"], agent[0][1]["call_id"]) == ("finder", "c_finder")
    assert agent[-1][1]["status"] == "completed"
    # The parent's own deltas are its own answer's only.
    assert "".join(e.data["text"] for e in seen if e.type == "text.delta") == "Ok."
