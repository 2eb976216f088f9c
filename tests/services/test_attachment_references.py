"""References travel, bytes stay: the export names attachments by id and sha256, a fork
references the same ones, and a streamed answer sends the files natively too."""

from __future__ import annotations

import base64
import json

import pytest

from conversations.domain import ChatMessage
from conversations.models import Attachment, LanguageModel, MessageAttachment, Profile, Provider
from conversations.selectors import attachment_part
from conversations.selectors.export import conversation_lines
from conversations.services import (
    append_messages,
    fork_conversation,
    run_tool_loop,
    store_attachment,
)
from conversations.services.transcript.messages import create_conversation
from tests.fake_provider import WIRES, FakeAnswer, FakeProviderServer

from ..files import pdf, png

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def with_files(user):
    conversation = create_conversation(owner=user, title="files")
    image = store_attachment(owner=user, file=png(), name="cat.png").attachment
    document = store_attachment(owner=user, file=pdf("hello"), name="doc.pdf").attachment
    message = ChatMessage.user("look", parts=[attachment_part(image), attachment_part(document)])
    append_messages(conversation=conversation, messages=[message, ChatMessage.assistant("ok")])
    return conversation, image, document


def test_the_export_references_attachments_by_id_and_sha256_never_bytes(user, with_files):
    _, image, document = with_files
    (line,) = list(conversation_lines(user=user))
    exported = json.loads(line)
    first = exported["messages"][0]
    assert first["content"] == "look"
    assert first["attachments"] == [
        {
            "id": str(row.pk),
            "sha256": row.sha256,
            "name": row.name,
            "media_type": row.media_type,
            "size": row.size,
        }
        for row in (image, document)
    ]
    assert "attachments" not in exported["messages"][1]
    assert base64.b64encode(png()).decode()[:24] not in line


def test_a_fork_references_the_same_attachments_and_copies_no_bytes(with_files):
    conversation, image, document = with_files
    branch = fork_conversation(conversation=conversation, position=1)
    links = MessageAttachment.objects.filter(message__conversation=branch).order_by("position")
    assert [link.attachment_id for link in links] == [image.pk, document.pk]
    assert Attachment.objects.count() == 2


def test_a_streamed_answer_sends_the_files_natively_too(monkeypatch, user):
    monkeypatch.setenv("ATTACHMENT_STREAM_KEY", "sk-test")
    wire = WIRES["anthropic"]
    answer = FakeAnswer(b"".join(wire.stream("A cat.")), content_type=wire.content_type)
    with FakeProviderServer(answer) as server:
        provider = Provider.objects.create(
            slug="fake-anthropic",
            name="Fake",
            adapter="anthropic",
            base_url=server.base_url,
            api_key_ref="env:ATTACHMENT_STREAM_KEY",
            max_retries=0,
        )
        model = LanguageModel.objects.create(
            provider=provider, model_id="fake-model", input_modalities=["image"]
        )
        profile = Profile.objects.create(
            slug="fake", name="Fake", language_model=model, stream=True
        )
        conversation = create_conversation(owner=user, profile=profile)
        image = store_attachment(owner=user, file=png(), name="cat.png").attachment
        run = run_tool_loop(conversation=conversation, content="What?", attachments=[image])
    assert run.status == "completed" and run.final_content == "A cat."
    (request,) = server.requests
    assert request["body"]["stream"] is True
    blocks = request["body"]["messages"][0]["content"]
    assert blocks[0]["type"] == "image"
    assert blocks[0]["source"]["data"] == base64.b64encode(png()).decode()
