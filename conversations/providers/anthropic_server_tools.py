"""Anthropic's server tools: web search and code execution offered in its form, read back from
``server_tool_use`` and ``*_tool_result`` blocks, and the ``citations`` of its text blocks.

A turn that used them holds, among its text blocks, a ``server_tool_use``
block per call (its ``id``, the tool's ``name`` and ``input``: the query or
the code) and a result block answering it by ``tool_use_id``
(``web_search_tool_result``, ``code_execution_tool_result``,
``bash_code_execution_tool_result``...; an ``*_error`` content is a failed
call). Text blocks backed by a search carry ``citations``
(``web_search_result_location``: ``url``, ``title``, ``cited_text``).
Anthropic asks for such a turn to be sent back as it came, so the whole
content (every block but the ``tool_use`` ones, which are built from the
stored calls) is kept in the turn's metadata and replayed to this adapter only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from conversations.domain import ProviderTool, ProviderToolActivity, SourceCitation

__all__ = [
    "CODE_EXECUTION_BETA",
    "METADATA_KEY",
    "anthropic_activity",
    "anthropic_citations",
    "anthropic_server_tools",
    "has_server_blocks",
]

METADATA_KEY: Final = "anthropic"
"""The Anthropic adapter's namespace inside ``provider_metadata``."""
CODE_EXECUTION_BETA: Final = "code-execution-2025-08-25"
"""The ``anthropic-beta`` flag the code execution tool needs (the configuration adds it)."""
_TOOLS: Final[Mapping[str, dict[str, str]]] = {
    "web_search": {"type": "web_search_20250305", "name": "web_search"},
    "code_execution": {"type": "code_execution_20250825", "name": "code_execution"},
}
_CALL_BLOCK: Final = "server_tool_use"
_KINDS: Final[Mapping[str, str]] = {
    "web_search": "web_search",
    "code_execution": "code_execution",
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
}
"""A ``server_tool_use`` block's name -> the provider tool kind."""

Block = dict[str, Any]


def anthropic_server_tools(tools: Sequence[ProviderTool]) -> list[Block]:
    """The ``tools`` entries of the provider tools, as Anthropic's versioned server tools."""
    return [dict(_TOOLS[tool.kind]) for tool in tools if tool.kind in _TOOLS]


def _is_result(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    return isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result"


def has_server_blocks(blocks: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a response's content holds a server tool's call or result."""
    return any(block.get("type") == "server_tool_use" or _is_result(block) for block in blocks)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _outcome(kind: str, content: Any) -> tuple[str, str]:
    """The status and summary of a result block's ``content``."""
    if isinstance(content, list):
        results = [item for item in content if isinstance(item, Mapping)]
        return "completed", f"{len(results)} result(s)"
    if not isinstance(content, Mapping):
        return "completed", ""
    if _text(content.get("type")).endswith("_error"):
        return "failed", _text(content.get("error_code"))
    if kind == "code_execution":
        output = _text(content.get("stdout")) or _text(content.get("stderr"))
        code = content.get("return_code")
        status = "failed" if isinstance(code, int) and code != 0 else "completed"
        return status, output
    return "completed", ""


def anthropic_activity(blocks: Sequence[Mapping[str, Any]]) -> list[ProviderToolActivity]:
    """One record per ``server_tool_use`` block, with the result block that answers it."""
    results = {_text(block.get("tool_use_id")): block for block in blocks if _is_result(block)}
    found: list[ProviderToolActivity] = []
    for block in blocks:
        if block.get("type") != _CALL_BLOCK:
            continue
        kind = _KINDS.get(_text(block.get("name")))
        if kind is None:
            continue
        call_id = _text(block.get("id"))
        arguments = block.get("input")
        arguments = arguments if isinstance(arguments, Mapping) else {}
        result = results.get(call_id)
        status, summary = (
            ("in_progress", "") if result is None else _outcome(kind, result.get("content"))
        )
        payload: dict[str, Any] = {"call": copy.deepcopy(dict(block))}
        if result is not None:
            payload["result"] = copy.deepcopy(dict(result))
        found.append(
            ProviderToolActivity(
                kind=kind,
                provider_id=call_id,
                status=status,
                query=_text(arguments.get("query")),
                code=_text(arguments.get("code")) or _text(arguments.get("command")),
                result_summary=summary,
                payload=payload,
            )
        )
    return found


def anthropic_citations(blocks: Sequence[Mapping[str, Any]]) -> list[SourceCitation]:
    """The citations of the text blocks: each spans its whole block in the joined text."""
    citations: list[SourceCitation] = []
    offset = 0
    for block in blocks:
        if block.get("type") != "text":
            continue
        text = str(block.get("text") or "")
        notes = block.get("citations")
        for note in notes if isinstance(notes, list) else ():
            url = _text(note.get("url")) if isinstance(note, Mapping) else ""
            if url:
                citations.append(
                    SourceCitation(
                        start=offset,
                        end=offset + len(text),
                        url=url,
                        title=_text(note.get("title")),
                    )
                )
        offset += len(text)
    return citations
