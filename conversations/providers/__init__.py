"""Provider adapters: one module per vendor, all speaking ``ChatProvider``."""

from .base import ChatProvider, CompletionOptions, HTTPProvider

__all__ = ["ChatProvider", "CompletionOptions", "HTTPProvider"]
