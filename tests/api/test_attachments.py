"""Attachments over the API: upload, dedup, metadata, bytes, ownership, limits, messages."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from conversations.models import Attachment, Message, MessageAttachment

from ..files import HTML, SVG, pdf, png

pytestmark = pytest.mark.django_db

UPLOAD = reverse("conversations:attachment-list")


def stored_files() -> list[Path]:
    root = Path(django_settings.MEDIA_ROOT) / "conversations" / "attachments"
    return sorted(root.iterdir()) if root.exists() else []


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def body_of(response) -> bytes:
    """A file response's bytes, its file closed (``close()`` would also end the test's DB)."""
    try:
        return b"".join(response.streaming_content)
    finally:
        for closer in response._resource_closers:
            closer()


def upload(api, data: bytes, name: str = "file.bin", content_type: str = "image/png"):
    return api.post(
        UPLOAD,
        {"file": SimpleUploadedFile(name, data, content_type=content_type)},
        format="multipart",
    )


def test_an_upload_answers_201_with_its_metadata_and_location(api, user):
    data = png()
    response = upload(api, data, "cat.png")
    assert response.status_code == 201, response.content
    body = response.json()
    row = Attachment.objects.get()
    assert body == {
        "id": str(row.pk),
        "name": "cat.png",
        "media_type": "image/png",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "url": f"/api/attachments/{row.pk}/content/",
        "created_at": body["created_at"],
    }
    assert response["Location"] == f"http://testserver/api/attachments/{row.pk}/"
    assert row.owner == user


def test_the_same_bytes_posted_twice_give_one_row_and_one_stored_file(api):
    first = upload(api, png(), "a.png")
    second = upload(api, png(), "renamed.png")
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert Attachment.objects.count() == 1
    assert len(stored_files()) == 1


def test_the_same_bytes_of_two_users_are_two_rows(api, other_api):
    assert upload(api, png()).status_code == 201
    assert upload(other_api, png()).status_code == 201
    assert Attachment.objects.count() == 2
    assert len(stored_files()) == 2


def test_the_type_comes_from_the_bytes_not_the_name_or_header(api):
    response = upload(api, pdf("hello"), "picture.png", content_type="image/png")
    assert response.status_code == 201
    assert response.json()["media_type"] == "application/pdf"


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (HTML, "cat.png"),
        (SVG, "logo.svg"),
        (SVG, "logo.png"),
        (b"MZ\x90\x00" + b"\x00" * 200, "a.txt"),
    ],
)
def test_markup_and_executables_are_refused_415_whatever_they_are_called(api, data, name):
    response = upload(api, data, name)
    assert response.status_code == 415, response.content
    body = response.json()
    assert body["code"] == "unsupported_media_type"
    assert body["errors"][0]["pointer"] == "/file"
    assert not Attachment.objects.exists() and not stored_files()


def test_text_files_take_their_text_type_from_the_extension(api):
    kinds = {
        name: upload(api, f"{name} body\n".encode(), name).json()["media_type"]
        for name in ("notes.md", "rows.csv", "data.json", "plain.txt", "noext")
    }
    assert kinds == {
        "notes.md": "text/markdown",
        "rows.csv": "text/csv",
        "data.json": "application/json",
        "plain.txt": "text/plain",
        "noext": "text/plain",
    }


def test_a_type_left_out_of_attachment_types_is_refused(api, settings):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "ATTACHMENT_TYPES": ["image/png"]}
    assert upload(api, png()).status_code == 201
    assert upload(api, pdf("x")).status_code == 415


def test_an_upload_over_the_limit_is_413_with_nothing_stored(api):
    response = upload(api, b"\x89PNG\r\n\x1a\n" + b"\x00" * (25 * 1024 * 1024), "big.png")
    assert response.status_code == 413
    assert response.json()["code"] == "attachment_too_large"
    assert not Attachment.objects.exists() and not stored_files()


def test_a_file_over_a_lowered_limit_is_refused_after_parsing_too(api, settings):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_ATTACHMENT_BYTES": 100}
    response = upload(api, b"x" * 101, "a.txt")
    assert response.status_code == 413
    assert response.json()["errors"][0]["pointer"] == "/file"
    assert not Attachment.objects.exists() and not stored_files()


def test_an_upload_without_a_file_names_the_field(api):
    response = api.post(UPLOAD, {"other": "x"}, format="multipart")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/file"


def test_anonymous_uploads_are_refused(anonymous):
    assert upload(anonymous, png()).status_code in (401, 403)
    assert not Attachment.objects.exists()


def test_the_metadata_and_the_bytes_of_an_image_are_served_inline(api):
    data = png()
    attachment_id = upload(api, data, "cat.png").json()["id"]
    detail = api.get(reverse("conversations:attachment-detail", args=[attachment_id]))
    assert detail.status_code == 200 and detail.json()["sha256"] == hashlib.sha256(data).hexdigest()
    content = api.get(reverse("conversations:attachment-content", args=[attachment_id]))
    assert content.status_code == 200
    assert body_of(content) == data
    assert content["Content-Type"] == "image/png"
    assert content["X-Content-Type-Options"] == "nosniff"
    assert content["Content-Disposition"].startswith('inline; filename="cat.png"')
    assert "sandbox" in content["Content-Security-Policy"]


def test_a_pdf_and_a_text_file_are_served_as_downloads(api):
    for data, name in ((pdf("x"), "doc.pdf"), (b"a,b\n1,2\n", "rows.csv")):
        attachment_id = upload(api, data, name).json()["id"]
        content = api.get(reverse("conversations:attachment-content", args=[attachment_id]))
        assert content["Content-Disposition"].startswith(f'attachment; filename="{name}"')
        assert content["X-Content-Type-Options"] == "nosniff"
        assert body_of(content) == data


def test_a_name_with_a_path_and_control_characters_is_sanitised(api):
    response = upload(api, png(), "../../etc/\x00evil\n.png")
    assert response.json()["name"] == "evil.png"


def test_another_users_attachment_is_a_404_everywhere(api, other_api):
    attachment_id = upload(api, png()).json()["id"]
    for name in ("conversations:attachment-detail", "conversations:attachment-content"):
        response = other_api.get(reverse(name, args=[attachment_id]))
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


# Messages with attachments ----------------------------------------------------------------


def messages_url(conversation):
    return reverse("conversations:conversation-messages", args=[conversation.pk])


def test_a_message_references_its_attachments_in_order_and_may_have_no_text(api, demo_conversation):
    image = upload(api, png(), "cat.png").json()
    document = upload(api, pdf("page one"), "doc.pdf").json()
    response = api.post(
        messages_url(demo_conversation),
        {"content": "", "attachments": [document["id"], image["id"]]},
        format="json",
    )
    assert response.status_code == 201, response.content
    user_message = response.json()["messages"][0]
    assert user_message["role"] == "user" and user_message["content"] == ""
    assert [a["id"] for a in user_message["attachments"]] == [document["id"], image["id"]]
    assert user_message["attachments"][1] == {
        key: image[key] for key in ("id", "name", "media_type", "size", "url")
    }
    listed = api.get(messages_url(demo_conversation)).json()["results"]
    assert listed[0]["attachments"] == user_message["attachments"]
    assert all(m["attachments"] == [] for m in listed[1:])


def test_another_users_attachment_in_a_message_is_400_naming_the_index(
    api, other_api, demo_conversation
):
    own = upload(api, png(), "a.png").json()["id"]
    foreign = upload(other_api, pdf("secret"), "b.pdf").json()["id"]
    response = api.post(
        messages_url(demo_conversation),
        {"content": "look", "attachments": [own, foreign]},
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "unknown_attachment"
    assert body["errors"][0]["pointer"] == "/attachments/1"
    assert not Message.objects.exists() and not MessageAttachment.objects.exists()


@pytest.mark.parametrize("bad", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_attachment_id_is_400_naming_the_index(api, demo_conversation, bad):
    response = api.post(
        messages_url(demo_conversation), {"content": "x", "attachments": [bad]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/attachments/0"
    assert not Message.objects.exists()


def test_more_attachments_than_allowed_is_400(api, demo_conversation, settings):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_ATTACHMENTS_PER_MESSAGE": 1}
    ids = [upload(api, png(), "a.png").json()["id"], upload(api, pdf("x"), "b.pdf").json()["id"]]
    response = api.post(
        messages_url(demo_conversation), {"content": "x", "attachments": ids}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/attachments"
    assert response.json()["errors"][0]["code"] == "too_many_attachments"


def test_the_same_attachment_twice_in_a_message_is_400(api, demo_conversation):
    same = upload(api, png()).json()["id"]
    response = api.post(
        messages_url(demo_conversation),
        {"content": "x", "attachments": [same, same]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/attachments/1"


def test_no_text_and_no_attachments_is_still_blank(api, demo_conversation):
    response = api.post(messages_url(demo_conversation), {"content": " "}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["code"] == "blank"


def test_the_dry_run_export_shows_the_files_as_the_provider_would_get_them(
    api, demo_conversation, language_model
):
    document = upload(api, pdf("the total is 42"), "invoice.pdf").json()["id"]
    image = upload(api, png(), "cat.png").json()["id"]
    api.post(
        messages_url(demo_conversation),
        {"content": "read", "attachments": [image, document]},
        format="json",
    )
    language_model.input_modalities = ["image"]
    language_model.save()
    url = reverse("conversations:conversation-export", args=[demo_conversation.pk])
    response = api.get(url, {"format": "anthropic"})
    assert response.status_code == 200, response.content
    first = response.json()["messages"][0]["content"]
    assert first[0]["type"] == "image" and first[0]["source"]["media_type"] == "image/png"
    assert "the total is 42" in first[1]["text"]


def test_a_file_too_large_for_the_provider_is_413_and_nothing_is_sent(
    api, demo_conversation, language_model, monkeypatch
):
    from conversations.providers import parts

    # The demo adapter sends no part natively: give it limits and images to see the check.
    monkeypatch.setitem(parts.NATIVE_KINDS, "demo", frozenset({"image"}))
    monkeypatch.setitem(
        parts.INLINE_LIMITS,
        "demo",
        parts.InlineLimits(per_image=10, per_document=10, per_request=10),
    )
    language_model.input_modalities = ["image"]
    language_model.save()
    image = upload(api, png(), "cat.png").json()["id"]
    response = api.post(
        messages_url(demo_conversation), {"content": "look", "attachments": [image]}, format="json"
    )
    assert response.status_code == 413, response.content
    body = response.json()
    assert body["code"] == "attachment_too_large_for_provider"
    assert "cat.png" in body["detail"]
