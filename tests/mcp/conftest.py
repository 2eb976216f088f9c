"""Real MCP servers (the SDK's server API, ``demo_server.py``) over stdio and streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conversations.models import MCPServer, MCPTransport
from tests.processes import free_port

SERVER_SCRIPT = str(Path(__file__).with_name("demo_server.py"))

pytest.importorskip("mcp", reason="the mcp extra is not installed")


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the MCP demo server exited at startup")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("the MCP demo server did not start listening")


@pytest.fixture
def http_server_url() -> Iterator[Callable[..., str]]:
    """Start ``demo_server.py`` over streamable HTTP; returns its URL."""
    started: list[subprocess.Popen[bytes]] = []

    def start(**env: str) -> str:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, SERVER_SCRIPT, "http", str(port)],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(process)
        _wait_listening(port, process)
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


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
