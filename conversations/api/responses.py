"""Error answers shared by the API views' schema (drf-spectacular responses)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse

from .serializers import ErrorSerializer

__all__ = [
    "AUTH_ERRORS",
    "ERR_400",
    "ERR_400_LIST",
    "ERR_401",
    "ERR_403",
    "ERR_404",
    "ERR_409",
    "ERR_409_ENDED",
    "error_response",
]


def error_response(description: str) -> OpenApiResponse:
    """An error answer of the schema, with its description."""
    return OpenApiResponse(ErrorSerializer, description=description)


ERR_400 = error_response(
    "The request is not valid (code `invalid` or a domain code; see `errors`)."
)
ERR_400_LIST = error_response("Invalid query parameters (`invalid`) or cursor (`invalid_cursor`).")
ERR_401 = error_response("No valid credentials (`not_authenticated`, `authentication_failed`).")
ERR_403 = error_response("Refused (`permission_denied`, e.g. a missing CSRF token with a session).")
ERR_404 = error_response("No such object among yours (`not_found`).")
ERR_409 = error_response("A run is already running on this conversation (`conversation_busy`).")
ERR_409_ENDED = error_response("The run has already ended (`run_not_running`).")
AUTH_ERRORS = {401: ERR_401, 403: ERR_403}
