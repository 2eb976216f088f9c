"""Which adapters need no API key: one set, and it is what the adapters really accept."""

from __future__ import annotations

import pytest

from conversations.exceptions import ConfigurationError
from conversations.models import Provider
from conversations.services.configuration import KEYLESS_ADAPTERS, provider_from_record

pytestmark = pytest.mark.django_db


def test_the_offline_demo_and_ollama_need_no_key():
    assert sorted(KEYLESS_ADAPTERS) == ["demo", "ollama"]


@pytest.mark.parametrize("adapter", Provider.Adapter.values)
def test_a_record_without_a_key_builds_exactly_when_its_adapter_is_keyless(adapter):
    record = Provider.objects.create(slug=adapter.replace("_", "-"), name=adapter, adapter=adapter)
    if adapter in KEYLESS_ADAPTERS:
        assert provider_from_record(record) is not None
    else:
        with pytest.raises(ConfigurationError, match="does not resolve"):
            provider_from_record(record)
