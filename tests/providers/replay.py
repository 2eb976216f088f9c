"""Build a history into a request for every adapter and check it with that wire's validator."""

from __future__ import annotations

from collections.abc import Sequence

from conversations.domain import ChatMessage, ToolSpec
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import CompletionOptions
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from conversations.providers.openai_responses import OpenAIResponsesProvider
from tests.providers.responses_conformance import validate_responses_request
from tests.providers.wire_anthropic import validate_anthropic_request
from tests.providers.wire_gemini import validate_gemini_request
from tests.providers.wire_ollama import validate_ollama_request
from tests.providers.wire_openai import validate_openai_request

ADAPTERS = {
    "openai": (OpenAIProvider(api_key="k"), validate_openai_request, "gpt-4o-mini"),
    "anthropic": (AnthropicProvider(api_key="k"), validate_anthropic_request, "claude-sonnet-4-5"),
    "gemini": (GeminiProvider(api_key="k"), validate_gemini_request, "gemini-2.5-flash"),
    "ollama": (OllamaProvider(), validate_ollama_request, "qwen3"),
    "openai_responses": (
        OpenAIResponsesProvider(api_key="k"),
        validate_responses_request,
        "gpt-5-mini",
    ),
}


def assert_every_adapter_accepts(
    history: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
) -> None:
    """Fail with every provider's problems if any adapter would send an invalid body."""
    problems = {}
    for name, (adapter, validate, model) in ADAPTERS.items():
        body = adapter.build_payload(list(history), list(tools), CompletionOptions(model=model))
        found = validate(body)
        if found:
            problems[name] = found
    assert not problems, problems
