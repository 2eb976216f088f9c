"""Compact JSON for every answer of the API: one line, no space after a separator.

Whatever the host's DRF settings (``COMPACT_JSON``) and whatever the client
asks for (``Accept: application/json; indent=4``), the API answers in one
shape, so a client (or a log line) never has to cope with two spellings of
the same body. The DRF views render with :class:`CompactJSONRenderer`; the
few plain Django views (the JSON 404 of unknown paths, the event stream's
errors, the pool's 503) answer with :func:`json_answer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from django.core.serializers.json import DjangoJSONEncoder
from django.http import JsonResponse
from rest_framework.renderers import JSONRenderer

__all__ = ["SEPARATORS", "CompactJSONRenderer", "json_answer"]

SEPARATORS: Final = (",", ":")
"""``json.dumps`` separators without spaces."""


class CompactJSONRenderer(JSONRenderer):
    """DRF's JSON renderer, always compact and never indented."""

    compact = True
    ensure_ascii = False

    def get_indent(self, accepted_media_type: str, renderer_context: Mapping[str, Any]) -> None:
        # The media type's ``indent`` parameter is the client's to send, not to choose the shape.
        return None


def json_answer(
    body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> JsonResponse:
    """A plain Django JSON response, spelled as :class:`CompactJSONRenderer` spells it."""
    return JsonResponse(
        body,
        status=status,
        headers=dict(headers or {}),
        safe=False,
        encoder=DjangoJSONEncoder,
        json_dumps_params={"separators": SEPARATORS, "ensure_ascii": False},
    )
