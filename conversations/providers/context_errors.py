"""Recognising each vendor's "the request is longer than the context window" refusal.

Every vendor says it differently, in a 400 whose body the adapters otherwise
pass on as ``provider_http_error``. Recognised, it becomes
:class:`~conversations.exceptions.ContextTooLarge` (``context_too_large``),
which the loop answers with one retry on a smaller view. Only the body's
structured fields and the vendor's own wording are looked at; anything else
stays an HTTP error.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["is_context_length_error", "is_context_length_record"]


def _error_object(text: str) -> dict[str, Any]:
    """The body's ``error`` object (OpenAI, Anthropic, Gemini), or ``{"message": ...}`` for a
    body whose ``error`` is a string (Ollama), or the text itself as the message."""
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return {"message": text}
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        # Ollama may wrap its runner's JSON error in the string.
        nested = _error_object(error) if error.lstrip().startswith("{") else None
        return nested if nested and nested.get("message") != error else {"message": error}
    return {"message": text}


def _openai(error: dict[str, Any]) -> bool:
    message = str(error.get("message", "")).lower()
    return error.get("code") == "context_length_exceeded" or "maximum context length" in message


def _anthropic(error: dict[str, Any]) -> bool:
    return "prompt is too long" in str(error.get("message", "")).lower()


def _gemini(error: dict[str, Any]) -> bool:
    message = str(error.get("message", "")).lower()
    return "input token count" in message and "exceeds the maximum number of tokens" in message


def _ollama(error: dict[str, Any]) -> bool:
    message = str(error.get("message", "")).lower()
    if error.get("type") == "exceed_context_size_error":
        return True
    return "exceed" in message and ("context length" in message or "context size" in message)


_CHECKS = {"anthropic": _anthropic, "gemini": _gemini, "ollama": _ollama}


def is_context_length_error(provider_name: str, status: int, text: str) -> bool:
    """Whether the non-2xx answer ``text`` of ``provider_name`` says the request was too long.

    OpenAI-shaped adapters (every name not listed) use OpenAI's rule.
    """
    if not 400 <= status < 500:
        return False
    return _CHECKS.get(provider_name, _openai)(_error_object(text))


def is_context_length_record(provider_name: str, kind: str, message: str) -> bool:
    """The same for a failure record inside a stream (its ``kind`` is the vendor's code)."""
    error = {"code": kind, "type": kind, "message": message}
    return _CHECKS.get(provider_name, _openai)(error)
