"""URLs of the host project: the admin plus the app's API and pages."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
