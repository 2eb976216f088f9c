"""Tools the provider runs itself (web search, code execution, file search), and the sources it cites.

A profile asks for them as :class:`ProviderTool` values (validated here, from
the JSON list ``Profile.provider_tools`` stores); an adapter offers each in
its vendor's own form or refuses it. What the provider did with them comes
back in the :class:`~conversations.domain.CompletionResponse` as
:class:`ProviderToolActivity` records, and the passages of the answer it
backed with a source as :class:`SourceCitation` records: typed data, not text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from conversations.exceptions import InvalidArgumentError

__all__ = [
    "PROVIDER_TOOL_KINDS",
    "ProviderTool",
    "ProviderToolActivity",
    "SourceCitation",
    "parse_provider_tools",
]

PROVIDER_TOOL_KINDS: Final = ("web_search", "code_execution", "file_search")
"""The tools a provider may run for a profile, by the names ``Profile.provider_tools`` uses."""

SUMMARY_LIMIT: Final = 500
"""The longest result summary kept, in characters (the raw payload keeps the rest)."""


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


@dataclass(frozen=True, slots=True)
class ProviderTool:
    """One tool the provider runs itself; ``file_search`` needs the vector stores it searches."""

    kind: str
    """One of :data:`PROVIDER_TOOL_KINDS`."""
    vector_store_ids: tuple[str, ...] = ()
    """For ``file_search`` only: the ids of the provider's vector stores to search."""

    def __post_init__(self) -> None:
        if self.kind not in PROVIDER_TOOL_KINDS:
            raise InvalidArgumentError(
                f"unknown provider tool {self.kind!r}; known: {', '.join(PROVIDER_TOOL_KINDS)}",
                code="unknown_provider_tool",
                field="type",
            )
        ids = self.vector_store_ids
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise InvalidArgumentError(
                f"vector_store_ids must be a list of ids, got {_type_name(ids)}",
                code="invalid_vector_store_ids",
                field="vector_store_ids",
            )
        ids = tuple(ids)
        if not all(isinstance(item, str) and item.strip() for item in ids):
            raise InvalidArgumentError(
                "vector_store_ids must hold non-empty strings",
                code="invalid_vector_store_ids",
                field="vector_store_ids",
            )
        if self.kind == "file_search" and not ids:
            raise InvalidArgumentError(
                "file_search needs at least one vector store id",
                code="missing_vector_store_ids",
                field="vector_store_ids",
            )
        if self.kind != "file_search" and ids:
            raise InvalidArgumentError(
                f"{self.kind} takes no vector_store_ids",
                code="unexpected_vector_store_ids",
                field="vector_store_ids",
            )
        object.__setattr__(self, "vector_store_ids", ids)

    def to_json(self) -> str | dict[str, Any]:
        """The stored form: the bare name, or an object for ``file_search``."""
        if self.kind == "file_search":
            return {"type": self.kind, "vector_store_ids": list(self.vector_store_ids)}
        return self.kind


def _one_tool(item: Any) -> ProviderTool:
    if isinstance(item, str):
        return ProviderTool(item)
    if isinstance(item, Mapping):
        unknown = sorted(set(item) - {"type", "vector_store_ids"})
        if unknown:
            raise InvalidArgumentError(
                f"unknown key(s) {', '.join(map(str, unknown))}; a provider tool has "
                "type and (file_search only) vector_store_ids",
                code="invalid_provider_tool",
                field=str(unknown[0]),
            )
        kind = item.get("type")
        return ProviderTool(
            kind if isinstance(kind, str) else repr(kind), item.get("vector_store_ids") or ()
        )
    raise InvalidArgumentError(
        f"a provider tool is a name or an object, got {_type_name(item)}",
        code="invalid_provider_tool",
    )


def parse_provider_tools(value: Any) -> tuple[ProviderTool, ...]:
    """The provider tools of a stored list: names (``"web_search"``) or objects
    (``{"type": "file_search", "vector_store_ids": ["vs_1"]}``); ``None`` is none.

    Raises :class:`InvalidArgumentError` whose ``field`` is the item's index
    (``provider_tools/1/vector_store_ids``); a kind listed twice is refused.
    """
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidArgumentError(
            f"provider_tools must be a list, got {_type_name(value)}",
            code="invalid_provider_tools",
            field="provider_tools",
        )
    tools: list[ProviderTool] = []
    for index, item in enumerate(value):
        try:
            found = _one_tool(item)
        except InvalidArgumentError as exc:
            raise exc.at(index).at("provider_tools") from None
        if any(tool.kind == found.kind for tool in tools):
            raise InvalidArgumentError(
                f"{found.kind} is listed twice",
                code="duplicate_provider_tool",
                field=f"provider_tools/{index}",
            )
        tools.append(found)
    return tuple(tools)


def summary(text: str) -> str:
    """``text`` cut to :data:`SUMMARY_LIMIT` characters."""
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"


@dataclass(frozen=True, slots=True)
class ProviderToolActivity:
    """One call of a tool the provider ran while answering (a search, a piece of code)."""

    kind: str
    """One of :data:`PROVIDER_TOOL_KINDS`."""
    provider_id: str
    """The provider's id of the call (``""`` when it gives none, as Gemini's grounding)."""
    status: str
    """``completed``, ``failed``, ``in_progress``... as the provider says it, in lower case."""
    query: str = ""
    """The search query (queries joined by ``"; "``)."""
    code: str = ""
    """The code it ran."""
    result_summary: str = ""
    """A short account of the result (how many sources, the output), at most 500 characters."""
    payload: Mapping[str, Any] = field(default_factory=dict)
    """The provider's raw items for this call, exactly as received."""

    def __post_init__(self) -> None:
        if self.kind not in PROVIDER_TOOL_KINDS:
            raise InvalidArgumentError(
                f"unknown provider tool {self.kind!r}", code="unknown_provider_tool", field="kind"
            )
        for name in ("provider_id", "status", "query", "code", "result_summary"):
            if not isinstance(getattr(self, name), str):
                raise InvalidArgumentError(
                    f"{name} must be a string", code="invalid_provider_tool_call", field=name
                )
        object.__setattr__(self, "result_summary", summary(self.result_summary))
        object.__setattr__(self, "payload", dict(self.payload))


@dataclass(frozen=True, slots=True)
class SourceCitation:
    """A passage of the answer's text (``content[start:end]``) backed by a source."""

    start: int
    """Offset of the passage's first character in the answer's text."""
    end: int
    """Offset just past its last character (``start <= end``)."""
    url: str
    """The source's address."""
    title: str = ""
    """The source's title, when the provider gives one."""
    source_id: str = ""
    """The provider's id of the source, when it has one (Gemini: the grounding chunk's index)."""

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(
                    f"{name} must be an integer >= 0, got {value!r}",
                    code="invalid_citation",
                    field=name,
                )
        if self.end < self.start:
            raise InvalidArgumentError(
                "a citation ends before it starts", code="invalid_citation", field="end"
            )
        for name in ("url", "title", "source_id"):
            if not isinstance(getattr(self, name), str):
                raise InvalidArgumentError(
                    f"{name} must be a string", code="invalid_citation", field=name
                )
        if not self.url:
            raise InvalidArgumentError(
                "a citation needs a url", code="invalid_citation", field="url"
            )
