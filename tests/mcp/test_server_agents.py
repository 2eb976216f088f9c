"""A served profile's agents over MCP: listed, called as a run of the agent, recorded."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, MCPCall, Profile, Run

from .test_server import mcp

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _urls(settings):
    settings.ROOT_URLCONF = "tests.mcp.urls"


@pytest.fixture
def helper(served, profile):
    agent = Profile.objects.create(
        slug="helper",
        name="Helper",
        description="Answers a question.",
        language_model=profile.language_model,
    )
    profile.agents.add(agent)
    return agent


def test_a_profiles_agent_is_served_and_its_call_is_a_run_of_the_callers_own(
    helper, url, token, user
):
    async def work(client):
        listed = (await client.list_tools()).tools
        return listed, await client.call_tool("agent_helper", {"task": "Say hello."})

    listed, answer = mcp(url, token, work)

    spec = next(t for t in listed if t.name == "agent_helper")
    assert spec.description == "Answers a question."
    assert spec.input_schema["required"] == ["task"]
    run = Run.objects.get(profile=helper)
    assert run.status == Run.Status.COMPLETED and run.parent_run_id is None
    assert (answer.is_error, answer.content[0].text) == (False, run.final_content)
    conversation = Conversation.objects.get(pk=run.conversation_id)
    assert (conversation.owner_id, conversation.title) == (user.pk, "Say hello.")
    (call,) = MCPCall.objects.all()
    assert (call.tool, call.status, call.user_id) == ("agent_helper", "succeeded", user.pk)
    assert call.arguments == {"task": "Say hello."}
