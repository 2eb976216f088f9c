"""Streams of the offline providers: the demo model word by word, scripted entries as scripted."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from conversations.providers.base import CompletionOptions
from conversations.providers.demo import DemoProvider
from conversations.providers.scripted import (
    ScriptedProvider,
    ScriptExhausted,
    scripted_calls,
    scripted_stream,
    scripted_text,
)
from tests.strategies import answer_characters, answer_text, argument_objects, json_values

from .stream_checks import check_stream

OPTIONS = CompletionOptions(model="demo")
DEMO_TOOLS = [ToolSpec("get_weather"), ToolSpec("get_current_time"), ToolSpec("calculate")]
names = st.from_regex(r"[a-zA-Z0-9_-]{1,12}", fullmatch=True)
arguments = argument_objects(
    st.text(answer_characters, max_size=6), json_values(max_leaves=5), max_size=3
)


def without_ids(response: CompletionResponse) -> CompletionResponse:
    """The response with call ids by position (the demo draws fresh ids per answer)."""
    calls = response.tool_calls
    if calls is None:
        return response
    renamed = tuple(dataclasses.replace(c, id=f"call_{i}") for i, c in enumerate(calls))
    return dataclasses.replace(response, tool_calls=renamed)


@st.composite
def demo_prompts(draw: st.DrawFn) -> tuple[str, list[ToolSpec]]:
    """A user message: free text (maybe asking for the demo tools) or ``/call`` lines."""
    if draw(st.booleans()):
        text = draw(answer_text | st.sampled_from(["weather in Paris and 2 * (3 + 4)", "time?"]))
        return text, DEMO_TOOLS
    calls = draw(st.lists(st.tuples(names, arguments), max_size=3))
    lines = [f"/call {name} {json.dumps(value, ensure_ascii=False)}" for name, value in calls]
    return "\n".join(lines), [ToolSpec(name) for name in {name for name, _ in calls}]


@settings(max_examples=60, deadline=None)
@given(prompt=demo_prompts())
def test_the_demo_stream_ends_with_what_complete_answers(prompt):
    text, tools = prompt
    messages = [ChatMessage.user(text)]
    events = list(DemoProvider().stream(messages, tools=tools, options=OPTIONS))
    whole = DemoProvider().complete(messages, tools=tools, options=OPTIONS)
    assert without_ids(events[-1]) == without_ids(whole)
    check_stream(events, events[-1])


def test_the_demo_streams_word_by_word_with_a_pause_before_each_piece():
    pauses: list[float] = []
    demo = DemoProvider(stream_delay=0.25, sleep=pauses.append)
    events = list(demo.stream([ChatMessage.user("hello")], options=OPTIONS))
    words = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(words) > 10 and all(len(w.split()) == 1 for w in words)
    assert pauses == [0.25] * (len(events) - 1)


def test_the_demo_streams_arguments_in_a_few_pieces():
    text = '/call lookup {"query": "a long enough query"}'
    events = list(
        DemoProvider().stream([ChatMessage.user(text)], tools=[ToolSpec("lookup")], options=OPTIONS)
    )
    pieces = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(pieces) == 3
    assert (pieces[0].id, pieces[0].name) == (events[-1].tool_calls[0].id, "lookup")
    assert all(p.id is None and p.name is None for p in pieces[1:])


def test_the_demo_without_a_delay_never_pauses():
    pauses: list[float] = []
    list(DemoProvider(sleep=pauses.append).stream([ChatMessage.user("hi")], options=OPTIONS))
    assert pauses == []


def test_a_negative_stream_delay_is_refused():
    with pytest.raises(ValueError, match="stream_delay"):
        DemoProvider(stream_delay=-1)


# Scripted ------------------------------------------------------------------------------

responses = st.builds(
    lambda text, thinking, calls: CompletionResponse(
        content=text,
        model="scripted",
        usage=Usage(3, 4),
        finish_reason="tool_calls" if calls else "stop",
        provider="scripted",
        tool_calls=tuple(
            ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)
        )
        or None,
        thinking=thinking or None,
    ),
    answer_text,
    answer_text.filter(lambda t: t == "" or t.strip() != ""),
    st.lists(st.tuples(names, arguments), max_size=3),
)


@settings(max_examples=40, deadline=None)
@given(response=responses)
def test_a_scripted_entry_streams_to_what_complete_answers(response):
    provider = ScriptedProvider([response, response])
    events = list(provider.stream([ChatMessage.user("hi")], options=OPTIONS))
    check_stream(events, provider.complete([ChatMessage.user("hi")], options=OPTIONS))
    assert events[-1] == response


def test_a_scripted_stream_plays_its_deltas_then_its_response():
    final = scripted_text("Hello")
    provider = ScriptedProvider(
        [scripted_stream(ReasoningDelta("hm"), TextDelta("Hel"), TextDelta("lo"), final)] * 2
    )
    events = list(provider.stream([ChatMessage.user("hi")], options=OPTIONS))
    assert events == [ReasoningDelta("hm"), TextDelta("Hel"), TextDelta("lo"), final]
    assert provider.complete([ChatMessage.user("again")], options=OPTIONS) == final
    assert [r.messages[-1].content for r in provider.requests] == ["hi", "again"]


@pytest.mark.parametrize(
    ("events", "field"),
    [
        ((), "events"),
        ((TextDelta("a"),), "events"),
        ((scripted_text("a"), scripted_text("b")), "events/0"),
        ((TextDelta("a"), "b", scripted_text("c")), "events/1"),
    ],
)
def test_a_scripted_stream_has_exactly_one_response_last(events, field):
    with pytest.raises(InvalidArgumentError) as info:
        scripted_stream(*events)
    assert info.value.field == field


def test_a_scripted_exception_is_raised_before_anything_is_yielded():
    provider = ScriptedProvider([TimeoutError("slow"), scripted_calls(("f", {}))])
    with pytest.raises(TimeoutError):
        provider.stream([ChatMessage.user("hi")], options=OPTIONS)  # not even iterated
    assert len(provider.requests) == 1
    events = list(provider.stream([ChatMessage.user("again")], options=OPTIONS))
    assert events[0] == ToolCallDelta(0, events[-1].tool_calls[0].id, "f", "{}")
    with pytest.raises(ScriptExhausted):
        provider.stream([ChatMessage.user("more")], options=OPTIONS)
    assert len(provider.requests) == 3


def test_a_callable_entry_streams_its_answer():
    provider = ScriptedProvider(
        [lambda messages, tools, options: scripted_text(messages[-1].content)]
    )
    events = list(provider.stream([ChatMessage.user("echo")], options=OPTIONS))
    assert events == [TextDelta("echo"), scripted_text("echo")]
