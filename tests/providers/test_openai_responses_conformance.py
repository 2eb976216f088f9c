"""Every Responses request the adapter builds, and every body it parses, fits the ``openai`` SDK."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from conversations.domain import ChatMessage, ToolCall
from conversations.providers.base import CompletionOptions
from conversations.providers.openai_responses import OpenAIResponsesProvider
from tests.providers.responses_conformance import (
    assert_valid_event,
    assert_valid_request,
    assert_valid_response,
)
from tests.providers.responses_server import (
    call_item,
    message_item,
    reasoning_item,
    response_body,
    stream_events,
)
from tests.providers.test_openai_responses import ADD, TOOL_ROUND, history_with_a_call

ADAPTER = OpenAIResponsesProvider(api_key="sk-test")
OPTIONS = [
    CompletionOptions(model="gpt-5-mini"),
    CompletionOptions(
        model="gpt-5-mini",
        temperature=0.2,
        max_tokens=64,
        tool_choice="add",
        parallel_tool_calls=True,
    ),
    CompletionOptions(model="gpt-5-mini", tool_choice="required"),
]
HISTORIES = {
    "one user message": [ChatMessage.user("Hi")],
    "a tool round with replayed reasoning": history_with_a_call(),
    "a tool round from another provider": history_with_a_call(None),
    "unparsable arguments kept as text": [
        ChatMessage.user("Go"),
        ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="add", raw_arguments="{oops")]),
        ChatMessage.tool_result("c1", "bad arguments", is_error=True),
        ChatMessage.assistant("Sorry."),
        ChatMessage.user("Again"),
    ],
}
BODIES = {
    "a tool round": TOOL_ROUND,
    "reasoning and text": response_body(
        [reasoning_item("rs_1", ["One.", "Two."], "enc"), message_item("msg_1", "Three.")]
    ),
    "two calls": response_body(
        [
            call_item("fc_1", "call_a", "add", '{"a":1}'),
            call_item("fc_2", "call_b", "add", "{}"),
        ]
    ),
    "cut short": response_body(
        [message_item("msg_1", "Part")], status="incomplete", incomplete_reason="max_output_tokens"
    ),
}


@pytest.mark.parametrize("history", HISTORIES.values(), ids=HISTORIES.keys())
@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("stream", [False, True])
def test_every_request_body_fits_the_sdk_request_types(
    history: list[ChatMessage], options: CompletionOptions, stream: bool
) -> None:
    build = ADAPTER.build_stream_payload if stream else ADAPTER.build_payload
    assert_valid_request(build(history, [ADD], options))


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_every_parsed_body_and_its_stream_fit_the_sdk_types(body: dict[str, Any]) -> None:
    assert_valid_response(body)
    for event in stream_events(body):
        assert_valid_event(event)
    ADAPTER.parse_response(body)  # and the adapter reads it


def test_the_check_refuses_a_key_the_sdk_does_not_know() -> None:
    body = ADAPTER.build_payload(history_with_a_call(), [ADD], OPTIONS[0])
    broken = copy.deepcopy(body)
    broken["input"][-1]["is_error"] = True
    with pytest.raises(AssertionError):
        assert_valid_request(broken)
    misspelled = copy.deepcopy(body)
    misspelled["max_tokens"] = 5
    with pytest.raises(AssertionError):
        assert_valid_request(misspelled)
    extra = copy.deepcopy(TOOL_ROUND)
    extra["output"][1]["callid"] = "x"
    with pytest.raises(AssertionError):
        assert_valid_response(extra)
