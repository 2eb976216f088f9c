"""Provider adapters: one module per vendor (and per vendor API), all speaking ``ChatProvider``.

The names below are the package's public surface: the protocol every adapter
implements, the shared HTTP base, the options of a request, and the adapters
a host project may build directly (most build them from configuration rows
through ``conversations.services.build_provider``). The modules themselves,
their wire-mapping functions and stream parsers, are internal and may move.
"""

from .anthropic import AnthropicProvider
from .base import ChatProvider, CompletionOptions, HTTPProvider
from .demo import DemoProvider
from .gemini import GeminiProvider
from .ollama import OllamaProvider
from .openai import OpenAIProvider
from .openai_responses import OpenAIResponsesProvider
from .scripted import ScriptedProvider, scripted_calls, scripted_stream, scripted_text

__all__ = [
    "AnthropicProvider",
    "ChatProvider",
    "CompletionOptions",
    "DemoProvider",
    "GeminiProvider",
    "HTTPProvider",
    "OllamaProvider",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "ScriptedProvider",
    "scripted_calls",
    "scripted_stream",
    "scripted_text",
]
