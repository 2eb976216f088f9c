"""Attachments in the admin: a read-only list (owner, type, size, references) and their bytes.

The list filters the attachments no message references any more (what
``purge_attachments`` removes after its grace period). Staff who may view
attachments read their bytes through the admin (the API serves them to their
owner only), with the same guarded headers as the API: the stored media
type, ``nosniff``, a sandboxing content security policy, and inline only for
the image types, every other file a download. The transcripts show images
as thumbnails and other files as chips that link here.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, QuerySet
from django.http import FileResponse, Http404, HttpRequest
from django.urls import URLPattern, path
from django.utils.html import format_html

from conversations.domain.parts import IMAGE_TYPES
from conversations.models import Attachment
from conversations.services.attachments import open_attachment

from .display import ReadOnlyAdmin
from .files import content_url, human_size

__all__ = ["AttachmentAdmin", "ReferencedFilter", "attachment_response"]


class ReferencedFilter(admin.SimpleListFilter):
    """Attachments by whether any message references them."""

    title = "referenced"
    parameter_name = "referenced"

    def lookups(self, request, model_admin):
        return [("yes", "Referenced"), ("no", "Unreferenced (an orphan)")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(reference_count__gt=0)
        if self.value() == "no":
            return queryset.filter(reference_count=0)
        return queryset


@admin.register(Attachment)
class AttachmentAdmin(ReadOnlyAdmin):
    """Stored files, read-only: who owns each, what it is, and how many messages reference it."""

    list_display = (
        "display_name",
        "owner",
        "media_type",
        "display_size",
        "reference_count",
        "created_at",
    )
    list_filter = (ReferencedFilter, "media_type", "created_at")
    search_fields = ("name", "sha256", "owner__username")
    list_select_related = ("owner",)
    ordering = ("-created_at",)
    fields = (
        "preview",
        "name",
        "owner",
        "media_type",
        "display_size",
        "sha256",
        "reference_count",
        "created_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Attachment]:
        queryset: QuerySet[Attachment] = super().get_queryset(request)
        return queryset.annotate(reference_count=Count("links"))

    def get_urls(self) -> list[URLPattern]:
        content = self.admin_site.admin_view(self.content_view)
        return [
            path("<uuid:object_id>/content/", content, name="conversations_attachment_content"),
            *super().get_urls(),
        ]

    def content_view(self, request: HttpRequest, object_id: Any) -> FileResponse:
        """The bytes, for staff who may view attachments (404 for an unknown id)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            attachment = Attachment.objects.get(pk=object_id)
        except (Attachment.DoesNotExist, ValidationError):
            raise Http404 from None
        return attachment_response(attachment)

    @admin.display(description="name", ordering="name")
    def display_name(self, obj: Attachment) -> str:
        return obj.name or str(obj.pk)

    @admin.display(description="size", ordering="size")
    def display_size(self, obj: Attachment) -> str:
        return human_size(obj.size)

    @admin.display(description="references", ordering="reference_count")
    def reference_count(self, obj: Attachment) -> int:
        return int(getattr(obj, "reference_count", 0))

    @admin.display(description="preview")
    def preview(self, obj: Attachment) -> str:
        url = content_url(obj.pk, site=self.admin_site.name)
        if obj.media_type in IMAGE_TYPES:
            return format_html(
                '<a href="{}"><img src="{}" alt="{}" style="max-width: 320px; max-height: 320px">'
                "</a>",
                url,
                url,
                obj.name,
            )
        return format_html('<a href="{}">Download {}</a>', url, obj.name or obj.pk)


def attachment_response(attachment: Attachment) -> FileResponse:
    """An attachment's bytes with guarded headers (never rendered as a page by the browser)."""
    response = FileResponse(open_attachment(attachment), content_type=attachment.media_type)
    response["Content-Length"] = str(attachment.size)
    kind = "inline" if attachment.media_type in IMAGE_TYPES else "attachment"
    name = attachment.name or str(attachment.pk)
    ascii_name = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in name)
    response["Content-Disposition"] = (
        f"{kind}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response
