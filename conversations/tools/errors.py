"""The one exception a tool raises on purpose: its message is shown to the model."""

from __future__ import annotations

__all__ = ["ToolError"]


class ToolError(Exception):
    """A failure the tool's author wants the model (and so the user) to read.

    ``raise ToolError("division by zero")`` answers the call with
    ``Error: tool "calculate" failed: division by zero``. Raise it for a
    mistake in the request (a value out of range, a city the tool does not
    know): the model can correct itself or explain. Never put secrets in the
    message. Any other exception is treated as a bug: the model gets a fixed
    sentence and the text stays in the call's error detail for admins.
    """

    def __init__(self, message: str) -> None:
        if not isinstance(message, str) or not message.strip():
            raise TypeError("ToolError needs a non-empty message for the model")
        super().__init__(message)
        self.message = message
        """The text the model is shown after ``Error: tool "<name>" failed: ``."""
