"""When the database has no connection to give: recognising it, and a plain 503 for pages.

With Django's psycopg connection pool (``DATABASES[...]["OPTIONS"]["pool"]``),
a request that waits longer than the pool's ``timeout`` for a connection gets
``psycopg_pool.PoolTimeout``, which Django hands on wrapped in its own
``django.db.utils.OperationalError``. That is the server being busy, not a
bug: the API answers 503 ``service_unavailable`` (``conversations.api.errors``)
and :class:`DatabaseBusyMiddleware` gives every other view a plain 503, both
with ``Retry-After``. Any other database error is left alone (a 500).
"""

from __future__ import annotations

from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin
from psycopg_pool import PoolTimeout, TooManyRequests

__all__ = [
    "RETRY_AFTER_SECONDS",
    "DatabaseBusyMiddleware",
    "database_busy",
    "release_pooled_connections",
]

RETRY_AFTER_SECONDS = 2
"""The ``Retry-After`` of a 503 for want of a connection: the pool frees one per
finished request, so a short wait is enough; clients add their own jitter."""


def database_busy(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised ``from``, says the pool had no connection.

    Only explicit causes count (Django's wrapper raises ``from`` the driver's
    error): an error that merely happened while handling a timeout may be a
    bug of its own. ``TooManyRequests`` is the pool refusing to queue more
    than its ``max_waiting`` requests: the same condition, reported sooner.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, PoolTimeout | TooManyRequests):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


class DatabaseBusyMiddleware(MiddlewareMixin):
    """A plain-text 503 with ``Retry-After`` instead of a 500 when the pool is exhausted.

    For the host's pages, the admin and the app's chat page (the API answers in
    its own error shape before this sees anything). Place it anywhere in
    ``MIDDLEWARE``; it handles exceptions raised by views only. Django's mixin
    makes it both sync and async capable, so under ASGI it keeps async views
    async.
    """

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_busy(exception):
            return None
        return HttpResponse(
            "The service is busy. Please try again in a moment.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )


def release_pooled_connections() -> None:
    """Give this thread's pooled connections back to their pool, when none is inside a transaction.

    For a thread about to wait a long time without the database (the loop
    while tools run, the heartbeat between beats): a pooled connection it kept
    would be one less for every other request. The next query takes one from
    the pool again. Connections without a pool are left open: reconnecting
    costs more than the idle connection.
    """
    for connection in connections.all(initialized_only=True):
        pooled = connection.settings_dict.get("OPTIONS", {}).get("pool")
        if pooled and connection.connection is not None and not connection.in_atomic_block:
            connection.close()
