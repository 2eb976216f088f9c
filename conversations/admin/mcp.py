"""MCP in the admin: servers (sync action), their tools (schema changes side by side), calls of ours."""

from __future__ import annotations

import difflib

from django.contrib import admin, messages
from django.utils.html import format_html

from conversations.exceptions import MCPServerError
from conversations.mcp import SDK_MISSING_HINT, sdk_installed
from conversations.models import MCPCall, MCPServer, MCPTool

from .display import pretty_json

__all__ = ["MCPCallAdmin", "MCPServerAdmin", "MCPToolAdmin"]


class MCPToolInline(admin.TabularInline):
    model = MCPTool
    fields = ("name", "enabled", "present", "schema_changed_at")
    readonly_fields = ("name", "present", "schema_changed_at")
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(MCPServer)
class MCPServerAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "transport", "enabled", "trusted", "last_synced_at")
    list_filter = ("transport", "enabled", "trusted")
    search_fields = ("slug", "name")
    readonly_fields = ("last_synced_at", "last_sync_error", "created_at", "updated_at")
    inlines = [MCPToolInline]
    actions = ["sync_tools"]
    fieldsets = (
        (None, {"fields": ("slug", "name", "transport", "enabled", "trusted", "tool_prefix")}),
        ("stdio", {"fields": ("command", "args", "env_refs")}),
        ("Streamable HTTP", {"fields": ("url", "header_refs")}),
        ("Limits", {"fields": ("connect_timeout", "call_timeout", "max_result_bytes")}),
        ("Sync", {"fields": ("last_synced_at", "last_sync_error", "created_at", "updated_at")}),
    )

    @admin.action(description="Sync the tools of the selected MCP servers")
    def sync_tools(self, request, queryset):
        if not sdk_installed():
            self.message_user(request, SDK_MISSING_HINT, messages.ERROR)
            return
        from conversations.mcp.sync import sync_server_tools

        for server in queryset:
            try:
                report = sync_server_tools(server=server)
            except MCPServerError as exc:
                self.message_user(request, exc.detail, messages.ERROR)
                continue
            level = messages.WARNING if report.changed else messages.SUCCESS
            changed = f" Schema changed (disabled): {', '.join(report.changed)}." * bool(
                report.changed
            )
            self.message_user(
                request,
                f"{server.slug}: {len(report.added)} added, {len(report.changed)} changed, "
                f"{len(report.removed)} removed.{changed}",
                level,
            )


@admin.register(MCPTool)
class MCPToolAdmin(admin.ModelAdmin):
    list_display = ("name", "server", "enabled", "present", "schema_changed_at", "synced_at")
    list_filter = ("enabled", "present", "server")
    list_editable = ("enabled",)
    search_fields = ("name", "description")
    fields = (
        "server",
        "name",
        "enabled",
        "present",
        "description",
        "schema",
        "annotations_json",
        "schema_hash",
        "schema_changed_at",
        "schema_difference",
        "synced_at",
    )
    readonly_fields = tuple(f for f in fields if f != "enabled")

    def has_add_permission(self, request):
        return False

    @admin.display(description="Input schema")
    def schema(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.input_schema))

    @admin.display(description="Annotations")
    def annotations_json(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.annotations))

    @admin.display(description="Change since the schema admins last saw")
    def schema_difference(self, obj):
        if obj.previous_input_schema is None:
            return "-"
        before = [f"description: {obj.previous_description}"]
        before += pretty_json(obj.previous_input_schema).splitlines()
        after = [f"description: {obj.description}"]
        after += pretty_json(obj.input_schema).splitlines()
        diff = difflib.unified_diff(before, after, "before", "now", lineterm="", n=2)
        return format_html("<pre>{}</pre>", "\n".join(diff))


@admin.register(MCPCall)
class MCPCallAdmin(admin.ModelAdmin):
    """Calls MCP clients made of the app's tools through ``/mcp/``: an audit log, read-only."""

    list_display = ("created_at", "user", "tool", "status", "duration_ms", "result_bytes")
    list_filter = ("status", "tool")
    search_fields = ("tool", "user__username")
    list_select_related = ("user",)
    fields = (
        "created_at",
        "user",
        "tool",
        "status",
        "arguments_json",
        "duration_ms",
        "result_bytes",
        "error",
    )
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="Arguments")
    def arguments_json(self, obj):
        return format_html("<pre>{}</pre>", pretty_json(obj.arguments))
