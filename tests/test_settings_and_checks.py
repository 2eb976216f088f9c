"""The CONVERSATIONS settings object, its system checks and the secret resolver."""

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from conversations import secrets
from conversations.checks import check_settings
from conversations.conf import DEFAULTS, app_settings, tool_concurrency, tool_timeout
from conversations.exceptions import ConfigurationError


def ids(messages):
    return sorted(m.id for m in messages)


def test_defaults_and_override_settings_resets_the_cache():
    assert app_settings().MAX_ITERATIONS == DEFAULTS["MAX_ITERATIONS"] == 10
    first = app_settings()
    assert app_settings() is first  # cached
    with override_settings(CONVERSATIONS={"MAX_ITERATIONS": 3}):
        assert app_settings().MAX_ITERATIONS == 3
        assert app_settings().TOOL_RESULT_MAX_BYTES == 50_000
    assert app_settings().MAX_ITERATIONS == 10


def test_a_clean_configuration_has_no_messages():
    assert check_settings() == []
    assert [m for m in run_checks() if m.id.startswith("conversations.")] == []


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"NO_SUCH_KEY": 1}, ["conversations.W001"]),
        ({"MAX_ITERATIONS": 0}, ["conversations.E001"]),
        ({"TOOL_RESULT_MAX_BYTES": "big"}, ["conversations.E001"]),
        ({"RUN_LEASE_SECONDS": True}, ["conversations.E001"]),
        ({"MAX_RUNS_PER_USER": 0}, ["conversations.E001"]),
        ({"MAX_RUNS_PER_USER": "4"}, ["conversations.E001"]),
        ({"LOGIN_FAILURE_LIMIT": 0}, ["conversations.E001"]),
        ({"LOGIN_FAILURE_WINDOW_SECONDS": 2.5}, ["conversations.E001"]),
        ({"EXECUTOR": "threads"}, ["conversations.E002"]),
        ({"HTTP_MAX_RETRIES": -1}, ["conversations.E003"]),
        ({"HTTP_TIMEOUT": 0}, ["conversations.E004"]),
        ({"CURRENCY": "dollars"}, ["conversations.E007"]),
        ({"CURRENCY": 978}, ["conversations.E007"]),
        ({"TRACE_CONTENT": "yes"}, ["conversations.E008"]),
        ({"SECRET_RESOLVER": "no.such.module.resolve"}, ["conversations.E005"]),
        ({"SECRET_RESOLVER": "conversations.conf.DEFAULTS"}, ["conversations.E005"]),
        ({"SEARCH_CONFIG": "english; drop"}, ["conversations.E010"]),
        ({"SEARCH_CONFIG": 7}, ["conversations.E010"]),
        ({"REDACTION_MARKER": ""}, ["conversations.E011"]),
        ({"TOOL_CONCURRENCY": 0}, ["conversations.E001"]),
        ({"TOOL_CONCURRENCY": 2.5}, ["conversations.E001"]),
        ({"TOOL_CONCURRENCY": "8"}, ["conversations.E001"]),
        ({"TOOL_TIMEOUT_SECONDS": 0}, ["conversations.E012"]),
        ({"TOOL_TIMEOUT_SECONDS": -1.5}, ["conversations.E012"]),
        ({"TOOL_TIMEOUT_SECONDS": True}, ["conversations.E012"]),
        ({"TOOL_TIMEOUT_SECONDS": "60"}, ["conversations.E012"]),
        ({"TOOL_TIMEOUT_SECONDS": float("inf")}, ["conversations.E012"]),
        ({"SEARCH_MAX_WORDS": 0}, ["conversations.E001"]),
        ({"SEARCH_MAX_CANDIDATES": "1000"}, ["conversations.E001"]),
        ({"SEARCH_TIMEOUT_SECONDS": 0}, ["conversations.E012"]),
    ],
)
def test_misconfiguration_is_reported_with_a_stable_id(conf, expected):
    with override_settings(CONVERSATIONS=conf):
        messages = check_settings()
    assert ids(messages) == expected
    assert all(repr(next(iter(conf))) in m.msg for m in messages)


def test_the_tool_limits_default_and_accept_good_values():
    assert (app_settings().TOOL_CONCURRENCY, app_settings().TOOL_TIMEOUT_SECONDS) == (8, 60)
    with override_settings(CONVERSATIONS={"TOOL_CONCURRENCY": 1, "TOOL_TIMEOUT_SECONDS": 0.5}):
        assert check_settings() == []
        assert (tool_concurrency(), tool_timeout()) == (1, 0.5)


@pytest.mark.parametrize(
    ("conf", "read", "message"),
    [
        (
            {"TOOL_CONCURRENCY": 0},
            tool_concurrency,
            "CONVERSATIONS['TOOL_CONCURRENCY'] must be a positive integer, got 0.",
        ),
        (
            {"TOOL_TIMEOUT_SECONDS": "soon"},
            tool_timeout,
            "CONVERSATIONS['TOOL_TIMEOUT_SECONDS'] must be a positive number, got 'soon'.",
        ),
    ],
)
def test_reading_an_unusable_tool_limit_raises_naming_the_key(conf, read, message):
    with override_settings(CONVERSATIONS=conf), pytest.raises(ConfigurationError) as info:
        read()
    assert info.value.detail == message
    assert info.value.code == "configuration_error"


def test_env_references_resolve_only_when_set(monkeypatch):
    monkeypatch.setenv("CONV_TEST_KEY", "sk-123")
    assert secrets.resolve("env:CONV_TEST_KEY") == "sk-123"
    monkeypatch.delenv("CONV_TEST_KEY")
    assert secrets.resolve("env:CONV_TEST_KEY") is None
    assert secrets.resolve("") is None
    assert secrets.resolve("vault:whatever") is None
    assert secrets.resolve("env:") is None


def upper_resolver(reference):
    return reference.upper() if reference.startswith("test:") else None


def test_the_resolver_is_replaceable():
    with override_settings(CONVERSATIONS={"SECRET_RESOLVER": f"{__name__}.upper_resolver"}):
        assert secrets.resolve("test:abc") == "TEST:ABC"
        assert secrets.resolve("env:HOME") is None


def test_the_suite_runs_on_the_test_settings_with_a_fast_hasher(settings):
    from django.contrib.auth.hashers import make_password

    assert settings.SETTINGS_MODULE == "project.settings_test"
    assert make_password("secret").startswith("md5$")


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"ATTACHMENT_STORAGE": "nowhere"}, ["conversations.E030"]),
        ({"ATTACHMENT_TYPES": "image/png"}, ["conversations.E031"]),
        ({"ATTACHMENT_TYPES": ["image/png", "image/svg+xml"]}, ["conversations.W030"]),
        ({"MAX_ATTACHMENT_BYTES": 0}, ["conversations.E001"]),
        ({"MAX_ATTACHMENTS_PER_MESSAGE": "10"}, ["conversations.E001"]),
        ({"PDF_TEXT_MAX_PAGES": 0}, ["conversations.E001"]),
        ({"PDF_TEXT_TIMEOUT_SECONDS": 0}, ["conversations.E012"]),
    ],
)
def test_attachment_misconfiguration_is_reported_with_a_stable_id(conf, expected):
    from conversations.checks import check_attachments

    with override_settings(CONVERSATIONS=conf):
        messages = check_attachments()
    assert ids(messages) == expected
    assert all(repr(next(iter(conf))) in m.msg for m in messages)
