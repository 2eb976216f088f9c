"""``file`` parts through useChat's endpoint: data URLs stored as attachments, never a fetch.

A file part's bytes travel inline (a ``data:`` URL, as the AI SDK sends a
picked file); they are stored as the owner's attachment and the user message
references it. Any other URL is refused with a 400 naming the part, and the
server requests nothing. The history gives the files back as ``file`` parts
with the attachment's content URL.
"""

from __future__ import annotations

import base64

import pytest

from conversations.domain import FilePart, ToolCall
from conversations.models import Attachment, Message, MessageAttachment, Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop
from conversations.tools import ToolResult, registry, tool

from ..files import SVG, pdf, png
from .test_ai_sdk import chat_body, chat_url, chunks_of

PNG = png()


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def file_part(url, media_type="image/png", filename="photo.png"):
    return {"type": "file", "mediaType": media_type, "filename": filename, "url": url}


def message_with(*parts):
    return {"id": "m1", "role": "user", "parts": list(parts)}


@pytest.mark.django_db(transaction=True)
def test_a_file_part_is_stored_referenced_answered_and_given_back_by_the_history(
    api, demo_conversation
):
    body = chat_body(
        message_with({"type": "text", "text": "What is this?"}, file_part(data_url(PNG)))
    )

    response = api.post(chat_url(demo_conversation), body, format="json")

    assert response.status_code == 200, response.content
    chunks = chunks_of(response)
    assert chunks[-1]["type"] == "finish"
    assert Run.objects.get().status == Run.Status.COMPLETED
    attachment = Attachment.objects.get()
    assert (attachment.owner_id, attachment.media_type, attachment.name) == (
        demo_conversation.owner_id,
        "image/png",
        "photo.png",
    )
    user_message = Message.objects.get(role="user")
    assert user_message.content == "What is this?"
    assert [link.attachment_id for link in user_message.attachment_links.all()] == [attachment.pk]

    history = api.get(chat_url(demo_conversation)).json()
    assert history[0]["parts"] == [
        {"type": "text", "text": "What is this?"},
        {
            "type": "file",
            "mediaType": "image/png",
            "filename": "photo.png",
            "url": f"/api/attachments/{attachment.pk}/content/",
        },
    ]
    # The URL serves the bytes to the owner.
    content = api.get(history[0]["parts"][1]["url"])
    assert content.status_code == 200
    assert b"".join(content.streaming_content) == PNG


@pytest.mark.django_db(transaction=True)
def test_a_message_of_files_alone_is_answered(api, demo_conversation):
    body = chat_body(
        message_with(
            file_part(data_url(PNG)),
            file_part(data_url(pdf("Minutes"), "application/pdf"), "application/pdf", "m.pdf"),
        )
    )

    response = api.post(chat_url(demo_conversation), body, format="json")

    assert response.status_code == 200, response.content
    chunks_of(response)
    user_message = Message.objects.get(role="user")
    assert user_message.content == ""
    media = [link.attachment.media_type for link in user_message.attachment_links.all()]
    assert media == ["image/png", "application/pdf"]
    history = api.get(chat_url(demo_conversation)).json()
    assert [part["type"] for part in history[0]["parts"]] == ["file", "file"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/cat.png",
        "http://127.0.0.1:8000/api/attachments/",
        "file:///etc/passwd",
        "/api/attachments/1/content/",
    ],
)
def test_a_file_that_is_not_a_data_url_is_refused_naming_the_part_and_nothing_is_fetched(
    api, demo_conversation, url
):
    body = chat_body(message_with({"type": "text", "text": "see"}, file_part(url)))

    response = api.post(chat_url(demo_conversation), body, format="json")

    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "unsupported_file_url"
    assert [e["pointer"] for e in answer["errors"]] == ["/messages/0/parts/1/url"]
    assert "data: URL" in answer["detail"]
    assert not Attachment.objects.exists()
    assert not Message.objects.exists() and not Run.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("part", "status", "code", "pointer"),
    [
        (file_part(data_url(SVG, "image/svg+xml")), 415, "unsupported_media_type", ""),
        # An HTML page named like a PNG: its bytes say what it is.
        (
            file_part(data_url(b"<!DOCTYPE html><html><script>x()</script></html>")),
            415,
            "unsupported_media_type",
            "",
        ),
        (file_part("data:image/png;base64,@@@"), 400, "invalid_file_data", "/url"),
        (file_part("data:image/png,rawtext"), 400, "unsupported_file_url", "/url"),
        (file_part(None), 400, "invalid", "/url"),
        ({**file_part(data_url(PNG)), "filename": 3}, 400, "invalid", "/filename"),
    ],
)
def test_a_refused_file_names_its_part_and_stores_nothing(
    api, demo_conversation, part, status, code, pointer
):
    body = chat_body(message_with({"type": "text", "text": "see"}, part))

    response = api.post(chat_url(demo_conversation), body, format="json")

    assert response.status_code == status, response.content
    answer = response.json()
    assert answer["code"] == code
    assert [e["pointer"] for e in answer["errors"]] == ["/messages/0/parts/1" + pointer]
    assert not Attachment.objects.exists() and not Run.objects.exists()


@pytest.mark.django_db
def test_a_file_over_the_limit_is_413_before_it_is_decoded(api, settings, demo_conversation):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_ATTACHMENT_BYTES": 1000}
    body = chat_body(message_with(file_part(data_url(b"x" * 2000, "text/plain"))))

    response = api.post(chat_url(demo_conversation), body, format="json")

    assert response.status_code == 413
    answer = response.json()
    assert answer["code"] == "attachment_too_large"
    assert [e["pointer"] for e in answer["errors"]] == ["/messages/0/parts/0"]
    assert not Attachment.objects.exists() and not Run.objects.exists()


@pytest.mark.django_db
def test_more_files_than_a_message_may_have_is_400(api, settings, demo_conversation):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_ATTACHMENTS_PER_MESSAGE": 1}
    body = chat_body(message_with(file_part(data_url(PNG)), file_part(data_url(PNG))))

    response = api.post(chat_url(demo_conversation), body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "too_many_attachments"
    assert not Attachment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_files_a_tool_returned_follow_its_part_in_the_history(api, conversation):
    with registry.isolated(empty=True) as tools:

        @tool(registry=tools)
        def chart() -> ToolResult:
            """A chart."""
            return ToolResult("drawn", files=[FilePart("image/png", PNG, name="chart.png")])

        provider = ScriptedProvider(
            [scripted_calls(ToolCall(id="c1", name="chart", arguments={})), scripted_text("ok")]
        )
        run_tool_loop(conversation=conversation, content="draw", provider=provider)

    _, assistant = api.get(chat_url(conversation)).json()
    link = MessageAttachment.objects.get()
    assert [part["type"] for part in assistant["parts"]] == [
        "step-start",
        "tool-chart",
        "file",
        "step-start",
        "text",
    ]
    assert assistant["parts"][2] == {
        "type": "file",
        "mediaType": "image/png",
        "filename": "chart.png",
        "url": f"/api/attachments/{link.attachment_id}/content/",
    }
