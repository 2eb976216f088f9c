"""One tool call made over ``/mcp/``: run within the tool's timeout, recorded, answered safely.

The call runs as the loop's tool runner runs it: within ``@tool(timeout=...)``
or ``TOOL_TIMEOUT_SECONDS`` (an ``async def`` tool is cancelled then; a plain
one runs in a thread of its own that is dropped, its late result unused),
with the caller in its :class:`~conversations.tools.ToolContext`. Every call
writes its ``MCPCall`` row, its values made storable first (PostgreSQL
refuses NUL; no database stores a lone surrogate). Whatever else goes wrong
(the database, a bug) is never shown to the client in its own words: the
client gets a fixed sentence with a reference that the log line carries too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

from conversations.conf import app_settings, tool_timeout
from conversations.domain.storable import MAX_NAME_LENGTH, storable_json, storable_text
from conversations.domain.timing import milliseconds
from conversations.models import MCPCall
from conversations.services.loop import (
    INVALID_ARGUMENTS,
    TOOL_ERROR,
    TOOL_FAILED,
    UNKNOWN_TOOL,
    tool_error_text,
)
from conversations.services.loop.tool_calls import timed_out_text
from conversations.tools import Tool, ToolContext, ToolError, execute, truncate_result
from conversations.tools import execute_async as execute_awaited
from conversations.tools import validate_arguments as check_arguments

__all__ = ["CALL_FAILED", "call_and_record", "call_safely"]

logger = logging.getLogger("conversations.mcp")

CALL_FAILED = "Error: the call could not be completed (reference {reference})."
"""What an MCP client reads when a call broke outside its tool; the log has the detail."""


def _in_own_thread(work: Callable[[], str]) -> asyncio.Future[str]:
    """``work()`` in a daemon thread: a call past its timeout is dropped, not waited for.

    Not the event loop's default executor: the loop waits for that one when it
    closes, which would hold the request until the tool ends after all.
    """
    future: concurrent.futures.Future[str] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to the awaiting call, not lost in the thread
            future.set_exception(exc)
        finally:
            # The thread ends here: the connections a tool opened in it go too.
            connections.close_all()

    threading.Thread(target=run, name="conversations-mcp-tool", daemon=True).start()
    return asyncio.wrap_future(future)


async def _run_tool(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> str:
    seconds = tool.timeout if tool.timeout is not None else tool_timeout()
    if tool.is_async:
        running: asyncio.Future[str] = asyncio.ensure_future(
            execute_awaited(tool, arguments, context)
        )
    else:
        running = _in_own_thread(lambda: execute(tool, arguments, context))
    return await asyncio.wait_for(running, seconds)


async def call_and_record(
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
            text = await _run_tool(tool, arguments, ToolContext(user_id=user.pk))
        except TimeoutError:
            seconds = tool.timeout if tool.timeout is not None else tool_timeout()
            status = MCPCall.Status.FAILED
            text = error = timed_out_text(name, seconds)
        except ToolError as exc:
            status, error = MCPCall.Status.FAILED, traceback.format_exc()
            text = tool_error_text(TOOL_ERROR, name, message=exc.message)
        except Exception:
            logger.exception("tool %s failed (called over MCP by user %s)", name, user.pk)
            status, error = MCPCall.Status.FAILED, traceback.format_exc()
            text = tool_error_text(TOOL_FAILED, name)
    text = truncate_result(text, app_settings().TOOL_RESULT_MAX_BYTES)
    await sync_to_async(_record)(
        user=user,
        name=name,
        arguments=arguments,
        status=status,
        error=error,
        duration_ms=milliseconds(time.monotonic() - started),
        result_bytes=len(text.encode("utf-8", "surrogatepass")),
    )
    return text, status != MCPCall.Status.SUCCEEDED


def _record(
    *,
    user: Any,
    name: str,
    arguments: dict[str, Any],
    status: str,
    error: str,
    duration_ms: int,
    result_bytes: int,
) -> None:
    MCPCall.objects.create(
        user=user,
        tool=storable_text(name)[0][:MAX_NAME_LENGTH],
        arguments=storable_json(arguments)[0],
        status=status,
        error=storable_text(error)[0],
        duration_ms=duration_ms,
        result_bytes=result_bytes,
    )


async def call_safely(
    *, user: Any, tools: Mapping[str, Tool], name: str, arguments: dict[str, Any]
) -> tuple[str, bool]:
    """:func:`call_and_record`, with anything it raises answered by :data:`CALL_FAILED`.

    The log line names the exception's type and where it was raised, not its
    text: a database error quotes the statement, with the caller's arguments.
    """
    try:
        return await call_and_record(user=user, tools=tools, name=name, arguments=arguments)
    except Exception as exc:
        reference = uuid.uuid4().hex[:12]
        # Where, without the source lines: a line may spell out the values too.
        where = "\n".join(
            f"  {frame.filename}:{frame.lineno} in {frame.name}"
            for frame in traceback.extract_tb(exc.__traceback__)
        )
        logger.error(
            "MCP call of %r by user %s broke (reference %s): %s\n%s",
            storable_text(name)[0][:MAX_NAME_LENGTH],
            user.pk,
            reference,
            type(exc).__qualname__,
            where,
        )
        return CALL_FAILED.format(reference=reference), True
