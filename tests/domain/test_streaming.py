"""The stream items a provider yields: deltas are validated like every other value object."""

import pytest

from conversations.domain import InvalidArgumentError, ReasoningDelta, TextDelta, ToolCallDelta


def test_deltas_keep_their_values():
    assert TextDelta("Hel").text == "Hel"
    assert ReasoningDelta("thinking").text == "thinking"
    delta = ToolCallDelta(2, "call_1", "add", '{"a":')
    assert (delta.index, delta.id, delta.name, delta.arguments) == (2, "call_1", "add", '{"a":')
    assert ToolCallDelta(0).arguments == ""


@pytest.mark.parametrize("make", [TextDelta, ReasoningDelta])
def test_text_must_be_a_string(make):
    with pytest.raises(InvalidArgumentError) as excinfo:
        make(None)
    assert excinfo.value.field == "text"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"index": -1}, "index"),
        ({"index": True}, "index"),
        ({"index": "0"}, "index"),
        ({"index": 0, "id": 5}, "id"),
        ({"index": 0, "name": b"add"}, "name"),
        ({"index": 0, "arguments": None}, "arguments"),
    ],
)
def test_tool_call_delta_names_the_wrong_field(kwargs, field):
    with pytest.raises(InvalidArgumentError) as excinfo:
        ToolCallDelta(**kwargs)
    assert excinfo.value.field == field
    assert excinfo.value.code == "invalid_delta"
