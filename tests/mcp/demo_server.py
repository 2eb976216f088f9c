"""A small MCP server written with the SDK's server API, started by the tests.

``python demo_server.py stdio`` serves over stdin/stdout;
``python demo_server.py http PORT`` serves streamable HTTP on 127.0.0.1:PORT/mcp (PORT 0:
one the kernel picks, which uvicorn logs).
``MCP_DEMO_VARIANT=changed`` gives ``add`` a different input schema, as a server
update would; ``MCP_DEMO_SECRET`` (from the environment the client passes) is
what ``whoami`` reports.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("demo")

if os.environ.get("MCP_DEMO_VARIANT") == "changed":

    @server.tool()
    def add(a: int, b: int, c: int = 0) -> int:
        """Add numbers."""
        return a + b + c

else:

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add numbers."""
        return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def whoami() -> str:
    """The secret this server was started with."""
    return os.environ.get("MCP_DEMO_SECRET", "")


@server.tool()
def pid() -> str:
    """The server process's id (tells whether a connection was reused)."""
    return str(os.getpid())


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, with the reason."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def die() -> str:
    """Ends the server process in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
