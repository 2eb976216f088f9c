"""FilePart and messages with parts: their rules and the one OpenAI wire shape."""

import base64
import uuid

import pytest

from conversations.domain import ChatMessage, FilePart, InvalidArgumentError, Role

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"


def test_a_user_message_with_an_image_and_a_pdf_has_the_openai_content_array():
    message = ChatMessage.user(
        "What is in these?",
        parts=[FilePart("image/png", PNG, name="cat.png"), FilePart("application/pdf", PDF)],
    )
    png_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    pdf_url = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    assert message.to_dict() == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": png_url}},
            {"type": "file", "file": {"filename": "file", "file_data": pdf_url}},
        ],
    }


def test_the_wire_shape_of_parts_reads_back_to_an_equal_message():
    message = ChatMessage.user(
        "look", parts=[FilePart("image/png", PNG), FilePart("application/pdf", PDF, name="a.pdf")]
    )
    assert ChatMessage.from_dict(message.to_dict()) == message


def test_an_empty_text_with_parts_leaves_the_text_item_out():
    message = ChatMessage.user("", parts=[FilePart("image/png", PNG)])
    assert [item["type"] for item in message.to_dict()["content"]] == ["image_url"]


def test_a_message_without_parts_keeps_its_plain_string_content():
    assert ChatMessage.user("hi").to_dict() == {"role": "user", "content": "hi"}
    assert ChatMessage.user("hi").parts == ()


def test_a_tool_result_carries_parts_and_its_call_id():
    message = ChatMessage.tool_result("call_1", "a chart", parts=[FilePart("image/png", PNG)])
    assert message.parts[0].media_type == "image/png"
    assert message.to_dict()["tool_call_id"] == "call_1"


@pytest.mark.parametrize("role", [Role.SYSTEM, Role.ASSISTANT])
def test_parts_are_refused_on_system_and_assistant_messages(role):
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage(role, "x", parts=(FilePart("image/png", PNG),))
    assert (info.value.code, info.value.field) == ("parts_not_allowed", "parts")


def test_a_part_that_is_not_a_file_part_is_refused():
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage(Role.USER, "x", parts=({"media_type": "image/png"},))  # type: ignore[arg-type]
    assert info.value.code == "invalid_parts"


def test_a_reference_part_has_a_size_but_no_bytes_until_loaded():
    attachment = uuid.uuid4()
    part = FilePart("image/png", b"", attachment_id=attachment, size=len(PNG))  # type: ignore[arg-type]
    assert part.attachment_id == str(attachment)
    assert not part.loaded
    loaded = part.with_data(PNG)
    assert loaded.loaded and loaded.size == len(PNG) and loaded.attachment_id == str(attachment)


def test_a_size_that_contradicts_the_bytes_is_refused():
    with pytest.raises(InvalidArgumentError) as info:
        FilePart("image/png", PNG, size=3)
    assert info.value.code == "invalid_file_size"


def test_a_part_without_bytes_nor_attachment_cannot_claim_a_size():
    with pytest.raises(InvalidArgumentError) as info:
        FilePart("image/png", b"", size=10)
    assert info.value.code == "invalid_file_data"


@pytest.mark.parametrize("data", [bytearray(PNG), memoryview(PNG)])
def test_a_bytearray_or_memoryview_is_kept_as_bytes(data):
    part = FilePart("image/png", data)
    assert part.data == PNG and type(part.data) is bytes and part.size == len(PNG)


@pytest.mark.parametrize(("data", "named"), [(None, "null"), ("text", "str"), (12, "int")])
def test_data_that_is_not_bytes_is_refused_naming_its_type(data, named):
    with pytest.raises(InvalidArgumentError) as info:
        FilePart("image/png", data)  # type: ignore[arg-type]
    assert (info.value.code, info.value.field) == ("invalid_file_data", "data")
    assert str(info.value).endswith(f"got {named}")


@pytest.mark.parametrize(("name", "named"), [(None, "null"), (3, "int")])
def test_a_name_that_is_not_text_is_refused(name, named):
    with pytest.raises(InvalidArgumentError) as info:
        FilePart("image/png", PNG, name=name)  # type: ignore[arg-type]
    assert (info.value.code, info.value.field) == ("invalid_file_name", "name")
    assert str(info.value).endswith(f"got {named}")


def test_an_attachment_id_is_kept_as_text_and_must_not_be_empty():
    pk = uuid.uuid4()
    assert FilePart("image/png", PNG, attachment_id=pk).attachment_id == str(pk)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError) as info:
        FilePart("image/png", PNG, attachment_id="")
    assert (info.value.code, info.value.field) == ("invalid_attachment_id", "attachment_id")


@pytest.mark.parametrize("size", [-1, True, "10", 2.5])
def test_a_reference_size_must_be_a_non_negative_whole_number(size):
    with pytest.raises(InvalidArgumentError) as info:
        FilePart("image/png", b"", attachment_id="a1", size=size)
    assert (info.value.code, info.value.field) == ("invalid_file_size", "size")


def test_a_reference_without_bytes_or_size_is_empty():
    assert FilePart("text/plain", b"", attachment_id="a1").size == 0


@pytest.mark.parametrize("media_type", ["", "png", None])
def test_a_media_type_without_a_slash_is_refused(media_type):
    with pytest.raises(InvalidArgumentError) as info:
        FilePart(media_type, PNG)  # type: ignore[arg-type]
    assert info.value.code == "invalid_media_type"


def test_the_kind_tells_what_a_model_must_read():
    kinds = {
        t: FilePart(t, b"x").kind
        for t in ("image/png", "image/webp", "application/pdf", "text/csv", "application/zip")
    }
    assert kinds == {
        "image/png": "image",
        "image/webp": "image",
        "application/pdf": "pdf",
        "text/csv": "text",
        "application/zip": "file",
    }


@pytest.mark.parametrize(
    "item",
    [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "file", "file": {"file_data": "file:///etc/passwd"}},
        {"type": "image_url", "image_url": {"url": "data:image/png,rawtext"}},
    ],
)
def test_a_part_that_is_not_a_base64_data_url_is_refused_never_fetched(item):
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage.from_dict({"role": "user", "content": [item]})
    assert (info.value.code, info.value.field) == ("unsupported_file_url", "content/0")


def test_broken_base64_in_a_data_url_is_refused():
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage.from_dict(
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}
                ],
            }
        )
    assert info.value.code == "invalid_file_data"


def test_an_unknown_content_item_is_refused_naming_its_index():
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage.from_dict(
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "audio"}]}
        )
    assert (info.value.code, info.value.field) == ("invalid_content_part", "content/1")


def test_the_wire_shape_of_a_part_whose_bytes_are_not_loaded_is_refused():
    reference = FilePart("image/png", b"", attachment_id="a1", size=10)
    with pytest.raises(InvalidArgumentError) as info:
        ChatMessage.user("x", parts=[reference]).to_dict()
    assert (info.value.code, info.value.field) == ("part_not_loaded", "parts/0")
