"""Model shape: choices match the domain, constraints validate through ``full_clean``."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from conversations import domain
from conversations.models import (
    Conversation,
    LanguageModel,
    Message,
    Profile,
    Provider,
    Run,
    ToolCall,
    ToolSetting,
)

from .factories import add_call, add_message


def test_message_roles_are_the_domain_roles():
    assert Message.Role.values == [role.value for role in domain.Role]
    assert Message.Role.TOOL == domain.Role.TOOL == "tool"


def test_status_choices_are_reachable_from_the_models():
    assert Run.Status.RUNNING == "running"
    assert ToolCall.Status.PENDING == "pending"
    assert "cancelled" in ToolCall.Status.values
    assert Provider.Adapter.AZURE_OPENAI == "azure_openai"
    assert len(Provider.Adapter.values) == 13


@pytest.fixture
def demo1_model(provider):
    """A model of its own on the demo provider, for the profiles these tests build."""
    return LanguageModel.objects.create(provider=provider, model_id="demo-1")


def make_profile(language_model, slug="default", **fields):
    return Profile(slug=slug, name=slug.title(), language_model=language_model, **fields)


@pytest.mark.django_db
def test_every_model_has_a_readable_str(conversation, answered_turn, demo1_model):
    _, call, answer, _ = answered_turn
    profile = make_profile(demo1_model)
    profile.save()
    run = Run.objects.create(conversation=conversation, max_iterations=3)
    assert str(demo1_model.provider) == "Demo (demo)"
    assert str(demo1_model) == "demo-1"
    assert str(profile) == "Default"
    assert str(ToolSetting(name="get_weather", enabled=False)) == "get_weather (disabled)"
    assert str(conversation) == "Weather"
    assert str(Conversation(title="")).startswith("Conversation ")
    assert str(answer) == "#2 tool"
    assert str(call) == "get_weather [call_1]"
    assert str(run) == f"Run {run.pk} (running)"


@pytest.mark.django_db
def test_defaults(conversation, demo1_model):
    profile = make_profile(demo1_model)
    profile.full_clean()
    assert (profile.max_iterations, profile.tool_choice, profile.allowed_tools) == (
        10,
        "auto",
        None,
    )
    run = Run.objects.create(conversation=conversation, max_iterations=4)
    assert run.status == Run.Status.RUNNING
    assert run.iterations == run.prompt_tokens == 0
    assert run.heartbeat_at is not None
    assert conversation.metadata == {}


# CheckConstraints and UniqueConstraints through full_clean (the admin's path) ------------


@pytest.mark.django_db
def test_full_clean_refuses_a_tool_message_without_call(conversation):
    message = Message(conversation=conversation, position=0, role="tool", content="x")
    with pytest.raises(ValidationError, match="answers exactly one tool call"):
        message.full_clean()


@pytest.mark.django_db
def test_full_clean_refuses_an_unknown_role(conversation):
    message = Message(conversation=conversation, position=0, role="function")
    with pytest.raises(ValidationError) as excinfo:
        message.full_clean()
    assert "role" in excinfo.value.message_dict


@pytest.mark.django_db
def test_full_clean_refuses_a_second_answer(conversation, answered_turn):
    _, call, _, _ = answered_turn
    message = Message(conversation=conversation, position=4, role="tool", tool_call=call)
    with pytest.raises(ValidationError, match="already has an answer"):
        message.full_clean()


@pytest.mark.django_db
@pytest.mark.parametrize("arguments", [[], "text", 3, None])
def test_full_clean_refuses_arguments_that_are_not_an_object(conversation, arguments):
    assistant = add_message(conversation, 0, "assistant")
    call = ToolCall(
        message=assistant,
        conversation=conversation,
        index=0,
        call_id="c",
        name="n",
        arguments=arguments,
    )
    with pytest.raises(ValidationError, match="must be a JSON object"):
        call.validate_constraints()


@pytest.mark.django_db
def test_full_clean_accepts_a_valid_call(conversation):
    assistant = add_message(conversation, 0, "assistant")
    call = ToolCall(
        message=assistant, conversation=conversation, index=0, call_id="c", name="n", arguments={}
    )
    call.full_clean()


@pytest.mark.django_db
def test_full_clean_refuses_a_reused_call_id(conversation, open_turn):
    assistant, _ = open_turn
    call = ToolCall(
        message=assistant, conversation=conversation, index=1, call_id="call_1", name="n"
    )
    with pytest.raises(ValidationError, match="already used in the conversation"):
        call.full_clean()


@pytest.mark.django_db
def test_full_clean_refuses_a_second_running_run(conversation):
    Run.objects.create(conversation=conversation, max_iterations=3)
    with pytest.raises(ValidationError, match="already running"):
        Run(conversation=conversation, max_iterations=3).full_clean()
    Run(conversation=conversation, max_iterations=3, status=Run.Status.COMPLETED).full_clean()


@pytest.mark.django_db
def test_full_clean_refuses_iterations_beyond_max(conversation):
    run = Run(conversation=conversation, max_iterations=2, iterations=3)
    with pytest.raises(ValidationError, match="conversations_run_iterations_within_max"):
        run.full_clean()


@pytest.mark.django_db
def test_only_one_default_profile(demo1_model):
    make_profile(demo1_model, "first", is_default=True).save()
    second = make_profile(demo1_model, "second", is_default=True)
    with pytest.raises(ValidationError, match="already the default"):
        second.full_clean()
    make_profile(demo1_model, "third", is_default=False).full_clean()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("allowed_tools", "valid"),
    [(None, True), ([], True), (["get_weather"], True), ({"get_weather": True}, False)],
)
def test_profile_allowed_tools_is_null_or_a_list(demo1_model, allowed_tools, valid):
    profile = make_profile(demo1_model, allowed_tools=allowed_tools)
    if valid:
        profile.full_clean()
    else:
        with pytest.raises(ValidationError, match="conversations_profile_allowed_tools_list"):
            profile.full_clean()


@pytest.mark.django_db
def test_profile_max_iterations_is_at_least_one(demo1_model):
    with pytest.raises(ValidationError, match="conversations_profile_max_iterations_positive"):
        make_profile(demo1_model, max_iterations=0).full_clean()


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["extra_headers", "options"])
def test_provider_json_settings_are_objects(field):
    provider = Provider(slug="p", name="P", adapter="openai", **{field: ["x"]})
    with pytest.raises(ValidationError, match=f"conversations_provider_{field}_object"):
        provider.full_clean()


@pytest.mark.django_db
@pytest.mark.parametrize("seconds", [0, -1.5])
def test_provider_max_stream_seconds_is_positive_in_the_form_and_the_database(seconds):
    provider = Provider(slug="p", name="P", adapter="openai", max_stream_seconds=seconds)
    rule = "conversations_provider_max_stream_seconds_positive"
    with pytest.raises(ValidationError, match=rule):
        provider.full_clean()
    table = Provider._meta.db_table
    with (
        pytest.raises(IntegrityError, match=rule),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            f"INSERT INTO {table} (slug, name, adapter, base_url, api_key_ref,"
            " max_response_bytes, max_stream_seconds, extra_headers, options, is_active,"
            " created_at, updated_at)"
            " VALUES ('p', 'P', 'openai', '', '', 1, %s, '{}', '{}', TRUE,"
            " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
            [seconds],
        )


@pytest.mark.django_db
def test_provider_adapter_must_be_known():
    with pytest.raises(ValidationError) as excinfo:
        Provider(slug="p", name="P", adapter="acme").full_clean()
    assert "adapter" in excinfo.value.message_dict


@pytest.mark.django_db
def test_language_model_is_unique_per_provider(demo1_model):
    duplicate = LanguageModel(provider=demo1_model.provider, model_id="demo-1")
    with pytest.raises(ValidationError):
        duplicate.full_clean()
    LanguageModel(
        provider=demo1_model.provider,
        model_id="demo-2",
        input_price_per_million=Decimal("0.150000"),
    ).full_clean()


@pytest.mark.django_db
def test_protected_configuration_cannot_be_deleted_while_used(demo1_model):
    from django.db.models import ProtectedError

    make_profile(demo1_model).save()
    with pytest.raises(ProtectedError):
        demo1_model.provider.delete()
    with pytest.raises(ProtectedError):
        demo1_model.delete()


@pytest.mark.django_db
def test_deleting_a_profile_keeps_conversations(conversation, demo1_model):
    profile = make_profile(demo1_model)
    profile.save()
    conversation.profile = profile
    conversation.save()
    profile.delete()
    conversation.refresh_from_db()
    assert conversation.profile is None


@pytest.mark.django_db
def test_message_and_call_ordering(conversation, open_turn):
    assistant, first = open_turn
    second = add_call(assistant, index=1, call_id="call_2")
    assert list(assistant.tool_calls.all()) == [first, second]
    assert [m.position for m in conversation.messages.all()] == [0, 1]
