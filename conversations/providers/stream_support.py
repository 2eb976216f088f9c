"""What the stream parsers of the adapters share: in-stream errors and call ids.

Once a stream has started, the status line says 200 and a failure arrives as a
record of its own (Anthropic's ``error`` event, Gemini's ``error`` object).
:func:`stream_error` maps such a record to the error the same failure would
have raised as a status code, so a caller cannot tell the two apart:
a rate limit is :class:`ProviderRateLimited`, a refused key
:class:`ProviderAuthenticationError`, a refused request
:class:`ProviderHTTPError`, and a server-side failure (overloaded, internal)
:class:`ProviderResponseError`, which the streaming transport retries while
nothing has been shown yet. The vendor's text is redacted and cut short.

A parser shows each call's id in its first delta, before the answer is
complete; :class:`StreamCallIds` picks that id by the rule
:func:`~conversations.providers.conversion.assign_call_ids` applies to the
whole answer (the vendor's id unless it is missing or already used, else a
fresh one), so the id shown is the id stored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from conversations.exceptions import (
    ContextTooLarge,
    ProviderAuthenticationError,
    ProviderError,
    ProviderHTTPError,
    ProviderRateLimited,
    ProviderResponseError,
)

from .context_errors import is_context_length_record
from .conversion import fresh_call_id

__all__ = ["StreamCallIds", "record_index", "record_object", "record_text", "stream_error"]


def stream_error(
    provider: str,
    status: int | None,
    kind: str,
    message: str,
    *,
    redact: Callable[[str], str],
) -> ProviderError:
    """The error for a failure record: ``status`` is the HTTP status it stands for, if known.

    ``kind`` is the vendor's name for the failure (``overloaded_error``,
    ``RESOURCE_EXHAUSTED``); ``message`` its text, redacted here.
    """
    text = redact(f"{kind}: {message}" if message else kind)
    description = f"{provider}: the stream reported an error ({text})"
    if status == 429:
        return ProviderRateLimited(description)
    if status in (401, 403):
        return ProviderAuthenticationError(description, status_code=status)
    if status is not None and 400 <= status < 500:
        if is_context_length_record(provider, kind, message):
            return ContextTooLarge(description, status_code=status)
        return ProviderHTTPError(description, status_code=status, body=text)
    return ProviderResponseError(description)


class StreamCallIds:
    """The ids of one answer's calls, chosen as they start (in order, named calls only)."""

    def __init__(self, known_ids: Collection[str]) -> None:
        self._used = set(known_ids)
        self.assigned: list[str] = []
        """The ids chosen so far; position ``i`` is the call with ``ToolCallDelta.index == i``."""

    def next(self, vendor_id: Any) -> str:
        """The id of the next call, whose id on the wire is ``vendor_id``."""
        usable = isinstance(vendor_id, str) and vendor_id and vendor_id not in self._used
        call_id = vendor_id if usable else fresh_call_id()
        self._used.add(call_id)
        self.assigned.append(call_id)
        return call_id


def record_object(value: Any, what: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else ``TypeError`` (a malformed record)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} is not an object")
    return value


def record_text(value: Any, what: str) -> str:
    """``value`` when it is a string, else ``TypeError`` (a malformed record)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} is not a string")
    return value


def record_index(value: Any, what: str) -> int:
    """``value`` when it is a non-negative integer, else ``ValueError`` (a malformed record)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} is not a non-negative integer")
    return value
