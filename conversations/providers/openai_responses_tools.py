"""The Responses API's own tools: offered as ``web_search``, ``file_search`` and
``code_interpreter``, read back from their output items and ``url_citation`` annotations.

The API answers a turn that used them with one output item per call
(``web_search_call`` with its ``action``, ``file_search_call`` with its
``queries``, ``code_interpreter_call`` with its ``code`` and ``outputs``) and
marks the sources of the text as ``url_citation`` annotations on each
``output_text`` part (``start_index``/``end_index`` within that part's text).
The items are kept exactly as received in the turn's metadata (``"items"``,
in their order among the reasoning items) and replayed to this adapter only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from conversations.domain import ProviderTool, ProviderToolActivity, SourceCitation

__all__ = [
    "TOOL_ITEM_KINDS",
    "responses_activity",
    "responses_citations",
    "responses_provider_tools",
]

TOOL_ITEM_KINDS: Final[Mapping[str, str]] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
}
"""Output item type -> the provider tool kind it is a call of."""

Item = dict[str, Any]


def responses_provider_tools(tools: Sequence[ProviderTool]) -> list[Item]:
    """The ``tools`` entries of the provider tools, in the Responses API's own form."""
    result: list[Item] = []
    for tool in tools:
        match tool.kind:
            case "web_search":
                result.append({"type": "web_search"})
            case "file_search":
                result.append(
                    {"type": "file_search", "vector_store_ids": list(tool.vector_store_ids)}
                )
            case "code_execution":
                result.append({"type": "code_interpreter", "container": {"type": "auto"}})
    return result


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _web_search(item: Mapping[str, Any]) -> tuple[str, str]:
    action = item.get("action")
    action = action if isinstance(action, Mapping) else {}
    queries = action.get("queries")
    listed = [q for q in queries if isinstance(q, str) and q] if isinstance(queries, list) else []
    query = _text(action.get("query")) or "; ".join(listed)
    match action.get("type"):
        case "search":
            sources = action.get("sources")
            count = len(sources) if isinstance(sources, list) else 0
            return query, f"{count} source(s)" if count else "searched"
        case "open_page":
            return query, f"opened {_text(action.get('url'))}".strip()
        case "find_in_page":
            return _text(action.get("pattern")), f"found in {_text(action.get('url'))}".strip()
    return query, ""


def _code(item: Mapping[str, Any]) -> str:
    outputs = item.get("outputs")
    logs = [
        _text(output.get("logs"))
        for output in (outputs if isinstance(outputs, list) else ())
        if isinstance(output, Mapping) and output.get("type") == "logs"
    ]
    return "\n".join(log for log in logs if log)


def responses_activity(items: Iterable[Mapping[str, Any]]) -> list[ProviderToolActivity]:
    """One record per provider tool item of the output, in order."""
    found: list[ProviderToolActivity] = []
    for item in items:
        kind = TOOL_ITEM_KINDS.get(_text(item.get("type")))
        if kind is None:
            continue
        query, code, result = "", "", ""
        if kind == "web_search":
            query, result = _web_search(item)
        elif kind == "file_search":
            queries = item.get("queries")
            query = (
                "; ".join(q for q in queries if isinstance(q, str))
                if isinstance(queries, list)
                else ""
            )
            results = item.get("results")
            result = f"{len(results)} result(s)" if isinstance(results, list) else ""
        else:
            code, result = _text(item.get("code")), _code(item)
        found.append(
            ProviderToolActivity(
                kind=kind,
                provider_id=_text(item.get("id")),
                status=_text(item.get("status")).lower() or "completed",
                query=query,
                code=code,
                result_summary=result,
                payload=copy.deepcopy(dict(item)),
            )
        )
    return found


def _index(value: Any, limit: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        return None
    return value


def responses_citations(items: Iterable[Mapping[str, Any]]) -> list[SourceCitation]:
    """The ``url_citation`` annotations of the output's text, as offsets into the joined text.

    The answer's text is every ``output_text`` and ``refusal`` part of every
    ``message`` item joined in order, so a part's offsets are shifted by the
    length of the text before it; an annotation whose span falls outside its
    part is dropped.
    """
    citations: list[SourceCitation] = []
    offset = 0
    for item in items:
        content = item.get("content") if item.get("type") == "message" else None
        for part in content if isinstance(content, list) else ():
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            text = _text(part.get("text" if kind == "output_text" else "refusal"))
            if kind not in ("output_text", "refusal"):
                continue
            annotations = part.get("annotations") if kind == "output_text" else None
            for note in annotations if isinstance(annotations, list) else ():
                if not isinstance(note, Mapping) or note.get("type") != "url_citation":
                    continue
                start = _index(note.get("start_index"), len(text))
                end = _index(note.get("end_index"), len(text))
                url = _text(note.get("url"))
                if start is None or end is None or end < start or not url:
                    continue
                citations.append(
                    SourceCitation(
                        start=offset + start,
                        end=offset + end,
                        url=url,
                        title=_text(note.get("title")),
                    )
                )
            offset += len(text)
    return citations
