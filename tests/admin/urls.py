"""Only the admin: the admin tests do not depend on the API or chat URL modules."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
