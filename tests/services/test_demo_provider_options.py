"""A demo Provider record's options, the environment and the setting: latency, pause per piece."""

from __future__ import annotations

import pytest

from conversations.checks import check_settings
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


def test_the_demo_streams_about_30_pieces_a_second_by_default(provider, monkeypatch):
    monkeypatch.delenv(DEMO_STREAM_DELAY_VARIABLE, raising=False)
    made = built(provider)
    assert made.latency == 0.0
    assert 25 <= 1 / made.stream_delay <= 35


def test_the_setting_sets_the_stream_delay_when_nothing_else_does(provider, monkeypatch, settings):
    monkeypatch.delenv(DEMO_STREAM_DELAY_VARIABLE, raising=False)
    settings.CONVERSATIONS = {"DEMO_STREAM_DELAY_SECONDS": 0}
    assert built(provider).stream_delay == 0.0
    settings.CONVERSATIONS = {"DEMO_STREAM_DELAY_SECONDS": 0.1}
    assert built(provider).stream_delay == 0.1
    monkeypatch.setenv(DEMO_STREAM_DELAY_VARIABLE, "0.2")
    assert built(provider).stream_delay == 0.2  # the environment wins over the setting


@pytest.mark.parametrize("value", [-1, "fast", True, None, float("inf")])
def test_a_bad_setting_is_a_configuration_error_and_a_check_naming_it(
    provider, monkeypatch, settings, value
):
    monkeypatch.delenv(DEMO_STREAM_DELAY_VARIABLE, raising=False)
    settings.CONVERSATIONS = {"DEMO_STREAM_DELAY_SECONDS": value}
    with pytest.raises(ConfigurationError, match="DEMO_STREAM_DELAY_SECONDS"):
        provider_from_record(provider)
    errors = [m for m in check_settings() if m.id == "conversations.E016"]
    assert len(errors) == 1 and "DEMO_STREAM_DELAY_SECONDS" in errors[0].msg


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
