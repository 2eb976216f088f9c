"""A turn Anthropic paused (``pause_turn``) is asked again with its paused content and becomes
one answer, whole or streamed, with the usage of every request; an endless pause is cut off."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from conversations.domain import ChatMessage, ProviderTool, ToolCall, ToolSpec, Usage
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.anthropic_pause import MAX_PAUSE_CONTINUATIONS, merged_body
from conversations.providers.base import CompletionOptions
from tests.providers.mock_http import provider_with_replies
from tests.providers.mock_stream import collect, shown
from tests.providers.provider_tool_fixtures import (
    ANTHROPIC_PAUSED,
    ANTHROPIC_RESUMED,
    PAUSED_TEXT,
    RESUMED_TEXT,
    anthropic_body,
    anthropic_stream,
)
from tests.providers.stream_checks import check_stream
from tests.providers.wire_anthropic import validate_anthropic_request

KEY = "sk-ant-test-0123456789abcdef"
OPTIONS = CompletionOptions(model="claude-test", provider_tools=(ProviderTool("web_search"),))
HISTORY = [ChatMessage.user("When and where was Claude Shannon born?")]
ADD = ToolSpec("add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}})


def whole(answer: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=answer)


def sent(request: httpx.Request) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(request.content)
    assert validate_anthropic_request(payload) == []
    return payload


# Whole ---------------------------------------------------------------------------------


def test_a_paused_turn_and_its_continuation_are_one_answer_with_the_summed_usage() -> None:
    adapter, requests, _ = provider_with_replies(
        AnthropicProvider, whole(ANTHROPIC_PAUSED), whole(ANTHROPIC_RESUMED), api_key=KEY
    )
    answer = adapter.complete(HISTORY, options=OPTIONS)
    assert answer.content == PAUSED_TEXT + RESUMED_TEXT
    assert answer.finish_reason == "stop"
    assert answer.usage == Usage(prompt_tokens=450, completion_tokens=60, cached_prompt_tokens=50)
    assert [call.provider_id for call in answer.provider_tool_calls] == [
        "srvtoolu_01",
        "srvtoolu_02",
    ]
    assert {call.status for call in answer.provider_tool_calls} == {"completed"}
    (citation,) = answer.citations
    assert answer.content[citation.start : citation.end] == RESUMED_TEXT
    assert answer.provider_metadata == {
        "anthropic": {
            "content": ANTHROPIC_PAUSED["content"] + ANTHROPIC_RESUMED["content"],
            "pause_turn": {"continuations": 1, "cut_off": False},
        }
    }
    assert len(requests) == 2


def test_the_continuation_is_the_same_request_ending_with_the_paused_content() -> None:
    adapter, requests, _ = provider_with_replies(
        AnthropicProvider, whole(ANTHROPIC_PAUSED), whole(ANTHROPIC_RESUMED), api_key=KEY
    )
    adapter.complete(HISTORY, tools=[ADD], options=OPTIONS)
    first, second = (sent(request) for request in requests)
    assert second["messages"][-1] == {"role": "assistant", "content": ANTHROPIC_PAUSED["content"]}
    assert second == {**first, "messages": [*first["messages"], second["messages"][-1]]}


def test_the_paused_turn_goes_back_later_exactly_as_received() -> None:
    adapter, _, _ = provider_with_replies(
        AnthropicProvider, whole(ANTHROPIC_PAUSED), whole(ANTHROPIC_RESUMED), api_key=KEY
    )
    turn = adapter.complete(HISTORY, options=OPTIONS).to_message()
    later = adapter.build_payload([*HISTORY, turn, ChatMessage.user("Thanks!")], [], OPTIONS)
    assert later["messages"][1] == {
        "role": "assistant",
        "content": ANTHROPIC_PAUSED["content"] + ANTHROPIC_RESUMED["content"],
    }
    assert validate_anthropic_request(later) == []


def test_an_endless_pause_stops_after_the_bound_with_what_came_marked_cut_off() -> None:
    replies = [whole(ANTHROPIC_PAUSED)] * (MAX_PAUSE_CONTINUATIONS + 1)
    adapter, requests, _ = provider_with_replies(AnthropicProvider, *replies, api_key=KEY)
    answer = adapter.complete(HISTORY, options=OPTIONS)
    rounds = MAX_PAUSE_CONTINUATIONS + 1
    assert len(requests) == rounds  # one more reply would have failed the strict recorder
    assert answer.content == PAUSED_TEXT * rounds
    assert answer.finish_reason == "length"
    assert answer.usage == Usage(prompt_tokens=100 * rounds, completion_tokens=20 * rounds)
    assert answer.provider_metadata["anthropic"]["pause_turn"] == {
        "continuations": MAX_PAUSE_CONTINUATIONS,
        "cut_off": True,
    }
    last = sent(requests[-1])["messages"][-1]
    assert last == {
        "role": "assistant",
        "content": ANTHROPIC_PAUSED["content"] * MAX_PAUSE_CONTINUATIONS,
    }


def test_a_paused_turn_holding_a_call_of_ours_is_answered_as_it_is() -> None:
    call = {"type": "tool_use", "id": "toolu_01", "name": "add", "input": {"a": 1}}
    paused = anthropic_body(
        [*ANTHROPIC_PAUSED["content"], call], "pause_turn", input_tokens=10, output_tokens=5
    )
    adapter, requests, _ = provider_with_replies(AnthropicProvider, whole(paused), api_key=KEY)
    answer = adapter.complete(HISTORY, tools=[ADD], options=OPTIONS)
    assert len(requests) == 1
    assert answer.tool_calls == (ToolCall(id="toolu_01", name="add", arguments={"a": 1}),)
    assert "pause_turn" not in answer.provider_metadata["anthropic"]


def test_a_code_run_continues_in_its_container_and_a_prefill_takes_the_paused_blocks() -> None:
    ran = [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_03",
            "name": "bash_code_execution",
            "input": {"command": "python fit.py"},
        },
        {
            "type": "bash_code_execution_tool_result",
            "tool_use_id": "srvtoolu_03",
            "content": {"type": "bash_code_execution_result", "stdout": "ok", "return_code": 0},
        },
        {"type": "text", "text": "Fitted; now plotting.  \n"},
    ]
    paused = {
        **anthropic_body(ran, "pause_turn", input_tokens=10, output_tokens=5),
        "container": {"id": "container_011", "expires_at": "2026-12-01T23:00:00Z"},
    }
    done = anthropic_body(
        [{"type": "text", "text": "Done."}], "end_turn", input_tokens=20, output_tokens=2
    )
    adapter, requests, _ = provider_with_replies(
        AnthropicProvider, whole(paused), whole(done), api_key=KEY
    )
    options = CompletionOptions(
        model="claude-test", provider_tools=(ProviderTool("code_execution"),)
    )
    prefill = ChatMessage.assistant("Here is the plan:")
    answer = adapter.complete([*HISTORY, prefill], options=options)
    assert answer.content == "Fitted; now plotting.  \nDone."  # as received
    second = sent(requests[1])
    assert second["container"] == "container_011"
    # The trailing whitespace of a final assistant message is refused: cut in the request only.
    replayed = [*copy.deepcopy(ran[:2]), {"type": "text", "text": "Fitted; now plotting."}]
    assert second["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Here is the plan:"}, *replayed],
    }


def test_usage_objects_are_summed_key_by_key_and_a_missing_count_counts_nothing() -> None:
    merged = merged_body(
        [
            anthropic_body(
                [], "pause_turn", input_tokens=1, output_tokens=2, service_tier="standard"
            ),
            anthropic_body(
                [],
                "end_turn",
                input_tokens=3,
                output_tokens=4,
                cache_creation_input_tokens=None,
                server_tool_use={"web_search_requests": 2},
                service_tier="priority",
            ),
        ]
    )
    assert merged["usage"] == {
        "input_tokens": 4,
        "output_tokens": 6,
        "cache_creation_input_tokens": None,
        "server_tool_use": {"web_search_requests": 2},
        "service_tier": "priority",
    }
    assert merged["stop_reason"] == "end_turn"


# Streamed ------------------------------------------------------------------------------


def test_a_streamed_paused_turn_goes_on_streaming_and_ends_as_the_whole_one() -> None:
    adapter, requests, _ = provider_with_replies(
        AnthropicProvider,
        anthropic_stream(ANTHROPIC_PAUSED),
        anthropic_stream(ANTHROPIC_RESUMED),
        api_key=KEY,
    )
    items = collect(adapter.stream(HISTORY, options=OPTIONS))
    reference, _, _ = provider_with_replies(
        AnthropicProvider, whole(ANTHROPIC_PAUSED), whole(ANTHROPIC_RESUMED), api_key=KEY
    )
    check_stream(items, reference.complete(HISTORY, options=OPTIONS))
    assert shown(items).text == PAUSED_TEXT + RESUMED_TEXT
    first, second = (sent(request) for request in requests)
    assert first["stream"] is second["stream"] is True
    assert second["messages"] == [
        *first["messages"],
        {"role": "assistant", "content": ANTHROPIC_PAUSED["content"]},
    ]


@pytest.mark.parametrize("calls", [False, True])
def test_a_streamed_endless_pause_is_cut_off_like_a_whole_one(calls: bool) -> None:
    ending = copy.deepcopy(ANTHROPIC_PAUSED)
    if calls:  # the last part's call keeps the id its deltas showed, even a minted one
        ending["content"].append({"type": "tool_use", "name": "add", "input": {"a": 2}})
    parts = [*[ANTHROPIC_PAUSED] * MAX_PAUSE_CONTINUATIONS, ending]
    adapter, requests, _ = provider_with_replies(
        AnthropicProvider, *(anthropic_stream(part) for part in parts), api_key=KEY
    )
    items = collect(adapter.stream(HISTORY, tools=[ADD], options=OPTIONS))
    answer = items[-1]
    assert len(requests) == MAX_PAUSE_CONTINUATIONS + 1
    assert answer.finish_reason == ("tool_calls" if calls else "length")
    assert answer.provider_metadata["anthropic"]["pause_turn"] == {
        "continuations": MAX_PAUSE_CONTINUATIONS,
        "cut_off": not calls,
    }
    assert answer.usage.prompt_tokens == 100 * len(parts)
    turn = shown(items)
    assert turn.text == answer.content == PAUSED_TEXT * len(parts)
    if calls:
        (call,) = answer.tool_calls
        assert turn.calls[0]["id"] == call.id and call.arguments == {"a": 2}
