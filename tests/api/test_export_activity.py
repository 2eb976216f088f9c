"""The tools a provider ran itself and the sources it cited: exported on their turn, imported back."""

from __future__ import annotations

import copy
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from conversations.domain import (
    ChatMessage,
    CompletionResponse,
    ProviderToolActivity,
    SourceCitation,
)
from conversations.models import Citation, Conversation, Message, ProviderToolCall
from conversations.selectors.export import conversation_lines
from conversations.services.history.imported_activity import (
    MAX_IMPORT_CITATIONS,
    MAX_IMPORT_PROVIDER_TOOL_CALLS,
)
from conversations.services.transcript.messages import append_messages
from conversations.services.transcript.provider_activity import record_provider_activity

pytestmark = pytest.mark.django_db

EXPORT = "/api/export/"
IMPORT = reverse("conversations:conversation-import")
ANSWER = "Python 3.13 came out in October 2024, with a new REPL."


def _searched(conversation, *, searches=1, sources=2):
    """A question and an answer that ran ``searches`` searches and cites ``sources`` sources."""
    _, answer = append_messages(
        conversation=conversation,
        messages=[ChatMessage.user("When did 3.13 come out?"), ChatMessage.assistant(ANSWER)],
    )
    response = CompletionResponse(
        content=ANSWER,
        model="m",
        provider="anthropic",
        provider_tool_calls=tuple(
            ProviderToolActivity(
                kind="web_search" if index % 2 == 0 else "code_execution",
                provider_id=f"srvtoolu_{index}",
                status="completed",
                query=f"python 3.13 release {index}" if index % 2 == 0 else "",
                code="print(3.13)" if index % 2 else "",
                result_summary=f"{index} results",
                payload={"type": "server_tool_use", "id": f"srvtoolu_{index}"},
            )
            for index in range(searches)
        ),
        citations=tuple(
            SourceCitation(
                start=index % 10,
                end=len(ANSWER) - index % 10,
                url=f"https://example.com/{index}",
                title=f"Source {index}" if index % 2 == 0 else "",
                source_id=str(index) if index % 3 == 0 else "",
            )
            for index in range(sources)
        ),
    )
    record_provider_activity(message=answer, response=response)
    return answer


def _lines(client):
    response = client.get(EXPORT)
    assert response.status_code == 200
    return [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]


def test_an_assistant_turn_is_exported_with_its_provider_tool_calls_and_citations_as_the_api_shows_them(
    api, demo_conversation
):
    _searched(demo_conversation, searches=2, sources=3)
    (line,) = _lines(api)
    user, assistant = line["messages"]
    assert "provider_tool_calls" not in user and "citations" not in user
    shown = api.get(
        reverse("conversations:conversation-messages", args=[demo_conversation.pk])
    ).json()["results"][1]
    assert assistant["provider_tool_calls"] == shown["provider_tool_calls"]
    assert assistant["citations"] == shown["citations"]
    assert assistant["provider_tool_calls"][0] == {
        "kind": "web_search",
        "provider": "anthropic",
        "id": "srvtoolu_0",
        "status": "completed",
        "query": "python 3.13 release 0",
        "code": "",
        "result_summary": "0 results",
    }
    assert assistant["citations"][1] == {
        "start": 1,
        "end": len(ANSWER) - 1,
        "url": "https://example.com/1",
        "title": "",
        "source_id": "",
    }


def _rows(conversation):
    calls = ProviderToolCall.objects.filter(message__conversation=conversation)
    cited = Citation.objects.filter(message__conversation=conversation)
    fields = ("message__position", "index", "kind", "provider", "provider_call_id", "status")
    return (
        list(calls.values_list(*fields, "query", "code", "result_summary")),
        list(cited.values_list("message__position", "index", "start_offset", "end_offset", "url")),
        list(cited.values_list("title", "source_id")),
    )


def test_an_exported_line_imports_again_with_the_same_rows_and_exports_the_same(
    api, user, demo_conversation
):
    _searched(demo_conversation, searches=3, sources=4)
    (line,) = _lines(api)
    response = api.post(IMPORT, line, format="json")
    assert response.status_code == 201, response.json()
    copy_ = Conversation.objects.get(pk=response.json()["id"])
    assert _rows(copy_) == _rows(demo_conversation)
    again = {line["id"]: line for line in map(json.loads, conversation_lines(user=user))}
    assert again[str(copy_.pk)]["messages"] == line["messages"]


def test_exporting_many_provider_tool_calls_and_citations_costs_the_same_queries_as_a_few(
    user, profile
):
    few = Conversation.objects.create(owner=user, title="few", profile=profile)
    _searched(few, searches=1, sources=1)
    with CaptureQueriesContext(connection) as light:
        assert len(list(conversation_lines(user=user, chunk_size=2))) == 1
    for index in range(4):
        many = Conversation.objects.create(owner=user, title=f"many {index}", profile=profile)
        _searched(many, searches=6, sources=9)
    with CaptureQueriesContext(connection) as heavy:
        lines = [json.loads(text) for text in conversation_lines(user=user, chunk_size=2)]
    assert len(heavy.captured_queries) == len(light.captured_queries) == 7
    assert [len(line["messages"][1]["citations"]) for line in lines] == [1, 9, 9, 9, 9]
    assert [len(line["messages"][1]["provider_tool_calls"]) for line in lines] == [1, 6, 6, 6, 6]


def _body(**assistant):
    return {
        "title": "Searched",
        "messages": [
            {"role": "user", "content": "When did 3.13 come out?"},
            {"role": "assistant", "content": ANSWER, **assistant},
        ],
    }


CALL = {
    "kind": "web_search",
    "provider": "openai",
    "id": "ws_1",
    "status": "completed",
    "query": "python 3.13",
    "code": "",
    "result_summary": "3 results",
}
CITED = {"start": 0, "end": 10, "url": "https://example.com", "title": "Ex", "source_id": ""}


def test_only_kind_provider_and_status_of_a_call_and_the_span_and_url_of_a_citation_are_required(
    api,
):
    body = _body(
        provider_tool_calls=[{"kind": "code_execution", "provider": "anthropic", "status": "ok"}],
        citations=[{"start": 3, "end": 3, "url": "https://example.com/a"}],
    )
    response = api.post(IMPORT, body, format="json")
    assert response.status_code == 201, response.json()
    (call,) = ProviderToolCall.objects.all()
    assert (call.kind, call.provider_call_id, call.query, call.provider_metadata) == (
        "code_execution",
        "",
        "",
        {},
    )
    (cited,) = Citation.objects.all()
    assert (cited.start_offset, cited.end_offset, cited.title, cited.source_id) == (3, 3, "", "")
    assert cited.message.role == Message.Role.ASSISTANT


def _with(item, **changes):
    changed = copy.deepcopy(item)
    for key, value in changes.items():
        if value is _DROP:
            changed.pop(key)
        else:
            changed[key] = value
    return changed


_DROP = object()
_CALLS = "/messages/1/provider_tool_calls"
_CITES = "/messages/1/citations"

INVALID = [
    (_body(provider_tool_calls={}), _CALLS, "invalid_provider_tool_calls"),
    (_body(citations="none"), _CITES, "invalid_citations"),
    (_body(provider_tool_calls=["web_search"]), f"{_CALLS}/0", "invalid_provider_tool_call"),
    (_body(citations=[CITED, 3]), f"{_CITES}/1", "invalid_citation"),
    (_body(provider_tool_calls=[_with(CALL, raw={})]), f"{_CALLS}/0/raw", "unknown_field"),
    (
        _body(provider_tool_calls=[_with(CALL, provider_metadata={})]),
        f"{_CALLS}/0/provider_metadata",
        "unknown_field",
    ),
    (_body(citations=[_with(CITED, start_offset=0)]), f"{_CITES}/0/start_offset", "unknown_field"),
    (
        _body(provider_tool_calls=[_with(CALL, kind="browse")]),
        f"{_CALLS}/0/kind",
        "unknown_provider_tool",
    ),
    (
        _body(provider_tool_calls=[_with(CALL, kind=1)]),
        f"{_CALLS}/0/kind",
        "invalid_provider_tool_call",
    ),
    (
        _body(provider_tool_calls=[_with(CALL, provider=_DROP)]),
        f"{_CALLS}/0/provider",
        "invalid_provider_tool_call",
    ),
    (
        _body(provider_tool_calls=[_with(CALL, status="")]),
        f"{_CALLS}/0/status",
        "invalid_provider_tool_call",
    ),
    (
        _body(provider_tool_calls=[_with(CALL, status="s" * 33)]),
        f"{_CALLS}/0/status",
        "invalid_provider_tool_call",
    ),
    (
        _body(provider_tool_calls=[_with(CALL, id="i" * 201)]),
        f"{_CALLS}/0/id",
        "invalid_provider_tool_call",
    ),
    (
        _body(provider_tool_calls=[_with(CALL, query=None)]),
        f"{_CALLS}/0/query",
        "invalid_provider_tool_call",
    ),
    (
        _body(provider_tool_calls=[CALL, _with(CALL, result_summary="r" * 501)]),
        f"{_CALLS}/1/result_summary",
        "invalid_provider_tool_call",
    ),
    (_body(citations=[_with(CITED, url=5)]), f"{_CITES}/0/url", "invalid_citation"),
    (_body(citations=[_with(CITED, url="")]), f"{_CITES}/0/url", "invalid_citation"),
    (_body(citations=[_with(CITED, url=_DROP)]), f"{_CITES}/0/url", "invalid_citation"),
    (_body(citations=[_with(CITED, start="0")]), f"{_CITES}/0/start", "invalid_citation"),
    (_body(citations=[_with(CITED, start=True)]), f"{_CITES}/0/start", "invalid_citation"),
    (_body(citations=[_with(CITED, start=-1)]), f"{_CITES}/0/start", "invalid_citation"),
    (_body(citations=[_with(CITED, end=1.5)]), f"{_CITES}/0/end", "invalid_citation"),
    (_body(citations=[_with(CITED, start=5, end=4)]), f"{_CITES}/0/end", "invalid_citation"),
    (_body(citations=[_with(CITED, end=len(ANSWER) + 1)]), f"{_CITES}/0/end", "invalid_citation"),
    (_body(citations=[_with(CITED, title=[])]), f"{_CITES}/0/title", "invalid_citation"),
    (
        _body(provider_tool_calls=[CALL] * (MAX_IMPORT_PROVIDER_TOOL_CALLS + 1)),
        _CALLS,
        "too_many_provider_tool_calls",
    ),
    (_body(citations=[CITED] * (MAX_IMPORT_CITATIONS + 1)), _CITES, "too_many_citations"),
    (
        {"messages": [{"role": "user", "content": "hi", "citations": [CITED]}]},
        "/messages/0/citations",
        "citations_not_allowed",
    ),
    (
        {"messages": [{"role": "system", "content": "hi", "provider_tool_calls": [CALL]}]},
        "/messages/0/provider_tool_calls",
        "provider_tool_calls_not_allowed",
    ),
]


@pytest.mark.parametrize(
    ("body", "pointer", "code"), INVALID, ids=[f"{c}-{i}" for i, (_, _, c) in enumerate(INVALID)]
)
def test_a_bad_provider_tool_call_or_citation_is_400_naming_it_and_nothing_is_stored(
    api, body, pointer, code
):
    response = api.post(IMPORT, body, format="json")
    assert response.status_code == 400, response.json()
    data = response.json()
    assert data["code"] == code
    assert [(e["pointer"], e["code"]) for e in data["errors"]] == [(pointer, code)]
    assert not Conversation.objects.exists()
    assert not Message.objects.exists()
    assert not ProviderToolCall.objects.exists() and not Citation.objects.exists()


def test_the_limits_themselves_are_accepted_and_empty_lists_are_allowed_on_any_role(api):
    body = _body(
        provider_tool_calls=[
            _with(CALL, id=f"ws_{i}") for i in range(MAX_IMPORT_PROVIDER_TOOL_CALLS)
        ],
        citations=[CITED] * MAX_IMPORT_CITATIONS,
    )
    body["messages"][0].update(provider_tool_calls=[], citations=None)
    response = api.post(IMPORT, body, format="json")
    assert response.status_code == 201, response.json()
    assert ProviderToolCall.objects.count() == MAX_IMPORT_PROVIDER_TOOL_CALLS
    assert list(Citation.objects.values_list("index", flat=True)) == list(
        range(MAX_IMPORT_CITATIONS)
    )


def test_a_nul_in_an_imported_citation_is_refused_by_the_api_naming_it(api):
    response = api.post(IMPORT, _body(citations=[_with(CITED, title="a\x00b")]), format="json")
    assert response.status_code == 400
    assert [e["pointer"] for e in response.json()["errors"]] == [f"{_CITES}/0/title"]
    assert not Citation.objects.exists()


def test_importing_many_provider_tool_calls_and_citations_costs_the_same_queries_as_one(api):
    counts = []
    for size in (1, 50):
        body = _body(
            provider_tool_calls=[_with(CALL, id=f"ws_{i}") for i in range(size)],
            citations=[CITED] * size,
        )
        with CaptureQueriesContext(connection) as queries:
            assert api.post(IMPORT, body, format="json").status_code == 201
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1]
    assert ProviderToolCall.objects.count() == Citation.objects.count() == 51
