"""Attachments: upload a file, read its metadata, download its bytes.

Every query is scoped to ``owner=request.user``: another user's attachment is
a 404, like every owned object. The upload is parsed by Django's upload
handlers (a large file goes to a temporary file, never whole into memory)
and handed to ``store_attachment`` in chunks; a body announcing more than
``MAX_ATTACHMENT_BYTES`` is refused before it is read. The bytes are served
with the stored media type, ``X-Content-Type-Options: nosniff``, a sandboxing
``Content-Security-Policy``, and as a download for everything but images.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.http import FileResponse, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from conversations import selectors
from conversations.domain.parts import IMAGE_TYPES
from conversations.models import Attachment
from conversations.services.attachments import check_size, open_attachment, store_attachment

from ..attachment_serializers import AttachmentInputSerializer, AttachmentSerializer
from ..base import ConversationsAPIView
from ..responses import AUTH_ERRORS, ERR_400, ERR_404
from ..responses import error_response as _error
from ..schema import CREATED_LOCATION, document

__all__ = ["AttachmentContentView", "AttachmentDetailView", "AttachmentListView"]

# Multipart framing around the file (boundaries, part headers) is far smaller than this.
_FRAMING_BYTES = 64 * 1024


class _OwnedAttachment(ConversationsAPIView):
    def get_attachment(self, attachment_id: Any) -> Attachment:
        """The user's attachment, else 404 (never 403: it may not exist at all)."""
        return get_object_or_404(
            selectors.owned_attachments(user=self.request.user), pk=attachment_id
        )


class AttachmentListView(ConversationsAPIView):
    """Uploading a file."""

    parser_classes = (MultiPartParser,)  # type: ignore[assignment]  # a file, not JSON

    @document(
        operation_id="attachments_create",
        summary="Upload a file",
        description=(
            "Multipart, field `file`. The type is sniffed from the bytes, never taken from "
            "the client's header or file name. The same bytes uploaded again answer 200 with "
            "the same attachment (stored once); a new one is 201. Reference it in a message "
            "with `attachments: [id]`."
        ),
        request={"multipart/form-data": AttachmentInputSerializer},
        parameters=[CREATED_LOCATION],
        responses={
            200: OpenApiResponse(AttachmentSerializer, description="Already stored."),
            201: AttachmentSerializer,
            400: ERR_400,
            **AUTH_ERRORS,
            413: _error("Larger than `MAX_ATTACHMENT_BYTES` (`attachment_too_large`)."),
            415: _error("A type that is not allowed (`unsupported_media_type`)."),
        },
        tags=["attachments"],
    )
    def post(self, request: Request) -> Response:
        announced = request.headers.get("content-length") or ""
        if announced.isdigit():
            # Refused before Django reads (and spools) the body.
            check_size(max(0, int(announced) - _FRAMING_BYTES))
        serializer = AttachmentInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        stored = store_attachment(owner=request.user, file=upload, name=upload.name)
        body = AttachmentSerializer(stored.attachment, context={"request": request}).data
        url = request.build_absolute_uri(
            reverse("conversations:attachment-detail", args=[stored.attachment.pk])
        )
        code = status.HTTP_201_CREATED if stored.created else status.HTTP_200_OK
        return Response(body, status=code, headers={"Location": url})


class AttachmentDetailView(_OwnedAttachment):
    """One attachment's metadata."""

    @document(
        operation_id="attachments_retrieve",
        summary="An attachment's metadata",
        responses={200: AttachmentSerializer, 404: ERR_404, **AUTH_ERRORS},
        tags=["attachments"],
    )
    def get(self, request: Request, attachment_id: Any) -> Response:
        attachment = self.get_attachment(attachment_id)
        return Response(AttachmentSerializer(attachment, context={"request": request}).data)


class AttachmentContentView(_OwnedAttachment):
    """One attachment's bytes."""

    @document(
        operation_id="attachments_content",
        summary="An attachment's bytes",
        description=(
            "The stored bytes with the stored media type and `X-Content-Type-Options: "
            "nosniff`; `Content-Disposition: inline` for PNG, JPEG, GIF and WebP images, "
            "`attachment` (a download) for everything else."
        ),
        responses={
            (200, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="The bytes."),
            404: ERR_404,
            **AUTH_ERRORS,
        },
        tags=["attachments"],
    )
    def get(self, request: Request, attachment_id: Any) -> HttpResponse | FileResponse:
        attachment = self.get_attachment(attachment_id)
        response: HttpResponse | FileResponse
        if request.method == "HEAD":
            # The headers only: the stored object is not even opened.
            response = HttpResponse(content_type=attachment.media_type)
        else:
            response = FileResponse(open_attachment(attachment), content_type=attachment.media_type)
        response["Content-Length"] = str(attachment.size)
        disposition = "inline" if attachment.media_type in IMAGE_TYPES else "attachment"
        name = attachment.name or f"{attachment.pk}"
        response["Content-Disposition"] = _disposition(disposition, name)
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "default-src 'none'; sandbox"
        response["Cache-Control"] = "private, max-age=3600"
        return response


def _disposition(kind: str, name: str) -> str:
    """``Content-Disposition`` with an ASCII fallback and the UTF-8 name (RFC 6266)."""
    ascii_name = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in name)
    return f"{kind}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"
