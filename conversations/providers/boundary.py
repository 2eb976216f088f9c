"""The adapter boundary: every value a provider sends is checked before the store sees it.

Text is kept as faithfully as the database allows: NUL characters and lone
surrogates become U+FFFD, and the message's provider metadata says where
(``{"conversations": {"replaced_characters": ["content", ...]}}``). What
cannot be stored at all (an id, a name, a model or a finish reason longer
than its column, a token count beyond the counters) fails the call with
:class:`~conversations.exceptions.ProviderInvalidResponse` (``invalid_response``).
Arguments nested deeper than the configured limit are already kept raw by
:class:`~conversations.domain.ToolCall`, so they are stored and never executed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from conversations.domain import CompletionResponse, ToolCall, Usage
from conversations.domain.storable import MAX_NAME_LENGTH, storable_json, storable_text
from conversations.exceptions import ProviderInvalidResponse

__all__ = ["MAX_TOKEN_COUNT", "METADATA_KEY", "check_response"]

MAX_FINISH_REASON_LENGTH: Final = 64
MAX_TOKEN_COUNT: Final = 2**48
"""Largest token count of one answer: a run adds up to 32,767 of them in 64-bit counters."""
METADATA_KEY: Final = "conversations"
"""The app's own namespace inside ``provider_metadata``."""


def check_response(response: CompletionResponse, *, provider: str) -> CompletionResponse:
    """``response`` made storable, or :class:`ProviderInvalidResponse` naming the value."""
    replaced: list[str] = []

    def text(value: str, where: str) -> str:
        cleaned, changed = storable_text(value)
        if changed:
            replaced.append(where)
        return cleaned

    def json_value(value: Any, where: str) -> Any:
        cleaned, changed = storable_json(value)
        if changed:
            replaced.append(where)
        return cleaned

    def bounded(value: str, where: str, limit: int) -> str:
        value = text(value, where)
        if len(value) > limit:
            raise ProviderInvalidResponse(
                f"{provider}: {where} is {len(value)} characters long; at most {limit} are stored"
            )
        return value

    _check_usage(response.usage, provider)
    calls = None
    if response.tool_calls is not None:
        calls = tuple(
            _checked_call(call, f"tool_calls/{index}", text, json_value, bounded)
            for index, call in enumerate(response.tool_calls)
        )
    content = text(response.content, "content")
    thinking = None if response.thinking is None else text(response.thinking, "thinking")
    model = bounded(response.model, "model", MAX_NAME_LENGTH)
    finish_reason = bounded(response.finish_reason, "finish_reason", MAX_FINISH_REASON_LENGTH)
    metadata = json_value(dict(response.provider_metadata), "provider_metadata")
    if not replaced:
        return response
    own = dict(metadata.get(METADATA_KEY) or {})
    own["replaced_characters"] = replaced
    metadata[METADATA_KEY] = own
    return dataclasses.replace(
        response,
        content=content,
        thinking=thinking,
        model=model,
        finish_reason=finish_reason,
        tool_calls=calls,
        provider_metadata=metadata,
    )


def _checked_call(
    call: ToolCall,
    where: str,
    text: Callable[[str, str], str],
    json_value: Callable[[Any, str], Any],
    bounded: Callable[[str, str, int], str],
) -> ToolCall:
    call_id = bounded(call.id, f"{where}/id", MAX_NAME_LENGTH)
    name = bounded(call.name, f"{where}/name", MAX_NAME_LENGTH)
    if call.raw_arguments is not None:
        raw = text(call.raw_arguments, f"{where}/arguments")
        return ToolCall(id=call_id, name=name, type=call.type, raw_arguments=raw)
    arguments = json_value(dict(call.arguments), f"{where}/arguments")
    return ToolCall(id=call_id, name=name, type=call.type, arguments=arguments)


def _check_usage(usage: Usage, provider: str) -> None:
    for name, value in usage.to_dict().items():
        if value > MAX_TOKEN_COUNT:
            raise ProviderInvalidResponse(f"{provider}: {name} is not a plausible count: {value}")
