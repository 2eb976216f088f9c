"""Structured output in the tool loop: validated output, one repair turn, tools first, extract()."""

from __future__ import annotations

import json

import httpx
import pytest
from django.db import IntegrityError, transaction

from conversations.domain import Role
from conversations.domain.output import schema_sha256
from conversations.exceptions import ExtractionFailed, InvalidArgumentError
from conversations.models import Conversation, ModelCall, OutputSchema, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.demo_output import SAMPLE_SCHEMAS
from conversations.providers.openai import OpenAIProvider
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.providers.structured import OUTPUT_TOOL_NAME
from conversations.selectors import get_history
from conversations.services import extract, run_tool_loop, store_output_schema, submit_message
from conversations.tools import registry, tool
from tests.providers.mock_http import provider_with_replies

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["positive", "negative"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["label", "confidence"],
    "additionalProperties": False,
}
VALID = '{"label": "positive", "confidence": 0.9}'
WRONG = '{"label": "positive", "confidence": 7}'


@pytest.fixture
def tools():
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        yield r


def test_a_valid_final_answer_becomes_the_runs_output(conversation):
    provider = ScriptedProvider([scripted_text(VALID)])
    run = run_tool_loop(
        conversation=conversation, content="Rate it", provider=provider, output_schema=SCHEMA
    )
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.output == {"label": "positive", "confidence": 0.9}
    assert run.output_schema.sha256 == schema_sha256(SCHEMA)
    assert provider.requests[0].options.output_schema.schema == SCHEMA


def test_an_invalid_answer_gets_one_stored_repair_turn_then_succeeds(conversation):
    provider = ScriptedProvider([scripted_text(WRONG), scripted_text(VALID)])
    run = run_tool_loop(
        conversation=conversation, content="Rate it", provider=provider, output_schema=SCHEMA
    )
    assert run.status == Run.Status.COMPLETED
    assert run.output == {"label": "positive", "confidence": 0.9}
    history = get_history(conversation=conversation)
    assert [m.role for m in history] == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    assert "/confidence" in history[2].content
    assert "7 is greater than the maximum of 1" in history[2].content
    assert conversation.messages.filter(run=run).count() == 4
    assert ModelCall.objects.filter(run=run).count() == 2
    assert provider.requests[1].tools == ()


def test_a_second_invalid_answer_ends_the_run_failed_after_exactly_two_model_calls(conversation):
    provider = ScriptedProvider([scripted_text(WRONG), scripted_text("no"), scripted_text(VALID)])
    run = run_tool_loop(
        conversation=conversation, content="Rate it", provider=provider, output_schema=SCHEMA
    )
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error_code == "output_invalid"
    assert "at the root" in run.error_message
    assert run.output is None
    assert len(provider.requests) == 2
    assert provider.remaining == 1
    assert ModelCall.objects.filter(run=run).count() == 2


def test_the_pointer_of_the_second_failure_is_in_the_detail(conversation):
    provider = ScriptedProvider([scripted_text("x"), scripted_text(WRONG)])
    run = run_tool_loop(
        conversation=conversation, content="Rate it", provider=provider, output_schema=SCHEMA
    )
    assert run.error_code == "output_invalid"
    assert "at /confidence" in run.error_message


def test_tools_run_first_and_the_validated_output_comes_last(conversation, tools):
    provider = ScriptedProvider([scripted_calls(("add", {"a": 2, "b": 3})), scripted_text(VALID)])
    run = run_tool_loop(
        conversation=conversation, content="Add, then rate", provider=provider, output_schema=SCHEMA
    )
    assert run.status == Run.Status.COMPLETED
    history = get_history(conversation=conversation)
    assert [m.role for m in history] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert ToolCallRow.objects.get(message__run=run).status == ToolCallRow.Status.SUCCEEDED
    assert json.loads(history[-1].content) == run.output
    assert [r.options.output_schema is not None for r in provider.requests] == [True, True]
    assert [len(r.tools) for r in provider.requests] == [1, 1]


def test_an_answer_given_as_the_forced_output_tool_is_the_output(conversation):
    provider = ScriptedProvider(
        [scripted_calls((OUTPUT_TOOL_NAME, {"label": "negative", "confidence": 0}))]
    )
    run = run_tool_loop(
        conversation=conversation, content="Rate it", provider=provider, output_schema=SCHEMA
    )
    assert run.status == Run.Status.COMPLETED
    assert run.output == {"label": "negative", "confidence": 0}
    assert not ToolCallRow.objects.filter(message__run=run).exists()


def test_a_json_null_output_is_stored_as_a_value(conversation):
    provider = ScriptedProvider([scripted_text("null")])
    run = run_tool_loop(
        conversation=conversation, content="?", provider=provider, output_schema={"type": "null"}
    )
    assert run.status == Run.Status.COMPLETED
    assert Run.objects.filter(pk=run.pk, output__isnull=True).count() == 0


def test_the_database_refuses_a_completed_run_with_a_schema_but_no_output(conversation):
    schema = store_output_schema(schema=SCHEMA)
    provider = ScriptedProvider([scripted_text("plain")])
    run = run_tool_loop(conversation=conversation, content="?", provider=provider)
    assert run.status == Run.Status.COMPLETED
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(output_schema=schema)


def test_the_same_schema_is_stored_once_whatever_its_key_order():
    first = store_output_schema(schema=SCHEMA)
    second = store_output_schema(schema=dict(reversed(list(SCHEMA.items()))))
    assert first.pk == second.pk
    assert OutputSchema.objects.count() == 1


def test_a_profile_gives_its_runs_its_default_schema(demo_conversation, profile):
    profile.output_schema = store_output_schema(schema=SAMPLE_SCHEMAS["sentiment"])
    profile.save()
    run = submit_message(conversation=demo_conversation, content="Great!")
    assert run.status == Run.Status.COMPLETED
    assert set(run.output) == {"label", "confidence"}


def test_submit_message_takes_the_sha256_of_a_schema_the_owner_used(demo_conversation):
    first = submit_message(conversation=demo_conversation, content="1", output_schema=SCHEMA)
    digest = first.output_schema.sha256
    second = submit_message(conversation=demo_conversation, content="2", output_schema=digest)
    assert second.output_schema_id == first.output_schema_id
    assert second.output == first.output


def test_another_users_schema_hash_is_unknown(demo_conversation, other_user, profile):
    submit_message(conversation=demo_conversation, content="1", output_schema=SCHEMA)
    theirs = Conversation.objects.create(owner=other_user, profile=profile)
    with pytest.raises(InvalidArgumentError) as caught:
        submit_message(conversation=theirs, content="2", output_schema=schema_sha256(SCHEMA))
    assert caught.value.code == "invalid_schema"
    assert not theirs.messages.exists()


def test_extract_returns_the_validated_value_and_stores_the_run(user, profile):
    value = extract(
        profile=profile, content="Invoice 17", schema=SAMPLE_SCHEMAS["invoice"], owner=user
    )
    run = Run.objects.get()
    assert run.output == value
    assert set(value) == {"number", "total", "lines"}
    assert run.conversation.owner == user
    assert run.conversation.profile == profile


def test_extract_refuses_an_invalid_schema_before_storing_anything(user, profile):
    with pytest.raises(InvalidArgumentError) as caught:
        extract(profile=profile, content="x", schema={"$ref": "http://x.example/s"}, owner=user)
    assert caught.value.field == "/$ref"
    assert not Conversation.objects.exists()


def test_extract_raises_with_the_runs_code_when_no_valid_output_came(user, profile):
    # The demo answers {"type": "string", "minLength": 5} with a string that
    # passes; "not" makes every answer fail, twice.
    schema = {"not": {}}
    with pytest.raises(ExtractionFailed) as caught:
        extract(profile=profile, content="x", schema=schema, owner=user)
    assert caught.value.code == "output_invalid"
    assert caught.value.run.status == Run.Status.FAILED


def openai_answer(content: str) -> httpx.Response:
    message = {"role": "assistant", "content": content}
    return httpx.Response(
        200, json={"model": "gpt", "choices": [{"message": message, "finish_reason": "stop"}]}
    )


def test_an_http_adapters_parsed_answer_becomes_the_runs_output(conversation):
    provider, requests, _ = provider_with_replies(OpenAIProvider, openai_answer(VALID), api_key="k")
    run = run_tool_loop(
        conversation=conversation, content="Rate it", provider=provider, output_schema=SCHEMA
    )
    assert run.status == Run.Status.COMPLETED
    assert run.output == {"label": "positive", "confidence": 0.9}
    assert json.loads(requests[0].content)["response_format"]["json_schema"]["strict"] is True


def test_a_10_mb_output_is_cut_by_the_response_size_limit_with_a_clear_error(conversation):
    huge = json.dumps({"label": "positive", "confidence": 0.5, "pad": "x" * (10 * 1024 * 1024)})
    provider, _, _ = provider_with_replies(OpenAIProvider, openai_answer(huge), api_key="k")
    run = run_tool_loop(
        conversation=conversation, content="Rate it", provider=provider, output_schema=SCHEMA
    )
    assert run.status == Run.Status.FAILED
    assert run.error_code == "invalid_response"
    assert "larger than 10485760 bytes" in run.error_message
    assert run.output is None
