"""Connections to MCP servers kept open for one run, on an event loop in a helper thread.

The tool loop is synchronous; the SDK is asynchronous. A :class:`ConnectionPool`
runs an anyio blocking portal (one thread with an event loop) and keeps one
initialised client per server, so the calls of a run reuse the connection
(and a stdio server's process); concurrent calls of a turn, from several
worker threads, share it too. A call that fails for any reason
other than the tool's own ``isError`` closes that server's connection, so the
next call starts afresh instead of talking to a dead process.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.types import CallToolResult

from conversations.exceptions import MCPServerError
from conversations.models import MCPServer

from .client import connection_of, describe_failure, open_client

__all__ = ["ConnectionPool"]

logger = logging.getLogger("conversations.mcp")


async def _call(client: Client, name: str, arguments: dict[str, Any], timeout: float) -> Any:
    # The SDK's timeout bounds each read; this bounds the whole call.
    with anyio.fail_after(timeout):
        return await client.call_tool(name, arguments, read_timeout_seconds=timeout)


class ConnectionPool:
    """Open clients by server, until :meth:`close`."""

    def __init__(self) -> None:
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._clients: dict[int, tuple[Client, ExitStack]] = {}
        # Concurrent calls of a turn (worker threads) open and drop clients;
        # the calls themselves go through the portal, which is thread-safe.
        self._lock = threading.RLock()

    def _client(self, server: MCPServer) -> tuple[Client, BlockingPortal]:
        with self._lock:
            held = self._clients.get(server.pk)
            if held is not None:
                assert self._portal is not None  # opened with the first client
                return held[0], self._portal
            connection = connection_of(server)
            if self._portal is None:
                self._portal_cm = start_blocking_portal()
                self._portal = self._portal_cm.__enter__()
            stack = ExitStack()
            try:
                client = stack.enter_context(
                    self._portal.wrap_async_context_manager(open_client(connection))
                )
            except Exception as exc:
                stack.close()
                raise MCPServerError(
                    f'MCP server "{server.slug}" could not be connected: {describe_failure(exc)}'
                ) from exc
            self._clients[server.pk] = (client, stack)
            return client, self._portal

    def call(self, *, server: MCPServer, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call tool ``name`` of ``server``; :class:`MCPServerError` when the server fails."""
        client, portal = self._client(server)
        try:
            result = portal.call(_call, client, name, arguments, server.call_timeout)
        except Exception as exc:
            self._drop(server.pk)
            raise MCPServerError(
                f'MCP server "{server.slug}" failed calling {name!r}: {describe_failure(exc)}'
            ) from exc
        if not isinstance(result, CallToolResult):
            self._drop(server.pk)
            raise MCPServerError(
                f'MCP server "{server.slug}" answered {name!r} with {type(result).__name__}, '
                "not a tool result"
            )
        return result

    def _drop(self, pk: int) -> None:
        with self._lock:
            held = self._clients.pop(pk, None)
        if held is None:
            return
        try:
            held[1].close()
        except Exception:  # a dead server may fail to close; it is gone either way
            logger.info("closing a failed MCP connection raised", exc_info=True)

    def close(self) -> None:
        """Close every connection (ending stdio servers), then the helper thread."""
        with self._lock:
            for pk in list(self._clients):
                self._drop(pk)
            if self._portal_cm is not None:
                self._portal_cm.__exit__(None, None, None)
                self._portal_cm = self._portal = None
