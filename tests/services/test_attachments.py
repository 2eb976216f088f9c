"""Storing attachments: dedup by content, sniffing from bytes, limits, and removal of orphans."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.utils import timezone

from conversations.domain import ChatMessage
from conversations.exceptions import AttachmentTooLarge, UnsupportedMediaType
from conversations.models import Attachment, MessageAttachment
from conversations.selectors import attachment_part, get_history
from conversations.services import append_messages, purge_attachments, store_attachment
from conversations.services.attachments import (
    delete_unreferenced_attachments,
    load_parts,
    read_attachment,
    sanitise_name,
    sniff_media_type,
)

from ..files import HTML, SVG, pdf, png

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def stored_files() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT) / "conversations" / "attachments"
    return sorted(root.iterdir()) if root.exists() else []


def test_bytes_a_file_object_and_an_upload_are_all_stored(user):
    for file in (png(), io.BytesIO(pdf("a")), SimpleUploadedFile("x.csv", b"a,b\n")):
        stored = store_attachment(owner=user, file=file, name="f.csv")
        assert stored.created
    assert sorted(Attachment.objects.values_list("media_type", flat=True)) == [
        "application/pdf",
        "image/png",
        "text/csv",
    ]
    assert len(stored_files()) == 3


def test_the_same_bytes_stored_twice_give_the_same_row_and_one_object(user):
    first = store_attachment(owner=user, file=png(), name="a.png")
    second = store_attachment(owner=user, file=png(), name="b.png")
    assert (first.created, second.created) == (True, False)
    assert first.attachment.pk == second.attachment.pk
    assert second.attachment.name == "a.png"  # the first name stays
    assert len(stored_files()) == 1
    assert read_attachment(second.attachment) == png()


def test_a_refused_file_leaves_no_row_and_no_object(user, settings):
    with pytest.raises(UnsupportedMediaType) as info:
        store_attachment(owner=user, file=HTML, name="cat.png")
    assert info.value.field == "file"
    settings.CONVERSATIONS = {"MAX_ATTACHMENT_BYTES": 10}
    with pytest.raises(AttachmentTooLarge):
        store_attachment(owner=user, file=png(), name="a.png")
    assert not Attachment.objects.exists() and not stored_files()


def test_a_file_object_without_a_size_is_measured_while_read(user, settings):
    settings.CONVERSATIONS = {"MAX_ATTACHMENT_BYTES": 1000}

    class Unsized(io.RawIOBase):
        """A stream that cannot tell its size in advance."""

        def __init__(self):
            self._data = io.BytesIO(b"a" * 5000)

        def readable(self):
            return True

        def readinto(self, buffer):
            chunk = self._data.read(len(buffer))
            buffer[: len(chunk)] = chunk
            return len(chunk)

    with pytest.raises(AttachmentTooLarge):
        store_attachment(owner=user, file=Unsized(), name="a.txt")
    assert not stored_files()


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (png(), "x.txt", "image/png"),
        (pdf("a"), "x.md", "application/pdf"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01", "x", "image/jpeg"),
        (b"GIF89a\x01\x00\x01\x00", "x", "image/gif"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "x", "image/webp"),
        (HTML, "x.png", "text/html"),
        (SVG, "x.png", "image/svg+xml"),
        (b"  <svg xmlns='http://www.w3.org/2000/svg'/>", "x.txt", "image/svg+xml"),
        (b"#!/bin/sh\nrm -rf /\n", "x.txt", "text/x-shellscript"),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 60, "x.txt", "application/octet-stream"),
        (b"# Title\n\nSome <b>bold</b> text", "x.md", "text/markdown"),
        ('{"a": "ü"}'.encode(), "x.json", "application/json"),
    ],
)
def test_the_media_type_is_sniffed_from_the_bytes(data, name, expected):
    from conversations.services.attachments.sniffing import TextProbe

    probe = TextProbe()
    probe.feed(data, final=True)
    assert sniff_media_type(data, is_text=probe.is_text, name=name) == expected


def test_text_cut_in_the_middle_of_a_character_between_chunks_is_still_text():
    from conversations.services.attachments.sniffing import TextProbe

    probe = TextProbe()
    data = "naïve".encode()
    probe.feed(data[:3])
    probe.feed(data[3:], final=True)
    assert probe.is_text


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\report.pdf", "report.pdf"),
        ("\x00evil\x1b[31m.png", "evil[31m.png"),
        ("...hidden", "hidden"),
        ("a" * 300 + ".png", "a" * 251 + ".png"),
    ],
)
def test_names_are_sanitised(raw, clean):
    assert sanitise_name(raw) == clean


def test_a_message_part_references_the_attachment_and_the_history_reads_it_back(user, conversation):
    attachment = store_attachment(owner=user, file=png(), name="cat.png").attachment
    message = ChatMessage.user("look", parts=[attachment_part(attachment)])
    append_messages(conversation=conversation, messages=[message])
    (read,) = get_history(conversation=conversation)
    assert read.parts == (attachment_part(attachment),)
    assert not read.parts[0].loaded
    (loaded,) = load_parts([read])
    assert loaded.parts[0].data == png() and loaded.parts[0].name == "cat.png"


def test_a_part_that_is_not_stored_is_refused_by_append(conversation):
    from conversations.domain import FilePart

    with pytest.raises(ValueError) as info:
        append_messages(
            conversation=conversation,
            messages=[ChatMessage.user("x", parts=[FilePart("image/png", png())])],
        )
    assert (info.value.code, info.value.field) == ("unstored_part", "0/parts/0")


def test_unreferenced_attachments_go_with_their_files_referenced_ones_stay(user, conversation):
    kept = store_attachment(owner=user, file=png(), name="kept.png").attachment
    orphan = store_attachment(owner=user, file=pdf("x"), name="orphan.pdf").attachment
    append_messages(
        conversation=conversation, messages=[ChatMessage.user("x", parts=[attachment_part(kept)])]
    )
    assert delete_unreferenced_attachments(owner=user) == 1
    assert list(Attachment.objects.values_list("pk", flat=True)) == [kept.pk]
    assert [path.name for path in stored_files()] == [Path(kept.file.name).name]
    assert not Attachment.objects.filter(pk=orphan.pk).exists()


def test_purge_attachments_spares_recent_uploads(user):
    old = store_attachment(owner=user, file=png(), name="old.png").attachment
    store_attachment(owner=user, file=pdf("new"), name="new.pdf")
    Attachment.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    assert purge_attachments(older_than=timedelta(days=1)) == 1
    assert list(Attachment.objects.values_list("name", flat=True)) == ["new.pdf"]
    assert len(stored_files()) == 1


def test_a_delete_rolled_back_keeps_the_file(user):
    attachment = store_attachment(owner=user, file=png(), name="a.png").attachment
    with pytest.raises(RuntimeError), transaction.atomic():
        Attachment.objects.filter(pk=attachment.pk).delete()
        raise RuntimeError("rolled back")
    assert len(stored_files()) == 1 and Attachment.objects.exists()


def test_deleting_the_owner_deletes_their_files(user, conversation):
    attachment = store_attachment(owner=user, file=png(), name="a.png").attachment
    append_messages(
        conversation=conversation,
        messages=[ChatMessage.user("x", parts=[attachment_part(attachment)])],
    )
    user.delete()
    assert not Attachment.objects.exists() and not MessageAttachment.objects.exists()
    assert not stored_files()
