"""The profile form refuses an agent graph with a cycle or a chain over MAX_AGENT_DEPTH, saying why."""

from __future__ import annotations

import pytest

from conversations.models import Profile

from .conftest import admin_url
from .test_config import profile_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def profiles(openai_model):
    """p0 -> p1 -> p2: a chain of two levels."""
    made = [
        Profile.objects.create(slug=f"p{i}", name=f"P{i}", language_model=openai_model)
        for i in range(3)
    ]
    made[0].agents.add(made[1])
    made[1].agents.add(made[2])
    return made


def change(admin_client, profile, openai_model, agents):
    data = profile_data(
        openai_model,
        name=profile.name,
        slug=profile.slug,
        agents=[str(agent.pk) for agent in agents],
    )
    return admin_client.post(admin_url(profile, "change"), data)


def test_an_agent_that_would_call_back_is_refused_naming_the_loop(
    admin_client, openai_model, profiles
):
    response = change(admin_client, profiles[2], openai_model, [profiles[0]])

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["agents"]
    assert "would reach itself through its agents (p2 -> p0 -> p1 -> p2)" in errors["agents"][0]
    assert not profiles[2].agents.exists()


def test_a_profile_cannot_be_its_own_agent(admin_client, openai_model, profiles):
    response = change(admin_client, profiles[0], openai_model, [profiles[0]])

    assert "cannot call itself" in response.context["adminform"].form.errors["agents"][0]


def test_a_chain_deeper_than_the_setting_is_refused(admin_client, openai_model, profiles, settings):
    extra = Profile.objects.create(slug="p3", name="P3", language_model=openai_model)
    assert change(admin_client, profiles[2], openai_model, [extra]).status_code == 302
    assert list(profiles[2].agents.all()) == [extra]

    settings.CONVERSATIONS = {"MAX_AGENT_DEPTH": 2}
    response = change(admin_client, profiles[2], openai_model, [])
    assert response.status_code == 302  # removing an edge is always fine
    response = change(admin_client, profiles[2], openai_model, [extra])

    errors = response.context["adminform"].form.errors
    assert "a chain of 3 agents would be longer than MAX_AGENT_DEPTH (2)" in errors["agents"][0]


def test_a_new_profile_may_call_agents(admin_client, openai_model, profiles):
    data = profile_data(openai_model, agents=[str(profiles[0].pk)], agent_timeout="30")

    assert admin_client.post(admin_url(Profile, "add"), data).status_code == 302

    saved = Profile.objects.get(slug="research")
    assert (list(saved.agents.all()), saved.agent_timeout) == ([profiles[0]], 30.0)


def test_a_runs_page_shows_its_own_cost_the_total_with_its_agents_and_the_run_tree(
    admin_client, user, openai_model, profiles
):
    from decimal import Decimal

    from conversations.models import Conversation, Run

    def run(profile, cost, parent=None):
        conversation = Conversation.objects.create(owner=user, profile=profile)
        return Run.objects.create(
            conversation=conversation,
            profile=profile,
            status=Run.Status.COMPLETED,
            max_iterations=4,
            cost=cost,
            parent_run=parent,
            root_run=(parent.root_run or parent) if parent else None,
        )

    lead = run(profiles[0], Decimal("0.5"))
    helper = run(profiles[1], Decimal("0.25"), parent=lead)
    digger = run(profiles[2], None, parent=helper)

    page = admin_client.get(admin_url(helper, "change")).content.decode()

    assert "0.25 own · 0.25 with its agents" in page
    assert page.index("p0: Completed · 0.5") < page.index("p1: Completed · 0.25")
    assert page.index("p1: Completed · 0.25") < page.index("p2: Completed · -")
    assert f'<strong><a href="{admin_url(helper, "change")}">' in page
    lead_page = admin_client.get(admin_url(lead, "change")).content.decode()
    assert "0.5 own · 0.75 with its agents" in lead_page
    assert admin_url(digger, "change") in lead_page
