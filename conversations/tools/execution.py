"""Checking a model's arguments, calling a tool, and turning what it returns into text.

The tool loop owns error handling: nothing here catches what a tool raises,
because only the loop knows what the model may be told (the message of a
``ToolError``, never the text of another exception) and what is logged and
stored for admins. The intended sequence::

    violations = validate_arguments(tool, call.arguments)   # explain these to the model
    if not violations:
        text = truncate_result(execute(tool, call.arguments, context))  # may raise

An ``async def`` tool is awaited by :func:`execute_async`; :func:`execute`
runs it to its end from synchronous code.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import json
import re
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from django.core.serializers.json import DjangoJSONEncoder

from conversations.exceptions import InvalidArgumentError

from .base import Tool
from .context import ToolContext
from .results import ToolResult

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "TRUNCATION_MARKER",
    "call_tool",
    "encode_result",
    "execute",
    "execute_async",
    "execute_result",
    "execute_result_async",
    "to_tool_result",
    "truncate_result",
    "validate_arguments",
]

DEFAULT_MAX_RESULT_BYTES = 50_000
"""The default bound of a tool result (the ``TOOL_RESULT_MAX_BYTES`` setting's default)."""

TRUNCATION_MARKER = "\n…[tool result truncated at {max_bytes} bytes]"
"""Appended to a cut result, so the model knows it is not seeing everything."""

# A model can send a megabyte string where an int was expected; jsonschema
# would quote all of it back. The model only needs to recognise its value.
_MAX_VIOLATION_CHARS = 300


def _shorten(message: str) -> str:
    if len(message) <= _MAX_VIOLATION_CHARS:
        return message
    return message[: _MAX_VIOLATION_CHARS - 1] + "…"


def validate_arguments(tool: Tool, arguments: Mapping[str, Any]) -> list[str]:
    """Human-readable violations of ``tool``'s schema by ``arguments``; empty when valid.

    Each is ``"<JSON path>: <message>"`` (``$`` is the arguments object),
    sorted, so the same input always gives the same text. When the schema is
    satisfied, the arguments are also checked against the function's
    signature, so a lax explicit schema cannot let through a call that would
    only fail inside Python with a ``TypeError``.
    """
    instance: Any = dict(arguments) if isinstance(arguments, Mapping) else arguments
    violations = sorted(
        _shorten(f"{error.json_path}: {error.message}")
        for error in tool.validator.iter_errors(instance)
    )
    if violations:
        return violations
    if not isinstance(instance, dict):
        return ["$: arguments must be a JSON object"]
    shape = tool.shape
    for name in sorted(set(instance) - shape.accepted):
        violations.append(_shorten(f"$: unexpected argument {name!r}"))
    for name in sorted(shape.required - set(instance)):
        violations.append(_shorten(f"$: missing required argument {name!r}"))
    return violations


def call_tool(
    tool: Tool,
    arguments: Mapping[str, Any],
    *,
    context: ToolContext | None = None,
    checked: bool = False,
) -> Any:
    """Validate, convert and call; return whatever the function returns.

    For an ``async def`` tool that is a coroutine, not yet started. Raises :class:`InvalidArgumentError` (code ``invalid_tool_arguments``)
    without calling the function when the arguments are invalid. Anything the
    function raises propagates unchanged. ``checked=True``: the caller has
    just had no violations from :func:`validate_arguments` for these very
    arguments (the tool loop checks every call before it runs), so they are
    not validated again.
    """
    violations = [] if checked else validate_arguments(tool, arguments)
    if violations:
        raise InvalidArgumentError(
            f'invalid arguments for tool "{tool.name}": ' + "; ".join(violations),
            code="invalid_tool_arguments",
        )
    # A copy: a tool mutating a list it was given must not change the
    # arguments recorded on the call (they are persisted and shown to admins).
    kwargs = copy.deepcopy(dict(arguments))
    for name, convert in tool.converters.items():
        if name in kwargs:
            kwargs[name] = convert(kwargs[name])
    for name in tool.shape.filled_with_none:
        kwargs.setdefault(name, None)
    if tool.shape.context_parameter is not None:
        kwargs[tool.shape.context_parameter] = context if context is not None else ToolContext()
    return tool.func(**kwargs)


def execute(
    tool: Tool,
    arguments: Mapping[str, Any],
    context: ToolContext | None = None,
    *,
    checked: bool = False,
) -> str:
    """:func:`call_tool`, then :func:`encode_result`: the text of the tool message.

    Not bounded in size: pass the text through :func:`truncate_result`.
    Nothing is caught; see the module docstring. An ``async def`` tool is run
    to its end with :func:`asgiref.sync.async_to_sync` (so not from a thread
    that runs an event loop: await :func:`execute_async` there). ``checked``
    as for :func:`call_tool`. The files of a :class:`ToolResult` are left
    out: :func:`execute_result` keeps them.
    """
    return execute_result(tool, arguments, context, checked=checked).text


async def execute_async(
    tool: Tool,
    arguments: Mapping[str, Any],
    context: ToolContext | None = None,
    *,
    checked: bool = False,
) -> str:
    """:func:`execute` for an event loop: an ``async def`` tool is awaited, any other called."""
    return (await execute_result_async(tool, arguments, context, checked=checked)).text


def execute_result(
    tool: Tool,
    arguments: Mapping[str, Any],
    context: ToolContext | None = None,
    *,
    checked: bool = False,
) -> ToolResult:
    """:func:`execute`, keeping the files: the text and files of the tool's answer.

    What the tool loop calls: a plain return value becomes a
    :class:`ToolResult` without files (see :func:`to_tool_result`).
    """
    if tool.is_async:
        return async_to_sync(execute_result_async)(tool, arguments, context, checked=checked)
    return to_tool_result(call_tool(tool, arguments, context=context, checked=checked))


async def execute_result_async(
    tool: Tool,
    arguments: Mapping[str, Any],
    context: ToolContext | None = None,
    *,
    checked: bool = False,
) -> ToolResult:
    """:func:`execute_result` for an event loop: an ``async def`` tool is awaited."""
    result = call_tool(tool, arguments, context=context, checked=checked)
    if inspect.isawaitable(result):
        result = await result
    return to_tool_result(result)


def to_tool_result(value: Any) -> ToolResult:
    """``value`` as a :class:`ToolResult`: itself, or its :func:`encode_result` text, no files."""
    if isinstance(value, ToolResult):
        return ToolResult(_valid_utf8(value.text), value.files)
    return ToolResult(encode_result(value))


class _ResultEncoder(DjangoJSONEncoder):
    """Django's encoder (dates, Decimal, UUID, lazy strings) plus Enums, sets, dataclasses."""

    def default(self, o: Any) -> Any:
        if isinstance(o, enum.Enum):
            return o.value
        if isinstance(o, set | frozenset):
            try:
                return sorted(o)  # deterministic text for the same set
            except TypeError:
                return list(o)
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return dataclasses.asdict(o)
        return super().default(o)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_utf8(text: str) -> str:
    # Lone surrogates (e.g. from os.fsdecode) are legal in a Python str but
    # not in UTF-8: PostgreSQL and every provider would reject the message.
    # Each becomes U+FFFD, the character Unicode reserves for "unrepresentable".
    return _LONE_SURROGATE.sub("\ufffd", text)


def encode_result(value: Any) -> str:
    """The text the model sees for a return value.

    A ``str`` is used as it is; anything else is JSON (``ensure_ascii=False``,
    compact), so ``None`` becomes ``"null"``, ``True`` ``"true"`` and a dict an
    object. Dates, Decimals, UUIDs, Enums, sets and dataclasses are encoded too.
    A :class:`ToolResult` is its text.
    Raises :class:`TypeError`/:class:`ValueError` for values JSON cannot hold
    (bytes, NaN, arbitrary objects): to the loop that is a failed tool.
    """
    if isinstance(value, str):
        text = value
    elif isinstance(value, ToolResult):
        text = value.text  # its files are not text: the loop stores them
    else:
        text = json.dumps(
            value,
            cls=_ResultEncoder,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )
    return _valid_utf8(text)


def truncate_result(text: str, max_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> str:
    """Bound ``text`` to ``max_bytes`` UTF-8 bytes, marker included, cut between characters.

    A text of at most ``max_bytes`` bytes is returned unchanged. A longer one
    keeps as many whole characters as fit before
    ``"\\n…[tool result truncated at <max_bytes> bytes]"``. When ``max_bytes``
    cannot even hold the marker, the text is cut without one.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"max_bytes must be a non-negative integer, got {max_bytes!r}")
    text = _valid_utf8(text)
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    marker = TRUNCATION_MARKER.format(max_bytes=max_bytes)
    room = max_bytes - len(marker.encode("utf-8"))
    if room < 0:
        marker, room = "", max_bytes
    # The slice may end inside a multi-byte character; "ignore" drops exactly
    # that incomplete tail, because everything before it is valid UTF-8.
    return data[:room].decode("utf-8", "ignore") + marker
