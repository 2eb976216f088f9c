"""HTTPProvider's shared behaviour (retries, error mapping, secrecy), through the adapters."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from conversations.domain import ChatMessage
from conversations.exceptions import (
    ProviderAuthenticationError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderRateLimited,
    ProviderResponseError,
    ProviderTimeout,
)
from conversations.providers.base import ChatProvider, CompletionOptions
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import OpenAIProvider

from .test_ollama import REFERENCE_TEXT_RESPONSE as OLLAMA_TEXT
from .test_openai import REFERENCE_TEXT_RESPONSE as OPENAI_TEXT

KEY = "sk-live-SECRET-4f9a8b7c6d5e"
MESSAGES = [ChatMessage.user("hi")]
OPTIONS = CompletionOptions(model="gpt-4o-mini")


def ok() -> httpx.Response:
    return httpx.Response(200, json=OPENAI_TEXT)


def error(
    status: int, text: str = '{"error": {"message": "nope"}}', **headers: str
) -> httpx.Response:
    return httpx.Response(status, text=text, headers=headers)


@pytest.fixture
def openai(mock_http, sleeps):
    """``openai(*replies, **kwargs)`` -> (adapter, recorder)."""

    def make(*replies, **kwargs):
        recorder = mock_http(*replies)
        adapter = OpenAIProvider(
            api_key=KEY, http_client=recorder.client, sleep=sleeps.append, **kwargs
        )
        return adapter, recorder

    return make


def test_the_adapters_are_chat_providers() -> None:
    assert isinstance(OpenAIProvider(api_key=KEY), ChatProvider)
    assert isinstance(OllamaProvider(), ChatProvider)


def test_success_sends_one_request(openai, sleeps) -> None:
    adapter, recorder = openai(ok())
    assert adapter.complete(MESSAGES, options=OPTIONS).usage.cached_prompt_tokens == 1024
    assert len(recorder.requests) == 1
    assert recorder.requests[0].headers["content-type"] == "application/json"
    assert sleeps == []


@pytest.mark.parametrize("status", [401, 403])
def test_authentication_errors_are_not_retried(openai, sleeps, status: int) -> None:
    adapter, recorder = openai(error(status), ok())
    with pytest.raises(ProviderAuthenticationError) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert info.value.status_code == status
    assert info.value.code == "provider_authentication_failed"
    assert len(recorder.requests) == 1
    assert sleeps == []


def test_429_honours_retry_after_then_succeeds(openai, sleeps) -> None:
    adapter, recorder = openai(error(429, **{"Retry-After": "7"}), ok())
    result = adapter.complete(MESSAGES, options=OPTIONS)
    assert result.content.startswith("It is 18")
    assert len(recorder.requests) == 2
    assert sleeps == [7.0]


def test_429_on_every_attempt_raises_rate_limited_with_retry_after(openai, sleeps) -> None:
    adapter, recorder = openai(error(429, **{"Retry-After": "3"}), max_retries=2)
    with pytest.raises(ProviderRateLimited) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert info.value.retry_after == 3.0
    assert info.value.code == "provider_rate_limited"
    assert len(recorder.requests) == 3
    assert sleeps == [3.0, 3.0]


def test_429_without_retry_after_backs_off_exponentially(openai, sleeps) -> None:
    adapter, _ = openai(error(429), max_retries=3)
    with pytest.raises(ProviderRateLimited) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert info.value.retry_after is None
    assert len(sleeps) == 3
    # 0.5 s doubling, plus up to a quarter of jitter.
    for delay, base in zip(sleeps, (0.5, 1.0, 2.0), strict=True):
        assert base <= delay <= base * 1.25


def test_500_then_success_sends_two_requests(openai, sleeps) -> None:
    adapter, recorder = openai(error(500), ok())
    assert adapter.complete(MESSAGES, options=OPTIONS).finish_reason == "stop"
    assert len(recorder.requests) == 2
    assert len(sleeps) == 1
    # The retry sends the same body.
    assert recorder.bodies[0] == recorder.bodies[1]


def test_500_every_time_sends_exactly_max_retries_plus_one(openai, sleeps) -> None:
    adapter, recorder = openai(error(500, "upstream exploded"), max_retries=2)
    with pytest.raises(ProviderHTTPError) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert info.value.status_code == 500
    assert info.value.body == "upstream exploded"
    assert len(recorder.requests) == 3
    assert len(sleeps) == 2


def test_400_is_not_retried_and_carries_a_short_body(openai, sleeps) -> None:
    long_body = json.dumps({"error": {"message": "Invalid 'tools': empty array. " + "x" * 2000}})
    adapter, recorder = openai(error(400, long_body), ok())
    with pytest.raises(ProviderHTTPError) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert info.value.status_code == 400
    assert info.value.code == "provider_http_error"
    assert "Invalid 'tools'" in info.value.body
    assert len(info.value.body) <= 501
    assert len(str(info.value)) < 600
    assert len(recorder.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize("status", [404, 422])
def test_other_4xx_are_not_retried(openai, status: int) -> None:
    adapter, recorder = openai(error(status), ok())
    with pytest.raises(ProviderHTTPError):
        adapter.complete(MESSAGES, options=OPTIONS)
    assert len(recorder.requests) == 1


def test_timeouts_are_retried_then_raise_provider_timeout(openai, sleeps) -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    adapter, recorder = openai(timeout, max_retries=2, timeout=5)
    with pytest.raises(ProviderTimeout) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert info.value.code == "provider_timeout"
    assert "5 s" in str(info.value)
    assert len(recorder.requests) == 3
    assert len(sleeps) == 2


def test_a_timeout_then_success(openai) -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("connect timed out", request=request)

    adapter, recorder = openai(timeout, ok())
    assert adapter.complete(MESSAGES, options=OPTIONS).model == "gpt-4o-mini-2024-07-18"
    assert len(recorder.requests) == 2


def test_connection_errors_raise_provider_connection_error(openai, sleeps) -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    adapter, recorder = openai(refused, max_retries=1)
    with pytest.raises(ProviderConnectionError) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert type(info.value) is ProviderConnectionError
    assert info.value.code == "provider_unavailable"
    assert len(recorder.requests) == 2
    assert len(sleeps) == 1


def test_malformed_json_is_a_response_error_and_not_retried(openai) -> None:
    adapter, recorder = openai(httpx.Response(200, text="<html>502 from a proxy</html>"), ok())
    with pytest.raises(ProviderResponseError) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    assert info.value.code == "provider_bad_response"
    assert "not JSON" in str(info.value)
    assert len(recorder.requests) == 1


def test_json_that_is_not_an_object_is_a_response_error(openai) -> None:
    adapter, _ = openai(httpx.Response(200, json=[1, 2]))
    with pytest.raises(ProviderResponseError, match="expected a JSON object"):
        adapter.complete(MESSAGES, options=OPTIONS)


def test_a_2xx_body_without_choices_is_a_clear_response_error(openai) -> None:
    adapter, _ = openai(httpx.Response(200, json={"object": "chat.completion"}))
    with pytest.raises(ProviderResponseError, match="the response has no choices"):
        adapter.complete(MESSAGES, options=OPTIONS)


@pytest.mark.parametrize(
    ("reply", "raised"),
    [(error(500), ProviderHTTPError), (error(429), ProviderRateLimited), (ok(), None)],
)
def test_max_retries_zero_sends_exactly_one_request(openai, sleeps, reply, raised) -> None:
    adapter, recorder = openai(reply, ok(), max_retries=0)
    if raised is None:
        adapter.complete(MESSAGES, options=OPTIONS)
    else:
        with pytest.raises(raised):
            adapter.complete(MESSAGES, options=OPTIONS)
    assert len(recorder.requests) == 1
    assert sleeps == []


# The key stays secret -----------------------------------------------------------------------


def _echo(status: int):
    def handler(request: httpx.Request) -> httpx.Response:
        # A hostile or careless server echoing our credentials back.
        return httpx.Response(
            status, text=f"bad key: {request.headers.get('authorization')} ({KEY})"
        )

    return handler


@pytest.mark.parametrize("status", [200, 400, 401, 403, 429, 500])
def test_the_key_never_appears_in_errors_or_logs(openai, caplog, status: int) -> None:
    caplog.set_level(logging.DEBUG)
    adapter, recorder = openai(_echo(status))
    with pytest.raises(ProviderError) as info:
        adapter.complete(MESSAGES, options=OPTIONS)
    error = info.value
    assert KEY not in str(error)
    assert KEY not in repr(error)
    assert KEY not in getattr(error, "body", "")
    assert KEY not in caplog.text
    assert recorder.requests  # the server did receive (and echo) it


def test_the_key_travels_only_in_the_header(openai) -> None:
    adapter, recorder = openai(ok())
    adapter.complete(MESSAGES, options=OPTIONS)
    (request,) = recorder.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in str(request.url)
    assert KEY.encode() not in request.content


def test_repr_has_no_key() -> None:
    adapter = OpenAIProvider(api_key=KEY, preset="mistral")
    assert KEY not in repr(adapter)
    assert "mistral" in repr(adapter)
    assert KEY not in repr(OllamaProvider(api_key=KEY))


def test_extra_headers_are_sent_but_cannot_replace_the_key(openai) -> None:
    adapter, recorder = openai(
        ok(), extra_headers={"X-Title": "demo", "Authorization": "Bearer other"}
    )
    adapter.complete(MESSAGES, options=OPTIONS)
    assert recorder.requests[0].headers["x-title"] == "demo"
    assert recorder.requests[0].headers["authorization"] == f"Bearer {KEY}"


# The same machinery, once through Ollama -------------------------------------------------------


def test_ollama_retries_429_and_maps_errors_like_every_adapter(mock_http, sleeps) -> None:
    recorder = mock_http(
        error(429, **{"Retry-After": "2"}),
        error(503),
        httpx.Response(200, json=OLLAMA_TEXT),
        error(404, '{"error":"model \\"qwen9\\" not found, try pulling it first"}'),
    )
    adapter = OllamaProvider(http_client=recorder.client, sleep=sleeps.append, max_retries=2)
    options = CompletionOptions(model="qwen3")

    assert adapter.complete(MESSAGES, options=options).usage.total_tokens == 262
    assert len(recorder.requests) == 3
    assert sleeps[0] == 2.0
    with pytest.raises(ProviderHTTPError) as info:
        adapter.complete(MESSAGES, options=options)
    assert info.value.status_code == 404
    assert "not found" in info.value.body
    assert len(recorder.requests) == 4


def test_ollama_timeout_and_malformed_json(mock_http, sleeps) -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow model load", request=request)

    recorder = mock_http(timeout)
    adapter = OllamaProvider(http_client=recorder.client, sleep=sleeps.append, max_retries=1)
    with pytest.raises(ProviderTimeout):
        adapter.complete(MESSAGES, options=CompletionOptions(model="qwen3"))
    assert len(recorder.requests) == 2

    ndjson = '{"message":{"role":"assistant","content":"a"},"done":false}\n{"done":true}\n'
    recorder = mock_http(httpx.Response(200, text=ndjson))
    adapter = OllamaProvider(http_client=recorder.client, sleep=sleeps.append)
    with pytest.raises(ProviderResponseError):
        adapter.complete(MESSAGES, options=CompletionOptions(model="qwen3"))
