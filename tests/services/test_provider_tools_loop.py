"""Runs whose provider ran its own tools: rows for the calls and the citations, the same whole or
streamed, an exact replay to the same adapter, nothing of it for another, and refusals at run start."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.db import IntegrityError, connection, transaction
from django.forms.models import model_to_dict

from conversations.exceptions import ConfigurationError
from conversations.models import (
    Budget,
    BudgetCounter,
    Citation,
    Conversation,
    LanguageModel,
    Message,
    ModelCall,
    Provider,
    ProviderToolCall,
    Run,
)
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.openai_responses import OpenAIResponsesProvider
from conversations.services import (
    fork_conversation,
    redact_conversation,
    run_tool_loop,
    submit_message,
)
from conversations.services.configuration import build_provider, completion_options
from conversations.services.transcript.messages import create_conversation
from tests.providers.mock_http import Recorder
from tests.providers.provider_tool_fixtures import (
    ANTHROPIC_PAUSED,
    ANTHROPIC_RESUMED,
    ANTHROPIC_SEARCH,
    GEMINI_SEARCH,
    PAUSED_TEXT,
    RESPONSES_SEARCH,
    RESPONSES_TEXT,
    RESUMED_TEXT,
    anthropic_stream,
    gemini_stream,
)
from tests.providers.responses_conformance import assert_valid_request
from tests.providers.responses_server import streamed_reply, whole_reply
from tests.providers.wire_anthropic import validate_anthropic_request

pytestmark = pytest.mark.django_db

ANTHROPIC_PLAIN = {
    "id": "msg_02",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "In Petoskey."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 30, "output_tokens": 3},
}


@pytest.fixture
def searching(profile):
    profile.provider_tools = ["web_search"]
    profile.save()
    return profile


def answering(body: dict[str, Any], streamed_form) -> Recorder:
    def reply(request: httpx.Request) -> httpx.Response:
        asked = request.content and json.loads(request.content).get("stream") is True
        return (
            streamed_form(body)
            if asked or "streamGenerate" in str(request.url)
            else whole_reply(body)
        )

    return Recorder(reply, strict=True)


def run(profile, user, adapter, *, stream: bool, conversation=None, content="When?") -> Run:
    profile.stream = stream
    profile.save()
    conversation = conversation or create_conversation(owner=user, profile=profile)
    return run_tool_loop(conversation=conversation, content=content, provider=adapter)


_VOLATILE = ["id", "message"]


def rows(run_: Run) -> dict[str, Any]:
    turn = Message.objects.get(run=run_, role="assistant")
    return {
        "content": turn.content,
        "metadata": turn.provider_metadata,
        "calls": [model_to_dict(r, exclude=_VOLATILE) for r in turn.provider_tool_calls.all()],
        "citations": [model_to_dict(c, exclude=_VOLATILE) for c in turn.citations.all()],
    }


@pytest.mark.parametrize(
    ("adapter_class", "body", "streamed_form", "provider_call_id"),
    [
        (OpenAIResponsesProvider, RESPONSES_SEARCH, streamed_reply, "ws_68a1"),
        (
            AnthropicProvider,
            ANTHROPIC_SEARCH,
            anthropic_stream,
            "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
        ),
        (GeminiProvider, GEMINI_SEARCH, gemini_stream, ""),
    ],
)
def test_a_web_search_turn_is_stored_as_rows_the_same_whole_or_streamed(
    searching, user, adapter_class, body, streamed_form, provider_call_id
) -> None:
    records = []
    for stream in (False, True):
        server = answering(body, streamed_form)
        done = run(
            searching, user, adapter_class(api_key="k", http_client=server.client), stream=stream
        )
        assert done.status == Run.Status.COMPLETED
        records.append(rows(done))
    whole, streamed = records
    assert whole == streamed
    (call,) = whole["calls"]
    assert (call["kind"], call["provider_call_id"], call["status"]) == (
        "web_search",
        provider_call_id,
        "completed",
    )
    assert call["provider"] == adapter_class.provider_name and call["query"]
    assert call["provider_metadata"]
    assert whole["citations"]
    for citation in whole["citations"]:
        assert citation["url"].startswith("https://")
        assert 0 <= citation["start_offset"] < citation["end_offset"] <= len(whole["content"])


@pytest.mark.parametrize("stream", [False, True])
def test_a_paused_anthropic_turn_is_one_message_one_model_call_and_both_searches(
    searching, user, stream
) -> None:
    replies = [
        anthropic_stream(b) if stream else whole_reply(b)
        for b in (ANTHROPIC_PAUSED, ANTHROPIC_RESUMED)
    ]
    server = Recorder(*replies, strict=True)
    done = run(
        searching, user, AnthropicProvider(api_key="k", http_client=server.client), stream=stream
    )
    assert done.status == Run.Status.COMPLETED
    stored = rows(done)
    assert stored["content"] == PAUSED_TEXT + RESUMED_TEXT
    assert [call["provider_call_id"] for call in stored["calls"]] == ["srvtoolu_01", "srvtoolu_02"]
    assert len(stored["citations"]) == 1
    (call,) = ModelCall.objects.filter(run=done)
    assert (call.prompt_tokens, call.completion_tokens, call.web_search_calls) == (450, 60, 2)
    asked, resumed = server.bodies
    paused_turn = {"role": "assistant", "content": ANTHROPIC_PAUSED["content"]}
    assert resumed["messages"] == [*asked["messages"], paused_turn]
    assert validate_anthropic_request(resumed) == []


def test_the_responses_search_is_offered_and_replayed_exactly_on_the_next_turn(
    searching, user
) -> None:
    server = Recorder(whole_reply(RESPONSES_SEARCH), whole_reply(RESPONSES_SEARCH), strict=True)
    adapter = OpenAIResponsesProvider(api_key="k", http_client=server.client)
    first = run(searching, user, adapter, stream=False)
    conversation = Conversation.objects.get(pk=first.conversation_id)
    run(searching, user, adapter, stream=False, conversation=conversation, content="And 3.14?")
    asked, replayed = server.bodies
    assert asked["tools"][-1] == {"type": "web_search"}
    assert replayed["input"][2:4] == RESPONSES_SEARCH["output"][:2]
    for body in server.bodies:
        assert_valid_request(body)


def test_switching_from_responses_to_anthropic_sends_the_text_and_no_tool_or_reasoning_item(
    searching, user
) -> None:
    responses = Recorder(whole_reply(RESPONSES_SEARCH), strict=True)
    first = run(
        searching,
        user,
        OpenAIResponsesProvider(api_key="k", http_client=responses.client),
        stream=False,
    )
    anthropic = Recorder(httpx.Response(200, json=ANTHROPIC_PLAIN), strict=True)
    conversation = Conversation.objects.get(pk=first.conversation_id)
    follow_up = run(
        searching,
        user,
        AnthropicProvider(api_key="k", http_client=anthropic.client),
        stream=False,
        conversation=conversation,
        content="Where?",
    )
    assert follow_up.status == Run.Status.COMPLETED
    (sent,) = anthropic.bodies
    assert validate_anthropic_request(sent) == []
    assert sent["messages"][1] == {"role": "assistant", "content": RESPONSES_TEXT}
    text = json.dumps(sent)
    for leak in ("web_search_call", "ws_68a1", "reasoning", "rs_ws", "encrypted", "url_citation"):
        assert leak not in text
    # Anthropic is offered its own server tool for the profile's web search (the last tool
    # definition also carries the request's prompt cache breakpoint, docs/context.md).
    offered = [{k: v for k, v in tool.items() if k != "cache_control"} for tool in sent["tools"]]
    assert {"type": "web_search_20250305", "name": "web_search"} in offered


# Refused before a run starts ------------------------------------------------------------


@pytest.fixture
def chat_completions_profile(searching):
    record = Provider.objects.create(
        slug="oa", name="OpenAI", adapter="openai", api_key_ref="env:PROVTOOLS_TEST_KEY"
    )
    searching.language_model = LanguageModel.objects.create(provider=record, model_id="gpt-4o")
    searching.save()
    return searching


def test_a_profile_asking_an_adapter_for_a_tool_it_lacks_is_refused_at_run_start(
    chat_completions_profile, user
) -> None:
    conversation = create_conversation(owner=user, profile=chat_completions_profile)
    with pytest.raises(ConfigurationError) as raised:
        submit_message(conversation=conversation, content="When?")
    assert 'the openai adapter cannot offer the provider tool "web_search"' in str(raised.value)
    assert not Run.objects.exists()
    with pytest.raises(ConfigurationError):
        build_provider(chat_completions_profile)


def test_a_stored_list_that_is_not_valid_is_a_configuration_error_naming_the_item(
    searching,
) -> None:
    searching.provider_tools = ["web_search", {"type": "file_search"}]
    with pytest.raises(ConfigurationError) as raised:
        completion_options(searching)
    assert "provider_tools/1/vector_store_ids" in str(raised.value)


def test_anthropic_code_execution_adds_its_beta_flag_to_the_records_own(
    profile, monkeypatch
) -> None:
    monkeypatch.setenv("PROVTOOLS_ANTHROPIC_KEY", "sk-ant-test")
    record = Provider.objects.create(
        slug="an",
        name="Anthropic",
        adapter="anthropic",
        api_key_ref="env:PROVTOOLS_ANTHROPIC_KEY",
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
    )
    profile.language_model = LanguageModel.objects.create(provider=record, model_id="claude")
    profile.provider_tools = ["code_execution"]
    profile.save()
    adapter = build_provider(profile)
    assert (
        adapter.extra_headers["anthropic-beta"] == "context-1m-2025-08-07,code-execution-2025-08-25"
    )


# The database's own checks -----------------------------------------------------------------


def test_raw_sql_cannot_store_a_backwards_citation_or_an_unknown_tool_kind(searching, user) -> None:
    server = Recorder(whole_reply(RESPONSES_SEARCH), strict=True)
    done = run(
        searching,
        user,
        OpenAIResponsesProvider(api_key="k", http_client=server.client),
        stream=False,
    )
    message = Message.objects.get(run=done, role="assistant")
    citation = Citation._meta.db_table
    calls = ProviderToolCall._meta.db_table
    profile_table = searching._meta.db_table
    statements = [
        f"INSERT INTO {citation} (message_id, {connection.ops.quote_name('index')}, start_offset, "
        f"end_offset, url, title, source_id) VALUES (%s, 9, 10, 2, 'https://a.example', '', '')",
        f"INSERT INTO {calls} (message_id, {connection.ops.quote_name('index')}, kind, provider, "
        "provider_call_id, status, query, code, result_summary, provider_metadata) "
        "VALUES (%s, 9, 'telepathy', 'x', '', 'completed', '', '', '', '{}')",
        f"UPDATE {profile_table} SET provider_tools = '{{}}' WHERE id = %s",
    ]
    for sql, arg in zip(statements, [message.pk, message.pk, searching.pk], strict=True):
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [arg])


def test_redaction_empties_the_provider_tool_calls_and_drops_the_citations(searching, user) -> None:
    server = Recorder(whole_reply(RESPONSES_SEARCH), strict=True)
    done = run(
        searching,
        user,
        OpenAIResponsesProvider(api_key="k", http_client=server.client),
        stream=False,
    )
    conversation = Conversation.objects.get(pk=done.conversation_id)
    redact_conversation(conversation=conversation)
    (call,) = ProviderToolCall.objects.filter(message__conversation=conversation)
    assert (call.query, call.code, call.result_summary, call.provider_metadata) == ("", "", "", {})
    assert (call.kind, call.status) == ("web_search", "completed")  # the shape stays
    assert not Citation.objects.filter(message__conversation=conversation).exists()


# Per-call billing ---------------------------------------------------------------------------


def _search_run(profile, user, *, price: str | None) -> Run:
    model = profile.language_model
    model.input_price_per_million = Decimal("1")
    model.output_price_per_million = Decimal("2")
    model.web_search_price_per_call = None if price is None else Decimal(price)
    model.save()
    Budget.objects.create(
        name="cost", scope="user", user=user, period="day", cost_limit=Decimal("100")
    )
    server = Recorder(whole_reply(RESPONSES_SEARCH), strict=True)
    adapter = OpenAIResponsesProvider(api_key="k", http_client=server.client)
    return run(profile, user, adapter, stream=False)


def test_a_web_search_is_charged_at_the_models_price_per_call_and_counts_in_budgets(
    searching, user
) -> None:
    done = _search_run(searching, user, price="0.01")
    (call,) = ModelCall.objects.filter(run=done)
    tokens = (Decimal(320) * 1 + Decimal(60) * 2) / 1_000_000
    assert call.web_search_calls == 1
    assert call.web_search_price_per_call == Decimal("0.01")
    assert call.cost == tokens + Decimal("0.01")
    done.refresh_from_db()
    assert done.cost == call.cost and done.unpriced_calls == 0
    (counter,) = BudgetCounter.objects.all()
    assert counter.cost == call.cost


def test_a_web_search_without_a_price_leaves_the_call_unpriced(searching, user) -> None:
    done = _search_run(searching, user, price=None)
    (call,) = ModelCall.objects.filter(run=done)
    assert (call.web_search_calls, call.web_search_price_per_call, call.cost) == (1, None, None)
    done.refresh_from_db()
    assert done.unpriced_calls == 1


def test_a_branch_keeps_the_search_and_its_citations_with_the_copied_answer(
    searching, user
) -> None:
    server = Recorder(whole_reply(RESPONSES_SEARCH), strict=True)
    done = run(
        searching,
        user,
        OpenAIResponsesProvider(api_key="k", http_client=server.client),
        stream=False,
    )
    original = Conversation.objects.get(pk=done.conversation_id)
    branch = fork_conversation(conversation=original, position=1)
    copied = Message.objects.get(conversation=branch, role="assistant")
    (call,) = copied.provider_tool_calls.all()
    assert (call.provider_call_id, call.query) == ("ws_68a1", "python 3.13 release date")
    assert [c.url for c in copied.citations.all()] == [
        "https://www.python.org/downloads/release/python-3130/"
    ]
    # The original keeps its own rows.
    assert ProviderToolCall.objects.count() == 2 and Citation.objects.count() == 2
