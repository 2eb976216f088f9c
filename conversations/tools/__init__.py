"""Tools the model can call: the ``@tool`` decorator, the registry, validation, execution, results.

An installed app contributes tools by defining them in its ``llm_tools``
module; :func:`autodiscover` (run from the app's ``ready()``) imports them.
See ``docs/tools.md``.
"""

from .base import Tool
from .context import ToolContext
from .errors import ToolError
from .execution import (
    DEFAULT_MAX_RESULT_BYTES,
    TRUNCATION_MARKER,
    call_tool,
    encode_result,
    execute,
    execute_async,
    truncate_result,
    validate_arguments,
)
from .registration import TOOLS_MODULE, ToolRegistry, autodiscover, registry, tool
from .results import ToolResult

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "TOOLS_MODULE",
    "TRUNCATION_MARKER",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "autodiscover",
    "call_tool",
    "encode_result",
    "execute",
    "execute_async",
    "registry",
    "tool",
    "truncate_result",
    "validate_arguments",
]
