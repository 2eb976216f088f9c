"""The API's answer for paths that match none of its routes: a JSON 404, never an HTML page.

Mounted as the last route of ``conversations.api.urls``, so everything under
the host's prefix is answered by the app (whatever the host's ``handler404``
and ``DEBUG``). A path that only lacks its trailing slash is told the URL to
use: with a catch-all route, Django's ``APPEND_SLASH`` never redirects, and a
redirect would turn a ``POST`` into a ``GET`` anyway.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt

from .compact import json_answer
from .errors import error_body

__all__ = ["route_not_found"]


def _with_slash(request: HttpRequest) -> str | None:
    """The URL the client probably meant: the path plus ``/``, when that is an API route."""
    if request.path_info.endswith("/"):
        return None
    try:
        match = resolve(request.path_info + "/", getattr(request, "urlconf", None))
    except Resolver404:
        return None
    if match.func is route_not_found:
        return None
    query = request.META.get("QUERY_STRING", "")
    return request.path + "/" + (f"?{query}" if query else "")


@csrf_exempt
def route_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any method on a path under the API that names no resource: ``404 not_found``."""
    suggestion = _with_slash(request)
    if suggestion is None:
        detail = "Not found."
    else:
        detail = f"Not found. The URL of this resource ends with a slash: {suggestion}"
    return json_answer(error_body("not_found", detail), status=404)
