"""An agent's spans nest under the span of the call that started it, in the caller's trace."""

from __future__ import annotations

import pytest

from conversations.models import Conversation
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import run_tool_loop

from .test_agents import agent_calls, agent_profile, answers, key, parent  # noqa: F401
from .test_tracing import Telemetry, telemetry  # noqa: F401

pytest.importorskip("opentelemetry.sdk", reason="the dev extra pins the OpenTelemetry SDK")

from tests.fake_provider import FakeProviderServer

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_agents_invoke_agent_span_is_a_child_of_the_callers_tool_span(
    user,
    parent,  # noqa: F811
    telemetry,  # noqa: F811
):
    with FakeProviderServer(answers("found")) as server:
        parent.agents.add(agent_profile("finder", server))
        conversation = Conversation.objects.create(owner=user, profile=parent)
        provider = ScriptedProvider([agent_calls(("finder", "Find.")), scripted_text("Ok.")])
        run_tool_loop(conversation=conversation, content="Go", provider=provider)

    spans = {span.name: span for span in Telemetry.exporter.get_finished_spans()}
    lead, call = spans["invoke_agent lead"], spans["execute_tool agent_finder"]
    child, asked = spans["invoke_agent finder"], spans["chat finder-model"]
    assert call.parent.span_id == lead.context.span_id
    assert child.parent.span_id == call.context.span_id
    assert asked.parent.span_id == child.context.span_id
    assert {span.context.trace_id for span in (lead, call, child, asked)} == {lead.context.trace_id}
    assert child.attributes["gen_ai.operation.name"] == "invoke_agent"
