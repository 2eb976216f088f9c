"""The app's tools served over MCP (streamable HTTP, stateless JSON) at a URL the host mounts.

A Django view authenticates the request with the API's token authentication,
then hands it to the SDK's streamable-HTTP transport (stateless, JSON
answers) as an ASGI call. The SDK speaks the protocol; the tools, their
validation, error texts and truncation are the tool loop's. A tool that needs
approval is not offered: there is nobody to approve a call made over MCP.
Every call is recorded as an ``MCPCall``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.settings import api_settings

from conversations.api.errors import error_body
from conversations.api.throttling import MessageRateThrottle
from conversations.conf import app_settings
from conversations.models import Profile
from conversations.selectors import available_tools
from conversations.services.approvals import approval_levels
from conversations.services.loop import agent_tools, run_agent
from conversations.tools import Tool

from . import SDK_MISSING_HINT, sdk_installed
from .calls import call_safely

__all__ = ["mcp_endpoint", "offered_tools"]

logger = logging.getLogger("conversations.mcp")


def _error(status: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse(error_body(code, detail), status=status)


def offered_tools() -> dict[str, Tool] | None:
    """The tools ``/mcp/`` serves: the profile's enabled tools and agents that need no approval.

    ``None`` when no (active) profile is configured.
    """
    slug = app_settings().MCP_SERVER_PROFILE
    profile = Profile.objects.filter(slug=slug, is_active=True).first() if slug else None
    if profile is None:
        return None
    tools = available_tools(allowed=profile.allowed_tools)
    # Its agents too: each call is a run of the agent in a conversation of the caller's.
    tools.update(agent_tools(profile, run_child=run_agent))
    held = approval_levels(profile=profile, tools=tools.values())
    return {name: tool for name, tool in tools.items() if name not in held}


async def _serve(
    request: HttpRequest, body: bytes, user: AbstractBaseUser, tools: Mapping[str, Tool]
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    from mcp import types
    from mcp.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters))
                for t in tools.values()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text, failed = await call_safely(
            user=user, tools=tools, name=params.name, arguments=dict(params.arguments or {})
        )
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=failed)

    server: Server[Any] = Server(
        "django-llm-conversations", on_list_tools=list_tools, on_call_tool=call_tool
    )
    manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": "/",
        "raw_path": b"/",
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [
            (key.lower().encode("latin-1"), value.encode("latin-1"))
            for key, value in request.headers.items()
        ],
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host(), 0),
    }
    sent = False
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Mapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = int(message["status"])
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)


def _calls_a_tool(body: bytes) -> bool:
    """Whether the JSON-RPC message (or batch) in ``body`` calls a tool; the SDK judges the rest."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    messages = message if isinstance(message, list) else [message]
    return any(isinstance(m, dict) and m.get("method") == "tools/call" for m in messages)


def _throttled(request: HttpRequest, user: Any, body: bytes) -> float | None:
    """``None`` when the API's throttles let the request in, else the seconds to wait (0: unknown).

    The API's default throttles apply to every request; a tool call also
    counts against ``MESSAGE_THROTTLE_RATE``, as a posted message does: both
    start work on the server.
    """
    classes: list[Any] = list(api_settings.DEFAULT_THROTTLE_CLASSES)
    throttles: list[Any] = [throttle() for throttle in classes]
    if _calls_a_tool(body):
        throttles.append(MessageRateThrottle())
    # DRF's throttles read ``request.user``; this plain view authenticated it itself.
    request.user = user
    waits = [t.wait() for t in throttles if not t.allow_request(request, None)]
    if not waits:
        return None
    return max((w for w in waits if w is not None), default=0.0)


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """The MCP endpoint: token-authenticated, serving the configured profile's tools."""
    try:
        authenticated = TokenAuthentication().authenticate(request)  # type: ignore[arg-type]
    except AuthenticationFailed as exc:
        authenticated, reason = None, str(exc.detail)
    else:
        reason = "Authentication credentials were not provided."
    if authenticated is None:
        refused = _error(401, "not_authenticated", reason)
        refused["WWW-Authenticate"] = "Token"
        return refused
    if not sdk_installed():
        return _error(501, "mcp_unavailable", SDK_MISSING_HINT)
    tools = offered_tools()
    if tools is None:
        return _error(404, "mcp_not_configured", "No profile is served over MCP.")
    try:
        # Django refuses a body past DATA_UPLOAD_MAX_MEMORY_SIZE when it is first read.
        received = request.body
    except RequestDataTooBig:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _error(
            413, "content_too_large", f"The request body is larger than the {limit} bytes accepted."
        )
    user = authenticated[0]
    wait = _throttled(request, user, received)
    if wait is not None:
        refused = _error(429, "throttled", "Request was throttled.")
        if wait:
            refused["Retry-After"] = str(int(wait))
        return refused
    status, headers, body = async_to_sync(_serve)(request, received, user, tools)
    response = HttpResponse(body, status=status)
    for key, value in headers:
        name = key.decode("latin-1")
        if name.lower() not in {"content-length", "connection", "transfer-encoding"}:
            response[name] = value.decode("latin-1")
    return response
