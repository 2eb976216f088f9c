"""The value objects every layer speaks: pure Python, no Django.

The OpenAI wire shape (arguments as a compact JSON string, ``"{}"`` when
empty) is produced here and nowhere else: :meth:`ToolCall.to_wire` and
:meth:`ChatMessage.to_dict`.
"""

from conversations.exceptions import InvalidArgumentError

from .messages import ChatMessage, Role, ToolCall, normalise_messages
from .parts import FilePart
from .provider_tools import (
    PROVIDER_TOOL_KINDS,
    ProviderTool,
    ProviderToolActivity,
    SourceCitation,
    parse_provider_tools,
)
from .responses import USAGE_FIELDS, CompletionResponse, Usage
from .streaming import ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from .tools import TOOL_NAME_PATTERN, ToolSpec

__all__ = [
    "PROVIDER_TOOL_KINDS",
    "TOOL_NAME_PATTERN",
    "USAGE_FIELDS",
    "ChatMessage",
    "CompletionResponse",
    "FilePart",
    "InvalidArgumentError",
    "ProviderTool",
    "ProviderToolActivity",
    "ReasoningDelta",
    "Role",
    "SourceCitation",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "normalise_messages",
    "parse_provider_tools",
]
