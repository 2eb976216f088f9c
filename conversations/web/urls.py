"""URLs of the chat page; the host mounts them with ``path("chat/", include(...))``."""

from django.contrib.auth.views import LogoutView
from django.urls import path, reverse_lazy

from . import views

app_name = "conversations_web"

urlpatterns = [
    path("", views.chat, name="chat"),
    path("login/", views.ChatLoginView.as_view(), name="login"),
    path(
        "logout/",
        LogoutView.as_view(next_page=reverse_lazy("conversations_web:login")),
        name="logout",
    ),
    path("<uuid:conversation_id>/", views.chat, name="conversation"),
]
