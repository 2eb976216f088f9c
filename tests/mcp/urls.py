"""The MCP endpoint mounted as a host would, and the admin."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp/", include("conversations.mcp.urls")),
]
