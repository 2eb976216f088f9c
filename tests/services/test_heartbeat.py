"""A long tool keeps its run's heartbeat fresh, so recovery never takes it for dead."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from conversations.models import Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import recover_runs, run_tool_loop
from conversations.tools import ToolContext, registry, tool

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LEASE = 1
TOOL_SECONDS = 3.0
SAMPLES = 20
"""Looks the tool takes at the least, however long a busy machine makes each of them."""


def test_a_slow_tool_keeps_the_heartbeat_within_the_lease(conversation, settings):
    settings.CONVERSATIONS = {"RUN_LEASE_SECONDS": LEASE}
    ages: list[float] = []
    recovered: list[Run] = []

    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def slow(context: ToolContext) -> str:
            """Watches its own run's heartbeat (written by the loop's thread) while it works."""
            end = time.monotonic() + TOOL_SECONDS
            while time.monotonic() < end or len(ages) < SAMPLES:
                beat = Run.objects.get(pk=context.run_id).heartbeat_at
                ages.append((timezone.now() - beat).total_seconds())
                recovered.extend(recover_runs())  # another process's recovery, meanwhile
                time.sleep(0.1)
            return "done"

        provider = ScriptedProvider([scripted_calls(("slow", {})), scripted_text("ok")])
        run = run_tool_loop(conversation=conversation, content="go", provider=provider)

    assert run.status == Run.Status.COMPLETED
    assert recovered == []
    # Beats every third of the lease; without them the age would reach the tool's 3 s.
    assert max(ages) < LEASE
