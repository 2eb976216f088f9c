"""Talking to one MCP server through the official SDK: connect, list its tools.

Nothing here touches the database: :func:`connection_of` turns an
``MCPServer`` row into a :class:`Connection` (secrets resolved), and the
functions below speak MCP. Every failure of the server (cannot start, refuses,
times out, answers something that is not MCP) is raised as
:class:`~conversations.exceptions.MCPServerError` whose text is for admins.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from conversations.exceptions import MCPServerError
from conversations.models import MCPServer, MCPTransport
from conversations.secrets import resolve

__all__ = ["Connection", "RemoteTool", "connection_of", "list_remote_tools", "open_client"]

# Enough of a failure's text for an admin to act on, not a whole traceback.
_MAX_DETAIL_CHARS = 500


@dataclass(frozen=True, slots=True)
class Connection:
    """How to reach one server, secrets resolved (never logged or stored)."""

    slug: str
    """The server's slug, for messages."""
    transport: str
    """``stdio`` or ``streamable_http``."""
    command: str = ""
    """stdio: the executable."""
    args: tuple[str, ...] = ()
    """stdio: its arguments."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """stdio: extra environment variables (resolved secrets)."""
    url: str = ""
    """streamable_http: the endpoint."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """streamable_http: extra headers (resolved secrets)."""
    connect_timeout: float = 10.0
    """Seconds to start, connect and list."""


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as a server lists it."""

    name: str
    """Its name on the server."""
    description: str
    """What the server says it does."""
    input_schema: Mapping[str, Any]
    """The JSON Schema of its arguments."""
    annotations: Mapping[str, Any]
    """The server's hints (read-only, destructive, ...), as sent."""


def _resolved(server: MCPServer, references: Any, what: str) -> dict[str, str]:
    if not isinstance(references, Mapping):
        raise MCPServerError(f'MCP server "{server.slug}": {what} must be a JSON object.')
    values: dict[str, str] = {}
    for name, reference in references.items():
        value = resolve(reference) if isinstance(reference, str) else None
        if value is None:
            # The reference is a name like env:TOKEN, not the secret, so naming it is safe.
            raise MCPServerError(
                f'MCP server "{server.slug}": {what} "{name}" refers to {reference!r}, '
                "which resolves to nothing."
            )
        values[str(name)] = value
    return values


def connection_of(server: MCPServer) -> Connection:
    """The :class:`Connection` of an ``MCPServer`` row; secret references are resolved now."""
    if server.transport == MCPTransport.STDIO:
        args = server.args
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise MCPServerError(f'MCP server "{server.slug}": args must be a list of strings.')
        return Connection(
            slug=server.slug,
            transport=server.transport,
            command=server.command,
            args=tuple(args),
            env=_resolved(server, server.env_refs, "environment variable"),
            connect_timeout=server.connect_timeout,
        )
    return Connection(
        slug=server.slug,
        transport=server.transport,
        url=server.url,
        headers=_resolved(server, server.header_refs, "header"),
        connect_timeout=server.connect_timeout,
    )


def describe_failure(exc: BaseException) -> str:
    """A short text naming what went wrong, for admins (groups are unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_MAX_DETAIL_CHARS]


@asynccontextmanager
async def open_client(connection: Connection) -> AsyncIterator[Client]:
    """An initialised SDK client of the server, closed (process ended) on exit.

    Every request, the handshake included, times out after the connection's
    ``connect_timeout`` unless the call gives its own.
    """
    timeout = connection.connect_timeout
    if connection.transport == MCPTransport.STDIO:
        # The server's stderr is its own log; it must not mix into ours.
        with open(os.devnull, "w") as errlog:
            params = StdioServerParameters(
                command=connection.command, args=list(connection.args), env=dict(connection.env)
            )

            async with Client(
                stdio_client(params, errlog=errlog), read_timeout_seconds=timeout
            ) as client:
                yield client
        return
    async with (
        httpx2.AsyncClient(headers=dict(connection.headers), timeout=timeout) as http,
        Client(
            streamable_http_client(connection.url, http_client=http), read_timeout_seconds=timeout
        ) as client,
    ):
        yield client


async def _list(connection: Connection) -> tuple[RemoteTool, ...]:
    found: list[RemoteTool] = []
    with anyio.fail_after(connection.connect_timeout):
        async with open_client(connection) as client:
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                for item in page.tools:
                    annotations = (
                        item.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
                        if item.annotations is not None
                        else {}
                    )
                    found.append(
                        RemoteTool(
                            name=item.name,
                            description=item.description or "",
                            input_schema=dict(item.input_schema),
                            annotations=annotations,
                        )
                    )
                cursor = page.next_cursor
                if not cursor:
                    return tuple(found)


def list_remote_tools(connection: Connection) -> tuple[RemoteTool, ...]:
    """Every tool the server lists (all pages); :class:`MCPServerError` when it cannot."""
    try:
        return anyio.run(_list, connection)
    except Exception as exc:
        raise MCPServerError(
            f'MCP server "{connection.slug}" could not list its tools: {describe_failure(exc)}'
        ) from exc
