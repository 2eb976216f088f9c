"""Export and import of files: references by id and sha256 out, only the importer's own in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from conversations.domain import ChatMessage, ToolCall
from conversations.models import Attachment, Conversation, MessageAttachment
from conversations.selectors import attachment_part
from conversations.services import append_messages, store_attachment

from ..files import pdf, png

pytestmark = pytest.mark.django_db

IMPORT = reverse("conversations:conversation-import")
EXPORT = reverse("conversations:export")


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def stored_files() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT) / "conversations" / "attachments"
    return sorted(root.iterdir()) if root.exists() else []


@pytest.fixture
def picture(user):
    return store_attachment(owner=user, file=png(), name="p.png").attachment


@pytest.fixture
def report(user):
    return store_attachment(owner=user, file=pdf("Q3"), name="q3.pdf").attachment


@pytest.fixture
def with_files(conversation, picture, report):
    """A conversation whose user message has a PNG and whose tool result has a PDF."""
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("Look", parts=[attachment_part(picture)]),
            ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="fetch", arguments={})]),
            ChatMessage.tool_result("c1", "the report", parts=[attachment_part(report)]),
            ChatMessage.assistant("Seen both."),
        ],
    )
    return conversation


def reference(attachment):
    return {"id": str(attachment.pk), "sha256": attachment.sha256}


def test_an_exported_line_imports_again_referencing_the_same_files(
    api, with_files, picture, report
):
    response = api.get(EXPORT)
    (line,) = [json.loads(row) for row in b"".join(response.streaming_content).splitlines()]
    user_message, _, tool_message, _ = line["messages"]
    assert user_message["content"] == "Look"
    assert user_message["attachments"] == [
        {
            "id": str(picture.pk),
            "sha256": picture.sha256,
            "name": "p.png",
            "media_type": "image/png",
            "size": picture.size,
        }
    ]
    assert [a["id"] for a in tool_message["attachments"]] == [str(report.pk)]
    assert "base64" not in json.dumps(line)

    imported = api.post(IMPORT, line, format="json")

    assert imported.status_code == 201, imported.content
    copy = Conversation.objects.get(pk=imported.json()["id"])
    links = MessageAttachment.objects.filter(message__conversation=copy).order_by(
        "message__position"
    )
    assert [(link.message.role, link.attachment_id) for link in links] == [
        ("user", picture.pk),
        ("tool", report.pk),
    ]
    # References, never copies: still two rows and two stored objects.
    assert Attachment.objects.count() == 2
    assert len(stored_files()) == 2
    # The imported messages list them like any other.
    messages = api.get(reverse("conversations:conversation-messages", args=[copy.pk])).json()
    rows = messages["results"] if isinstance(messages, dict) else messages
    assert [a["id"] for a in rows[0]["attachments"]] == [str(picture.pk)]


def body_with(attachments, role="user"):
    message = {"role": role, "content": "hi", "attachments": attachments}
    return {"title": "t", "messages": [message]}


def test_another_users_attachment_is_400_naming_the_reference_and_nothing_is_saved(api, other_user):
    foreign = store_attachment(owner=other_user, file=png()).attachment

    response = api.post(IMPORT, body_with([reference(foreign)]), format="json")

    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "unknown_attachment"
    assert [e["pointer"] for e in answer["errors"]] == ["/messages/0/attachments/0/id"]
    assert not Conversation.objects.exists() and not MessageAttachment.objects.exists()


@pytest.mark.parametrize(
    ("attachments", "role", "code", "pointer"),
    [
        ("nope", "user", "invalid_attachments", "/messages/0/attachments"),
        (["x"], "user", "invalid_attachment", "/messages/0/attachments/0"),
        (
            [{"id": "not-a-uuid", "sha256": "a"}],
            "user",
            "unknown_attachment",
            "/messages/0/attachments/0/id",
        ),
        (
            [{"id": "00000000-0000-0000-0000-000000000001", "sha256": "a"}],
            "user",
            "unknown_attachment",
            "/messages/0/attachments/0/id",
        ),
        ("MINE_NO_SHA", "user", "invalid_attachment", "/messages/0/attachments/0/sha256"),
        ("MINE_WRONG_SHA", "user", "attachment_mismatch", "/messages/0/attachments/0/sha256"),
        ("MINE_TWICE", "user", "duplicate_attachment", "/messages/0/attachments/1/id"),
        ("MINE", "assistant", "attachments_not_allowed", "/messages/0/attachments"),
    ],
)
def test_a_bad_reference_is_400_naming_it(api, picture, attachments, role, code, pointer):
    mine = reference(picture)
    attachments = (
        {
            "MINE": [mine],
            "MINE_NO_SHA": [{"id": mine["id"]}],
            "MINE_WRONG_SHA": [{**mine, "sha256": "0" * 64}],
            "MINE_TWICE": [mine, mine],
        }.get(attachments, attachments)
        if isinstance(attachments, str)
        else attachments
    )

    response = api.post(IMPORT, body_with(attachments, role), format="json")

    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["code"] == code
    assert [e["pointer"] for e in answer["errors"]] == [pointer]
    assert not Conversation.objects.exists()


def test_bytes_inline_are_refused_not_stored(api):
    content = [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    body = {"title": "t", "messages": [{"role": "user", "content": content}]}

    response = api.post(IMPORT, body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "unstored_part"
    assert response.json()["errors"][0]["pointer"].startswith("/messages/0/parts/0")
    assert not Attachment.objects.exists() and not Conversation.objects.exists()
