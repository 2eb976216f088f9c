"""Files in the admin: thumbnails and chips in transcripts, the Attachments list, bytes for staff."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from conversations.domain import ChatMessage, ToolCall
from conversations.models import Attachment, Conversation, Run
from conversations.selectors import attachment_part
from conversations.services import append_messages, create_conversation, store_attachment

from ..files import pdf, png
from .conftest import add_run, admin_url

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def picture(user):
    return store_attachment(owner=user, file=png(), name="red.png").attachment


@pytest.fixture
def report(user):
    return store_attachment(owner=user, file=pdf("Q3"), name="q3 <b>.pdf").attachment


@pytest.fixture
def talk(user, picture, report):
    conversation = create_conversation(owner=user, title="files")
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


def test_the_transcript_shows_an_image_as_a_thumbnail_and_a_pdf_as_a_chip(
    admin_client, talk, picture, report
):
    page = admin_client.get(admin_url(talk)).content.decode()

    picture_url = f"/admin/conversations/attachment/{picture.pk}/content/"
    report_url = f"/admin/conversations/attachment/{report.pk}/content/"
    # The image: a thumbnail opening the full size.
    assert f'<a class="llm-thumb" href="{picture_url}"' in page
    assert f'<img src="{picture_url}" alt="red.png" loading="lazy">' in page
    # The PDF beside the tool result that returned it: a chip, a download; its name escaped.
    assert f'<a class="llm-chip" href="{report_url}" download>' in page
    assert "q3 &lt;b&gt;.pdf · application/pdf" in page
    assert "q3 <b>.pdf" not in page


def test_the_transcript_reads_files_in_one_query_whatever_their_number(
    admin_client, user, picture, report, django_assert_max_num_queries
):
    def page_queries(conversation):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(admin_url(conversation)).status_code == 200
        return len(queries)

    small = create_conversation(owner=user, title="small")
    append_messages(
        conversation=small, messages=[ChatMessage.user("a", parts=[attachment_part(picture)])]
    )
    large = create_conversation(owner=user, title="large")
    append_messages(
        conversation=large,
        messages=[
            message
            for _ in range(10)
            for message in (
                ChatMessage.user("a", parts=[attachment_part(picture), attachment_part(report)]),
                ChatMessage.assistant("ok"),
            )
        ],
    )
    assert page_queries(large) == page_queries(small)


def test_the_run_trace_shows_the_files_too(admin_client, user, picture, report, openai_profile):
    conversation = create_conversation(owner=user, title="run")
    run = add_run(conversation, openai_profile, Run.Status.COMPLETED)
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("Look", parts=[attachment_part(picture)]),
            ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="fetch", arguments={})]),
            ChatMessage.tool_result("c1", "the report", parts=[attachment_part(report)]),
        ],
        run=run,
    )
    page = admin_client.get(admin_url(run)).content.decode()
    assert f'<img src="/admin/conversations/attachment/{picture.pk}/content/"' in page
    assert f'href="/admin/conversations/attachment/{report.pk}/content/" download' in page


def test_staff_read_the_bytes_with_guarded_headers(admin_client, talk, picture, report):
    image = admin_client.get(f"/admin/conversations/attachment/{picture.pk}/content/")
    assert image.status_code == 200
    assert b"".join(image.streaming_content) == png()
    assert image["Content-Type"] == "image/png"
    assert image["Content-Disposition"].startswith("inline;")
    assert image["X-Content-Type-Options"] == "nosniff"
    assert image["Content-Security-Policy"] == "default-src 'none'; sandbox"

    document = admin_client.get(f"/admin/conversations/attachment/{report.pk}/content/")
    assert document["Content-Disposition"].startswith("attachment;")
    document.close()


def test_the_bytes_need_the_view_permission(client, django_user_model, picture):
    staff = django_user_model.objects.create_user(username="staff", is_staff=True)
    client.force_login(staff)
    url = f"/admin/conversations/attachment/{picture.pk}/content/"
    assert client.get(url).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_attachment"))
    allowed = client.get(url)
    assert allowed.status_code == 200
    allowed.close()


def test_anyone_else_is_sent_to_the_login_page(client, picture):
    url = f"/admin/conversations/attachment/{picture.pk}/content/"
    assert client.get(url).status_code == 302


def test_an_unknown_id_is_404(admin_client):
    url = "/admin/conversations/attachment/00000000-0000-0000-0000-000000000009/content/"
    assert admin_client.get(url).status_code == 404


def test_the_list_shows_owner_type_size_and_references_and_filters_orphans(
    admin_client, talk, user, picture, report
):
    orphan = store_attachment(owner=user, file=b"a,b\n1,2\n", name="t.csv").attachment
    fork = Conversation.objects.create(owner=user, title="again")
    append_messages(
        conversation=fork, messages=[ChatMessage.user("x", parts=[attachment_part(picture)])]
    )

    listing = admin_client.get(admin_url(Attachment, "changelist"))
    assert listing.status_code == 200
    rows = {row.pk: row for row in listing.context["cl"].result_list}
    assert {pk: row.reference_count for pk, row in rows.items()} == {
        picture.pk: 2,
        report.pk: 1,
        orphan.pk: 0,
    }
    page = listing.content.decode()
    assert "alice" in page and "text/csv" in page and "8 B" in page

    orphans = admin_client.get(admin_url(Attachment, "changelist") + "?referenced=no")
    assert [row.pk for row in orphans.context["cl"].result_list] == [orphan.pk]
    referenced = admin_client.get(admin_url(Attachment, "changelist") + "?referenced=yes")
    assert {row.pk for row in referenced.context["cl"].result_list} == {picture.pk, report.pk}


def test_the_change_page_previews_and_nothing_can_be_changed(admin_client, picture):
    page = admin_client.get(admin_url(picture))
    assert page.status_code == 200
    assert (
        f'<img src="/admin/conversations/attachment/{picture.pk}/content/"' in page.content.decode()
    )
    assert admin_client.post(admin_url(picture), {"name": "x"}).status_code == 403
    assert Attachment.objects.get(pk=picture.pk).name == "red.png"
