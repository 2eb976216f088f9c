"""Per-user throttling of posted messages, configured in the app's own settings."""

from __future__ import annotations

from rest_framework.throttling import UserRateThrottle

from conversations.conf import app_settings

__all__ = ["MessageRateThrottle"]


class MessageRateThrottle(UserRateThrottle):
    """``CONVERSATIONS["MESSAGE_THROTTLE_RATE"]`` per user (``None``: no limit).

    The rate comes from the app's settings, not from DRF's
    ``DEFAULT_THROTTLE_RATES``, so the host needs no global DRF configuration.
    Counts live in Django's default cache, like every DRF throttle.
    """

    scope = "conversations_messages"

    def get_rate(self) -> str | None:
        return app_settings().MESSAGE_THROTTLE_RATE
