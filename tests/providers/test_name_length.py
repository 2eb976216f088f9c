"""The longest call id, tool name and model name: one constant, the columns' size."""

from __future__ import annotations

import pytest

from conversations.domain import CompletionResponse, ToolCall
from conversations.domain.storable import MAX_NAME_LENGTH
from conversations.exceptions import ProviderInvalidResponse
from conversations.models import LanguageModel, MCPCall, Message, ModelCall, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.boundary import check_response

COLUMNS = [
    (ToolCallRow, "call_id"),
    (ToolCallRow, "name"),
    (Message, "model"),
    (Run, "model"),
    (ModelCall, "model"),
    (LanguageModel, "model_id"),
    (MCPCall, "tool"),
]


@pytest.mark.parametrize(("model", "field"), COLUMNS, ids=lambda v: getattr(v, "__name__", v))
def test_each_column_holding_an_id_or_a_name_is_as_long_as_the_constant(model, field):
    assert model._meta.get_field(field).max_length == MAX_NAME_LENGTH


def answer(*, call_id="call_1", name="get_weather", model="m"):
    call = ToolCall(id=call_id, name=name, arguments={})
    return CompletionResponse(content="", model=model, tool_calls=(call,))


@pytest.mark.parametrize("part", ["call_id", "name", "model"])
def test_a_provider_answer_may_use_the_whole_length_and_not_one_character_more(part):
    longest = "a" * MAX_NAME_LENGTH
    assert check_response(answer(**{part: longest}), provider="test") is not None
    with pytest.raises(ProviderInvalidResponse):
        check_response(answer(**{part: longest + "a"}), provider="test")
