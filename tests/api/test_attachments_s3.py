"""Attachments on S3 through django-storages, against an S3-compatible server on 127.0.0.1.

The tests start moto's server mode in this process (a real HTTP endpoint;
boto3 speaks to it as to S3) and point ``CONVERSATIONS["ATTACHMENT_STORAGE"]``
at a ``STORAGES`` entry using ``storages.backends.s3.S3Storage``. Upload,
dedup, download and purge behave as on the file system. They skip only when
the packages are missing outside CI (they are in the dev extras).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.urls import reverse

try:
    import boto3
    from moto.server import ThreadedMotoServer
    from storages.backends.s3 import S3Storage  # noqa: F401  (the backend must import)
except ImportError:  # pragma: no cover - the dev extras have them
    if os.environ.get("CI"):
        raise
    pytest.skip("moto[server] and django-storages[s3] are not installed", allow_module_level=True)

from django.core.files.uploadedfile import SimpleUploadedFile

from conversations.domain import ChatMessage
from conversations.models import Attachment, Conversation
from conversations.selectors import attachment_part
from conversations.services import append_messages, delete_conversation, store_attachment

from ..files import pdf, png

pytestmark = pytest.mark.django_db(transaction=True)

BUCKET = "conversations-attachments"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def bucket(s3_endpoint, settings, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **CREDENTIALS)
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
                "access_key": CREDENTIALS["aws_access_key_id"],
                "secret_key": CREDENTIALS["aws_secret_access_key"],
                "addressing_style": "path",
                "file_overwrite": False,
            },
        },
    }
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "ATTACHMENT_STORAGE": "attachments"}
    yield client
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    for item in listed:
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def keys(client) -> list[str]:
    return sorted(item["Key"] for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def test_an_upload_lands_in_the_bucket_once_and_downloads_back(api, bucket):
    url = reverse("conversations:attachment-list")
    data = png(8, 8)
    first = api.post(url, {"file": SimpleUploadedFile("a.png", data)}, format="multipart")
    second = api.post(url, {"file": SimpleUploadedFile("b.png", data)}, format="multipart")
    assert (first.status_code, second.status_code) == (201, 200)
    attachment = Attachment.objects.get()
    assert keys(bucket) == [attachment.file.name]
    stored = bucket.get_object(Bucket=BUCKET, Key=attachment.file.name)["Body"].read()
    assert stored == data
    response = api.get(first.json()["url"])
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    try:
        assert b"".join(response.streaming_content) == data
    finally:
        for closer in response._resource_closers:
            closer()


def test_a_refused_upload_leaves_nothing_in_the_bucket(api, bucket):
    url = reverse("conversations:attachment-list")
    html = b"<html><script>alert(1)</script></html>"
    response = api.post(url, {"file": SimpleUploadedFile("x.png", html)}, format="multipart")
    assert response.status_code == 415
    assert keys(bucket) == [] and not Attachment.objects.exists()


def test_a_purge_deletes_the_object_an_attachment_still_referenced_keeps_its_own(user, bucket):
    shared = store_attachment(owner=user, file=png(), name="shared.png").attachment
    only = store_attachment(owner=user, file=pdf("x"), name="only.pdf").attachment
    first, second = Conversation.objects.create(owner=user), Conversation.objects.create(owner=user)
    for conversation, files in ((first, [shared, only]), (second, [shared])):
        message = ChatMessage.user("look", parts=[attachment_part(a) for a in files])
        append_messages(conversation=conversation, messages=[message])
    assert keys(bucket) == sorted([shared.file.name, only.file.name])
    delete_conversation(conversation=first)
    assert keys(bucket) == [shared.file.name]
    assert list(Attachment.objects.values_list("pk", flat=True)) == [shared.pk]
