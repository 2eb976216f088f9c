"""Real MCP servers (the SDK's server API, ``demo_server.py``) over stdio and streamable HTTP."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from conversations.models import MCPServer, MCPTransport
from conversations.tools import ToolError, registry, tool
from tests.processes import Process

SERVER_SCRIPT = str(Path(__file__).with_name("demo_server.py"))

pytest.importorskip("mcp", reason="the mcp extra is not installed")


@pytest.fixture
def http_server_url(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start ``demo_server.py`` over streamable HTTP; returns its URL."""
    started: list[Process] = []

    def start(**env: str) -> str:
        # Port 0: the server binds a port of the kernel's choosing and logs it.
        name = f"mcp-{len(started)}"
        process = Process(
            name,
            [sys.executable, SERVER_SCRIPT, "http", "0"],
            {**os.environ, **env},
            tmp_path / f"{name}.log",
        )
        started.append(process)
        return f"http://127.0.0.1:{process.listening_port()}/mcp"

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def stdio_server(db) -> MCPServer:
    """A trusted stdio server record starting ``demo_server.py``."""
    return MCPServer.objects.create(
        slug="local",
        name="Local demo",
        transport=MCPTransport.STDIO,
        command=sys.executable,
        args=[SERVER_SCRIPT, "stdio"],
        env_refs={"MCP_DEMO_SECRET": "env:TEST_MCP_SECRET"},
        trusted=True,
    )


@pytest.fixture
def http_server(db, http_server_url) -> MCPServer:
    """An untrusted streamable-HTTP server record, its process started."""
    return MCPServer.objects.create(
        slug="remote",
        name="Remote demo",
        transport=MCPTransport.STREAMABLE_HTTP,
        url=http_server_url(),
    )


@pytest.fixture
def served(settings, profile):
    """Three tools, one needing approval; the profile served over MCP allows them all."""
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @tool(registry=r)
        def divide(a: int, b: int) -> float:
            """Divide a by b."""
            if b == 0:
                raise ToolError("division by zero")
            return a / b

        @tool(registry=r)
        def crash() -> str:
            """Fails with a secret in its exception."""
            raise RuntimeError("SECRET-42 in the message")

        @tool(registry=r, requires_approval=True)
        def send_mail(to: str) -> str:
            """Needs a human's approval."""
            return "sent"

        settings.CONVERSATIONS = {"MCP_SERVER_PROFILE": profile.slug}
        yield r


@pytest.fixture
def token(user):
    """An API token of ``user``."""
    return Token.objects.create(user=user).key


@pytest.fixture
def url(live_server, settings):
    """The ``/mcp/`` endpoint of the live server (the test URLconf mounts it)."""
    settings.ROOT_URLCONF = "tests.mcp.urls"
    return live_server.url + reverse("conversations_mcp:endpoint")
