"""Fixtures for API tests: API clients for both users, histories with tool calls.

The users, the offline demo profile and ``demo_conversation`` come from
``tests/conftest.py``.

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
from conversations.models import Conversation, Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop


@pytest.fixture(autouse=True)
def _no_throttling(settings):
    """Throttling off (tests that check it turn it on); counters start empty."""
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None}
    cache.clear()
    yield
    cache.clear()


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
def other_users_conversation(other_user, profile):
    """A conversation of ``other_user`` on the demo profile: what ``user`` must never see."""
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
def history(demo_conversation):
    """``demo_conversation`` after one scripted run: user, assistant(2 calls), 2 tools, assistant."""
    return scripted_turn(demo_conversation)


@pytest.fixture
def other_run(other_users_conversation):
    return scripted_turn(other_users_conversation)


@pytest.fixture
def running_run(demo_conversation):
    """A live run on ``demo_conversation`` (fresh heartbeat), as if another request were looping."""
    return Run.objects.create(
        conversation=demo_conversation, status=Run.Status.RUNNING, max_iterations=3
    )
