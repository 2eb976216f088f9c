"""Output schemas in the admin: each schema pretty-printed, with the runs that used it."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html

from conversations.models import OutputSchema

from .display import ReadOnlyAdmin, pretty_json


@admin.register(OutputSchema)
class OutputSchemaAdmin(ReadOnlyAdmin):
    """The JSON Schemas runs were asked to answer in (rows are never edited: a change is
    another digest)."""

    list_display = ("name", "digest", "run_count", "created_at")
    search_fields = ("=sha256", "name")
    search_help_text = "sha256 (exact) or name."
    readonly_fields = ("name", "sha256", "created_at", "runs_link", "pretty_schema")
    fields = readonly_fields

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(run_count=Count("runs"))

    @admin.display(description="sha256")
    def digest(self, obj):
        return obj.sha256[:12]

    @admin.display(description="runs", ordering="run_count")
    def run_count(self, obj):
        return obj.run_count

    @admin.display(description="runs")
    def runs_link(self, obj):
        url = reverse(f"{self.admin_site.name}:conversations_run_changelist")
        return format_html(
            '<a href="{}?output_schema__id__exact={}">{} run(s)</a>', url, obj.pk, obj.run_count
        )

    @admin.display(description="schema")
    def pretty_schema(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.schema))
