"""The AI SDK history in pages of whole turns: newest first, the body useChat's array, links in ``Link``."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from conversations.models import Message

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db

QUESTIONS = ("first?", "second?", "third?")


def chat_url(conversation) -> str:
    return reverse("conversations:conversation-chat", args=[conversation.pk])


def links(response) -> dict[str, str]:
    """The ``Link`` header as ``{rel: url}``."""
    found = re.findall(r'<([^>]*)>; rel="([a-z]+)"', response.headers.get("Link", ""))
    return {rel: url for url, rel in found}


def texts(history: list[dict]) -> list[str]:
    """The user messages' texts of a page, in its order."""
    return [m["parts"][0]["text"] for m in history if m["role"] == "user"]


@pytest.fixture
def turns(demo_conversation):
    """Three finished runs, each a question, two tool calls with results, and an answer."""
    return [scripted_turn(demo_conversation, content=question) for question in QUESTIONS]


def test_the_first_page_is_the_newest_turns_and_next_leads_to_older_ones(
    api, demo_conversation, turns
):
    first = api.get(chat_url(demo_conversation), {"page_size": 2})
    assert first.status_code == 200
    assert isinstance(first.json(), list)  # what useChat({messages}) takes, as before
    assert texts(first.json()) == ["second?", "third?"]
    assert [m["id"] for m in first.json() if m["role"] == "assistant"] == [
        f"run-{turns[1].pk}",
        f"run-{turns[2].pk}",
    ]
    assert set(links(first)) == {"next"}
    older = api.get(links(first)["next"])
    assert texts(older.json()) == ["first?"]
    assert set(links(older)) == {"prev"}
    newer = api.get(links(older)["prev"])
    assert newer.json() == first.json()


def test_the_pages_put_together_are_the_whole_history(api, demo_conversation, turns):
    whole = api.get(chat_url(demo_conversation)).json()
    assert texts(whole) == list(QUESTIONS)
    pages, url = [], chat_url(demo_conversation) + "?page_size=1"
    while url:
        response = api.get(url)
        pages.insert(0, response.json())
        url = links(response).get("next")
    assert len(pages) == 3
    assert [m for page in pages for m in page] == whole
    shown = [pk for m in whole for pk in m["metadata"]["messageIds"]]
    assert shown == list(Message.objects.order_by("position").values_list("pk", flat=True))


def test_every_tool_result_is_on_the_page_of_its_call(api, demo_conversation, turns):
    url = chat_url(demo_conversation) + "?page_size=1"
    while url:
        response = api.get(url)
        tool_parts = [
            part for m in response.json() for part in m["parts"] if part["type"].startswith("tool-")
        ]
        assert len(tool_parts) == 2
        assert {part["state"] for part in tool_parts} == {"output-available"}
        url = links(response).get("next")


def test_a_history_that_fits_on_one_page_has_no_link_header(api, demo_conversation, turns):
    response = api.get(chat_url(demo_conversation))
    assert "Link" not in response.headers
    assert texts(response.json()) == list(QUESTIONS)


def test_an_empty_history_is_an_empty_page(api, demo_conversation):
    response = api.get(chat_url(demo_conversation))
    assert response.json() == [] and "Link" not in response.headers


def test_a_page_costs_the_same_queries_for_few_or_many_turns(
    api, demo_conversation, django_assert_max_num_queries
):
    scripted_turn(demo_conversation, content="one?")
    with django_assert_max_num_queries(10) as few:
        api.get(chat_url(demo_conversation), {"page_size": 2})
    for n in range(6):
        scripted_turn(demo_conversation, content=f"more {n}?")
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = api.get(chat_url(demo_conversation), {"page_size": 2})
    assert texts(response.json()) == ["more 4?", "more 5?"]


def test_a_forged_history_cursor_is_a_400_naming_it(api, demo_conversation, turns):
    response = api.get(chat_url(demo_conversation), {"cursor": "zz"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_cursor"
    assert [item["parameter"] for item in body["errors"]] == ["cursor"]


def test_an_imported_answer_before_the_first_question_stays_on_the_oldest_page(api, profile):
    imported = api.post(
        reverse("conversations:conversation-import"),
        {
            "title": "Imported",
            "messages": [
                {"role": "assistant", "content": "Welcome."},
                {"role": "user", "content": "first?"},
                {"role": "assistant", "content": "One."},
                {"role": "user", "content": "second?"},
                {"role": "assistant", "content": "Two."},
            ],
        },
        format="json",
    )
    assert imported.status_code == 201, imported.content
    url = reverse("conversations:conversation-chat", args=[imported.json()["id"]])
    newest = api.get(url, {"page_size": 1})
    assert texts(newest.json()) == ["second?"]
    oldest = api.get(links(newest)["next"]).json()
    assert [m["role"] for m in oldest] == ["assistant", "user", "assistant"]
    assert oldest[0]["parts"][-1]["text"] == "Welcome."
