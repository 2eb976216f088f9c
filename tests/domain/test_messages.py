"""Role, ChatMessage and normalise_messages: rules, their order, and the wire shape."""

import dataclasses
import json
from contextlib import contextmanager

import pytest

import conversations.domain as domain
from conversations.domain import ChatMessage, InvalidArgumentError, Role, ToolCall
from conversations.domain import normalise_messages as normalise


@contextmanager
def expect_error(code, field=None):
    """Expect an InvalidArgumentError with exactly this ``code`` and ``field``."""
    with pytest.raises(InvalidArgumentError) as info:
        yield info
    assert (info.value.code, info.value.field) == (code, field), str(info.value)


CALL = ToolCall(id="call_1", name="get_weather", arguments={"location": "Leipzig"})
CALL_2 = ToolCall(id="call_2", name="get_time")
WIRE_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"location":"Leipzig"}'},
}


# Public names -------------------------------------------------------------------


def test_public_names():
    for name in (
        "Role",
        "ToolCall",
        "ChatMessage",
        "ToolSpec",
        "Usage",
        "CompletionResponse",
        "InvalidArgumentError",
        "normalise_messages",
    ):
        assert name in domain.__all__
        assert hasattr(domain, name)
    assert issubclass(InvalidArgumentError, ValueError)


# Role ------------------------------------------------------------------------------


def test_role_values_in_order():
    assert [r.value for r in Role] == ["system", "user", "assistant", "tool"]


def test_role_is_a_str_enum():
    assert Role.USER == "user"
    assert str(Role.TOOL) == "tool"
    assert Role("assistant") is Role.ASSISTANT


@pytest.mark.parametrize("text", ["USER", "User", "user ", " user", "", "function", "developer"])
def test_role_matching_is_exact_and_case_sensitive(text):
    with pytest.raises(ValueError):
        Role(text)
    with expect_error("invalid_role", "role"):
        ChatMessage(text, "x")


# Constructor: roles and content ------------------------------------------------------


@pytest.mark.parametrize("role", list(Role))
def test_role_strings_become_roles(role):
    message = ChatMessage(role.value, "x")
    assert message.role is role
    assert type(message.role) is Role


def test_role_instance_kept():
    assert ChatMessage(Role.SYSTEM, "x").role is Role.SYSTEM


@pytest.mark.parametrize("role", ["USER", "bot", 3, None])
def test_invalid_role_message_names_value_and_lists_valid_roles(role):
    with expect_error("invalid_role", "role") as info:
        ChatMessage(role, "x")
    assert f'"{role}"' in str(info.value)
    assert "system, user, assistant, tool" in str(info.value)


@pytest.mark.parametrize(("content", "type_name"), [(None, "null"), (3, "int"), (["x"], "list")])
def test_content_must_be_a_string(content, type_name):
    with expect_error("invalid_content", "content") as info:
        ChatMessage("user", content)
    assert type_name in str(info.value)


def test_empty_content_is_fine():
    assert ChatMessage("user", "").content == ""


def test_is_frozen():
    message = ChatMessage.user("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "y"


# Constructor: tool_calls ---------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", "user", "tool"])
def test_tool_calls_only_on_assistant(role):
    with expect_error("tool_calls_not_allowed", "tool_calls") as info:
        ChatMessage(role, "x", tool_calls=[CALL])
    assert f'"{role}"' in str(info.value)


def test_tool_calls_not_allowed_is_checked_before_empty():
    with expect_error("tool_calls_not_allowed", "tool_calls"):
        ChatMessage("user", "x", tool_calls=[])


def test_invalid_role_is_checked_first():
    with expect_error("invalid_role", "role"):
        ChatMessage("USER", None, tool_calls=[], tool_call_id="")


def test_empty_tool_calls():
    with expect_error("empty_tool_calls", "tool_calls"):
        ChatMessage("assistant", "x", tool_calls=[])
    with expect_error("empty_tool_calls", "tool_calls"):
        ChatMessage("assistant", "x", tool_calls=())


def test_empty_tool_calls_is_checked_before_tool_call_id():
    with expect_error("empty_tool_calls", "tool_calls"):
        ChatMessage("assistant", "x", tool_calls=[], tool_call_id="")


@pytest.mark.parametrize(
    ("tool_calls", "type_name"),
    [
        ("call_1", "str"),
        (b"c", "bytes"),
        ({"id": "c"}, "dict"),
        ({"call_1"}, "set"),
        ((c for c in [CALL]), "generator"),
        (5, "int"),
    ],
)
def test_tool_calls_must_be_a_list(tool_calls, type_name):
    with expect_error("invalid_tool_calls", "tool_calls") as info:
        ChatMessage("assistant", "x", tool_calls=tool_calls)
    assert type_name in str(info.value)


@pytest.mark.parametrize(
    ("element", "type_name"), [(WIRE_CALL, "dict"), ("c", "str"), (None, "null")]
)
def test_every_element_must_be_a_tool_call(element, type_name):
    with expect_error("invalid_tool_call", "tool_calls/1") as info:
        ChatMessage("assistant", "x", tool_calls=[CALL, element])
    assert type_name in str(info.value)


def test_invalid_tool_call_is_checked_before_tool_call_id():
    with expect_error("invalid_tool_call", "tool_calls/0"):
        ChatMessage("assistant", "x", tool_calls=[5], tool_call_id="x")


def test_duplicate_tool_call_id_in_one_turn():
    twin = ToolCall(id="call_1", name="other")
    with expect_error("duplicate_tool_call_id", "tool_calls/2/id") as info:
        ChatMessage("assistant", "", tool_calls=[CALL, CALL_2, twin])
    assert '"call_1"' in str(info.value)


def test_tool_calls_are_stored_as_a_tuple():
    message = ChatMessage("assistant", "", tool_calls=[CALL, CALL_2])
    assert message.tool_calls == (CALL, CALL_2)
    assert isinstance(message.tool_calls, tuple)
    assert message.tool_calls[0] is CALL


def test_plain_messages_have_no_tool_fields():
    message = ChatMessage("assistant", "hi")
    assert message.tool_calls is None
    assert message.tool_call_id is None


# Constructor: tool_call_id --------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_tool_call_id_only_on_tool(role):
    with expect_error("tool_call_id_not_allowed", "tool_call_id") as info:
        ChatMessage(role, "x", tool_call_id="call_1")
    assert f'"{role}"' in str(info.value)


def test_tool_call_id_not_allowed_is_checked_before_empty():
    with expect_error("tool_call_id_not_allowed", "tool_call_id"):
        ChatMessage("assistant", "x", tool_call_id="")


def test_empty_tool_call_id():
    with expect_error("empty_tool_call_id", "tool_call_id") as info:
        ChatMessage("tool", "x", tool_call_id="")
    assert "tool_call_id" in str(info.value)


def test_empty_tool_call_id_is_checked_before_content():
    with expect_error("empty_tool_call_id", "tool_call_id"):
        ChatMessage("tool", None, tool_call_id="")


def test_tool_call_id_must_be_a_string():
    with expect_error("invalid_tool_call_id", "tool_call_id") as info:
        ChatMessage("tool", "x", tool_call_id=5)
    assert "int" in str(info.value)


def test_tool_message_without_call_id_is_allowed():
    # As in the original: only tool_result() insists on an id.
    assert ChatMessage("tool", "x").tool_call_id is None
    assert ChatMessage.tool("x") == ChatMessage("tool", "x")


# provider_metadata ----------------------------------------------------------------------


def test_provider_metadata_is_copied_and_not_compared():
    given = {"signature": "abc"}
    message = ChatMessage("assistant", "x", provider_metadata=given)
    given["signature"] = "changed"
    assert message.provider_metadata == {"signature": "abc"}
    assert message == ChatMessage("assistant", "x")
    assert message == ChatMessage("assistant", "x", provider_metadata={"other": 1})


def test_provider_metadata_is_not_in_the_wire_form():
    message = ChatMessage("assistant", "x", provider_metadata={"signature": "abc"})
    assert message.to_dict() == {"role": "assistant", "content": "x"}
    assert "signature" not in message.to_json()


def test_provider_metadata_must_be_a_mapping():
    with expect_error("invalid_provider_metadata", "provider_metadata"):
        ChatMessage("assistant", "x", provider_metadata=["sig"])


# Named constructors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "role"),
    [
        (ChatMessage.system, Role.SYSTEM),
        (ChatMessage.user, Role.USER),
        (ChatMessage.assistant, Role.ASSISTANT),
        (ChatMessage.tool, Role.TOOL),
    ],
)
def test_plain_factories(factory, role):
    message = factory("hello")
    assert message == ChatMessage(role, "hello")
    assert message.tool_calls is None
    assert message.tool_call_id is None


def test_assistant_tool_calls_none_content_is_stored_as_empty():
    message = ChatMessage.assistant_tool_calls([CALL])
    assert message.role is Role.ASSISTANT
    assert message.content == ""
    assert message.tool_calls == (CALL,)
    assert ChatMessage.assistant_tool_calls([CALL], None).content == ""


def test_assistant_tool_calls_with_content_and_metadata():
    message = ChatMessage.assistant_tool_calls(
        (c for c in [CALL, CALL_2]), "looking it up", provider_metadata={"sig": "s"}
    )
    assert message.content == "looking it up"
    assert message.tool_calls == (CALL, CALL_2)
    assert message.provider_metadata == {"sig": "s"}


def test_assistant_tool_calls_empty():
    with expect_error("empty_tool_calls", "tool_calls"):
        ChatMessage.assistant_tool_calls([])


def test_tool_result():
    message = ChatMessage.tool_result("call_1", "12 °C")
    assert message == ChatMessage("tool", "12 °C", tool_call_id="call_1")


def test_tool_result_needs_an_id():
    with expect_error("empty_tool_call_id", "tool_call_id"):
        ChatMessage.tool_result("", "x")


# to_dict / to_json -------------------------------------------------------------------------


def test_assistant_call_serialises_to_the_chat_completions_shape():
    message = ChatMessage.assistant_tool_calls(
        [ToolCall(id="call_1", name="get_weather", arguments={"location": "Leipzig"})],
        "looking it up",
    )
    data = message.to_dict()
    assert data["tool_calls"][0]["function"]["arguments"] == '{"location":"Leipzig"}'
    assert data == {
        "role": "assistant",
        "content": "looking it up",
        "tool_calls": [WIRE_CALL],
    }


def test_assistant_call_without_arguments_serialises_empty_object():
    message = ChatMessage.assistant_tool_calls([ToolCall(id="call_1", name="get_time")])
    assert message.to_dict()["tool_calls"][0]["function"]["arguments"] == "{}"


@pytest.mark.parametrize("role", list(Role))
def test_plain_message_is_exactly_role_and_content(role):
    data = ChatMessage(role, "hi").to_dict()
    assert data == {"role": role.value, "content": "hi"}
    assert list(data) == ["role", "content"]
    assert type(data["role"]) is str


def test_assistant_tool_calls_key_order():
    data = ChatMessage.assistant_tool_calls([CALL, CALL_2], "x").to_dict()
    assert list(data) == ["role", "content", "tool_calls"]
    assert [c["id"] for c in data["tool_calls"]] == ["call_1", "call_2"]
    assert list(data["tool_calls"][0]) == ["id", "type", "function"]


def test_tool_result_key_order():
    data = ChatMessage.tool_result("call_1", "12").to_dict()
    assert data == {"role": "tool", "content": "12", "tool_call_id": "call_1"}
    assert list(data) == ["role", "content", "tool_call_id"]


def test_to_dict_uses_raw_arguments_unchanged():
    raw = '{"location": "Leip'
    message = ChatMessage.assistant_tool_calls([ToolCall(id="c", name="x", raw_arguments=raw)])
    assert message.to_dict()["tool_calls"][0]["function"]["arguments"] == raw


def test_to_json_is_compact_and_keeps_non_ascii():
    message = ChatMessage.assistant_tool_calls(
        [ToolCall(id="c", name="x", arguments={"stadt": "Köln", "url": "a/b"})], "Grüße ☀"
    )
    assert message.to_json() == (
        '{"role":"assistant","content":"Grüße ☀","tool_calls":[{"id":"c","type":"function",'
        '"function":{"name":"x","arguments":"{\\"stadt\\":\\"Köln\\",\\"url\\":\\"a/b\\"}"}}]}'
    )
    assert json.loads(message.to_json()) == message.to_dict()


def test_to_json_plain():
    assert ChatMessage.user("hi").to_json() == '{"role":"user","content":"hi"}'


# from_dict ---------------------------------------------------------------------------------


def test_from_dict_plain():
    assert ChatMessage.from_dict({"role": "user", "content": "hi"}) == ChatMessage.user("hi")


def test_from_dict_assistant_with_wire_calls():
    message = ChatMessage.from_dict(
        {"role": "assistant", "content": "looking it up", "tool_calls": [WIRE_CALL]}
    )
    assert message == ChatMessage.assistant_tool_calls([CALL], "looking it up")
    assert message.tool_calls[0].arguments == {"location": "Leipzig"}


def test_from_dict_assistant_with_decoded_calls_and_instances():
    decoded = {"id": "call_2", "function": {"name": "get_time", "arguments": {}}}
    message = ChatMessage.from_dict({"role": "assistant", "tool_calls": (CALL, decoded)})
    assert message.tool_calls == (CALL, CALL_2)
    assert message.tool_calls[0] is CALL


@pytest.mark.parametrize("content", [None, "missing"])
def test_from_dict_null_or_missing_content_beside_tool_calls(content):
    data = {"role": "assistant", "tool_calls": [WIRE_CALL]}
    if content is None:
        data["content"] = None
    assert ChatMessage.from_dict(data).content == ""


def test_from_dict_tool_result():
    data = {"role": "tool", "content": "12", "tool_call_id": "call_1"}
    assert ChatMessage.from_dict(data) == ChatMessage.tool_result("call_1", "12")


def test_from_dict_ignores_unknown_keys():
    data = {"role": "user", "content": "hi", "name": "bob", "extra": [1]}
    assert ChatMessage.from_dict(data) == ChatMessage.user("hi")


def test_from_dict_null_tool_fields_are_absent():
    data = {"role": "user", "content": "hi", "tool_calls": None, "tool_call_id": None}
    assert ChatMessage.from_dict(data) == ChatMessage.user("hi")


@pytest.mark.parametrize(
    ("data", "type_name"),
    [({}, "null"), ({"role": None}, "null"), ({"role": 5}, "int"), ({"role": ["user"]}, "list")],
)
def test_from_dict_missing_role(data, type_name):
    with expect_error("missing_role", "role") as info:
        ChatMessage.from_dict({**data, "content": "x"})
    assert type_name in str(info.value)


def test_from_dict_missing_role_is_checked_first():
    with expect_error("missing_role", "role"):
        ChatMessage.from_dict({"role": 5, "tool_calls": "x", "tool_call_id": 5, "content": 5})


@pytest.mark.parametrize(
    ("tool_calls", "type_name"), [("x", "str"), ({"id": "c"}, "dict"), (1, "int")]
)
def test_from_dict_tool_calls_not_a_list(tool_calls, type_name):
    with expect_error("invalid_tool_calls", "tool_calls") as info:
        ChatMessage.from_dict({"role": "assistant", "content": "x", "tool_calls": tool_calls})
    assert type_name in str(info.value)


def test_from_dict_invalid_tool_calls_before_role_validity_and_the_rest():
    # The role string itself is only validated by the constructor, at the end.
    with expect_error("invalid_tool_calls", "tool_calls"):
        ChatMessage.from_dict({"role": "USER", "tool_calls": "x", "tool_call_id": 5, "content": 5})


@pytest.mark.parametrize(("element", "type_name"), [("c", "str"), (7, "int"), (None, "null")])
def test_from_dict_tool_call_element_neither_call_nor_mapping(element, type_name):
    with expect_error("invalid_tool_call", "tool_calls/1") as info:
        ChatMessage.from_dict(
            {"role": "assistant", "tool_calls": [WIRE_CALL, element], "tool_call_id": 5}
        )
    assert type_name in str(info.value)


def test_from_dict_error_inside_a_tool_call_is_prefixed():
    bad = {"id": "call_2", "function": {"name": ""}}
    with expect_error("empty_tool_name", "tool_calls/1/function/name"):
        ChatMessage.from_dict({"role": "assistant", "tool_calls": [WIRE_CALL, bad]})


def test_from_dict_invalid_arguments_inside_a_tool_call_is_prefixed():
    bad = {"id": "call_1", "function": {"name": "x", "arguments": [1]}}
    with expect_error("invalid_arguments", "tool_calls/0/function/arguments"):
        ChatMessage.from_dict({"role": "assistant", "tool_calls": [bad]})


def test_from_dict_duplicate_ids():
    with expect_error("duplicate_tool_call_id", "tool_calls/1/id"):
        ChatMessage.from_dict({"role": "assistant", "tool_calls": [WIRE_CALL, WIRE_CALL]})


@pytest.mark.parametrize(("tool_call_id", "type_name"), [(5, "int"), (["c"], "list")])
def test_from_dict_tool_call_id_not_a_string(tool_call_id, type_name):
    with expect_error("invalid_tool_call_id", "tool_call_id") as info:
        ChatMessage.from_dict({"role": "tool", "tool_call_id": tool_call_id, "content": 5})
    assert type_name in str(info.value)


@pytest.mark.parametrize(
    ("data", "type_name"),
    [
        ({"role": "user"}, "null"),
        ({"role": "user", "content": None}, "null"),
        ({"role": "user", "content": 5}, "int"),
        ({"role": "assistant", "content": 5, "tool_calls": [WIRE_CALL]}, "int"),
        # An invalid role string is only caught after content.
        ({"role": "USER", "content": 5}, "int"),
        ({"role": "tool", "tool_call_id": "c"}, "null"),
    ],
)
def test_from_dict_invalid_content(data, type_name):
    with expect_error("invalid_content", "content") as info:
        ChatMessage.from_dict(data)
    assert type_name in str(info.value)


@pytest.mark.parametrize(
    ("data", "code", "field"),
    [
        ({"role": "USER", "content": "x"}, "invalid_role", "role"),
        (
            {"role": "user", "content": "x", "tool_calls": [WIRE_CALL]},
            "tool_calls_not_allowed",
            "tool_calls",
        ),
        ({"role": "user", "tool_calls": []}, "tool_calls_not_allowed", "tool_calls"),
        (
            {"role": "assistant", "tool_calls": [], "content": None},
            "empty_tool_calls",
            "tool_calls",
        ),
        (
            {"role": "assistant", "content": "x", "tool_call_id": ""},
            "tool_call_id_not_allowed",
            "tool_call_id",
        ),
        (
            {"role": "tool", "content": "x", "tool_call_id": ""},
            "empty_tool_call_id",
            "tool_call_id",
        ),
    ],
)
def test_from_dict_then_the_constructor_checks(data, code, field):
    with expect_error(code, field):
        ChatMessage.from_dict(data)


@pytest.mark.parametrize("data", [None, "user: hi", ["user", "hi"]])
def test_from_dict_not_an_object(data):
    with expect_error("invalid_message"):
        ChatMessage.from_dict(data)


@pytest.mark.parametrize(
    "message",
    [
        ChatMessage.system("be brief"),
        ChatMessage.user("hi"),
        ChatMessage.assistant("hello"),
        ChatMessage.tool("orphan result"),
        ChatMessage.assistant_tool_calls([CALL, CALL_2]),
        ChatMessage.assistant_tool_calls([ToolCall(id="c", name="x", raw_arguments="{")], "…"),
        ChatMessage.tool_result("call_1", ""),
    ],
)
def test_from_dict_round_trips_examples(message):
    assert ChatMessage.from_dict(message.to_dict()) == message
    assert ChatMessage.from_dict(json.loads(message.to_json())) == message
    assert ChatMessage.from_dict(message.to_dict()).to_dict() == message.to_dict()


# normalise_messages -----------------------------------------------------------------------


def test_normalise_passes_instances_through_as_the_same_objects():
    first = ChatMessage.user("hi")
    second = ChatMessage.assistant_tool_calls([CALL], provider_metadata={"sig": "s"})
    result = normalise([first, second])
    assert result == [first, second]
    assert result[0] is first
    assert result[1] is second
    assert result[1].provider_metadata == {"sig": "s"}


def test_normalise_builds_mappings_and_returns_a_list():
    items = (
        item
        for item in [
            ChatMessage.system("s"),
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [WIRE_CALL]},
            {"role": "tool", "content": "12", "tool_call_id": "call_1"},
        ]
    )
    result = normalise(items)
    assert isinstance(result, list)
    assert result == [
        ChatMessage.system("s"),
        ChatMessage.user("hi"),
        ChatMessage.assistant_tool_calls([CALL]),
        ChatMessage.tool_result("call_1", "12"),
    ]


def test_normalise_empty():
    assert normalise([]) == []


def test_normalise_prefixes_the_field_with_the_index():
    with expect_error("invalid_role", "1/role"):
        normalise([ChatMessage.user("ok"), {"role": "USER", "content": "x"}])


def test_normalise_prefixes_nested_fields():
    bad = {"id": "call_2", "function": {"name": ""}}
    items = [
        ChatMessage.user("ok"),
        {"role": "user", "content": "ok"},
        {"role": "assistant", "tool_calls": [WIRE_CALL, bad]},
    ]
    with expect_error("empty_tool_name", "2/tool_calls/1/function/name"):
        normalise(items)


def test_normalise_item_that_is_not_an_object():
    with expect_error("invalid_message", "0") as info:
        normalise(["hi"])
    assert "str" in str(info.value)


# is_error: a tool result that reports a failure -----------------------------------


def test_is_error_defaults_to_false():
    assert ChatMessage.tool_result("call_1", "42").is_error is False


def test_tool_result_can_report_an_error():
    message = ChatMessage.tool_result("call_1", "Error: boom", is_error=True)
    assert message.is_error is True
    assert message != ChatMessage.tool_result("call_1", "Error: boom")


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_is_error_only_on_tool_messages(role):
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage(role, "text", is_error=True)
    assert info.value.code == "is_error_not_allowed"
    assert info.value.field == "is_error"


@pytest.mark.parametrize("value", [1, "true", None])
def test_is_error_must_be_a_boolean(value):
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage("tool", "text", tool_call_id="call_1", is_error=value)
    assert info.value.code == "invalid_is_error"


def test_is_error_is_not_part_of_the_openai_wire_shape():
    message = ChatMessage.tool_result("call_1", "Error: boom", is_error=True)
    assert message.to_dict() == {"role": "tool", "content": "Error: boom", "tool_call_id": "call_1"}


def test_from_dict_reads_is_error():
    data = {"role": "tool", "content": "Error: boom", "tool_call_id": "call_1", "is_error": True}
    assert ChatMessage.from_dict(data).is_error is True
    assert ChatMessage.from_dict({**data, "is_error": False}).is_error is False


def test_from_dict_refuses_a_non_boolean_is_error():
    data = {"role": "tool", "content": "x", "tool_call_id": "call_1", "is_error": "yes"}
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage.from_dict(data)
    assert info.value.code == "invalid_is_error"
    assert info.value.field == "is_error"
