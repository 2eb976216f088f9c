"""Connection checks and per-model sampling parameters: one service for the admin and the CLI."""

from __future__ import annotations

import httpx
import pytest

from conversations.domain import ChatMessage
from conversations.exceptions import ConfigurationError
from conversations.models import LanguageModel, Profile, Provider
from conversations.services import append_messages
from conversations.services.configuration.providers import (
    ConnectionCheck,
    accepted_sampling_parameters,
    check_connection,
    completion_options,
)
from conversations.services.history.conversations import export_payload

pytestmark = pytest.mark.django_db

KEY = "sk-check-SECRET-1234567890"


@pytest.fixture
def openai(monkeypatch):
    monkeypatch.setenv("CHECK_TEST_KEY", KEY)
    provider = Provider.objects.create(
        slug="oai",
        name="OAI",
        adapter=Provider.Adapter.OPENAI,
        api_key_ref="env:CHECK_TEST_KEY",
        max_retries=3,
    )
    model = LanguageModel.objects.create(provider=provider, model_id="gpt-test")
    return Profile.objects.create(slug="oai", name="OAI", language_model=model, temperature=0.5)


def client(status: int, body: dict, seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=body)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_a_failure_is_one_attempt_and_never_shows_the_key(openai):
    seen: list[httpx.Request] = []
    check = check_connection(profile=openai, http_client=client(500, {"error": KEY}, seen))
    assert (check.status, check.code) == ("failed", "provider_http_error")
    assert len(seen) == 1  # no retries, whatever the record says
    assert KEY not in check.detail and "HTTP 500" in check.detail
    openai.language_model.provider.refresh_from_db()
    assert openai.language_model.provider.max_retries == 3


def test_a_provider_is_checked_with_its_first_active_model(openai):
    seen: list[httpx.Request] = []
    reply = {
        "model": "gpt-test",
        "choices": [{"message": {"role": "assistant", "content": "pong"}}],
    }
    provider = openai.language_model.provider
    check = check_connection(provider=provider, http_client=client(200, reply, seen))
    assert check.ok and "gpt-test answered in" in check.detail
    assert len(seen) == 1


def test_a_provider_without_an_active_model_is_skipped(openai):
    LanguageModel.objects.update(is_active=False)
    check = check_connection(provider=openai.language_model.provider)
    assert check == ConnectionCheck("skipped", check.detail)
    assert "no active language model" in check.detail


def test_without_send_nothing_goes_out_but_the_key_must_resolve(openai, monkeypatch):
    seen: list[httpx.Request] = []
    assert check_connection(profile=openai, send=False, http_client=client(200, {}, seen)).ok
    assert seen == []
    monkeypatch.delenv("CHECK_TEST_KEY")
    check = check_connection(profile=openai, send=False)
    assert (check.status, check.code) == ("failed", "configuration_error")


def test_exactly_one_record_is_checked(openai):
    with pytest.raises(TypeError):
        check_connection()
    with pytest.raises(TypeError):
        check_connection(profile=openai, provider=openai.language_model.provider)


def test_the_models_sampling_parameters_reach_the_options(openai):
    model = openai.language_model
    assert completion_options(openai).sampling_parameters is None
    model.sampling_parameters = []
    model.save()
    assert completion_options(openai).sampling_parameters == frozenset()
    assert accepted_sampling_parameters(model) == frozenset()


def test_a_stored_unknown_parameter_is_a_configuration_error(openai):
    openai.language_model.sampling_parameters = ["top_q"]
    with pytest.raises(ConfigurationError, match="top_q"):
        completion_options(openai)


def test_the_adapter_default_applies_when_the_model_names_none(openai):
    assert accepted_sampling_parameters(openai.language_model) == frozenset({"temperature"})
    claude = Provider.objects.create(slug="c", name="C", adapter=Provider.Adapter.ANTHROPIC)
    model = LanguageModel.objects.create(provider=claude, model_id="claude-sonnet-4-5")
    assert accepted_sampling_parameters(model) == frozenset()


@pytest.mark.parametrize(("accepted", "sent"), [(None, False), (["temperature"], True)])
def test_the_export_shows_the_temperature_exactly_when_it_would_be_sent(
    conversation, openai, accepted, sent
):
    claude = Provider.objects.create(slug="c", name="C", adapter=Provider.Adapter.ANTHROPIC)
    model = LanguageModel.objects.create(
        provider=claude, model_id="claude-sonnet-4-5", sampling_parameters=accepted
    )
    openai.language_model = model
    openai.save()
    conversation.profile = openai
    conversation.save()
    append_messages(conversation=conversation, messages=[ChatMessage.user("hi")])
    body = export_payload(conversation=conversation, format="anthropic")
    assert ("temperature" in body) is sent
