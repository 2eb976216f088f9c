"""Limits on what a request may hold: JSON depth (before parsing), and importable values.

Python's JSON parser recurses: a body nested a thousand levels deep would
raise ``RecursionError`` (a 500) on any endpoint. The API's parser measures
the depth on the text first and answers 400 ``too_deep`` with a pointer to
the first container past ``CONVERSATIONS["MAX_JSON_DEPTH"]``.

An imported history is checked here for what the store cannot hold and the
domain cannot see: argument text that decodes to NUL, lone surrogates or a
nesting past the limit, and ids or names longer than their columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.settings import api_settings
from rest_framework.utils import json as drf_json

from conversations.conf import app_settings
from conversations.domain.storable import MAX_NAME_LENGTH, text_depth_excess

from .errors import APIError, error_item, json_pointer
from .fields import check_storable

__all__ = [
    "DepthLimitedJSONParser",
    "check_import_values",
    "too_deep",
]


def too_deep(path: list[str | int], limit: int) -> APIError:
    """The 400 for a value nested deeper than ``limit``, located by ``path``."""
    detail = f"JSON nested deeper than {limit} levels is not accepted."
    return APIError(
        detail,
        code="too_deep",
        errors=[error_item("too_deep", detail, pointer=json_pointer(path))],
    )


class DepthLimitedJSONParser(JSONParser):
    """DRF's JSON parser, refusing bodies nested past the limit before it parses them."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        data = stream.read()
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(
                f"JSON parse error - the body is not {encoding}: {exc.reason}"
            ) from None
        limit = app_settings().MAX_JSON_DEPTH
        path = text_depth_excess(text, limit)
        if path is not None:
            raise too_deep(path, limit)
        constant = drf_json.strict_constant if api_settings.STRICT_JSON else None
        try:
            return drf_json.loads(text, parse_constant=constant)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None


def check_import_values(messages: list[Any]) -> None:
    """Raise a 400 for the first value of an imported history the store cannot hold."""
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            for index, call in enumerate(calls):
                if isinstance(call, Mapping):
                    _check_call(call, ["messages", position, "tool_calls", index])
        tool_call_id = message.get("tool_call_id")
        if isinstance(tool_call_id, str) and len(tool_call_id) > MAX_NAME_LENGTH:
            raise _too_long(["messages", position, "tool_call_id"])


def _check_call(call: Mapping[str, Any], path: list[str | int]) -> None:
    call_id = call.get("id")
    if isinstance(call_id, str) and len(call_id) > MAX_NAME_LENGTH:
        raise _too_long([*path, "id"])
    function = call.get("function")
    if not isinstance(function, Mapping):
        return
    name = function.get("name")
    if isinstance(name, str) and len(name) > MAX_NAME_LENGTH:
        raise _too_long([*path, "function", "name"])
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        return
    where = [*path, "function", "arguments"]
    limit = app_settings().MAX_JSON_DEPTH
    excess = text_depth_excess(arguments, limit)
    if excess is not None:
        raise too_deep(where, limit)
    try:
        decoded = drf_json.loads(arguments)
    except ValueError:
        return  # not JSON: imported as raw arguments, never executed
    check_storable(decoded, field=tuple(where))


def _too_long(path: list[str | int]) -> APIError:
    detail = f"At most {MAX_NAME_LENGTH} characters are stored."
    return APIError(
        detail,
        code="invalid",
        errors=[error_item("too_long", detail, pointer=json_pointer(path))],
    )
