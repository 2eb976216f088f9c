"""The offline providers: the deterministic demo model and the scripted test provider."""

import pytest

from conversations.domain import ChatMessage, CompletionResponse, ToolSpec, Usage
from conversations.providers.base import ChatProvider, CompletionOptions
from conversations.providers.demo import HELP_TEXT, DemoProvider
from conversations.providers.scripted import (
    ScriptedProvider,
    ScriptExhausted,
    scripted_calls,
    scripted_text,
)

OPTIONS = CompletionOptions(model="demo")
DEMO_TOOLS = [ToolSpec("get_weather"), ToolSpec("get_current_time"), ToolSpec("calculate")]


def plan(text, tools=DEMO_TOOLS):
    response = DemoProvider().complete([ChatMessage.user(text)], tools=tools, options=OPTIONS)
    return [(c.name, dict(c.arguments)) for c in response.tool_calls or ()], response


def test_both_providers_satisfy_the_protocol():
    assert isinstance(DemoProvider(), ChatProvider)
    assert isinstance(ScriptedProvider(), ChatProvider)


def test_demo_question_gives_two_parallel_calls():
    calls, response = plan("What's the weather in Leipzig and what time is it?")
    assert calls == [("get_weather", {"city": "Leipzig"}), ("get_current_time", {})]
    assert response.finish_reason == "tool_calls"
    assert len({c.id for c in response.tool_calls}) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("weather in New York please", [("get_weather", {"city": "New York"})]),
        (
            "What time is it in Europe/Berlin?",
            [("get_current_time", {"timezone": "Europe/Berlin"})],
        ),
        (
            "calculate 2 * (3 + 4) and 10/4",
            [("calculate", {"expression": "2 * (3 + 4)"}), ("calculate", {"expression": "10/4"})],
        ),
    ],
)
def test_demo_rules(text, expected):
    assert plan(text)[0] == expected


def test_demo_only_calls_offered_tools_and_otherwise_explains_itself():
    calls, response = plan("What's the weather in Leipzig?", tools=[])
    assert calls == []
    assert response.content == HELP_TEXT
    assert response.tool_calls is None


def test_demo_answers_from_the_results():
    _, first = plan("What's the weather in Leipzig and what time is it?")
    weather, clock = first.tool_calls
    history = [
        ChatMessage.user("What's the weather in Leipzig and what time is it?"),
        first.to_message(),
        ChatMessage.tool_result(
            weather.id, '{"city": "Leipzig", "temperature_celsius": 4, "conditions": "foggy"}'
        ),
        ChatMessage.tool_result(clock.id, 'Error: tool "get_current_time" failed.'),
    ]
    answer = DemoProvider().complete(history, tools=DEMO_TOOLS, options=OPTIONS)
    assert answer.tool_calls is None
    assert "In Leipzig it is 4 °C" in answer.content
    assert 'I could not use get_current_time: tool "get_current_time" failed.' in answer.content
    assert answer.usage.prompt_tokens > 0


def test_scripted_plays_entries_in_order_and_records_requests():
    boom = RuntimeError("scripted failure")
    provider = ScriptedProvider(
        [
            scripted_calls(("get_weather", {"city": "Paris"}), usage=Usage(3, 1)),
            boom,
            lambda messages, tools, options: scripted_text(f"{len(messages)} messages"),
        ]
    )
    first = provider.complete([ChatMessage.user("a")], tools=DEMO_TOOLS, options=OPTIONS)
    assert first.tool_calls[0].name == "get_weather"
    assert first.finish_reason == "tool_calls"
    with pytest.raises(RuntimeError, match="scripted failure"):
        provider.complete([ChatMessage.user("b")], options=OPTIONS)
    third = provider.complete([ChatMessage.user("c"), ChatMessage.assistant("d")], options=OPTIONS)
    assert third.content == "2 messages"
    assert [r.messages[0].content for r in provider.requests] == ["a", "b", "c"]
    assert provider.requests[0].tools == tuple(DEMO_TOOLS)
    assert provider.remaining == 0
    with pytest.raises(ScriptExhausted, match="asked 4 times, but only 3"):
        provider.complete([ChatMessage.user("e")], options=OPTIONS)


def test_scripted_add_and_ready_made_calls():
    provider = ScriptedProvider()
    ready = scripted_calls(*scripted_calls(("x", {})).tool_calls, content="thinking aloud")
    provider.add(ready, scripted_text("done"))
    assert provider.remaining == 2
    assert provider.complete([], options=OPTIONS).content == "thinking aloud"
    assert isinstance(provider.complete([], options=OPTIONS), CompletionResponse)
