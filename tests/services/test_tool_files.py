"""Files a tool returns: stored as the owner's attachments, referenced by the tool message."""

from __future__ import annotations

import pytest

from conversations.domain import FilePart, Role, ToolCall
from conversations.models import Attachment, Message, MessageAttachment, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import get_history
from conversations.services import run_tool_loop, store_attachment
from conversations.services.loop.tool_calls import TOOL_FAILED
from conversations.tools import ToolResult, registry, tool

from ..files import SVG, pdf, png

pytestmark = pytest.mark.django_db(transaction=True)

PNG = png()
PDF = pdf("Quarterly figures")


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def returned():
    """What the ``hand`` tools return: set by each test."""
    return {}


@pytest.fixture
def tools(returned):
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def chart(label: str) -> ToolResult:
            """Draw a chart."""
            return ToolResult(f"chart {label}", files=[FilePart("image/png", PNG, name="c.png")])

        @tool(registry=r)
        async def report() -> ToolResult:
            """Fetch a report (an async tool)."""
            return ToolResult("the report", files=[FilePart("application/pdf", PDF, name="r.pdf")])

        @tool(registry=r)
        def hand() -> ToolResult:
            """Whatever the test set."""
            return returned["value"]

        yield r


def call(name, arguments=None, id=None):
    return ToolCall(id=id or f"c_{name}", name=name, arguments=arguments or {})


def run(conversation, *calls):
    provider = ScriptedProvider([scripted_calls(*calls), scripted_text("done")])
    finished = run_tool_loop(conversation=conversation, content="go", provider=provider)
    return finished, provider


def tool_messages(conversation):
    return {
        m.tool_call_id: m for m in get_history(conversation=conversation) if m.role is Role.TOOL
    }


def test_a_returned_png_is_stored_for_the_owner_and_the_tool_message_references_it(
    conversation, tools
):
    finished, provider = run(conversation, call("chart", {"label": "sales"}, id="c1"))

    assert finished.status == Run.Status.COMPLETED
    attachment = Attachment.objects.get()
    assert (attachment.owner_id, attachment.media_type, attachment.size, attachment.name) == (
        conversation.owner_id,
        "image/png",
        len(PNG),
        "c.png",
    )
    message = tool_messages(conversation)["c1"]
    assert message.content == "chart sales"
    (part,) = message.parts
    assert (part.attachment_id, part.media_type, part.size) == (
        str(attachment.pk),
        "image/png",
        len(PNG),
    )
    link = MessageAttachment.objects.get()
    assert link.message.role == "tool" and link.position == 0
    # The next request carries the file with the tool message: the scripted adapter sends
    # no file natively, so the model reads the note naming it (see services.attachments).
    (sent,) = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert sent.content.startswith("chart sales") and "c.png" in sent.content
    # The message row holds the text only, never the bytes.
    assert Message.objects.get(role="tool").content == "chart sales"


def test_concurrent_and_async_tools_store_their_files_with_their_messages(conversation, tools):
    finished, _ = run(
        conversation,
        call("chart", {"label": "a"}, id="a"),
        call("report", id="b"),
        call("chart", {"label": "c"}, id="c"),
    )

    assert finished.status == Run.Status.COMPLETED
    # The same PNG twice: one row; the PDF: another.
    assert sorted(Attachment.objects.values_list("media_type", flat=True)) == [
        "application/pdf",
        "image/png",
    ]
    messages = tool_messages(conversation)
    png_id = str(Attachment.objects.get(media_type="image/png").pk)
    pdf_id = str(Attachment.objects.get(media_type="application/pdf").pk)
    assert [p.attachment_id for p in messages["a"].parts] == [png_id]
    assert [p.attachment_id for p in messages["b"].parts] == [pdf_id]
    assert [p.attachment_id for p in messages["c"].parts] == [png_id]
    assert MessageAttachment.objects.count() == 3


def test_an_attachment_row_of_the_owner_is_referenced_without_storing_again(
    conversation, tools, returned
):
    existing = store_attachment(owner=conversation.owner, file=PNG, name="mine.png").attachment
    returned["value"] = ToolResult("here it is", files=[existing])

    run(conversation, call("hand", id="h"))

    assert Attachment.objects.count() == 1
    assert [p.attachment_id for p in tool_messages(conversation)["h"].parts] == [str(existing.pk)]


def test_another_owners_attachment_fails_the_call_and_is_never_linked(
    conversation, tools, returned, other_user
):
    foreign = store_attachment(owner=other_user, file=PNG).attachment
    returned["value"] = ToolResult("look", files=[foreign])

    finished, _ = run(conversation, call("hand", id="h"))

    assert finished.status == Run.Status.COMPLETED
    message = tool_messages(conversation)["h"]
    assert message.content == (
        'Error: tool "hand" failed: file 0 is an attachment the conversation\'s owner does not own'
    )
    assert message.is_error and message.parts == ()
    assert ToolCallRow.objects.get(call_id="h").status == ToolCallRow.Status.FAILED
    assert not MessageAttachment.objects.exists()


def test_a_file_of_a_refused_type_fails_the_call_saying_why_and_stores_nothing(
    conversation, tools, returned
):
    returned["value"] = ToolResult("drawn", files=[FilePart("image/png", SVG, name="x.png")])

    run(conversation, call("hand", id="h"))

    message = tool_messages(conversation)["h"]
    assert message.content == (
        'Error: tool "hand" failed: file 0 was refused: '
        "files of type image/svg+xml are not accepted"
    )
    assert not Attachment.objects.exists() and not MessageAttachment.objects.exists()


def test_more_files_than_a_message_may_reference_fail_the_call(
    conversation, tools, returned, settings
):
    settings.CONVERSATIONS = {**settings.CONVERSATIONS, "MAX_ATTACHMENTS_PER_MESSAGE": 1}
    returned["value"] = ToolResult("two", files=[FilePart("image/png", PNG)] * 2)

    run(conversation, call("hand", id="h"))

    assert tool_messages(conversation)["h"].content == (
        'Error: tool "hand" failed: it returned 2 files; at most 1 are accepted'
    )
    assert not Attachment.objects.exists()


def test_links_are_written_in_the_tool_messages_transaction(
    conversation, tools, returned, other_user
):
    # The row claims the owner in memory; the database knows better and its rule
    # refuses the link. The tool message written with it must go too: the call
    # ends failed with the fixed sentence, and no message keeps the tool's text.
    foreign = store_attachment(owner=other_user, file=PNG).attachment
    foreign.owner_id = conversation.owner_id
    returned["value"] = ToolResult("the tool's own text", files=[foreign])

    finished, _ = run(conversation, call("hand", id="h"))

    assert finished.status == Run.Status.COMPLETED
    message = tool_messages(conversation)["h"]
    assert message.content == TOOL_FAILED.format(name="hand")
    assert message.parts == ()
    assert not Message.objects.filter(content="the tool's own text").exists()
    assert not MessageAttachment.objects.exists()
    assert "could not be stored" in ToolCallRow.objects.get(call_id="h").error


@pytest.mark.parametrize(
    ("text", "files", "field"),
    [
        (b"bytes", (), "text"),
        ("t", "not a list", "files"),
        ("t", [b"raw bytes"], "files/0"),
        ("t", [FilePart("image/png", b"", attachment_id="x", size=3)], "files/0"),
    ],
)
def test_a_tool_result_is_checked_when_made(text, files, field):
    from conversations.exceptions import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as caught:
        ToolResult(text, files=files)
    assert caught.value.field == field
