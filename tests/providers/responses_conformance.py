"""Checks of Responses API bodies against the official ``openai`` SDK's types.

The SDK describes requests as ``TypedDict`` types and responses and stream
events as pydantic models. A ``TypedDict`` silently drops keys it does not
know, so a request is valid only when validating it gives back the very same
body (an unknown or misspelled key would be missing); a response or event is
valid when it validates and no model along the way holds keys it does not
declare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)
from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = [
    "assert_valid_event",
    "assert_valid_request",
    "assert_valid_response",
    "validate_responses_request",
]

_NON_STREAMING = TypeAdapter(ResponseCreateParamsNonStreaming)
_STREAMING = TypeAdapter(ResponseCreateParamsStreaming)
_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def _materialised(value: Any) -> Any:
    """``value`` with pydantic's lazily validated iterables consumed (which validates them)."""
    if isinstance(value, Mapping):
        return {key: _materialised(item) for key, item in value.items()}
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return value
    return [_materialised(item) for item in value]


def assert_valid_request(body: Mapping[str, Any]) -> None:
    """``body`` is a ``responses.create`` request the SDK types accept, key for key."""
    adapter = _STREAMING if body.get("stream") is True else _NON_STREAMING
    validated = _materialised(adapter.validate_python(body))
    assert validated == body, "keys or values the SDK's request types do not have"


def validate_responses_request(body: Any) -> list[str]:
    """The problems the SDK's request types find in ``body`` (empty: it fits), for the matrix."""
    try:
        assert_valid_request(body)
    except (AssertionError, ValidationError) as exc:
        return [str(exc)]
    return []


def _extras(model: Any, where: str) -> list[str]:
    if isinstance(model, BaseModel):
        found = [f"{where}.{key}" for key in model.model_extra or {}]
        for name in type(model).model_fields:
            found += _extras(getattr(model, name), f"{where}.{name}")
        return found
    if isinstance(model, list | tuple):
        return [extra for i, item in enumerate(model) for extra in _extras(item, f"{where}[{i}]")]
    return []


def assert_valid_response(body: Mapping[str, Any]) -> None:
    """``body`` is a ``Response`` of the SDK, with no key it does not declare."""
    assert _extras(Response.model_validate(body), "response") == []


def assert_valid_event(event: Mapping[str, Any]) -> None:
    """``event`` is one of the SDK's ``ResponseStreamEvent`` types, with no undeclared key."""
    assert _extras(_EVENT.validate_python(event), event["type"]) == []
