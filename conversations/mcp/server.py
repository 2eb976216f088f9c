"""The app's tools served over MCP (streamable HTTP, stateless JSON) at a URL the host mounts.

A Django view authenticates the request with the API's token authentication,
then hands it to the SDK's streamable-HTTP transport (stateless, JSON
answers) as an ASGI call. The SDK speaks the protocol; the tools, their
validation, error texts and truncation are the tool loop's. A tool that needs
approval is not offered: there is nobody to approve a call made over MCP.
Every call is recorded as an ``MCPCall``.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from conversations.conf import app_settings
from conversations.domain.storable import MAX_NAME_LENGTH
from conversations.domain.timing import milliseconds
from conversations.models import MCPCall, Profile
from conversations.selectors import available_tools
from conversations.services.approvals import approval_levels
from conversations.services.loop import (
    INVALID_ARGUMENTS,
    TOOL_ERROR,
    TOOL_FAILED,
    UNKNOWN_TOOL,
    tool_error_text,
)
from conversations.tools import Tool, ToolContext, ToolError, execute, truncate_result
from conversations.tools import validate_arguments as check_arguments

from . import SDK_MISSING_HINT, sdk_installed

__all__ = ["mcp_endpoint", "offered_tools"]

logger = logging.getLogger("conversations.mcp")


def _error(status: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse({"code": code, "detail": detail}, status=status)


def offered_tools() -> dict[str, Tool] | None:
    """The tools ``/mcp/`` serves: the profile's enabled tools that need no approval.

    ``None`` when no (active) profile is configured.
    """
    slug = app_settings().MCP_SERVER_PROFILE
    profile = Profile.objects.filter(slug=slug, is_active=True).first() if slug else None
    if profile is None:
        return None
    tools = available_tools(allowed=profile.allowed_tools)
    held = approval_levels(profile=profile, tools=tools.values())
    return {name: tool for name, tool in tools.items() if name not in held}


def call_and_record(
    *, user: Any, tools: Mapping[str, Tool], name: str, arguments: dict[str, Any]
) -> tuple[str, bool]:
    """Run one call for ``user`` and record it; the text the client gets and whether it failed."""
    started = time.monotonic()
    status, error = MCPCall.Status.SUCCEEDED, ""
    tool = tools.get(name)
    if tool is None:
        status, text = MCPCall.Status.REJECTED, tool_error_text(UNKNOWN_TOOL, name)
    elif violations := check_arguments(tool, arguments):
        status = MCPCall.Status.REJECTED
        text = tool_error_text(INVALID_ARGUMENTS, name, violations="; ".join(violations))
    else:
        try:
            text = execute(tool, arguments, ToolContext())
        except ToolError as exc:
            status, error = MCPCall.Status.FAILED, traceback.format_exc()
            text = tool_error_text(TOOL_ERROR, name, message=exc.message)
        except Exception:
            logger.exception("tool %s failed (called over MCP by user %s)", name, user.pk)
            status, error = MCPCall.Status.FAILED, traceback.format_exc()
            text = tool_error_text(TOOL_FAILED, name)
    text = truncate_result(text, app_settings().TOOL_RESULT_MAX_BYTES)
    MCPCall.objects.create(
        user=user,
        tool=name[:MAX_NAME_LENGTH],
        arguments=arguments,
        status=status,
        error=error,
        duration_ms=milliseconds(time.monotonic() - started),
        result_bytes=len(text.encode("utf-8")),
    )
    return text, status != MCPCall.Status.SUCCEEDED


async def _serve(
    request: HttpRequest, user: AbstractBaseUser, tools: Mapping[str, Tool]
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
        text, failed = await sync_to_async(call_and_record)(
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
    body = request.body
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
    status, headers, body = async_to_sync(_serve)(request, authenticated[0], tools)
    response = HttpResponse(body, status=status)
    for key, value in headers:
        name = key.decode("latin-1")
        if name.lower() not in {"content-length", "connection", "transfer-encoding"}:
            response[name] = value.decode("latin-1")
    return response
