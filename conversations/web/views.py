"""The chat page, served by the app and built on the REST API.

The view only renders the shell: the user's recent conversations (so the page
is useful before any script runs) and the URLs the script talks to. Everything
else, profiles, messages and runs, goes through the REST API, exactly as any
other front end would use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.csrf import ensure_csrf_cookie

from conversations.conf import app_settings
from conversations.models import Conversation

from . import login_throttle

__all__ = ["RECENT_CONVERSATIONS", "ChatLoginView", "api_root", "chat"]

RECENT_CONVERSATIONS = 50
"""How many conversations the page lists before the script loads more through the API."""


def api_root() -> str:
    """Where the host mounted the app's REST API (``/api/`` in the example project)."""
    try:
        profiles = reverse("conversations:profile-list")
    except NoReverseMatch:
        # The API is not mounted: the page still renders and reports the
        # failing requests in its alert region instead of crashing here.
        return "/api/"
    return profiles.removesuffix("profiles/")


class ChatLoginView(LoginView):
    """The chat's own login page: any active user may chat, staff or not.

    The admin's login page refuses users who are not staff, so the chat does
    not send people there; after logging in they land on the chat page.
    Wrong passwords are throttled per username and per address
    (:mod:`conversations.web.login_throttle`): past the limit, a 429 with the
    form and a message, the password not even checked.
    """

    template_name = "conversations/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")
        if not login_throttle.is_throttled(request, username):
            return super().post(request, *args, **kwargs)
        window = app_settings().LOGIN_FAILURE_WINDOW_SECONDS
        minutes = max(1, round(window / 60))
        # An unbound form: binding it would check the password.
        form = AuthenticationForm(request, initial={"username": username})
        context = self.get_context_data(
            form=form,
            throttled=f"Too many failed logins. Try again in {minutes} minute"
            + ("s." if minutes > 1 else "."),
        )
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(window)
        return response

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        login_throttle.record_failure(self.request, self.request.POST.get("username", ""))
        return super().form_invalid(form)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        login_throttle.clear_username(self.request, self.request.POST.get("username", ""))
        return super().form_valid(form)

    def get_default_redirect_url(self) -> str:
        return reverse("conversations_web:chat")


@login_required(login_url="conversations_web:login")
@ensure_csrf_cookie
def chat(request: HttpRequest, conversation_id: UUID | None = None) -> HttpResponse:
    """The chat page; ``conversation_id`` opens one of the user's conversations."""
    user = request.user
    assert not isinstance(user, AnonymousUser)  # login_required let only users through
    conversations = Conversation.objects.filter(owner=user).select_related("profile")
    current = None
    if conversation_id is not None:
        current = conversations.filter(pk=conversation_id).first()
        if current is None:
            # Another user's conversation is indistinguishable from a missing one.
            raise Http404("No such conversation.")
    # Branches are reached through the version switches, as in the API's list,
    # and a sub-agent's conversation through the card of the call it answers.
    # An evaluation's replays are the evaluator's, not chats to go back to.
    recent = conversations.filter(
        forked_from__isnull=True, kind=Conversation.Kind.CHAT, parent_tool_call__isnull=True
    ).order_by("-updated_at")[:RECENT_CONVERSATIONS]
    context = {
        "conversation_groups": date_groups(recent, today=timezone.localdate()),
        "current": current,
        "api_root": api_root(),
        "chat_url": reverse("conversations_web:chat"),
    }
    return render(request, "conversations/chat.html", context)


def date_group(day: date, today: date) -> str:
    """The sidebar's heading for a conversation last updated on ``day``, seen on ``today``.

    The same words and bounds as the page's own grouping (``dateGroup`` in
    ``chat/format.js``), so that the list the page draws over this one keeps
    its shape and nothing under the pointer moves while the page starts.
    """
    days = (today - day).days
    if days <= 0:
        return "Today"
    if days == 1:
        return "Yesterday"
    if days < 7:
        return "Previous 7 days"
    if days < 30:
        return "Previous 30 days"
    return "Older"


def date_groups(
    conversations: Iterable[Conversation], *, today: date
) -> list[tuple[str, list[Conversation]]]:
    """``conversations`` (newest first) under their headings, in order of appearance."""
    groups: dict[str, list[Conversation]] = {}
    for conversation in conversations:
        label = date_group(timezone.localdate(conversation.updated_at), today)
        groups.setdefault(label, []).append(conversation)
    return list(groups.items())
