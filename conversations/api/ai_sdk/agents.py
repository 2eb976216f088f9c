"""An agent's progress in the AI SDK stream of the run that called it: ``data-agent`` parts.

The loop relays the events of an agent's run to the runs above it as
``agent.*`` events (see ``conversations.events``). Here each agent's run is
one data part, ``{"type": "data-agent", "id": <its run id>, "data": ...}``,
sent again as it changes: the AI SDK client replaces a data part with the
same id, so a message holds each agent's latest state, its text so far
included, and the chat page can show it as a nested transcript.
"""

from __future__ import annotations

from typing import Any

from conversations.events import AGENT_PREFIX, LiveEvent

__all__ = ["AgentParts"]

Chunk = dict[str, Any]


class AgentParts:
    """The state of each agent's run seen so far, as ``data-agent`` parts."""

    def __init__(self) -> None:
        self._agents: dict[str, dict[str, Any]] = {}

    def on_event(self, event: LiveEvent) -> list[Chunk]:
        """The part an ``agent.*`` event changes (none for other events, or an unknown run)."""
        kind = event.type.removeprefix(AGENT_PREFIX)
        run = event.data.get("run")
        if not event.type.startswith(AGENT_PREFIX) or not isinstance(run, str):
            return []
        state = self._agents.setdefault(
            run,
            {
                "run": run,
                "conversation": None,
                "call_id": "",
                "profile": "",
                "status": "running",
                "text": "",
            },
        )
        if kind in ("started", "finished"):
            for key in ("conversation", "call_id", "profile", "status"):
                if isinstance(event.data.get(key), str):
                    state[key] = event.data[key]
        elif kind == "text.delta" and isinstance(event.data.get("text"), str):
            state["text"] += event.data["text"]
        elif kind == "tool_call.delta" and isinstance(event.data.get("name"), str):
            state["tool"] = event.data["name"]
        else:
            return []  # "changed" and reasoning: the agent's own stream has them
        return [{"type": "data-agent", "id": run, "data": dict(state)}]
