"""Recognising an exhausted connection pool in an exception and what it was raised from."""

from __future__ import annotations

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from psycopg_pool import PoolTimeout, TooManyRequests

from conversations.database import RETRY_AFTER_SECONDS, DatabaseBusyMiddleware, database_busy


def raised_from(cause: BaseException) -> OperationalError:
    """What Django raises around a driver error (``wrap_database_errors``)."""
    try:
        raise OperationalError(str(cause)) from cause
    except OperationalError as exc:
        return exc


def test_the_pools_errors_are_recognised_bare_and_wrapped():
    for error in (PoolTimeout("couldn't get a connection after 0.20 sec"), TooManyRequests("x")):
        assert database_busy(error)
        assert database_busy(raised_from(raised_from(error)))


def test_other_errors_are_not():
    assert not database_busy(OperationalError("connection refused"))
    assert not database_busy(raised_from(ValueError("x")))
    # Raised while handling a timeout, not from it: an error of its own.
    try:
        try:
            raise PoolTimeout("busy")
        except PoolTimeout:
            raise RuntimeError("a bug in the cleanup")  # noqa: B904 - the point of the test
    except RuntimeError as exc:
        assert not database_busy(exc)
    # A cycle of causes ends the search instead of looping.
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert not database_busy(first)


def test_the_middleware_answers_only_for_a_busy_database():
    middleware = DatabaseBusyMiddleware(lambda request: HttpResponse("ok"))
    request = HttpRequest()
    assert middleware(request).content == b"ok"
    assert middleware.process_exception(request, OperationalError("other")) is None
    response = middleware.process_exception(request, raised_from(PoolTimeout("busy")))
    assert response is not None and response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)


def test_the_middleware_keeps_async_views_async():
    from asgiref.sync import async_to_sync, iscoroutinefunction

    async def view(request):
        return HttpResponse("ok")

    middleware = DatabaseBusyMiddleware(view)
    assert iscoroutinefunction(middleware)  # no thread per request under ASGI
    assert async_to_sync(middleware)(HttpRequest()).content == b"ok"
