"""Each vendor's "too long for the context window" 400 becomes ``context_too_large``."""

from __future__ import annotations

import json

import httpx
import pytest

from conversations.exceptions import ContextTooLarge, ProviderHTTPError
from conversations.providers.context_errors import is_context_length_error
from conversations.providers.openai_responses import OpenAIResponsesProvider
from tests.providers.mock_http import provider_with_replies
from tests.providers.test_errors import CASES, HI, KEY

# The bodies as each vendor sends them (their wording and structure, our numbers).
CONTEXT_ERRORS = {
    "openai": {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130532 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208437 tokens > 200000 maximum",
        },
    },
    "gemini": {
        "error": {
            "code": 400,
            "message": "The input token count (1196265) exceeds the maximum number of tokens "
            "allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    },
    "ollama": {
        "error": json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "request (351 tokens) exceeds the available context size "
                    "(256 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 351,
                    "n_ctx": 256,
                }
            }
        )
    },
}
"""Ollama wraps its runner's error as a string in its own ``error``."""

OTHER_400 = {
    "openai": {"error": {"message": "Invalid 'messages[0].role'", "code": "invalid_value"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "x"}},
    "gemini": {"error": {"code": 400, "message": "Invalid JSON payload", "status": "BAD"}},
    "ollama": {"error": "model 'qwen3' not found"},
}


@pytest.mark.parametrize("vendor", sorted(CASES))
def test_each_vendors_context_length_400_is_context_too_large(vendor):
    case = CASES[vendor]
    provider, requests, _ = case.provider(httpx.Response(400, json=CONTEXT_ERRORS[vendor]))
    with pytest.raises(ContextTooLarge) as raised:
        provider.complete(HI, options=case.options())
    assert raised.value.code == "context_too_large"
    assert raised.value.status_code == 400
    assert len(requests) == 1  # not retried by the adapter: the loop decides


@pytest.mark.parametrize("vendor", sorted(CASES))
def test_another_400_stays_an_http_error(vendor):
    case = CASES[vendor]
    provider, _, _ = case.provider(httpx.Response(400, json=OTHER_400[vendor]))
    with pytest.raises(ProviderHTTPError) as raised:
        provider.complete(HI, options=case.options())
    assert not isinstance(raised.value, ContextTooLarge)


def test_the_responses_api_says_it_as_openai_does():
    provider, _, _ = provider_with_replies(
        OpenAIResponsesProvider, httpx.Response(400, json=CONTEXT_ERRORS["openai"]), api_key=KEY
    )
    with pytest.raises(ContextTooLarge):
        provider.complete(HI, options=CASES["openai"].options())


def test_ollamas_plain_wording_is_recognised_and_a_server_error_is_not():
    plain = json.dumps({"error": "the input length exceeds the context length"})
    assert is_context_length_error("ollama", 400, plain)
    assert not is_context_length_error("ollama", 500, plain)
    assert not is_context_length_error("openai", 400, "not json at all")
