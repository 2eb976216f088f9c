"""Hostile calls to ``/mcp/``: unstorable text, a broken record, slow tools, floods, big bodies."""

from __future__ import annotations

import json
import logging
import threading

import pytest
from django.core.cache import cache
from django.db import DatabaseError
from django.db.models.signals import pre_save

from conversations.models import MCPCall
from conversations.tools import ToolContext, tool
from tests.mcp.test_server import mcp

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_throttles():
    # The throttles count in the cache, which outlives a test's database.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def released():
    """An event a blocking tool waits for; set at the end so no thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def more_tools(served, released):
    """``echo``, ``whoami`` and ``stuck`` (a 0.2 s timeout) beside the served tools."""

    @tool(registry=served)
    def echo(text: str) -> str:
        """Give the text back."""
        return text

    @tool(registry=served)
    def whoami(context: ToolContext) -> str:
        """The user the call acts for."""
        return str(context.user_id)

    @tool(registry=served, timeout=0.2)
    def stuck() -> str:
        """Waits for the test to let it go (or half a minute)."""
        released.wait(30)
        return "let go"

    return served


def raw_call(client, url, token, name, arguments, request_id=1):
    """A JSON-RPC ``tools/call`` posted as it is (the SDK's client cannot send every byte)."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return client.post(
        url,
        data=json.dumps(body),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_AUTHORIZATION=f"Token {token}",
    )


def test_a_nul_in_a_value_a_key_or_a_tool_name_is_recorded_and_no_database_text_is_sent(
    more_tools, url, token, user
):
    async def work(client):
        return [
            await client.call_tool("echo", {"text": "a\x00b"}),
            await client.call_tool("echo", {"text": "x", "k\x00ey": 1}),
            await client.call_tool("ec\x00ho", {"text": "x"}),
        ]

    value, key, name = mcp(url, token, work)
    assert (value.is_error, value.content[0].text) == (False, "a\x00b")  # the tool got it as sent
    assert key.is_error and key.content[0].text.startswith(
        'Error: invalid arguments for tool "echo"'
    )
    assert name.is_error and name.content[0].text.startswith('Error: unknown tool "ec')
    for answer in (value, key, name):
        text = answer.content[0].text
        assert "INSERT" not in text and "conversations_mcpcall" not in text
    calls = list(MCPCall.objects.order_by("id"))
    assert [(c.tool, c.status, c.arguments) for c in calls] == [
        ("echo", "succeeded", {"text": "a\ufffdb"}),
        ("echo", "rejected", {"text": "x", "k\ufffdey": 1}),
        ("ec\ufffdho", "rejected", {"text": "x"}),
    ]
    assert all(c.user_id == user.pk for c in calls)


def test_a_record_that_cannot_be_written_gives_a_reference_and_never_the_database_text(
    more_tools, url, token, caplog
):
    def refuse(**kwargs):
        raise DatabaseError('INSERT INTO "conversations_mcpcall" ("arguments") VALUES (SECRET-7)')

    pre_save.connect(refuse, sender=MCPCall, dispatch_uid="refuse-mcp-calls")
    try:

        async def work(client):
            return await client.call_tool("echo", {"text": "SECRET-7"})

        with caplog.at_level(logging.ERROR, logger="conversations.mcp"):
            answer = mcp(url, token, work)
    finally:
        pre_save.disconnect(sender=MCPCall, dispatch_uid="refuse-mcp-calls")
    text = answer.content[0].text
    assert answer.is_error and text.startswith("Error: the call could not be completed (reference ")
    assert "SECRET-7" not in text and "INSERT" not in text
    reference = text.rsplit(" ", 1)[1].rstrip(").")
    logged = [r.getMessage() for r in caplog.records if reference in r.getMessage()]
    assert len(logged) == 1 and "DatabaseError" in logged[0]
    assert "SECRET-7" not in logged[0]


def test_a_call_past_its_tool_timeout_is_answered_timed_out_and_recorded(more_tools, url, token):
    async def work(client):
        return await client.call_tool("stuck", {})

    answer = mcp(url, token, work)
    assert answer.is_error
    assert answer.content[0].text == 'Error: tool "stuck" timed out after 0.2 s.'
    call = MCPCall.objects.get()
    assert (call.tool, call.status) == ("stuck", "failed")
    assert "timed out" in call.error


def test_the_tool_learns_the_caller_from_its_context(more_tools, url, token, user):
    async def work(client):
        return await client.call_tool("whoami", {})

    answer = mcp(url, token, work)
    assert (answer.is_error, answer.content[0].text) == (False, str(user.pk))


def test_tool_calls_are_throttled_like_posted_messages(more_tools, url, token, client, settings):
    settings.CONVERSATIONS = {**settings.CONVERSATIONS, "MESSAGE_THROTTLE_RATE": "2/min"}
    answers = [raw_call(client, url, token, "add", {"a": 1, "b": n}, n) for n in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[2].json()["code"] == "throttled"
    assert int(answers[2]["Retry-After"]) > 0
    assert MCPCall.objects.count() == 2


def test_an_oversized_body_gets_the_api_json_413(more_tools, url, token, client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    answer = raw_call(client, url, token, "echo", {"text": "x" * 2000})
    assert answer.status_code == 413
    assert answer.json() == {
        "code": "content_too_large",
        "detail": "The request body is larger than the 1000 bytes accepted.",
        "errors": [],
    }
    assert not MCPCall.objects.exists()
