"""Cross-provider replay: turns parsed from each provider, sent to every provider.

A conversation may start on one provider and continue on any other. For each
source provider, its reference responses (a turn with two parallel calls, one
without arguments, then a final text) are parsed into value objects and stored
as a history; that history is then built into a request for each of the four
adapters, and the validator written from that provider's HTTP 400 rules must
find nothing wrong. A last case mixes turns from all four in one conversation.
"""

from __future__ import annotations

import pytest

from conversations.domain import ChatMessage
from conversations.providers.base import CompletionOptions
from tests.providers import test_anthropic, test_gemini, test_ollama, test_openai
from tests.providers.replay import ADAPTERS, assert_every_adapter_accepts
from tests.providers.test_openai import TOOLS

SOURCES = {
    "openai": (test_openai.REFERENCE_CALLS_RESPONSE, test_openai.REFERENCE_TEXT_RESPONSE),
    "anthropic": (test_anthropic.REFERENCE_B, test_anthropic.REFERENCE_C),
    "gemini": (test_gemini.REFERENCE_B, test_gemini.REFERENCE_C),
    "ollama": (test_ollama.REFERENCE_CALLS_RESPONSE, test_ollama.REFERENCE_TEXT_RESPONSE),
}


def turn_from(source: str, known: set[str]) -> list[ChatMessage]:
    """A user question, the source's call turn, results for each call, its final answer."""
    adapter = ADAPTERS[source][0]
    calls_body, text_body = SOURCES[source]
    calls = adapter.parse_response(calls_body, known_ids=frozenset(known))
    assert calls.has_tool_calls, source
    known.update(c.id for c in calls.tool_calls)
    results = [
        ChatMessage.tool_result(call.id, f'{{"from": "{source}", "tool": "{call.name}"}}')
        for call in calls.tool_calls
    ]
    final = adapter.parse_response(text_body, known_ids=frozenset(known))
    return [
        ChatMessage.user(f"Question for {source}: weather in Paris, and the time?"),
        calls.to_message(),
        *results,
        final.to_message(),
    ]


@pytest.mark.parametrize("target", sorted(ADAPTERS))
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_history_from_source_is_accepted_by_target(source: str, target: str) -> None:
    history = [ChatMessage.system("You are a helpful assistant."), *turn_from(source, set())]
    history.append(ChatMessage.user("And tomorrow?"))
    adapter, validate, model = ADAPTERS[target]
    body = adapter.build_payload(history, list(TOOLS), CompletionOptions(model=model))
    assert validate(body) == [], (source, target, body)


def test_one_conversation_mixing_all_four_sources_is_accepted_everywhere() -> None:
    known: set[str] = set()
    history = [ChatMessage.system("You are a helpful assistant.")]
    for source in ("anthropic", "gemini", "openai", "ollama"):
        history.extend(turn_from(source, known))
    history.append(ChatMessage.user("Thanks!"))
    # Reference responses reuse ids across providers; parsing with known ids keeps them unique.
    all_ids = [c.id for m in history if m.tool_calls for c in m.tool_calls]
    assert len(all_ids) == len(set(all_ids)) == 8
    assert_every_adapter_accepts(history, TOOLS)
