"""Failed logins on the chat's login page, counted per username and per client address.

After ``LOGIN_FAILURE_LIMIT`` failures within ``LOGIN_FAILURE_WINDOW_SECONDS``
for one username, or from one address, the page refuses every further try
(right password or not, so the refusal tells nothing) with a 429 until the
window that began with the first failure ends. The counts live in Django's
cache: with several processes, use a shared cache. A successful login clears
its username's count; the address's count stays, else an attacker with an
account of their own could clear it between guesses at someone else's.

The address is ``REMOTE_ADDR``: behind a proxy, the host sets it from the
proxy's header (forwarded headers a client sends are not trusted here).
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.http import HttpRequest

from conversations.conf import app_settings

__all__ = ["clear_username", "is_throttled", "record_failure"]

_PREFIX = "conversations:login-failures:"


def _keys(request: HttpRequest, username: str) -> tuple[str, str]:
    # Hashed: usernames and addresses may hold characters a cache key may not.
    name = hashlib.sha256(username.strip().casefold().encode()).hexdigest()
    address = hashlib.sha256(request.META.get("REMOTE_ADDR", "").encode()).hexdigest()
    return f"{_PREFIX}user:{name}", f"{_PREFIX}addr:{address}"


def is_throttled(request: HttpRequest, username: str) -> bool:
    """Whether ``username`` or the request's address has used up its failures."""
    limit = app_settings().LOGIN_FAILURE_LIMIT
    counts = cache.get_many(_keys(request, username))
    return any(count >= limit for count in counts.values())


def record_failure(request: HttpRequest, username: str) -> None:
    """Count one failed login for ``username`` and for the request's address."""
    window = app_settings().LOGIN_FAILURE_WINDOW_SECONDS
    for key in _keys(request, username):
        # ``add`` starts the window with the first failure; ``incr`` never extends it.
        cache.add(key, 0, timeout=window)
        try:
            cache.incr(key)
        except ValueError:  # expired between the two calls: this failure starts a new window
            cache.add(key, 1, timeout=window)


def clear_username(request: HttpRequest, username: str) -> None:
    """Forget the failures of ``username`` (it just logged in)."""
    cache.delete(_keys(request, username)[0])
