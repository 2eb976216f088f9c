"""Gemini's own tools: Google Search grounding and code execution offered in its form,
read back from ``groundingMetadata`` and the ``executableCode``/``codeExecutionResult`` parts.

A grounded answer's candidate carries ``groundingMetadata``: the
``webSearchQueries`` it ran, the ``groundingChunks`` it found (``web``:
``uri``, ``title``) and the ``groundingSupports`` tying a ``segment`` of the
text (``startIndex``/``endIndex``, byte offsets in the UTF-8 text) to the
chunks by index. The search is one record (Gemini gives it no id) and each
support a citation per chunk. Code execution arrives as parts of the
answer: an ``executableCode`` part (``language``, ``code``) followed by its
``codeExecutionResult`` (``outcome``, ``output``); those parts, with the
text around them, are kept in the turn's metadata and replayed to this
adapter only. Grounding metadata is not part of the conversation's
contents, so nothing of it is sent back.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from conversations.domain import ProviderTool, ProviderToolActivity, SourceCitation

__all__ = [
    "CODE_PART_KEYS",
    "gemini_activity",
    "gemini_citations",
    "gemini_provider_tools",
    "replayed_parts",
    "stored_parts",
]

CODE_PART_KEYS: Final = frozenset({"executableCode", "codeExecutionResult"})
"""The keys of the parts code execution adds to an answer."""
_TOOLS: Final[Mapping[str, dict[str, Any]]] = {
    "web_search": {"google_search": {}},
    "code_execution": {"code_execution": {}},
}

Part = dict[str, Any]


def gemini_provider_tools(tools: Sequence[ProviderTool]) -> list[dict[str, Any]]:
    """The ``tools`` entries of the provider tools, in Gemini's form."""
    return [copy.deepcopy(_TOOLS[tool.kind]) for tool in tools if tool.kind in _TOOLS]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _grounding(candidate: Mapping[str, Any]) -> Mapping[str, Any]:
    found = candidate.get("groundingMetadata")
    return found if isinstance(found, Mapping) else {}


def _chunks(grounding: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The ``web`` object of each grounding chunk, in order (``{}`` for a chunk without one)."""
    chunks = grounding.get("groundingChunks")
    found: list[Mapping[str, Any]] = []
    for chunk in chunks if isinstance(chunks, list) else ():
        web = chunk.get("web") if isinstance(chunk, Mapping) else None
        found.append(web if isinstance(web, Mapping) else {})
    return found


def stored_parts(namespace: Any) -> list[Part] | None:
    """The parts a turn kept for replay (see :func:`replayed_parts`); ``None`` when none."""
    stored = namespace.get("parts") if isinstance(namespace, Mapping) else None
    if not isinstance(stored, list) or not stored:
        return None
    return [copy.deepcopy(dict(part)) for part in stored if isinstance(part, Mapping)]


def replayed_parts(parts: Sequence[Mapping[str, Any]]) -> list[Part] | None:
    """The parts to keep for replay when code ran: every part but thoughts and calls; else ``None``."""
    if not any(CODE_PART_KEYS & set(part) for part in parts):
        return None
    return [
        copy.deepcopy(dict(part))
        for part in parts
        if part.get("functionCall") is None and part.get("thought") is not True
    ]


def gemini_activity(
    candidate: Mapping[str, Any], parts: Sequence[Mapping[str, Any]]
) -> list[ProviderToolActivity]:
    """The code runs of the parts, in order, then the search of the grounding metadata."""
    found: list[ProviderToolActivity] = []
    pending: dict[str, Any] | None = None
    for part in [*parts, {}]:
        result = part.get("codeExecutionResult")
        if pending is not None and (result is not None or "executableCode" in part or not part):
            code = pending.get("executableCode")
            code = code if isinstance(code, Mapping) else {}
            outcome = result if isinstance(result, Mapping) else {}
            status = _text(outcome.get("outcome"))
            payload = {"executableCode": copy.deepcopy(dict(code))}
            if result is not None:
                payload["codeExecutionResult"] = copy.deepcopy(dict(outcome))
            found.append(
                ProviderToolActivity(
                    kind="code_execution",
                    provider_id=_text(code.get("id")),
                    status=(
                        "in_progress"
                        if result is None
                        else "completed"
                        if status == "OUTCOME_OK"
                        else "failed"
                    ),
                    code=_text(code.get("code")),
                    result_summary=_text(outcome.get("output")),
                    payload=payload,
                )
            )
            pending = None
        if "executableCode" in part:
            pending = dict(part)
    grounding = _grounding(candidate)
    queries = grounding.get("webSearchQueries")
    queries = [q for q in queries if isinstance(q, str)] if isinstance(queries, list) else []
    if queries or grounding.get("groundingChunks"):
        found.append(
            ProviderToolActivity(
                kind="web_search",
                provider_id="",
                status="completed",
                query="; ".join(queries),
                result_summary=f"{len(_chunks(grounding))} source(s)",
                payload={"groundingMetadata": copy.deepcopy(dict(grounding))},
            )
        )
    return found


def _char_offset(encoded: bytes, index: Any) -> int | None:
    """The character offset of a byte offset into ``encoded`` (``None`` when out of range)."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= len(encoded):
        return None
    return len(encoded[:index].decode("utf-8", errors="ignore"))


def gemini_citations(candidate: Mapping[str, Any], text: str) -> list[SourceCitation]:
    """One citation per (support, chunk) of the grounding metadata, as character offsets in ``text``."""
    grounding = _grounding(candidate)
    chunks = _chunks(grounding)
    supports = grounding.get("groundingSupports")
    encoded = text.encode("utf-8")
    citations: list[SourceCitation] = []
    for support in supports if isinstance(supports, list) else ():
        segment = support.get("segment") if isinstance(support, Mapping) else None
        if not isinstance(segment, Mapping):
            continue
        start = _char_offset(encoded, segment.get("startIndex", 0))
        end = _char_offset(encoded, segment.get("endIndex"))
        indices = support.get("groundingChunkIndices")
        if start is None or end is None or end < start or not isinstance(indices, list):
            continue
        for index in indices:
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(chunks):
                url = _text(chunks[index].get("uri"))
                if url:
                    citations.append(
                        SourceCitation(
                            start=start,
                            end=end,
                            url=url,
                            title=_text(chunks[index].get("title")),
                            source_id=str(index),
                        )
                    )
    return citations
