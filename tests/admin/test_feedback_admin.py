"""Feedback in the admin: the rate page's charts and tables, list filters, evaluations side by side."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from conversations.models import Conversation, Message, Profile, Run, ToolCall
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop
from conversations.services.evaluation import evaluate
from conversations.services.feedback import set_feedback

pytestmark = pytest.mark.django_db

RATES_URL = "/admin/conversations/feedback/rates/"


def turn(owner, profile, title):
    conversation = Conversation.objects.create(owner=owner, profile=profile, title=title)
    provider = ScriptedProvider(
        [scripted_calls(("get_weather", {"city": "Paris"})), scripted_text(f"Answer {title}")]
    )
    run_tool_loop(conversation=conversation, content="Weather?", provider=provider)
    return conversation


@pytest.fixture
def rated(user, profile):
    good = turn(user, profile, "good")
    bad = turn(user, profile, "bad")
    turn(user, profile, "unrated")
    answer = Message.objects.filter(conversation=good, role="assistant").last()
    set_feedback(user=user, target=answer, value=1, tags=["helpful"])
    call = ToolCall.objects.get(conversation=bad)
    set_feedback(user=user, target=call, value=-1, tags=["wrong_tool"])
    set_feedback(user=user, target=Run.objects.get(conversation=bad), value=-1)
    return good, bad


def test_the_rate_page_draws_three_charts_with_axes_and_the_tables(admin_client, rated, profile):
    response = admin_client.get(RATES_URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert re.search(r'id="feedback-up">1<', html)
    assert re.search(r'id="feedback-down">2<', html)
    assert re.search(r'id="feedback-share">33%<', html)
    for chart in ("feedback-up-chart", "feedback-down-chart", "feedback-share-chart"):
        svg = re.search(rf'<svg id="{chart}".*?</svg>', html, re.S).group(0)
        heights = [
            float(h) for h in re.findall(r'<rect class="usage-bar" [^>]*height="([\d.]+)"', svg)
        ]
        assert len(heights) == 30
        assert sum(1 for h in heights if h > 0) == 1  # all given today
        assert len(re.findall(r'<text class="usage-tick"', svg)) == 3  # numbers on the axis
    profiles = response.context["groups"][0][1]
    assert [(rate.key, rate.up, rate.down) for rate, _url in profiles] == [("demo", 1, 2)]
    tools = response.context["groups"][2][1]
    assert [(rate.key, rate.up, rate.down) for rate, _url in tools] == [("get_weather", 0, 1)]
    # The profile's row drills down to its rated conversations.
    url = profiles[0][1]
    listed = admin_client.get(url)
    assert listed.status_code == 200
    assert listed.context["cl"].result_count == 2


def test_the_rate_page_needs_staff(client):
    response = client.get(RATES_URL)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize(
    ("query", "titles"),
    [
        ("feedback=up", ["good"]),
        ("feedback=down", ["bad"]),
        ("feedback=any", ["bad", "good"]),
        ("feedback=none", ["unrated"]),
        ("feedback_tag=wrong_tool", ["bad"]),
        ("feedback_tag=helpful", ["good"]),
    ],
)
def test_the_conversation_list_filters_on_feedback_value_and_tag(
    admin_client, rated, query, titles
):
    response = admin_client.get(
        reverse("admin:conversations_conversation_changelist") + "?" + query
    )
    assert response.status_code == 200
    assert sorted(c.title for c in response.context["cl"].result_list) == titles


@pytest.mark.parametrize(
    ("query", "count"), [("feedback=down", 1), ("feedback_tag=helpful", 1), ("feedback=none", 1)]
)
def test_the_run_list_filters_on_feedback_too(admin_client, rated, query, count):
    response = admin_client.get(reverse("admin:conversations_run_changelist") + "?" + query)
    assert response.status_code == 200
    assert response.context["cl"].result_count == count


def test_a_tag_with_accents_and_quotes_filters_on_both_databases(admin_client, rated, user):
    good, _bad = rated
    answer = Message.objects.filter(conversation=good, role="assistant").last()
    set_feedback(user=user, target=answer, value=1, tags=["zu läng", 'say "hi"'])
    url = reverse("admin:conversations_conversation_changelist")
    for tag in ("zu läng", 'say "hi"'):
        response = admin_client.get(url, {"feedback_tag": tag})
        assert [c.title for c in response.context["cl"].result_list] == ["good"], tag
    assert admin_client.get(url, {"feedback_tag": "zu"}).context["cl"].result_count == 0


def test_the_feedback_list_filters_on_value_and_tag(admin_client, rated):
    url = reverse("admin:conversations_feedback_changelist")
    assert admin_client.get(url + "?value__exact=-1").context["cl"].result_count == 2
    response = admin_client.get(url + "?tag=helpful")
    assert response.context["cl"].result_count == 1
    assert b"Feedback rates" in response.content


def test_an_evaluation_shows_its_examples_side_by_side(admin_client, user, profile):
    other = Profile.objects.create(
        slug="other", name="Other", language_model=profile.language_model, max_iterations=4
    )

    def provider_for(p):
        text = "Paris" if p.slug == "demo" else "Lyon"
        return ScriptedProvider([scripted_text(text), scripted_text(text)])

    report = evaluate(
        examples=[{"input": "Capital of <b>France</b>?", "expected": "Paris"}],
        profiles=[profile, other],
        scorer_names=["exact_match"],
        owner=user,
        provider_for=provider_for,
    )
    url = reverse("admin:conversations_evaluation_change", args=[report.evaluation.pk])
    html = admin_client.get(url).content.decode()
    table = re.search(r'<table class="evaluation-side-by-side">.*?</table>', html, re.S).group(0)
    assert "Capital of &lt;b&gt;France&lt;/b&gt;?" in table
    assert "Paris" in table and "Lyon" in table
    assert "exact_match=True" in table and "exact_match=False" in table
    assert re.search(r"<td>demo</td></tr>", table)  # the winner
    totals = re.search(r'<table class="evaluation-totals">.*?</table>', html, re.S).group(0)
    assert "<td>demo</td><td>1</td><td>0</td><td>1.0</td>" in totals
