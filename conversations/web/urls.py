"""URLs of the chat page; the host mounts them with ``path("chat/", include(...))``."""

from django.urls import path

from . import views

app_name = "conversations_web"

urlpatterns = [
    path("", views.chat, name="chat"),
    path("login/", views.ChatLoginView.as_view(), name="login"),
    path("<uuid:conversation_id>/", views.chat, name="conversation"),
]
