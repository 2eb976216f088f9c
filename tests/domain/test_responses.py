"""Usage and CompletionResponse: counts, sums, and the message a response becomes."""

import dataclasses
from contextlib import contextmanager

import pytest

from conversations.domain import (
    USAGE_FIELDS,
    ChatMessage,
    CompletionResponse,
    InvalidArgumentError,
    Role,
    ToolCall,
    Usage,
)


@contextmanager
def expect_error(code, field=None):
    """Expect an InvalidArgumentError with exactly this ``code`` and ``field``."""
    with pytest.raises(InvalidArgumentError) as info:
        yield info
    assert (info.value.code, info.value.field) == (code, field), str(info.value)


CALL = ToolCall(id="call_1", name="get_weather", arguments={"location": "Leipzig"})
CALL_2 = ToolCall(id="call_2", name="get_time")

FIELDS = [
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_prompt_tokens",
    "reasoning_tokens",
]


# Usage ----------------------------------------------------------------------------------


def test_the_usage_field_names_are_the_counts_of_usage_in_order():
    # Every field but the flag that says the counts are a guess.
    counts = tuple(field.name for field in dataclasses.fields(Usage) if field.name != "estimated")
    assert counts == USAGE_FIELDS
    assert list(USAGE_FIELDS) == FIELDS
    assert [field.name for field in dataclasses.fields(Usage)] == [*FIELDS, "estimated"]


def test_usage_defaults_to_zero():
    assert Usage().to_dict() == dict.fromkeys(FIELDS, 0)


def test_usage_total_defaults_to_the_sum():
    usage = Usage(prompt_tokens=10, completion_tokens=5)
    assert usage.total_tokens == 15


def test_usage_explicit_total_is_kept():
    assert Usage(10, 5, total_tokens=20).total_tokens == 20
    assert Usage(10, 5, total_tokens=0).total_tokens == 0


def test_usage_all_fields():
    usage = Usage(
        prompt_tokens=100,
        completion_tokens=40,
        total_tokens=140,
        cached_prompt_tokens=60,
        reasoning_tokens=30,
    )
    assert usage.to_dict() == {
        "prompt_tokens": 100,
        "completion_tokens": 40,
        "total_tokens": 140,
        "cached_prompt_tokens": 60,
        "reasoning_tokens": 30,
    }
    assert list(usage.to_dict()) == FIELDS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (name, value)
        for name in FIELDS
        for value in (-1, 1.5, "3", None, True)
        # total_tokens=None means "the sum"
        if not (name == "total_tokens" and value is None)
    ],
)
def test_usage_counts_must_be_non_negative_integers(name, value):
    with expect_error("invalid_usage", name) as info:
        Usage(**{name: value})
    assert repr(value) in str(info.value)
    assert name in str(info.value)


def test_usage_negative_sum_is_caught_on_the_first_field():
    with expect_error("invalid_usage", "prompt_tokens"):
        Usage(prompt_tokens=-5, completion_tokens=2)


def test_usage_add_is_field_by_field():
    a = Usage(10, 5, cached_prompt_tokens=2, reasoning_tokens=1)
    b = Usage(1, 2, total_tokens=7, cached_prompt_tokens=3, reasoning_tokens=4)
    assert a + b == Usage(11, 7, total_tokens=22, cached_prompt_tokens=5, reasoning_tokens=5)


def test_usage_sum_of_many():
    assert sum([Usage(1, 1), Usage(2, 2)], Usage()) == Usage(3, 3)


def test_usage_add_other_types():
    with pytest.raises(TypeError):
        Usage() + 1
    assert Usage().__add__(1) is NotImplemented


def test_usage_is_frozen_and_compared_by_value():
    usage = Usage(1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.prompt_tokens = 5
    assert usage == Usage(1, 2, 3)
    assert usage != Usage(1, 2, 4)


# CompletionResponse ---------------------------------------------------------------------


def test_response_defaults():
    response = CompletionResponse(content="hi", model="gpt-x")
    assert response.usage == Usage()
    assert response.finish_reason == "stop"
    assert response.provider == ""
    assert response.tool_calls is None
    assert response.thinking is None
    assert response.provider_metadata == {}
    assert response.has_tool_calls is False


def test_response_tool_calls_become_a_tuple():
    response = CompletionResponse(
        content="", model="m", finish_reason="tool_calls", tool_calls=[CALL, CALL_2]
    )
    assert response.tool_calls == (CALL, CALL_2)
    assert isinstance(response.tool_calls, tuple)
    assert response.has_tool_calls is True


@pytest.mark.parametrize("tool_calls", [[], ()])
def test_response_tool_calls_never_empty(tool_calls):
    with expect_error("empty_tool_calls", "tool_calls"):
        CompletionResponse(content="", model="m", tool_calls=tool_calls)


@pytest.mark.parametrize("tool_calls", ["call_1", 5, (c for c in [CALL]), {"id": "c"}])
def test_response_tool_calls_must_be_a_list(tool_calls):
    with expect_error("invalid_tool_calls", "tool_calls"):
        CompletionResponse(content="", model="m", tool_calls=tool_calls)


def test_response_tool_call_elements_must_be_tool_calls():
    with expect_error("invalid_tool_call", "tool_calls/1"):
        CompletionResponse(content="", model="m", tool_calls=[CALL, {"id": "c"}])


@pytest.mark.parametrize("content", [None, 5])
def test_response_content_must_be_a_string(content):
    with expect_error("invalid_content", "content"):
        CompletionResponse(content=content, model="m")


def test_response_usage_must_be_a_usage():
    with expect_error("invalid_usage", "usage"):
        CompletionResponse(content="", model="m", usage={"prompt_tokens": 1})


def test_response_provider_metadata_is_a_private_copy():
    given = {"signature": "abc"}
    response = CompletionResponse(content="", model="m", provider_metadata=given)
    given["signature"] = "changed"
    assert response.provider_metadata == {"signature": "abc"}


def test_response_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CompletionResponse(content="", model="m").content = "x"


def test_to_message_plain():
    response = CompletionResponse(content="It is 12 °C.", model="m", thinking="hmm")
    message = response.to_message()
    assert message == ChatMessage.assistant("It is 12 °C.")
    assert message.role is Role.ASSISTANT
    assert message.provider_metadata is None


def test_to_message_with_tool_calls():
    response = CompletionResponse(
        content="looking it up", model="m", finish_reason="tool_calls", tool_calls=(CALL, CALL_2)
    )
    message = response.to_message()
    assert message == ChatMessage.assistant_tool_calls([CALL, CALL_2], "looking it up")
    assert message.tool_calls[0] is CALL
    assert message.to_dict()["tool_calls"][0]["function"]["arguments"] == '{"location":"Leipzig"}'
    assert message.to_dict()["tool_calls"][1]["function"]["arguments"] == "{}"


@pytest.mark.parametrize("tool_calls", [None, (CALL,)])
def test_to_message_carries_provider_metadata(tool_calls):
    response = CompletionResponse(
        content="", model="m", tool_calls=tool_calls, provider_metadata={"signature": "sig"}
    )
    message = response.to_message()
    assert message.provider_metadata == {"signature": "sig"}
    assert "signature" not in message.to_json()


def test_to_message_with_duplicate_ids_fails():
    # The response keeps what the provider sent; the history refuses a turn
    # whose ids collide.
    twin = ToolCall(id="call_1", name="other")
    response = CompletionResponse(content="", model="m", tool_calls=[CALL, twin])
    with expect_error("duplicate_tool_call_id", "tool_calls/1/id"):
        response.to_message()
