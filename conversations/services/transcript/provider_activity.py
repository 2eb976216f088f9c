"""Storing what the provider did itself while answering: its tool calls and the answer's citations.

Written in the assistant turn's transaction, right after its message, by
the tool loop; a turn without any costs no statement at all, so a run that
uses no provider tool is exactly as cheap as before.
"""

from __future__ import annotations

from conversations.domain import CompletionResponse, storable
from conversations.models import Citation, Message, ProviderToolCall

__all__ = ["record_provider_activity"]


def _storable(text: str) -> str:
    """``text`` as the database can store it."""
    return storable.storable_text(text)[0]


def record_provider_activity(*, message: Message, response: CompletionResponse) -> None:
    """Insert a :class:`ProviderToolCall` per record of ``response`` and a :class:`Citation`
    per citation, attached to ``message`` (the turn stored from ``response``)."""
    if response.provider_tool_calls:
        ProviderToolCall.objects.bulk_create(
            ProviderToolCall(
                message=message,
                index=index,
                kind=call.kind,
                provider=response.provider or "unknown",
                provider_call_id=_storable(call.provider_id)[:200],
                status=_storable(call.status)[:32] or "completed",
                query=_storable(call.query),
                code=_storable(call.code),
                result_summary=_storable(call.result_summary),
                provider_metadata=storable.storable_json(dict(call.payload))[0],
            )
            for index, call in enumerate(response.provider_tool_calls)
        )
    if response.citations:
        Citation.objects.bulk_create(
            Citation(
                message=message,
                index=index,
                start_offset=citation.start,
                end_offset=citation.end,
                url=_storable(citation.url),
                title=_storable(citation.title),
                source_id=_storable(citation.source_id)[:200],
            )
            for index, citation in enumerate(response.citations)
        )
