"""A demo Provider record's options: the answer latency and the pause between streamed pieces."""

from __future__ import annotations

import pytest

from conversations.exceptions import ConfigurationError
from conversations.providers.demo import DemoProvider
from conversations.services.configuration.providers import (
    DEMO_STREAM_DELAY_VARIABLE,
    provider_from_record,
)


def built(provider) -> DemoProvider:
    made = provider_from_record(provider)
    assert isinstance(made, DemoProvider)
    return made


def test_the_demo_does_not_pause_by_default(provider, monkeypatch):
    monkeypatch.delenv(DEMO_STREAM_DELAY_VARIABLE, raising=False)
    made = built(provider)
    assert (made.latency, made.stream_delay) == (0.0, 0.0)


def test_the_options_set_latency_and_stream_delay(provider, monkeypatch):
    monkeypatch.setenv(DEMO_STREAM_DELAY_VARIABLE, "0.5")
    provider.options = {"latency_seconds": 1, "stream_delay_seconds": 0.02}
    made = built(provider)
    assert (made.latency, made.stream_delay) == (1.0, 0.02)  # the option wins


def test_the_environment_sets_the_stream_delay_when_the_option_is_absent(provider, monkeypatch):
    monkeypatch.setenv(DEMO_STREAM_DELAY_VARIABLE, " 0.05 ")
    assert built(provider).stream_delay == 0.05


@pytest.mark.parametrize("value", [-1, "fast", True, None, float("nan")])
@pytest.mark.parametrize("option", ["latency_seconds", "stream_delay_seconds"])
def test_a_bad_option_is_a_configuration_error_naming_it(provider, option, value):
    provider.options = {option: value}
    with pytest.raises(ConfigurationError, match=option):
        provider_from_record(provider)


@pytest.mark.parametrize("value", ["-0.1", "soon", "inf", "nan"])
def test_a_bad_environment_value_is_a_configuration_error_naming_it(provider, monkeypatch, value):
    monkeypatch.setenv(DEMO_STREAM_DELAY_VARIABLE, value)
    with pytest.raises(ConfigurationError, match=DEMO_STREAM_DELAY_VARIABLE):
        provider_from_record(provider)
