"""GET /api/search/ under hostile input: prefixes, operator syntax, the word cap, the time bound.

Every test here runs on SQLite (FTS5) and on PostgreSQL (tsvector + GIN).
"""

from __future__ import annotations

import pytest
from django.db import connection

from conversations.domain import ChatMessage
from conversations.domain.context import estimate_message_tokens
from conversations.models import Message
from conversations.services.transcript.messages import append_messages

pytestmark = pytest.mark.django_db

SEARCH = "/api/search/"
START, STOP = "\ue000", "\ue001"


def _say(conversation, *texts):
    append_messages(conversation=conversation, messages=[ChatMessage.user(t) for t in texts])


def _found(api, **params):
    response = api.get(SEARCH, params)
    assert response.status_code == 200, response.json()
    return response.json()["results"]


def _bulk_messages(conversation, count, text):
    """``count`` user messages of ``text`` in one INSERT ... SELECT (the triggers index them)."""
    table = Message._meta.db_table
    # What Django stores for a UUID key: the uuid type, or 32 hex digits on SQLite.
    key = Message._meta.get_field("conversation").get_db_prep_value(conversation.pk, connection)
    if connection.vendor == "postgresql":
        numbers = "SELECT n FROM generate_series(1, %s) AS n"
        now = "now()"
    else:
        numbers = (
            "WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers"
            " WHERE n < %s) SELECT n FROM numbers"
        )
        now = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (conversation_id, position, role, content, model,"
            " finish_reason, provider_metadata, is_error, usage_estimated, token_estimate,"
            " created_at)"
            f" SELECT %s, n - 1, 'user', %s, '', '', '{{}}', false, false, %s, {now}"
            f" FROM ({numbers}) AS s"
            " ORDER BY n",
            (key, text, estimate_message_tokens(ChatMessage.user(text)), count),
        )


def test_a_word_prefix_finds_the_whole_word(api, demo_conversation):
    _say(demo_conversation, "We met in Leipzig in May", "Nothing here")
    assert [r["position"] for r in _found(api, q="Leip")] == [0]
    assert [r["position"] for r in _found(api, q="leipz may")] == [0]
    assert _found(api, q="Leipziger") == []


@pytest.mark.parametrize(
    "query",
    [
        "Leip:* & !(x | y)",
        "'Leip' <-> x",
        '"Leip" NEAR(x y) OR y*',
        "document : Leip AND x NOT y",
        "Leip\\' x) y(",
        "Leip^ x:A y-",
    ],
)
def test_operators_quotes_and_parentheses_in_a_query_are_literal_words(
    api, demo_conversation, query
):
    _say(demo_conversation, "Leipzig x-ray yesterday: near, or, and, not, document", "Leipzig only")
    assert [r["position"] for r in _found(api, q=query)] == [0]


def test_a_query_of_more_words_than_the_cap_is_a_400_naming_q(api, settings):
    settings.CONVERSATIONS = {**settings.CONVERSATIONS, "SEARCH_MAX_WORDS": 3}
    assert api.get(SEARCH, {"q": "one two three"}).status_code == 200
    response = api.get(SEARCH, {"q": "one two three four"})
    assert response.status_code == 400
    assert [(e["parameter"], e["code"]) for e in response.json()["errors"]] == [
        ("q", "too_many_words")
    ]


def test_only_the_newest_matches_are_ranked_and_paged(api, settings, demo_conversation):
    settings.CONVERSATIONS = {**settings.CONVERSATIONS, "SEARCH_MAX_CANDIDATES": 5}
    # The oldest match is the best one (the word three times): it is not among the newest.
    _say(demo_conversation, "slate slate slate", *[f"slate {i}" for i in range(7)])
    positions = sorted(r["position"] for r in _found(api, q="slate", page_size=50))
    assert positions == [3, 4, 5, 6, 7]


def test_a_hostile_query_on_a_large_table_is_stopped_with_search_timeout(
    api, settings, demo_conversation
):
    words = " ".join(f"{letter}{letter}word{i}" for i, letter in enumerate("abcdefgh" * 3))
    _bulk_messages(demo_conversation, 3_000, words)
    settings.CONVERSATIONS = {
        **settings.CONVERSATIONS,
        "SEARCH_TIMEOUT_SECONDS": 0.001,
        "SEARCH_MAX_CANDIDATES": 100_000,
    }
    response = api.get(SEARCH, {"q": "a b c d e f g h"})
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "search_timeout"
    assert "longer than 0.001 s" in body["detail"]
    # The connection is whole and unbounded again: the next search answers.
    settings.CONVERSATIONS = {
        **settings.CONVERSATIONS,
        "SEARCH_TIMEOUT_SECONDS": 60,
        "SEARCH_MAX_CANDIDATES": 10,
    }
    assert len(_found(api, q="aaword0 hhword7", page_size=3)) == 3
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone() == ("0",)


def test_the_time_bound_ends_with_the_search(api, settings, demo_conversation):
    _say(demo_conversation, "slate")
    if connection.vendor == "postgresql":
        # The test's transaction outlives the search: a SET LOCAL left behind would show.
        assert len(_found(api, q="slate")) == 1
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone() == ("0",)
        return
    settings.CONVERSATIONS = {**settings.CONVERSATIONS, "SEARCH_TIMEOUT_SECONDS": 0.001}
    # Stopped or not, the bound belongs to this search alone.
    assert api.get(SEARCH, {"q": "slate"}).status_code in (200, 503)
    # A progress handler left on the connection would interrupt this statement, which
    # runs long after the search's deadline.
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers"
            " WHERE n < %s) SELECT count(*) FROM numbers",
            (300_000,),
        )
        assert cursor.fetchone() == (300_000,)


@pytest.mark.parametrize(
    "content",
    [
        f"{START}injected{STOP} quartz",
        f"{STOP} before quartz after {START}",
        f"{START}{START} quartz {STOP}",
        f"quartz {START}<script>x</script>{STOP}",
    ],
)
def test_markers_stored_in_a_message_never_become_marks(api, demo_conversation, content):
    _say(demo_conversation, content)
    (result,) = _found(api, q="quartz")
    snippet = result["snippet"]
    assert snippet.count("<mark>") == 1
    assert snippet.count("</mark>") == 1
    assert "<mark>quartz</mark>" in snippet
    assert START not in snippet and STOP not in snippet
    assert "<script>" not in snippet


def test_a_search_page_costs_one_query_and_the_time_bound(
    api, demo_conversation, django_assert_num_queries
):
    _say(demo_conversation, *[f"slate {i}" for i in range(30)])
    # PostgreSQL: the bound's savepoint, SET LOCAL, the page, the caller's bound back,
    # the release (a test runs in a transaction); SQLite: the page alone.
    expected = 5 if connection.vendor == "postgresql" else 1
    with django_assert_num_queries(expected):
        assert len(_found(api, q="slate", page_size=25)) == 25
    with django_assert_num_queries(expected):
        assert len(_found(api, q="sla", page_size=5)) == 5
