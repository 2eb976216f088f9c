"""The provider timeout is a deadline, and answers have a size limit: over real HTTP."""

from __future__ import annotations

import json

import pytest

from conversations.domain import ChatMessage
from conversations.exceptions import (
    ProviderInvalidResponse,
    ProviderRateLimited,
    ProviderTimeout,
)
from conversations.providers.base import CompletionOptions
from conversations.providers.openai import OpenAIProvider
from tests.fake_provider import FakeAnswer, FakeProviderServer, openai_body

OPTIONS = CompletionOptions(model="fake-model")
HELLO = [ChatMessage.user("Hello")]


def adapter(server, **kwargs):
    sleeps: list[float] = []
    kwargs.setdefault("sleep", sleeps.append)
    provider = OpenAIProvider(
        api_key="sk-test", base_url=server.base_url, preset="openai_compatible", **kwargs
    )
    return provider, sleeps


def test_a_provider_trickling_bytes_is_cut_at_the_deadline():
    body = json.dumps(openai_body("x" * 200)).encode()
    with FakeProviderServer(FakeAnswer(body, drip_seconds=0.05)) as server:
        provider, _ = adapter(server, timeout=0.5, max_retries=0)
        with pytest.raises(ProviderTimeout):
            provider.complete(HELLO, options=OPTIONS)
        provider.close()
        # Each byte came well within the socket timeout; the deadline stopped reading.
        assert server.bytes_sent < len(body)


def test_a_retry_after_beyond_the_deadline_fails_at_once():
    answers = [FakeAnswer.json({"error": "slow down"}, status=429, headers={"retry-after": "100"})]
    with FakeProviderServer(*answers) as server:
        provider, sleeps = adapter(server, timeout=3, max_retries=3)
        with pytest.raises(ProviderRateLimited):
            provider.complete(HELLO, options=OPTIONS)
        provider.close()
        assert sleeps == []
        assert len(server.requests) == 1


def test_a_retry_within_the_deadline_still_happens():
    answers = [
        FakeAnswer.json({"error": "busy"}, status=429, headers={"retry-after": "1"}),
        FakeAnswer.json(openai_body("fine")),
    ]
    with FakeProviderServer(*answers) as server:
        provider, sleeps = adapter(server, timeout=30, max_retries=2)
        assert provider.complete(HELLO, options=OPTIONS).content == "fine"
        provider.close()
        assert sleeps == [1.0]


@pytest.mark.parametrize("declare_length", [True, False])
def test_an_answer_over_max_response_bytes_is_not_read(declare_length):
    body = json.dumps(openai_body("y" * 200_000)).encode()
    with FakeProviderServer(FakeAnswer(body, declare_length=declare_length)) as server:
        provider, _ = adapter(server, max_response_bytes=10_000, max_retries=0)
        with pytest.raises(ProviderInvalidResponse) as info:
            provider.complete(HELLO, options=OPTIONS)
        provider.close()
    assert info.value.code == "invalid_response"
    assert "10000 bytes" in info.value.detail


def test_an_answer_within_the_limit_is_read():
    with FakeProviderServer(FakeAnswer.json(openai_body("small"))) as server:
        provider, _ = adapter(server, max_response_bytes=10_000)
        assert provider.complete(HELLO, options=OPTIONS).content == "small"
        provider.close()


def test_max_response_bytes_must_be_positive():
    with pytest.raises(ValueError, match="max_response_bytes"):
        OpenAIProvider(api_key="k", max_response_bytes=0)
