"""Writes: one module per use case; the public functions are re-exported here."""

from .messages import MessageDetails, append_messages, create_conversation

__all__ = ["MessageDetails", "append_messages", "create_conversation"]
