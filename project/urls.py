"""URLs of the host project: the admin, the app's REST API and its chat page."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/chat/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/", include("conversations.api.urls")),
    path("chat/", include("conversations.web.urls")),
    path("mcp/", include("conversations.mcp.urls")),
]
