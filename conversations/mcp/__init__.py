"""Model Context Protocol: tools of MCP servers in the registry.

``sync`` (listing servers' tools into ``MCPTool`` rows) and ``client`` (the
MCP SDK) are imported only when used, so a project without the ``mcp`` extra
imports nothing from the SDK. See ``docs/mcp.md``.
"""

from __future__ import annotations

import importlib.util

__all__ = ["SDK_MISSING_HINT", "sdk_installed"]

SDK_MISSING_HINT = 'Install the MCP SDK: pip install "django-llm-conversations[mcp]".'


def sdk_installed() -> bool:
    """Whether the MCP Python SDK can be imported."""
    return importlib.util.find_spec("mcp") is not None
