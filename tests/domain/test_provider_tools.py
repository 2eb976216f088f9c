"""Provider tools as values: the profile's list validated by item, records and citations checked."""

from __future__ import annotations

from typing import Any

import pytest

from conversations.domain import (
    CompletionResponse,
    InvalidArgumentError,
    ProviderTool,
    ProviderToolActivity,
    SourceCitation,
    parse_provider_tools,
)
from conversations.domain.provider_tools import SUMMARY_LIMIT


def test_names_and_a_file_search_object_parse_and_store_back_the_same() -> None:
    stored = ["web_search", {"type": "file_search", "vector_store_ids": ["vs_1", "vs_2"]}]
    tools = parse_provider_tools(stored)
    assert tools == (ProviderTool("web_search"), ProviderTool("file_search", ("vs_1", "vs_2")))
    assert [tool.to_json() for tool in tools] == stored
    assert parse_provider_tools(None) == () == parse_provider_tools([])


@pytest.mark.parametrize(
    ("value", "code", "field"),
    [
        ("web_search", "invalid_provider_tools", "provider_tools"),
        ({"type": "web_search"}, "invalid_provider_tools", "provider_tools"),
        (["telepathy"], "unknown_provider_tool", "provider_tools/0/type"),
        ([{"type": 3}], "unknown_provider_tool", "provider_tools/0/type"),
        ([7], "invalid_provider_tool", "provider_tools/0"),
        (["web_search", {"type": "web_search"}], "duplicate_provider_tool", "provider_tools/1"),
        (
            [{"type": "file_search"}],
            "missing_vector_store_ids",
            "provider_tools/0/vector_store_ids",
        ),
        (
            [{"type": "file_search", "vector_store_ids": "vs_1"}],
            "invalid_vector_store_ids",
            "provider_tools/0/vector_store_ids",
        ),
        (
            [{"type": "file_search", "vector_store_ids": ["vs_1", " "]}],
            "invalid_vector_store_ids",
            "provider_tools/0/vector_store_ids",
        ),
        (
            [{"type": "web_search", "vector_store_ids": ["vs_1"]}],
            "unexpected_vector_store_ids",
            "provider_tools/0/vector_store_ids",
        ),
        (
            [{"type": "web_search", "max_uses": 3}],
            "invalid_provider_tool",
            "provider_tools/0/max_uses",
        ),
    ],
)
def test_a_bad_list_is_refused_naming_the_item_and_its_field(
    value: Any, code: str, field: str
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        parse_provider_tools(value)
    assert (raised.value.code, raised.value.field) == (code, field)


def test_a_record_keeps_a_copy_of_its_payload_and_a_short_summary() -> None:
    payload = {"id": "ws_1"}
    record = ProviderToolActivity(
        kind="web_search",
        provider_id="ws_1",
        status="completed",
        result_summary="x" * 900,
        payload=payload,
    )
    payload["id"] = "changed"
    assert record.payload == {"id": "ws_1"}
    assert len(record.result_summary) == SUMMARY_LIMIT and record.result_summary.endswith("…")


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"kind": "telepathy"}, "kind"), ({"status": None}, "status"), ({"query": 3}, "query")],
)
def test_a_record_with_a_bad_value_is_refused(changes: dict[str, Any], field: str) -> None:
    values: dict[str, Any] = {"kind": "web_search", "provider_id": "", "status": "completed"}
    with pytest.raises(InvalidArgumentError) as raised:
        ProviderToolActivity(**{**values, **changes})
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"start": -1}, "start"),
        ({"end": True}, "end"),
        ({"start": 5, "end": 4}, "end"),
        ({"title": None}, "title"),
        ({"url": ""}, "url"),
    ],
)
def test_a_citation_with_a_bad_span_or_source_is_refused(
    changes: dict[str, Any], field: str
) -> None:
    values: dict[str, Any] = {"start": 0, "end": 4, "url": "https://example.com/"}
    with pytest.raises(InvalidArgumentError) as raised:
        SourceCitation(**{**values, **changes})
    assert (raised.value.code, raised.value.field) == ("invalid_citation", field)


def test_a_response_holds_only_records_and_citations() -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        CompletionResponse(content="", model="m", provider_tool_calls=[{"kind": "web_search"}])  # type: ignore[list-item]
    assert raised.value.field == "provider_tool_calls"
    with pytest.raises(InvalidArgumentError) as raised:
        CompletionResponse(content="", model="m", citations=["https://example.com/"])  # type: ignore[list-item]
    assert raised.value.field == "citations"
    citation = SourceCitation(start=0, end=0, url="https://example.com/")
    assert CompletionResponse(content="", model="m", citations=[citation]).citations == (citation,)
