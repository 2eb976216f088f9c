"""Faulty provider values and unstorable tool results never crash a run nor lose a result.

The provider cases talk to a fake provider over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError

from conversations.domain import Role
from conversations.models import LanguageModel, Message, Profile, Provider, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.boundary import MAX_TOKEN_COUNT
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop
from conversations.services.loop import tool_calls as tool_calls_module
from conversations.services.loop.tool_calls import TOOL_FAILED, tool_error_text
from conversations.tools import registry, tool
from tests.fake_provider import FakeAnswer, FakeProviderServer, openai_body, openai_call

pytestmark = pytest.mark.django_db

KEY_VARIABLE = "HARDENING_TEST_KEY"


@pytest.fixture
def executed():
    return []


@pytest.fixture
def tools(executed):
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def echo(text: str) -> str:
            """Give the text back."""
            executed.append(text)
            return text

        @tool(registry=r)
        def nul() -> str:
            """A result with characters no database stores."""
            executed.append("nul")
            return "before\x00after\ud800end"

        yield r


@pytest.fixture
def fake_profile(monkeypatch):
    def make(server: FakeProviderServer, **provider_fields) -> Profile:
        monkeypatch.setenv(KEY_VARIABLE, "sk-test-secret")
        provider = Provider.objects.create(
            slug="fake",
            name="Fake",
            adapter=Provider.Adapter.OPENAI_COMPATIBLE,
            base_url=server.base_url,
            api_key_ref=f"env:{KEY_VARIABLE}",
            max_retries=0,
            **provider_fields,
        )
        model = LanguageModel.objects.create(provider=provider, model_id="fake-model")
        # The fake server answers with whole JSON bodies, not streams.
        return Profile.objects.create(slug="fake", name="Fake", language_model=model, stream=False)

    return make


def run_against(server, conversation, fake_profile, **provider_fields):
    profile = fake_profile(server, **provider_fields)
    return run_tool_loop(conversation=conversation, content="Go", profile=profile)


def assistant_rows(conversation):
    return list(Message.objects.filter(conversation=conversation, role="assistant"))


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b", "\udfff"])
def test_unstorable_text_is_kept_with_a_replacement_and_noted(
    bad, conversation, fake_profile, tools
):
    with FakeProviderServer(FakeAnswer.json(openai_body(bad))) as server:
        run = run_against(server, conversation, fake_profile)
    assert run.status == Run.Status.COMPLETED
    (message,) = assistant_rows(conversation)
    assert message.content == bad.replace("\x00", "\ufffd").replace("\ud800", "\ufffd").replace(
        "\udfff", "\ufffd"
    )
    assert message.provider_metadata["conversations"]["replaced_characters"] == ["content"]


def test_unstorable_arguments_are_replaced_and_the_call_still_runs(
    conversation, fake_profile, tools, executed
):
    arguments = json.dumps({"text": "x\x00y\ud83d"})
    answers = [
        FakeAnswer.json(openai_body(None, tool_calls=[openai_call("c1", "echo", arguments)])),
        FakeAnswer.json(openai_body("done")),
    ]
    with FakeProviderServer(*answers) as server:
        run = run_against(server, conversation, fake_profile)
    assert run.status == Run.Status.COMPLETED
    assert executed == ["x\ufffdy\ufffd"]
    call = ToolCallRow.objects.get(conversation=conversation)
    assert call.arguments == {"text": "x\ufffdy\ufffd"}
    assert call.status == ToolCallRow.Status.SUCCEEDED


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (openai_body(None, tool_calls=[openai_call("c" * 201, "echo", "{}")]), "id"),
        (openai_body(None, tool_calls=[openai_call("c1", "e" * 201, "{}")]), "name"),
        (openai_body("hi", model="m" * 201), "model"),
        (openai_body("hi", finish_reason="f" * 65), "finish_reason"),
        (openai_body("hi", usage={"prompt_tokens": MAX_TOKEN_COUNT + 1}), "prompt_tokens"),
    ],
)
def test_values_the_store_cannot_hold_fail_the_run_as_invalid_response(
    body, what, conversation, fake_profile, tools, executed
):
    with FakeProviderServer(FakeAnswer.json(body)) as server:
        run = run_against(server, conversation, fake_profile)
    assert run.status == Run.Status.FAILED
    assert run.error_code == "invalid_response"
    assert what in run.error_message
    assert executed == []
    assert assistant_rows(conversation) == []


def test_token_counts_beyond_32_bits_are_stored(conversation, fake_profile, tools):
    usage = {"prompt_tokens": 2**31, "completion_tokens": 2**33, "total_tokens": 2**31 + 2**33}
    with FakeProviderServer(FakeAnswer.json(openai_body("big", usage=usage))) as server:
        run = run_against(server, conversation, fake_profile)
    assert run.status == Run.Status.COMPLETED
    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens) == (2**31, 2**33)
    (message,) = assistant_rows(conversation)
    assert message.total_tokens == 2**31 + 2**33


def test_arguments_deeper_than_the_limit_are_kept_raw_and_never_run(
    conversation, fake_profile, tools, executed, settings
):
    settings.CONVERSATIONS = {"MAX_JSON_DEPTH": 8}
    deep = '{"text": ' + "[" * 20 + "]" * 20 + "}"
    answers = [
        FakeAnswer.json(openai_body(None, tool_calls=[openai_call("c1", "echo", deep)])),
        FakeAnswer.json(openai_body("done")),
    ]
    with FakeProviderServer(*answers) as server:
        run = run_against(server, conversation, fake_profile)
    assert run.status == Run.Status.COMPLETED
    assert executed == []
    call = ToolCallRow.objects.get(conversation=conversation)
    assert (call.arguments, call.raw_arguments) == ({}, deep)
    assert call.status == ToolCallRow.Status.REJECTED


def test_a_body_nested_past_the_parser_fails_cleanly(conversation, fake_profile, tools):
    body = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with FakeProviderServer(FakeAnswer(body)) as server:
        run = run_against(server, conversation, fake_profile)
    assert run.status == Run.Status.FAILED
    assert run.error_code == "provider_bad_response"


# Tool results --------------------------------------------------------------------------


def test_a_result_with_nul_and_surrogates_is_stored_not_thrown_away(conversation, tools, executed):
    provider = ScriptedProvider([scripted_calls(("nul", {})), scripted_text("ok")])
    run = run_tool_loop(conversation=conversation, content="Go", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert executed == ["nul"]
    call = ToolCallRow.objects.get(conversation=conversation)
    assert call.status == ToolCallRow.Status.SUCCEEDED
    (result,) = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    # NUL and the lone surrogate each become U+FFFD.
    assert result.content == "before\ufffdafter\ufffdend"
    assert provider.requests[1].messages[-1].content == "before\ufffdafter\ufffdend"


def test_a_result_that_cannot_be_stored_is_failed_never_interrupted(
    conversation, tools, executed, monkeypatch
):
    # The loop stores a turn's results with append_after (it knows the conversation's tail).
    real = tool_calls_module.append_after
    failures = []

    def refuse_once(**kwargs):
        if not failures:
            failures.append(1)
            raise DatabaseError("value too long for the column")
        return real(**kwargs)

    monkeypatch.setattr(tool_calls_module, "append_after", refuse_once)
    provider = ScriptedProvider([scripted_calls(("echo", {"text": "hi"})), scripted_text("ok")])
    run = run_tool_loop(conversation=conversation, content="Go", provider=provider)
    assert run.status == Run.Status.COMPLETED
    assert executed == ["hi"]
    call = ToolCallRow.objects.get(conversation=conversation)
    assert call.status == ToolCallRow.Status.FAILED
    assert "could not be stored" in call.error
    told = provider.requests[1].messages[-1].content
    assert told == tool_error_text(TOOL_FAILED, "echo")
    assert "interrupted" not in told


def test_the_provider_records_size_limit_fails_a_huge_answer(conversation, fake_profile, tools):
    body = FakeAnswer.json(openai_body("z" * 50_000))
    with FakeProviderServer(body) as server:
        run = run_against(server, conversation, fake_profile, max_response_bytes=4_096)
    assert run.status == Run.Status.FAILED
    assert run.error_code == "invalid_response"
    assert assistant_rows(conversation) == []
