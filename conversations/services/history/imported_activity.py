"""What the provider did for an imported assistant turn: the tools it ran itself, the sources cited.

The JSON Lines export writes both on each assistant message that has any, in
the shape the API shows them on a message: ``provider_tool_calls`` (``kind``,
``provider``, ``id``, ``status``, ``query``, ``code``, ``result_summary``) and
``citations`` (``start``, ``end``, ``url``, ``title``, ``source_id``). An
import reads them back, checked: only on assistant messages, at most
:data:`MAX_IMPORT_PROVIDER_TOOL_CALLS` and :data:`MAX_IMPORT_CITATIONS` per
message, no key the shape does not have, every value of its type and within
its column, every citation a span of the message's text. Anything else is an
:class:`InvalidArgumentError` whose field points at the value
(``messages/3/citations/0/url``, the caller prefixing ``messages``); nothing
is stored then. The raw vendor items (``provider_metadata``) are not part of
the shape, as a message's own are not: an imported call has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from conversations.domain import PROVIDER_TOOL_KINDS, ChatMessage, Role
from conversations.domain.provider_tools import SUMMARY_LIMIT
from conversations.domain.storable import MAX_NAME_LENGTH, storable_text
from conversations.exceptions import InvalidArgumentError
from conversations.models import Citation, Message, ProviderToolCall
from conversations.selectors.export import CITATION_KEYS, PROVIDER_TOOL_CALL_KEYS

__all__ = [
    "MAX_IMPORT_CITATIONS",
    "MAX_IMPORT_PROVIDER_TOOL_CALLS",
    "ImportedActivity",
    "imported_activity",
    "store_imported_activity",
]

MAX_IMPORT_PROVIDER_TOOL_CALLS: Final = 100
"""Most ``provider_tool_calls`` one imported message may hold."""
MAX_IMPORT_CITATIONS: Final = 500
"""Most ``citations`` one imported message may hold."""

_Row = TypeVar("_Row", ProviderToolCall, Citation)

_STATUS_LENGTH: Final = 32
"""``ProviderToolCall.provider`` and ``status``: their columns' length."""


@dataclass(frozen=True, slots=True)
class _Field:
    """One key of an imported item: text (``length``: at most that many characters) or an offset."""

    required: bool = False
    text: bool = True
    length: int | None = None
    non_empty: bool = False


# The keys the export writes (``selectors.export``), each with its check.
_CALL_FIELDS: Final = {
    "kind": _Field(required=True),
    "provider": _Field(required=True, length=_STATUS_LENGTH, non_empty=True),
    "id": _Field(length=MAX_NAME_LENGTH),
    "status": _Field(required=True, length=_STATUS_LENGTH, non_empty=True),
    "query": _Field(),
    "code": _Field(),
    "result_summary": _Field(length=SUMMARY_LIMIT),
}
_CITATION_FIELDS: Final = {
    "start": _Field(required=True, text=False),
    "end": _Field(required=True, text=False),
    "url": _Field(required=True, non_empty=True),
    "title": _Field(),
    "source_id": _Field(length=MAX_NAME_LENGTH),
}
assert tuple(_CALL_FIELDS) == tuple(PROVIDER_TOOL_CALL_KEYS)  # the shape the export writes
assert tuple(_CITATION_FIELDS) == tuple(CITATION_KEYS)


@dataclass(frozen=True, slots=True)
class ImportedActivity:
    """The checked rows of one imported assistant message, not yet attached to it."""

    calls: tuple[ProviderToolCall, ...] = ()
    citations: tuple[Citation, ...] = ()


def _values(item: Any, fields: Mapping[str, _Field], what: str, at: str) -> dict[str, Any]:
    """``item``'s values by key, every key known and every value of its type; text storable."""
    code = f"invalid_{what}"
    if not isinstance(item, Mapping):
        raise InvalidArgumentError(
            f"a {what.replace('_', ' ')} must be an object", code=code, field=at
        )
    for key in item:
        if key not in fields:
            known = ", ".join(fields)
            raise InvalidArgumentError(
                f"unknown field {str(key)[:100]!r}; known: {known}",
                code="unknown_field",
                field=f"{at}/{key}",
            )
    values: dict[str, Any] = {}
    for key, spec in fields.items():
        where = f"{at}/{key}"
        if key not in item:
            if spec.required:
                raise InvalidArgumentError(f"{key} is required", code=code, field=where)
            values[key] = ""
            continue
        value = item[key]
        if not spec.text:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{key} must be an integer >= 0", code=code, field=where)
        elif not isinstance(value, str):
            raise InvalidArgumentError(f"{key} must be a string", code=code, field=where)
        elif spec.non_empty and not value:
            raise InvalidArgumentError(f"{key} must not be empty", code=code, field=where)
        elif spec.length is not None and len(value) > spec.length:
            raise InvalidArgumentError(
                f"{key} holds at most {spec.length} characters", code=code, field=where
            )
        values[key] = storable_text(value)[0] if spec.text else value
    return values


def _call(item: Any, at: str, index: int, message: ChatMessage) -> ProviderToolCall:
    values = _values(item, _CALL_FIELDS, "provider_tool_call", at)
    if values["kind"] not in PROVIDER_TOOL_KINDS:
        raise InvalidArgumentError(
            f"unknown provider tool {str(values['kind'])[:100]!r}; "
            f"known: {', '.join(PROVIDER_TOOL_KINDS)}",
            code="unknown_provider_tool",
            field=f"{at}/kind",
        )
    columns = {column: values[key] for key, column in PROVIDER_TOOL_CALL_KEYS.items()}
    return ProviderToolCall(index=index, provider_metadata={}, **columns)


def _citation(item: Any, at: str, index: int, message: ChatMessage) -> Citation:
    values = _values(item, _CITATION_FIELDS, "citation", at)
    start, end, length = values["start"], values["end"], len(message.content)
    if end < start:
        raise InvalidArgumentError(
            "a citation cannot end before it starts", code="invalid_citation", field=f"{at}/end"
        )
    if end > length:
        raise InvalidArgumentError(
            f"a citation spans the message's text: end at most {length}",
            code="invalid_citation",
            field=f"{at}/end",
        )
    return Citation(index=index, **{column: values[key] for key, column in CITATION_KEYS.items()})


def _rows(
    raw: Mapping[str, Any],
    message: ChatMessage,
    key: str,
    limit: int,
    at: str,
    build: Callable[[Any, str, int, ChatMessage], _Row],
) -> tuple[_Row, ...]:
    items = raw.get(key)
    where = f"{at}/{key}"
    if items is None:
        return ()
    if not isinstance(items, list):
        raise InvalidArgumentError(f"{key} must be a list", code=f"invalid_{key}", field=where)
    if items and message.role is not Role.ASSISTANT:
        raise InvalidArgumentError(
            f'{key} are only allowed on assistant messages, got "{message.role}"',
            code=f"{key}_not_allowed",
            field=where,
        )
    if len(items) > limit:
        raise InvalidArgumentError(
            f"at most {limit} {key} per message; got {len(items)}",
            code=f"too_many_{key}",
            field=where,
        )
    return tuple(
        build(item, f"{where}/{index}", index, message) for index, item in enumerate(items)
    )


def imported_activity(
    *, raw: Sequence[Any], items: Sequence[ChatMessage]
) -> dict[int, ImportedActivity]:
    """The provider tool calls and citations ``raw`` gives its messages (parsed as ``items``).

    Keyed by message index; messages without any are left out. Fields are
    relative to the messages list (the caller prefixes ``messages``). No query.
    """
    found: dict[int, ImportedActivity] = {}
    for index, (message, parsed) in enumerate(zip(raw, items, strict=True)):
        if not isinstance(message, Mapping):
            continue
        at = str(index)
        calls = _rows(
            message, parsed, "provider_tool_calls", MAX_IMPORT_PROVIDER_TOOL_CALLS, at, _call
        )
        citations = _rows(message, parsed, "citations", MAX_IMPORT_CITATIONS, at, _citation)
        if calls or citations:
            found[index] = ImportedActivity(calls=calls, citations=citations)
    return found


def store_imported_activity(
    *, rows: Sequence[Message], activity: Mapping[int, ImportedActivity]
) -> None:
    """Insert ``activity`` on ``rows`` (the stored messages, in import order): two statements
    at most, whatever the number of rows; none when there is nothing to store."""
    calls: list[ProviderToolCall] = []
    citations: list[Citation] = []
    for index, found in activity.items():
        for call in found.calls:
            call.message = rows[index]
            calls.append(call)
        for citation in found.citations:
            citation.message = rows[index]
            citations.append(citation)
    if calls:
        ProviderToolCall.objects.bulk_create(calls)
    if citations:
        Citation.objects.bulk_create(citations)
