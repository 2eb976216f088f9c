"""Provider-run tools: offered in each vendor's form or refused, read back as records and
citations whole and streamed, replayed exactly to their adapter and to no other."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from conversations.domain import (
    ChatMessage,
    InvalidArgumentError,
    ProviderTool,
    ProviderToolActivity,
    SourceCitation,
    ToolSpec,
)
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import CompletionOptions, HTTPProvider
from conversations.providers.demo import DemoProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from conversations.providers.openai_responses import OpenAIResponsesProvider
from tests.providers.mock_http import provider_with_replies
from tests.providers.mock_stream import collect
from tests.providers.provider_tool_fixtures import (
    ANTHROPIC_SEARCH,
    GEMINI_CODE,
    GEMINI_SEARCH,
    GEMINI_TEXT,
    RESPONSES_SEARCH,
    RESPONSES_TEXT,
    anthropic_stream,
    gemini_stream,
)
from tests.providers.responses_conformance import (
    assert_valid_event,
    assert_valid_request,
    assert_valid_response,
)
from tests.providers.responses_server import (
    message_item,
    response_body,
    stream_events,
    streamed_reply,
    whole_reply,
)
from tests.providers.stream_checks import check_stream
from tests.providers.wire_anthropic import validate_anthropic_request
from tests.providers.wire_gemini import validate_gemini_request

KEY = "sk-test-0123456789abcdef"
ALL = (
    ProviderTool("web_search"),
    ProviderTool("code_execution"),
    ProviderTool("file_search", ("vs_abc",)),
)
SEARCH = (ProviderTool("web_search"),)
ADD = ToolSpec("add", "Add.", {"type": "object", "properties": {"a": {"type": "integer"}}})


def options(tools: tuple[ProviderTool, ...] = SEARCH) -> CompletionOptions:
    return CompletionOptions(model="a-model", provider_tools=tools)


def ask(adapter: HTTPProvider, tools: tuple[ProviderTool, ...] = SEARCH) -> dict[str, Any]:
    return adapter.build_payload([ChatMessage.user("Who won?")], [ADD], options(tools))


# Offered in each vendor's form --------------------------------------------------------


def test_the_responses_api_gets_web_search_code_interpreter_and_file_search() -> None:
    body = ask(OpenAIResponsesProvider(api_key=KEY), ALL)
    assert body["tools"][1:] == [
        {"type": "web_search"},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "file_search", "vector_store_ids": ["vs_abc"]},
    ]
    assert body["tools"][0]["name"] == "add"
    assert_valid_request(body)


def test_anthropic_gets_its_versioned_server_tools_beside_the_functions() -> None:
    body = ask(AnthropicProvider(api_key=KEY), ALL[:2])
    assert body["tools"][1:] == [
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "code_execution_20250825", "name": "code_execution"},
    ]
    assert validate_anthropic_request(body) == []


def test_gemini_gets_google_search_and_code_execution_beside_the_declarations() -> None:
    body = ask(GeminiProvider(api_key=KEY), ALL[:2])
    assert body["tools"][1:] == [{"google_search": {}}, {"code_execution": {}}]
    assert "functionDeclarations" in body["tools"][0]
    assert validate_gemini_request(body) == []


def test_provider_tools_alone_make_a_tools_list_without_a_tool_choice() -> None:
    adapter = OpenAIResponsesProvider(api_key=KEY)
    body = adapter.build_payload(
        [ChatMessage.user("hi")],
        [],
        CompletionOptions(model="m", tool_choice="auto", provider_tools=SEARCH),
    )
    assert body["tools"] == [{"type": "web_search"}]
    assert "tool_choice" not in body


@pytest.mark.parametrize(
    ("adapter_class", "tool", "name"),
    [
        (OpenAIProvider, ProviderTool("web_search"), "openai"),
        (OllamaProvider, ProviderTool("code_execution"), "ollama"),
        (GeminiProvider, ProviderTool("file_search", ("vs_1",)), "gemini"),
        (AnthropicProvider, ProviderTool("file_search", ("vs_1",)), "anthropic"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True])
def test_an_adapter_refuses_a_tool_it_cannot_offer_naming_both_and_sends_nothing(
    adapter_class: type[HTTPProvider], tool: ProviderTool, name: str, streamed: bool
) -> None:
    adapter, requests, _ = provider_with_replies(
        adapter_class, whole_reply({}), api_key=KEY, max_retries=0
    )
    with pytest.raises(InvalidArgumentError) as raised:
        if streamed:
            list(adapter.stream([ChatMessage.user("hi")], options=options((tool,))))
        else:
            adapter.complete([ChatMessage.user("hi")], options=options((tool,)))
    assert raised.value.code == "unsupported_provider_tool"
    assert f'the {name} adapter cannot offer the provider tool "{tool.kind}"' in str(raised.value)
    assert requests == []


# The Responses API ---------------------------------------------------------------------


def responses_adapter(*replies: Any) -> tuple[OpenAIResponsesProvider, list[Any]]:
    adapter, requests, _ = provider_with_replies(OpenAIResponsesProvider, *replies, api_key=KEY)
    return adapter, requests


def test_a_responses_web_search_is_a_record_and_its_annotation_a_citation() -> None:
    assert_valid_response(RESPONSES_SEARCH)
    response = OpenAIResponsesProvider(api_key=KEY).parse_response(RESPONSES_SEARCH)
    assert response.content == RESPONSES_TEXT
    (search,) = response.provider_tool_calls
    assert (search.kind, search.provider_id, search.status, search.query) == (
        "web_search",
        "ws_68a1",
        "completed",
        "python 3.13 release date",
    )
    assert search.result_summary == "1 source(s)"
    assert search.payload == RESPONSES_SEARCH["output"][1]
    assert response.citations == (
        SourceCitation(
            start=0,
            end=len(RESPONSES_TEXT) - 1,
            url="https://www.python.org/downloads/release/python-3130/",
            title="Python Release Python 3.13.0",
        ),
    )


def test_a_streamed_responses_web_search_is_the_whole_one() -> None:
    for event in stream_events(RESPONSES_SEARCH):
        assert_valid_event(event)
    adapter, _ = responses_adapter(streamed_reply(RESPONSES_SEARCH))
    items = collect(adapter.stream([ChatMessage.user("When?")], options=options()))
    check_stream(items, adapter.parse_response(RESPONSES_SEARCH))


def test_the_search_item_is_replayed_exactly_in_its_place_among_the_reasoning() -> None:
    adapter = OpenAIResponsesProvider(api_key=KEY)
    turn = adapter.parse_response(RESPONSES_SEARCH).to_message()
    history = [ChatMessage.user("When?"), turn, ChatMessage.user("And 3.14?")]
    body = adapter.build_payload(history, [], options())
    assert body["input"][1:3] == RESPONSES_SEARCH["output"][:2]  # reasoning, then the search
    assert body["input"][3] == {"role": "assistant", "content": RESPONSES_TEXT}
    assert_valid_request(body)


# Anthropic -------------------------------------------------------------------------------


ANTHROPIC_TEXT = (
    "I'll search for when Claude Shannon was born.Based on the search results, "
    "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan"
)


def test_an_anthropic_web_search_is_a_record_and_its_cited_block_a_citation() -> None:
    response = AnthropicProvider(api_key=KEY).parse_response(ANTHROPIC_SEARCH)
    assert response.content == ANTHROPIC_TEXT
    (search,) = response.provider_tool_calls
    assert search == ProviderToolActivity(
        kind="web_search",
        provider_id="srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
        status="completed",
        query="claude shannon birth date",
        result_summary="1 result(s)",
        payload={"call": ANTHROPIC_SEARCH["content"][1], "result": ANTHROPIC_SEARCH["content"][2]},
    )
    (citation,) = response.citations
    cited = ANTHROPIC_TEXT[citation.start : citation.end]
    assert cited == "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan"
    assert (citation.url, citation.title) == (
        "https://en.wikipedia.org/wiki/Claude_Shannon",
        "Claude Shannon - Wikipedia",
    )


def test_a_streamed_anthropic_web_search_is_the_whole_one() -> None:
    adapter, _, _ = provider_with_replies(
        AnthropicProvider, anthropic_stream(ANTHROPIC_SEARCH), api_key=KEY
    )
    items = collect(adapter.stream([ChatMessage.user("When?")], options=options()))
    check_stream(items, adapter.parse_response(ANTHROPIC_SEARCH))


def test_anthropic_gets_its_server_blocks_back_exactly_and_then_the_calls() -> None:
    adapter = AnthropicProvider(api_key=KEY)
    turn = adapter.parse_response(ANTHROPIC_SEARCH).to_message()
    body = adapter.build_payload(
        [ChatMessage.user("When?"), turn, ChatMessage.user("Where?")], [], options()
    )
    assert body["messages"][1] == {"role": "assistant", "content": ANTHROPIC_SEARCH["content"]}
    assert validate_anthropic_request(body) == []


# Gemini ---------------------------------------------------------------------------------


def test_gemini_grounding_is_one_search_and_a_citation_per_supporting_chunk() -> None:
    response = GeminiProvider(api_key=KEY).parse_response(GEMINI_SEARCH)
    (search,) = response.provider_tool_calls
    assert (search.kind, search.provider_id, search.query, search.result_summary) == (
        "web_search",
        "",
        "UEFA Euro 2024 winner; who won euro 2024",
        "2 source(s)",
    )
    spans = [(GEMINI_TEXT[c.start : c.end], c.title, c.source_id) for c in response.citations]
    # The segments count UTF-8 bytes ("ñ", "ó"); the citations count characters.
    assert spans == [
        ("España ganó la Euro 2024.", "uefa.com", "0"),
        ("Venció a Inglaterra 2-1 en la final.", "uefa.com", "0"),
        ("Venció a Inglaterra 2-1 en la final.", "bbc.com", "1"),
    ]


@pytest.mark.parametrize("body", [GEMINI_SEARCH, GEMINI_CODE])
def test_a_streamed_gemini_answer_with_its_tools_is_the_whole_one(body: dict[str, Any]) -> None:
    adapter, _, _ = provider_with_replies(GeminiProvider, gemini_stream(body), api_key=KEY)
    items = collect(adapter.stream([ChatMessage.user("When?")], options=options()))
    check_stream(items, adapter.parse_response(body))


def test_gemini_code_execution_is_a_record_and_its_parts_go_back_exactly() -> None:
    adapter = GeminiProvider(api_key=KEY)
    response = adapter.parse_response(GEMINI_CODE)
    (run,) = response.provider_tool_calls
    assert (run.kind, run.status, run.result_summary) == ("code_execution", "completed", "5117\n")
    assert run.code.startswith("import sympy")
    body = adapter.build_payload(
        [ChatMessage.user("Sum?"), response.to_message(), ChatMessage.user("Thanks")], [], options()
    )
    assert body["contents"][1] == GEMINI_CODE["candidates"][0]["content"]
    assert validate_gemini_request(body) == []


def test_gemini_sends_nothing_of_its_grounding_back() -> None:
    adapter = GeminiProvider(api_key=KEY)
    turn = adapter.parse_response(GEMINI_SEARCH).to_message()
    body = adapter.build_payload(
        [ChatMessage.user("Who?"), turn, ChatMessage.user("Why?")], [], options()
    )
    assert body["contents"][1] == {"role": "model", "parts": [{"text": GEMINI_TEXT}]}


# Another adapter gets the text only ------------------------------------------------------


TURNS = {
    "openai_responses": OpenAIResponsesProvider(api_key=KEY).parse_response(RESPONSES_SEARCH),
    "anthropic": AnthropicProvider(api_key=KEY).parse_response(ANTHROPIC_SEARCH),
    "gemini": GeminiProvider(api_key=KEY).parse_response(GEMINI_CODE),
}
ADAPTERS: dict[str, HTTPProvider] = {
    "openai_responses": OpenAIResponsesProvider(api_key=KEY),
    "anthropic": AnthropicProvider(api_key=KEY),
    "gemini": GeminiProvider(api_key=KEY),
    "openai": OpenAIProvider(api_key=KEY),
}
LEAKS = (
    "web_search_call",
    "reasoning",
    "server_tool_use",
    "web_search_tool_result",
    "executableCode",
    "codeExecutionResult",
    "encrypted_content",
    "citations",
)


@pytest.mark.parametrize(
    ("maker", "reader"),
    [(maker, reader) for maker in sorted(TURNS) for reader in sorted(ADAPTERS) if maker != reader],
)
def test_another_adapter_gets_the_answer_text_and_none_of_the_tool_items(
    maker: str, reader: str
) -> None:
    turn = TURNS[maker]
    history = [ChatMessage.user("Q?"), turn.to_message(), ChatMessage.user("More?")]
    body = ADAPTERS[reader].build_payload(history, [], CompletionOptions(model="m"))
    sent = json.dumps(body)
    assert not [leak for leak in LEAKS if f'"{leak}"' in sent]
    assert turn.content.split(".")[0] in sent


def test_the_provider_tool_payload_is_a_copy_of_what_came() -> None:
    body = copy.deepcopy(RESPONSES_SEARCH)
    response = OpenAIResponsesProvider(api_key=KEY).parse_response(body)
    body["output"][1]["action"]["query"] = "changed"
    assert response.provider_tool_calls[0].payload["action"]["query"] == "python 3.13 release date"


# The other kinds of each vendor ----------------------------------------------------------


def test_responses_file_search_and_code_interpreter_items_are_records_too() -> None:
    body = response_body(
        [
            {
                "type": "file_search_call",
                "id": "fs_1",
                "status": "completed",
                "queries": ["refund policy", "returns"],
                "results": [
                    {"file_id": "file-1", "filename": "policy.pdf", "score": 0.9, "text": "…"}
                ],
            },
            {
                "type": "code_interpreter_call",
                "id": "ci_1",
                "status": "completed",
                "container_id": "cntr_1",
                "code": "print(6 * 7)",
                "outputs": [{"type": "logs", "logs": "42\n"}],
            },
            message_item("msg_1", "42, and refunds take 14 days."),
        ]
    )
    assert_valid_response(body)
    adapter = OpenAIResponsesProvider(api_key=KEY)
    search, run = adapter.parse_response(body).provider_tool_calls
    assert (search.kind, search.query, search.result_summary) == (
        "file_search",
        "refund policy; returns",
        "1 result(s)",
    )
    assert (run.kind, run.code, run.result_summary) == ("code_execution", "print(6 * 7)", "42\n")
    replayed = adapter.build_payload(
        [ChatMessage.user("Q"), adapter.parse_response(body).to_message()], [], options()
    )
    assert replayed["input"][1:3] == body["output"][:2]
    assert_valid_request(replayed)


@pytest.mark.parametrize(
    ("result", "status", "summary"),
    [
        (
            {"type": "code_execution_result", "stdout": "42\n", "stderr": "", "return_code": 0},
            "completed",
            "42\n",
        ),
        (
            {"type": "code_execution_result", "stdout": "", "stderr": "boom", "return_code": 1},
            "failed",
            "boom",
        ),
        (
            {"type": "code_execution_tool_result_error", "error_code": "unavailable"},
            "failed",
            "unavailable",
        ),
    ],
)
def test_an_anthropic_code_run_reports_its_output_or_its_error(
    result: dict[str, Any], status: str, summary: str
) -> None:
    body = {
        **ANTHROPIC_SEARCH,
        "content": [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_code",
                "name": "code_execution",
                "input": {"code": "print(6 * 7)"},
            },
            {
                "type": "code_execution_tool_result",
                "tool_use_id": "srvtoolu_code",
                "content": result,
            },
            {"type": "text", "text": "Done."},
        ],
    }
    (run,) = AnthropicProvider(api_key=KEY).parse_response(body).provider_tool_calls
    assert (run.kind, run.code, run.status, run.result_summary) == (
        "code_execution",
        "print(6 * 7)",
        status,
        summary,
    )


def test_a_web_search_error_result_is_a_failed_search() -> None:
    body = copy.deepcopy(ANTHROPIC_SEARCH)
    body["content"][2]["content"] = {
        "type": "web_search_tool_result_error",
        "error_code": "max_uses_exceeded",
    }
    (search,) = AnthropicProvider(api_key=KEY).parse_response(body).provider_tool_calls
    assert (search.status, search.result_summary) == ("failed", "max_uses_exceeded")


def test_a_gemini_code_run_that_failed_and_one_without_a_result() -> None:
    body = copy.deepcopy(GEMINI_CODE)
    parts = body["candidates"][0]["content"]["parts"]
    parts[2]["codeExecutionResult"] = {"outcome": "OUTCOME_FAILED", "output": "NameError"}
    parts.append({"executableCode": {"language": "PYTHON", "code": "print(1)"}})
    failed, pending = GeminiProvider(api_key=KEY).parse_response(body).provider_tool_calls
    assert (failed.status, failed.result_summary) == ("failed", "NameError")
    assert (pending.status, pending.code) == ("in_progress", "print(1)")


def test_the_demo_searches_only_for_a_profile_offering_web_search() -> None:
    demo = DemoProvider()
    searched = demo.complete([ChatMessage.user("Look:\n/search green tea")], options=options())
    (search,) = searched.provider_tool_calls
    assert (search.kind, search.query, search.status) == ("web_search", "green tea", "completed")
    first, second = searched.citations
    assert searched.content[first.start : first.end].startswith("I searched the web")
    assert second.end == len(searched.content) and first.url.startswith("https://example.com/")
    plain = demo.complete(
        [ChatMessage.user("/search green tea")], options=CompletionOptions(model="m")
    )
    assert plain.provider_tool_calls == () and "offline demo model" in plain.content
