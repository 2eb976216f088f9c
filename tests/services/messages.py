"""Small builders of ChatMessage batches for service tests."""

from __future__ import annotations

from conversations.domain import ChatMessage, ToolCall


def calls(count: int, prefix: str = "call") -> list[ToolCall]:
    return [
        ToolCall(id=f"{prefix}_{n}", name="get_weather", arguments={"city": f"City {n}"})
        for n in range(count)
    ]


def tool_turn(count: int, prefix: str = "call") -> list[ChatMessage]:
    """An assistant message with ``count`` calls, an answer to each, and a final answer."""
    made = calls(count, prefix)
    return [
        ChatMessage.assistant_tool_calls(made),
        *(ChatMessage.tool_result(call.id, f"result of {call.id}") for call in made),
        ChatMessage.assistant("Done."),
    ]
