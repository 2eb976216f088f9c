"""List filters of the history admin: by last run status, tool name and error code."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Exists, OuterRef

from conversations.models import Run, RunStatus, ToolCall
from conversations.tools import registry

__all__ = ["ErrorCodeFilter", "LastRunStatusFilter", "RunToolFilter", "ToolNameFilter"]


class LastRunStatusFilter(admin.SimpleListFilter):
    """Conversations by the status of their most recent run."""

    title = "last run status"
    parameter_name = "last_run"

    def lookups(self, request, model_admin):
        return [("none", "No run yet"), *RunStatus.choices]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value == "none":
            return queryset.filter(last_run_status__isnull=True)
        return queryset.filter(last_run_status=value)


class ToolNameFilter(admin.SimpleListFilter):
    """By tool name: the registered tools plus any name a model ever called."""

    title = "tool"
    parameter_name = "tool"

    def lookups(self, request, model_admin):
        called = ToolCall.objects.order_by().values_list("name", flat=True).distinct()
        names = set(registry.names()) | set(called)
        return [(name, name) for name in sorted(names)]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return self.filter_by_name(queryset, value)

    def filter_by_name(self, queryset, name):
        return queryset.filter(name=name)


class RunToolFilter(ToolNameFilter):
    """Runs that made at least one call to the chosen tool."""

    title = "called tool"

    def filter_by_name(self, queryset, name):
        calls = ToolCall.objects.filter(message__run=OuterRef("pk"), name=name)
        return queryset.filter(Exists(calls))


class ErrorCodeFilter(admin.SimpleListFilter):
    """Runs by the code of the error that ended them (the termination detail)."""

    title = "error code"
    parameter_name = "error_code"

    def lookups(self, request, model_admin):
        codes = (
            Run.objects.exclude(error_code="")
            .order_by("error_code")
            .values_list("error_code", flat=True)
            .distinct()
        )
        return [("none", "No error"), *((code, code) for code in codes)]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(error_code="" if value == "none" else value)
