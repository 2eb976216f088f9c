"""An agent's relayed events become one ``data-agent`` part per agent run, sent as it changes."""

from __future__ import annotations

from conversations.api.ai_sdk.agents import AgentParts
from conversations.events import LiveEvent


def event(kind, **data):
    return LiveEvent("parent-run", kind, data)


def test_each_agent_run_is_one_data_part_holding_its_latest_state():
    parts = AgentParts()

    chunks = [
        *parts.on_event(
            event("agent.started", run="r1", conversation="c1", profile="finder", call_id="k1")
        ),
        *parts.on_event(event("agent.text.delta", run="r1", seq=1, text="Fo")),
        *parts.on_event(event("agent.changed", run="r1")),
        *parts.on_event(event("agent.text.delta", run="r1", seq=2, text="und")),
        *parts.on_event(event("agent.tool_call.delta", run="r1", seq=3, name="search")),
        *parts.on_event(event("agent.finished", run="r1", profile="finder", status="completed")),
    ]

    assert {chunk["type"] for chunk in chunks} == {"data-agent"}
    assert {chunk["id"] for chunk in chunks} == {"r1"}
    assert [chunk["data"]["text"] for chunk in chunks] == ["", "Fo", "Found", "Found", "Found"]
    assert chunks[-1]["data"] == {
        "run": "r1",
        "conversation": "c1",
        "call_id": "k1",
        "profile": "finder",
        "status": "completed",
        "text": "Found",
        "tool": "search",
    }


def test_events_of_the_run_itself_and_events_without_a_run_make_no_part():
    parts = AgentParts()

    assert parts.on_event(event("text.delta", seq=1, text="mine")) == []
    assert parts.on_event(event("agent.text.delta", seq=1, text="whose?")) == []
