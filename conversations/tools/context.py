"""What a tool may learn about the call it is serving, beyond its arguments."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["Identifier", "ToolContext"]

Identifier = int | str | uuid.UUID
"""A primary key or public id, whichever the loop has at hand."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Ids of the conversation, run and call a tool is executed for.

    A tool asks for it by annotating one parameter with ``ToolContext``; that
    parameter never appears in the schema and the model cannot fill it. Every
    field is ``None`` when a tool is executed outside a run (tests, the shell).
    It carries ids rather than model instances so that the tools package stays
    importable without the ORM and a tool decides itself what to load.
    """

    conversation_id: Identifier | None = None
    """The conversation the run belongs to."""
    run_id: Identifier | None = None
    """The run executing the tool."""
    call_id: str | None = None
    """The provider's id of the call being answered (the tool message's ``tool_call_id``)."""
    user_id: Identifier | None = None
    """The user the tool acts for: the caller of a call made over MCP (``/mcp/``)."""
