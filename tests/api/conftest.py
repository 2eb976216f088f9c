"""Fixtures for API tests: two users, the offline demo profile, histories with tool calls.

Realistic histories are made with the tool loop itself, driven by a
``ScriptedProvider`` handed to ``run_tool_loop``; the views under test only
read them. Posting through the API runs the loop on the demo adapter (no
network). Nothing is patched.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from conversations.domain import Usage
from conversations.models import Conversation, LanguageModel, Profile, Provider, Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop

SYSTEM_PROMPT = "You are terse."


@pytest.fixture(autouse=True)
def _no_throttling(settings):
    """Throttling off (tests that check it turn it on); counters start empty."""
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None}
    cache.clear()
    yield
    cache.clear()


# No passwords: hashing one costs most of a second, and clients log in with
# force_authenticate / force_login or a token.
@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="mallory")


@pytest.fixture
def api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def other_api(other_user):
    client = APIClient()
    client.force_authenticate(other_user)
    return client


@pytest.fixture
def anonymous():
    return APIClient()


@pytest.fixture
def demo_model(db):
    provider = Provider.objects.create(slug="demo", name="Demo", adapter=Provider.Adapter.DEMO)
    return LanguageModel.objects.create(provider=provider, model_id="demo-model")


@pytest.fixture
def profile(demo_model):
    return Profile.objects.create(
        slug="demo",
        name="Demo",
        language_model=demo_model,
        system_prompt=SYSTEM_PROMPT,
        is_default=True,
        max_iterations=4,
        temperature=0.5,
        max_tokens=256,
    )


@pytest.fixture
def conversation(user, profile):
    return Conversation.objects.create(owner=user, title="Weather talk", profile=profile)


@pytest.fixture
def other_conversation(other_user, profile):
    return Conversation.objects.create(owner=other_user, title="Secret", profile=profile)


def scripted_turn(conversation, content="Weather in Paris, and 6*7?"):
    """One finished run with two tool calls, then an answer; returns the Run."""
    provider = ScriptedProvider(
        [
            scripted_calls(
                ("get_weather", {"city": "Paris"}),
                ("calculate", {"expression": "6*7"}),
                usage=Usage(prompt_tokens=20, completion_tokens=5, cached_prompt_tokens=4),
            ),
            scripted_text(
                "Paris: light rain; 6*7 = 42.",
                usage=Usage(prompt_tokens=40, completion_tokens=12, reasoning_tokens=3),
            ),
        ]
    )
    return run_tool_loop(conversation=conversation, content=content, provider=provider)


@pytest.fixture
def history(conversation):
    """``conversation`` after one scripted run: user, assistant(2 calls), 2 tools, assistant."""
    return scripted_turn(conversation)


@pytest.fixture
def other_run(other_conversation):
    return scripted_turn(other_conversation)


@pytest.fixture
def running_run(conversation):
    """A live run on ``conversation`` (fresh heartbeat), as if another request were looping."""
    return Run.objects.create(
        conversation=conversation, status=Run.Status.RUNNING, max_iterations=3
    )
