"""MCP servers the app connects to, their tools, and the calls MCP clients make of ours."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.domain.storable import MAX_NAME_LENGTH

from .constraints import is_json, not_empty

__all__ = ["MCPCall", "MCPServer", "MCPTool", "MCPTransport"]


class MCPTransport(models.TextChoices):
    """How the app reaches an MCP server."""

    STDIO = "stdio", "stdio (a local command)"
    STREAMABLE_HTTP = "streamable_http", "Streamable HTTP (a URL)"


class MCPServer(models.Model):
    """A Model Context Protocol server whose tools may join the registry.

    Environment variables and HTTP headers are given as secret references
    (``env:NAME``, resolved at connection time like provider keys), never as
    values.
    """

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    transport = models.CharField(max_length=32, choices=MCPTransport)
    command = models.CharField(max_length=500, blank=True, help_text="stdio: the executable.")
    args = models.JSONField(
        default=list, blank=True, help_text='stdio: a JSON list of strings, e.g. ["server.py"].'
    )
    env_refs = models.JSONField(
        default=dict,
        blank=True,
        help_text='stdio: environment variables as secret references, e.g. {"TOKEN": "env:GH_TOKEN"}.',
    )
    url = models.URLField(max_length=500, blank=True, help_text="streamable_http: the endpoint.")
    header_refs = models.JSONField(
        default=dict,
        blank=True,
        help_text='streamable_http: headers as secret references, e.g. {"Authorization": "env:MCP_AUTH"}.',
    )
    enabled = models.BooleanField(default=True)
    tool_prefix = models.CharField(
        max_length=40,
        blank=True,
        help_text='Prepended to the names of its tools; empty = the slug and "__".',
    )
    trusted = models.BooleanField(
        default=False,
        help_text="New tools of an untrusted server start disabled and their calls need approval.",
    )
    connect_timeout = models.FloatField(default=10.0, help_text="Seconds to connect and list.")
    call_timeout = models.FloatField(default=60.0, help_text="Seconds one tool call may take.")
    max_result_bytes = models.PositiveIntegerField(
        default=50_000, help_text="A result is cut to this many UTF-8 bytes."
    )
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_sync_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = "MCP server"
        constraints = [
            models.CheckConstraint(
                condition=Q(transport__in=MCPTransport.values),
                name="conversations_mcpserver_transport_valid",
            ),
            models.CheckConstraint(
                condition=~Q(transport=MCPTransport.STDIO) | not_empty("command"),
                name="conversations_mcpserver_stdio_command",
            ),
            models.CheckConstraint(
                condition=~Q(transport=MCPTransport.STREAMABLE_HTTP) | not_empty("url"),
                name="conversations_mcpserver_http_url",
            ),
            models.CheckConstraint(
                condition=is_json("args", "array"), name="conversations_mcpserver_args_array"
            ),
            models.CheckConstraint(
                condition=is_json("env_refs", "object"),
                name="conversations_mcpserver_env_refs_object",
            ),
            models.CheckConstraint(
                condition=is_json("header_refs", "object"),
                name="conversations_mcpserver_header_refs_object",
            ),
            models.CheckConstraint(
                condition=Q(connect_timeout__gt=0) & Q(call_timeout__gt=0),
                name="conversations_mcpserver_timeouts_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.transport})"

    @property
    def prefix(self) -> str:
        """What is prepended to its tools' names in the registry."""
        return self.tool_prefix or f"{self.slug}__"


class MCPTool(models.Model):
    """One tool an MCP server listed at the last sync.

    ``schema_hash`` fingerprints what the model is shown (description and
    input schema). When a sync sees it change, the tool is disabled and the
    schema an admin last saw is kept in ``previous_input_schema`` so the admin
    can compare before enabling it again.
    """

    server = models.ForeignKey(MCPServer, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=200, help_text="The name on the server (unprefixed).")
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict, blank=True)
    schema_hash = models.CharField(max_length=64)
    enabled = models.BooleanField(default=False)
    previous_description = models.TextField(blank=True)
    previous_input_schema = models.JSONField(null=True, blank=True)
    schema_changed_at = models.DateTimeField(null=True, blank=True)
    present = models.BooleanField(
        default=True, help_text="Whether the server listed it at the last sync."
    )
    synced_at = models.DateTimeField()

    class Meta:
        ordering = ["server__slug", "name"]
        verbose_name = "MCP tool"
        constraints = [
            models.UniqueConstraint(
                fields=["server", "name"], name="conversations_mcptool_server_name_unique"
            ),
            models.CheckConstraint(
                condition=is_json("input_schema", "object"),
                name="conversations_mcptool_input_schema_object",
            ),
            models.CheckConstraint(
                condition=is_json("annotations", "object"),
                name="conversations_mcptool_annotations_object",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.server.slug}: {self.name}"


class MCPCall(models.Model):
    """One call of one of the app's tools by an MCP client through ``/mcp/`` (an audit record)."""

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        REJECTED = "rejected", "Rejected"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_calls"
    )
    tool = models.CharField(max_length=MAX_NAME_LENGTH)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    error = models.TextField(blank=True, help_text="Detail for admins; never sent to the client.")
    duration_ms = models.PositiveIntegerField()
    result_bytes = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "MCP call"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["succeeded", "failed", "rejected"]),
                name="conversations_mcpcall_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"
