"""A small MCP server written with the SDK's server API, started by the tests.

``python demo_server.py stdio`` serves over stdin/stdout;
``python demo_server.py http PORT`` serves streamable HTTP on 127.0.0.1:PORT/mcp (PORT 0:
one the kernel picks, which uvicorn logs).
``MCP_DEMO_VARIANT=changed`` gives ``add`` a different input schema, as a server
update would; ``MCP_DEMO_SECRET`` (from the environment the client passes) is
what ``whoami`` reports.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: tests.files
from tests.files import pdf, png

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
def picture() -> list[ContentBlock]:
    """A tiny PNG, a PDF as an embedded blob, and a line of text."""
    return [
        TextContent(type="text", text="a picture and a report"),
        ImageContent(type="image", data=_encoded(png()), mime_type="image/png"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///reports/q3.pdf", blob=_encoded(pdf("Q3")), mime_type="application/pdf"
            ),
        ),
    ]


def _encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


@server.tool()
def die() -> str:
    """Ends the server process in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
