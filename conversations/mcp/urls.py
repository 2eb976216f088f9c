"""The MCP endpoint's URL; a host mounts it: ``path("mcp/", include("conversations.mcp.urls"))``."""

from django.urls import path

from .server import mcp_endpoint

app_name = "conversations_mcp"

urlpatterns = [path("", mcp_endpoint, name="endpoint")]
