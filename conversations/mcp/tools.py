"""Enabled MCP tools as registry tools: prefixed names, the server's schema, calls through a pool.

Nothing here imports the SDK until a tool is called, so building the tool set
costs one query and no connection. :func:`mcp_connections` brackets a run:
calls inside it share one connection per server, closed at its end; a call
outside it (the shell, a test) connects and closes for itself.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator

from conversations.domain import TOOL_NAME_PATTERN
from conversations.exceptions import InvalidArgumentError
from conversations.models import MCPServer, MCPTool
from conversations.tools import Tool, ToolResult, truncate_result
from conversations.tools.base import checked_spec
from conversations.tools.schema import FunctionShape, ParameterShape

if TYPE_CHECKING:
    from .connections import ConnectionPool

__all__ = ["MCPRemoteTool", "RemoteCall", "enabled_mcp_tools", "mcp_connections"]

logger = logging.getLogger("conversations.mcp")


@dataclass(slots=True)
class _Slot:
    """Where the pool of the current run is kept once its first MCP call opens it."""

    pool: ConnectionPool | None = None
    # The calls of a turn run in worker threads that share this slot.
    lock: threading.Lock = field(default_factory=threading.Lock)


_slot: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar(
    "conversations_mcp_slot", default=None
)


@contextmanager
def mcp_connections() -> Iterator[None]:
    """Share MCP connections among the calls made inside the block; close them after it."""
    slot = _Slot()
    token = _slot.set(slot)
    try:
        yield
    finally:
        _slot.reset(token)
        if slot.pool is not None:
            slot.pool.close()


@dataclass(frozen=True, slots=True, eq=False)
class RemoteCall:
    """The function of an MCP tool: calls the server, returns the result's text and files."""

    server: MCPServer
    """The server row (secret references are resolved when connecting)."""
    remote_name: str
    """The tool's name on the server (unprefixed)."""

    def __call__(self, **arguments: Any) -> ToolResult:
        from .connections import ConnectionPool

        slot = _slot.get()
        if slot is None:
            pool = ConnectionPool()
            try:
                return self._result(pool, arguments)
            finally:
                pool.close()
        with slot.lock:
            if slot.pool is None:
                slot.pool = ConnectionPool()
            pool = slot.pool
        return self._result(pool, arguments)

    def _result(self, pool: ConnectionPool, arguments: dict[str, Any]) -> ToolResult:
        from .results import result_with_files

        result = result_with_files(
            pool.call(server=self.server, name=self.remote_name, arguments=arguments)
        )
        return ToolResult(truncate_result(result.text, self.server.max_result_bytes), result.files)


@dataclass(frozen=True, slots=True, eq=False)
class MCPRemoteTool(Tool):
    """A tool of an MCP server: its schema is the server's, its function a :class:`RemoteCall`.

    Validation is the registry's (the schema, then the names it declares), so
    the model gets the same texts as for a Python tool. Unlike a Python tool,
    the shape comes from the schema, not from a signature.
    """

    origin_name: str = field(default="", kw_only=True)
    """``server-slug.remote-name``: how logs and admins name it."""

    def __post_init__(self) -> None:
        if not TOOL_NAME_PATTERN.fullmatch(self.name):
            raise InvalidArgumentError(
                f"MCP tool name {self.name!r} must match {TOOL_NAME_PATTERN.pattern}",
                code="invalid_tool_name",
                field="name",
            )
        spec = checked_spec(self.name, self.description, self.parameters, label="MCP tool")
        parameters = spec.parameters
        properties = parameters.get("properties")
        names = sorted(properties) if isinstance(properties, dict) else []
        required = parameters.get("required")
        required_set = set(required) if isinstance(required, list) else set()
        shape = FunctionShape(
            qualified_name=f"mcp:{self.origin_name}",
            parameters=tuple(
                ParameterShape(name=n, hint=Any, required=n in required_set, default=None)
                for n in names
            ),
            context_parameter=None,
        )
        object.__setattr__(self, "parameters", parameters)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "converters", {})
        object.__setattr__(self, "validator", Draft202012Validator(parameters))
        object.__setattr__(self, "_spec", spec)


def enabled_mcp_tools(*, taken: Container[str]) -> list[MCPRemoteTool]:
    """Enabled tools of enabled servers, under their prefixed names (one query).

    A name already ``taken`` (a Python tool) or one the providers would refuse
    (too long, odd characters) is left out and logged: silently letting one
    win would make the model call code nobody chose.
    """
    rows = (
        MCPTool.objects.filter(enabled=True, present=True, server__enabled=True)
        .select_related("server")
        .order_by("server__slug", "name")
    )
    tools: list[MCPRemoteTool] = []
    seen: set[str] = set()
    for row in rows:
        name = f"{row.server.prefix}{row.name}"
        if name in taken or name in seen:
            logger.warning("MCP tool %s.%s left out: %r is taken", row.server.slug, row.name, name)
            continue
        try:
            tool = MCPRemoteTool(
                name=name,
                description=row.description,
                parameters=row.input_schema,
                func=RemoteCall(server=row.server, remote_name=row.name),
                requires_approval=not row.server.trusted,
                origin_name=f"{row.server.slug}.{row.name}",
            )
        except InvalidArgumentError as exc:
            logger.warning("MCP tool %s.%s left out: %s", row.server.slug, row.name, exc)
            continue
        seen.add(name)
        tools.append(tool)
    return tools
