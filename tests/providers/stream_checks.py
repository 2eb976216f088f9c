"""What every streamed answer must satisfy, whichever adapter made it.

:func:`check_stream` takes the events of one stream and the response the same
answer gives sent whole, and checks the stream contract: exactly one final
response, last, equal to the whole one; the text, reasoning and each call's
argument pieces add up to what the response holds; the calls' ids and names
are the response's.
"""

from __future__ import annotations

from collections.abc import Sequence

from conversations.domain import CompletionResponse, StreamEvent, ToolCall
from conversations.providers.streaming import PartialTurn


def check_stream(events: Sequence[StreamEvent], whole: CompletionResponse) -> PartialTurn:
    """Assert the contract; return the folded deltas for adapter-specific checks."""
    assert events, "a stream yields at least its response"
    final = events[-1]
    assert isinstance(final, CompletionResponse)
    assert not any(isinstance(event, CompletionResponse) for event in events[:-1])
    assert final == whole
    turn = PartialTurn()
    for event in events[:-1]:
        assert not isinstance(event, CompletionResponse)
        turn.add(event)
    assert turn.text == final.content
    assert turn.reasoning == (final.thinking or "")
    calls = final.tool_calls or ()
    assert sorted(turn.calls) == list(range(len(calls)))
    for index, call in enumerate(calls):
        shown = turn.calls[index]
        assert (shown["id"], shown["name"]) == (call.id, call.name)
        rebuilt = ToolCall.from_dict(
            {"id": call.id, "function": {"name": call.name, "arguments": shown["arguments"]}}
        )
        assert rebuilt == call
    return turn
