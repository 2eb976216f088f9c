"""A ``Provider`` record with the Responses API adapter: the service it names, and refusals."""

from __future__ import annotations

import pytest

from conversations.exceptions import ConfigurationError
from conversations.models import Provider
from conversations.providers.openai_responses import OpenAIResponsesProvider
from conversations.services.configuration import provider_from_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("RESPONSES_TEST_KEY", "sk-responses-test")


def record(**fields) -> Provider:
    return Provider.objects.create(
        slug="responses",
        name="Responses",
        adapter=Provider.Adapter.OPENAI_RESPONSES,
        api_key_ref="env:RESPONSES_TEST_KEY",
        **fields,
    )


def test_a_record_builds_the_responses_adapter_for_openai_by_default(key):
    adapter = provider_from_record(record())
    assert isinstance(adapter, OpenAIResponsesProvider)
    assert (adapter.preset.name, adapter.base_url) == ("openai", "https://api.openai.com/v1")


def test_the_azure_preset_comes_from_the_records_options(key):
    base = "https://example.openai.azure.com/openai/v1"
    adapter = provider_from_record(record(base_url=base, options={"preset": "azure_openai"}))
    assert isinstance(adapter, OpenAIResponsesProvider)
    assert (adapter.preset.name, adapter.base_url) == ("azure_openai", base)


def test_a_preset_without_the_responses_api_is_refused_by_name(key):
    with pytest.raises(ConfigurationError, match='option "preset" must be one of'):
        provider_from_record(record(options={"preset": "mistral"}))
