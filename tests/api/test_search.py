"""GET /api/search/: contents, tool names, argument values and results; filters; ownership.

Every test here runs on SQLite (FTS5) and on PostgreSQL (tsvector + GIN).
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from conversations.domain import ChatMessage, ToolCall
from conversations.exceptions import ConfigurationError
from conversations.models import Conversation, Message, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.selectors.search import highlight, search_config
from conversations.services.history.retention import redact_conversation
from conversations.services.transcript.messages import MessageDetails, append_messages
from conversations.services.transcript.search_index import rebuild_search_index

pytestmark = pytest.mark.django_db

SEARCH = "/api/search/"


def _stock_talk(conversation, *, status=ToolCallRow.Status.SUCCEEDED):
    """0 user, 1 assistant calling lookup_stock(ticker=zyxcorp), 2 its result, 3 the answer."""
    rows = append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("What does the <b>stock</b> market say?"),
            ChatMessage.assistant_tool_calls(
                [ToolCall(id="c1", name="lookup_stock", arguments={"ticker": "zyxcorp", "n": 3})]
            ),
            ChatMessage.tool_result("c1", "quartzite trades at 42"),
            ChatMessage.assistant("Quartzite is steady."),
        ],
        details=[None, MessageDetails(model="gpt-test"), None, MessageDetails(model="gpt-test")],
    )
    ToolCallRow.objects.filter(conversation=conversation).update(status=status)
    return rows


@pytest.fixture
def talk(demo_conversation):
    return _stock_talk(demo_conversation)


def _found(api, **params):
    response = api.get(SEARCH, params)
    assert response.status_code == 200, response.json()
    return response.json()


def _positions(body):
    return sorted(r["position"] for r in body["results"])


def test_a_word_of_a_content_is_found_with_its_conversation(api, talk, demo_conversation):
    body = _found(api, q="market")
    (result,) = body["results"]
    assert result["position"] == 0 and result["role"] == "user"
    assert result["conversation"] == {"id": str(demo_conversation.pk), "title": "Weather talk"}
    assert result["rank"] > 0
    assert "<mark>market</mark>" in result["snippet"]
    assert body["next"] is None and body["previous"] is None


def test_a_snippet_escapes_the_text_it_highlights(api, talk):
    (result,) = _found(api, q="market")["results"]
    # SQLite keeps the tag as escaped text; PostgreSQL's parser drops tags from headlines.
    assert "<b>" not in result["snippet"] and "stock" in result["snippet"]
    assert highlight("a < b \ue000c\ue001") == "a &lt; b <mark>c</mark>"


def test_an_argument_value_finds_the_calling_message(api, talk):
    assert _positions(_found(api, q="zyxcorp")) == [1]
    assert _positions(_found(api, q="3 zyxcorp")) == [1]


def test_every_call_of_a_turn_finds_its_message_as_a_rebuild_does(api, demo_conversation):
    # A turn's calls are stored by one INSERT: the index must hold the words of each.
    calls = [
        ToolCall(id=f"c{i}", name=f"probe_{word}", arguments={"place": word, "n": i})
        for i, word in enumerate(["basalt", "gneiss", "schist"])
    ]
    append_messages(
        conversation=demo_conversation,
        messages=[ChatMessage.user("Survey."), ChatMessage.assistant_tool_calls(calls)],
    )
    words = ["basalt", "gneiss", "schist", "probe_gneiss", "probe_schist", "2"]

    def found() -> list[list[int]]:
        return [_positions(_found(api, q=word)) for word in words]

    assert found() == [[1]] * len(words)
    assert _found(api, q="place")["results"] == []
    rebuild_search_index()
    assert found() == [[1]] * len(words)


@pytest.mark.postgres
def test_postgres_rewrites_a_turns_message_once_for_all_its_calls(demo_conversation):
    # A turn's calls are one INSERT: the message's document is written once, not once per call.
    append_messages(conversation=demo_conversation, messages=[ChatMessage.user("Survey.")])
    before = _message_updates()
    calls = [ToolCall(id=f"c{i}", name="probe", arguments={"n": i}) for i in range(20)]
    append_messages(
        conversation=demo_conversation, messages=[ChatMessage.assistant_tool_calls(calls)]
    )
    assert _message_updates() - before == 1


def _message_updates() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'conversations_message'"
        )
        return int(cursor.fetchone()[0])


def test_argument_keys_are_not_searched(api, talk):
    assert _found(api, q="ticker")["results"] == []


def test_a_tool_name_finds_the_call_and_its_result(api, talk):
    assert _positions(_found(api, q="lookup_stock")) == [1, 2]


def test_a_word_of_a_tool_result_is_found(api, talk):
    assert _positions(_found(api, q="quartzite")) == [2, 3]
    assert _positions(_found(api, q="quartzite 42")) == [2]


def test_every_word_must_match(api, talk):
    assert _found(api, q="quartzite market")["results"] == []


def test_another_users_messages_are_never_found(api, other_api, talk, other_users_conversation):
    _stock_talk(other_users_conversation)
    assert len(_found(api, q="quartzite")["results"]) == 2
    ids = {r["conversation"]["id"] for r in _found(other_api, q="quartzite")["results"]}
    assert ids == {str(other_users_conversation.pk)}


def test_an_evaluation_conversation_is_not_found_by_its_owner(api, talk, user, profile):
    evaluation = Conversation.objects.create(
        owner=user, profile=profile, kind=Conversation.Kind.EVALUATION
    )
    _stock_talk(evaluation)
    ids = {r["conversation"]["id"] for r in _found(api, q="quartzite")["results"]}
    assert ids == {str(talk[0].conversation_id)}


def test_filters_by_role_tool_status_model_and_profile(api, talk, user, profile):
    plain = Conversation.objects.create(owner=user, title="No profile")
    append_messages(conversation=plain, messages=[ChatMessage.user("quartzite again")])
    assert len(_found(api, q="quartzite")["results"]) == 3
    assert _positions(_found(api, q="quartzite", role="tool")) == [2]
    assert _positions(_found(api, q="quartzite", tool="lookup_stock")) == [2]
    assert _positions(_found(api, q="quartzite", tool="other")) == []
    assert _positions(_found(api, q="quartzite", status="succeeded")) == [2]
    assert _positions(_found(api, q="quartzite", status="failed")) == []
    assert _positions(_found(api, q="quartzite", model="gpt-test")) == [3]
    assert len(_found(api, q="quartzite", profile="demo")["results"]) == 2
    assert [r["conversation"]["title"] for r in _found(api, q="again")["results"]] == ["No profile"]


def test_the_model_filter_also_matches_the_run_model(api, demo_conversation):
    run = Run.objects.create(
        conversation=demo_conversation, max_iterations=1, model="run-model", status="completed"
    )
    append_messages(conversation=demo_conversation, run=run, messages=[ChatMessage.user("basalt")])
    assert len(_found(api, q="basalt", model="run-model")["results"]) == 1


def test_filters_by_creation_time(api, talk, demo_conversation):
    Message.objects.filter(conversation=demo_conversation, position=2).update(
        created_at=timezone.now() - timedelta(days=10)
    )
    week_ago = (timezone.now() - timedelta(days=7)).date().isoformat()
    assert _positions(_found(api, q="quartzite", **{"from": week_ago})) == [3]
    assert _positions(_found(api, q="quartzite", to=week_ago)) == [2]
    moment = (timezone.now() - timedelta(days=7)).isoformat()
    assert _positions(_found(api, q="quartzite", to=moment)) == [2]


def test_pages_follow_by_cursor(api, demo_conversation):
    append_messages(
        conversation=demo_conversation,
        messages=[ChatMessage.user(f"granite number {i}") for i in range(5)],
    )
    first = _found(api, q="granite", page_size=2)
    assert len(first["results"]) == 2 and first["previous"] is None
    second = api.get(first["next"]).json()
    third = api.get(second["next"]).json()
    assert len(third["results"]) == 1 and third["next"] is None
    seen = [r["id"] for page in (first, second, third) for r in page["results"]]
    assert len(set(seen)) == 5
    assert api.get(second["previous"]).json()["results"] == first["results"]


@pytest.mark.parametrize(
    ("params", "parameter", "code"),
    [
        ({}, "q", "required"),
        ({"q": "?!*"}, "q", "no_words"),
        ({"q": "a", "role": "robot"}, "role", "invalid_choice"),
        ({"q": "a", "status": "fine"}, "status", "invalid_choice"),
        ({"q": "a", "from": "yesterday"}, "from", "invalid"),
        ({"q": "a", "cursor": "bm90LWpzb24="}, "cursor", "invalid_cursor"),
        ({"q": "a", "cursor": "eyJvIjogLTF9"}, "cursor", "invalid_cursor"),
        ({"q": "a", "page_size": "0"}, "page_size", "min_value"),
    ],
)
def test_bad_parameters_answer_400(api, params, parameter, code):
    response = api.get(SEARCH, params)
    assert response.status_code == 400
    assert [(e["parameter"], e["code"]) for e in response.json()["errors"]] == [(parameter, code)]


def test_fts_operators_in_the_query_are_plain_words(api, demo_conversation):
    append_messages(conversation=demo_conversation, messages=[ChatMessage.user("NEAR OR NOT")])
    assert len(_found(api, q='NOT "near" OR*')["results"]) == 1


def test_the_index_follows_redaction(api, talk, demo_conversation):
    redact_conversation(conversation=demo_conversation)
    assert _found(api, q="quartzite")["results"] == []
    assert _found(api, q="zyxcorp")["results"] == []
    assert len(_found(api, q="redacted")["results"]) == 4


def test_the_index_is_rebuilt_identically(api, talk):
    rebuild_search_index()
    assert _positions(_found(api, q="zyxcorp")) == [1]
    assert _positions(_found(api, q="quartzite")) == [2, 3]


def test_a_branch_is_searchable_like_its_source(api, talk, demo_conversation):
    from conversations.services.history.branches import fork_conversation

    branch = fork_conversation(conversation=demo_conversation, position=2)
    titles = {r["conversation"]["id"] for r in _found(api, q="zyxcorp")["results"]}
    assert titles == {str(demo_conversation.pk), str(branch.pk)}


@pytest.mark.postgres
def test_postgres_uses_the_configured_language(api, settings, demo_conversation):
    append_messages(conversation=demo_conversation, messages=[ChatMessage.user("She runs daily")])
    assert _found(api, q="running")["results"] == []
    settings.CONVERSATIONS = {**settings.CONVERSATIONS, "SEARCH_CONFIG": "english"}
    rebuild_search_index()
    assert len(_found(api, q="running")["results"]) == 1


@pytest.mark.postgres
def test_postgres_answers_a_match_from_the_gin_index(talk):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM conversations_message"
            " WHERE search_vector @@ plainto_tsquery('simple', 'quartzite')"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "conversations_message_search_vector" in plan


def test_the_rebuild_command_reports_and_keeps_results(api, talk):
    out = StringIO()
    call_command("rebuild_search_index", stdout=out)
    assert "search index rebuilt" in out.getvalue()
    assert _positions(_found(api, q="quartzite")) == [2, 3]


def test_a_search_config_that_is_not_a_name_is_refused(settings):
    settings.CONVERSATIONS = {"SEARCH_CONFIG": "english'; DROP TABLE x; --"}
    with pytest.raises(ConfigurationError) as caught:
        search_config()
    assert caught.value.code == "invalid_search_config"
