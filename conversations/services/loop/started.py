"""What starting a run read in its transaction, handed to the first round so it reads none again."""

from __future__ import annotations

from dataclasses import dataclass

from conversations.domain import ChatMessage
from conversations.models import Run
from conversations.selectors import ToolSettings, TranscriptTail

from ..usage.prices import Prices

__all__ = ["StartedTurn"]


@dataclass(slots=True)
class StartedTurn:
    """A run just started and what its transaction read: the first round reads none of it again."""

    run: Run
    """The run, ``running``; claimed by this process when started with ``claim=True``."""
    history: list[ChatMessage] | None
    """What the provider is sent first: the system prompt, the history, the user message.

    ``None`` for a run started unclaimed (``claim=False``): the process that
    executes it reads the history then, so starting it reads no message text.
    """
    tail: TranscriptTail
    """The conversation's end, past the user message."""
    budgets_apply: bool
    """Whether any active budget covers the run."""
    tool_settings: ToolSettings
    """The tool settings, as read when the run started."""
    prices: Prices
    """The language model's prices, as read when the run started: every call of it is charged
    at them."""
