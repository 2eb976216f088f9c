"""HTTP failures map to the same errors through every HTTP adapter (retries, redaction, keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from conversations.domain import ChatMessage
from conversations.exceptions import (
    ProviderAuthenticationError,
    ProviderHTTPError,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderTimeout,
)
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import CompletionOptions, HTTPProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider
from tests.providers import test_anthropic, test_gemini, test_ollama, test_openai
from tests.providers.mock_http import Reply, provider_with_replies, timeout

KEY = "sk-errors-SECRET-0123456789abcdef"
HI = [ChatMessage.user("Hi")]


@dataclass(frozen=True)
class Case:
    adapter: type[HTTPProvider]
    model: str
    text_reply: dict[str, Any]
    """A final text answer; ``total_tokens`` is :attr:`total`."""
    total: int
    calls_reply: dict[str, Any]
    """An answer calling tools."""
    key_header: str
    """The header that carries the key (its value holds the key)."""

    def provider(
        self, *outcomes: Reply, **kwargs: Any
    ) -> tuple[Any, list[httpx.Request], list[float]]:
        return provider_with_replies(self.adapter, *outcomes, api_key=KEY, **kwargs)

    def options(self) -> CompletionOptions:
        return CompletionOptions(model=self.model)


CASES = {
    "openai": Case(
        OpenAIProvider,
        "gpt-4o-mini",
        test_openai.REFERENCE_TEXT_RESPONSE,
        1201,
        test_openai.REFERENCE_CALLS_RESPONSE,
        "authorization",
    ),
    "anthropic": Case(
        AnthropicProvider,
        "claude-sonnet-4-5",
        test_anthropic.REFERENCE_C,
        1204,
        test_anthropic.REFERENCE_B,
        "x-api-key",
    ),
    "gemini": Case(
        GeminiProvider,
        "gemini-2.5-flash",
        test_gemini.REFERENCE_C,
        1201,
        test_gemini.REFERENCE_B,
        "x-goog-api-key",
    ),
    "ollama": Case(
        OllamaProvider,
        "qwen3",
        test_ollama.REFERENCE_TEXT_RESPONSE,
        262,
        test_ollama.REFERENCE_CALLS_RESPONSE,
        "authorization",
    ),
}


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]


@pytest.mark.parametrize("status", [401, 403])
def test_authentication_errors_are_not_retried_and_hide_the_key(case: Case, status: int) -> None:
    echo = {"error": {"code": status, "message": f"invalid key {KEY}"}}
    provider, requests, _ = case.provider(httpx.Response(status, json=echo))
    with pytest.raises(ProviderAuthenticationError) as caught:
        provider.complete(HI, options=case.options())
    assert caught.value.status_code == status
    assert KEY not in str(caught.value)
    assert "[redacted]" in str(caught.value)
    assert len(requests) == 1


def test_429_waits_as_long_as_retry_after_says_then_succeeds(case: Case) -> None:
    provider, requests, sleeps = case.provider(
        httpx.Response(429, headers={"retry-after": "7"}), httpx.Response(200, json=case.text_reply)
    )
    response = provider.complete(HI, options=case.options())
    assert response.finish_reason == "stop"
    assert response.usage.total_tokens == case.total
    assert sleeps == [7.0]
    assert len(requests) == 2


def test_429_after_the_last_retry_is_rate_limited(case: Case) -> None:
    provider, requests, _ = case.provider(
        *(httpx.Response(429, headers={"retry-after": "2"}) for _ in range(3))
    )
    with pytest.raises(ProviderRateLimited) as caught:
        provider.complete(HI, options=case.options())
    assert caught.value.retry_after == 2.0
    assert len(requests) == 3


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_then_success_sends_the_same_body_twice(case: Case, status: int) -> None:
    provider, requests, sleeps = case.provider(
        httpx.Response(status, text="overloaded"), httpx.Response(200, json=case.calls_reply)
    )
    response = provider.complete(HI, options=case.options())
    assert response.finish_reason == "tool_calls"
    assert len(requests) == 2
    assert len(sleeps) == 1
    assert requests[0].content == requests[1].content


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_timeouts_are_retried_then_reported(case: Case, retries: int) -> None:
    provider, requests, sleeps = case.provider(*[timeout] * (retries + 1), max_retries=retries)
    with pytest.raises(ProviderTimeout):
        provider.complete(HI, options=case.options())
    assert len(requests) == retries + 1
    assert len(sleeps) == retries


@pytest.mark.parametrize("text", ["{not json", "<html>oops</html>"])
def test_invalid_json_is_a_response_error_and_not_retried(case: Case, text: str) -> None:
    provider, requests, _ = case.provider(httpx.Response(200, text=text))
    with pytest.raises(ProviderResponseError):
        provider.complete(HI, options=case.options())
    assert len(requests) == 1


@pytest.mark.parametrize("status", [502, 503])
def test_max_retries_zero_sends_exactly_one_request(case: Case, status: int) -> None:
    provider, requests, sleeps = case.provider(httpx.Response(status), max_retries=0)
    with pytest.raises(ProviderHTTPError) as caught:
        provider.complete(HI, options=case.options())
    assert caught.value.status_code == status
    assert len(requests) == 1
    assert sleeps == []


@pytest.mark.parametrize("status", [400, 404, 408, 422])
def test_other_4xx_are_not_retried_and_an_echoed_key_is_redacted(case: Case, status: int) -> None:
    provider, requests, _ = case.provider(
        httpx.Response(status, json={"error": {"message": f"bad request for key {KEY}"}})
    )
    with pytest.raises(ProviderHTTPError) as caught:
        provider.complete(HI, options=case.options())
    assert caught.value.status_code == status
    assert len(requests) == 1
    assert KEY not in str(caught.value)
    assert KEY not in caught.value.body


def test_the_key_travels_only_in_its_header(case: Case) -> None:
    provider, requests, _ = case.provider(httpx.Response(200, json=case.text_reply))
    provider.complete(HI, options=case.options())
    (request,) = requests
    assert KEY not in str(request.url)
    assert KEY.encode() not in request.content
    assert [name for name, value in request.headers.items() if KEY in value] == [case.key_header]
    assert KEY not in repr(provider)
