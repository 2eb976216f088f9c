"""The app's tools over MCP, exercised with the SDK's own client against a live server."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from django.urls import reverse
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from conversations.models import MCPCall, Profile, ToolSetting

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _urls(settings):
    settings.ROOT_URLCONF = "tests.mcp.urls"


def session(url, token=None):
    headers = {"Authorization": f"Token {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers)
    return http, Client(streamable_http_client(url, http_client=http))


def mcp(url, token, work):
    async def main():
        http, client = session(url, token)
        async with http, client:
            return await work(client)

    return anyio.run(main)


def test_the_sdk_client_lists_the_tools_not_needing_approval(served, url, token):
    async def work(client):
        return (await client.list_tools()).tools

    tools = mcp(url, token, work)
    assert sorted(t.name for t in tools) == ["add", "crash", "divide"]
    add = next(t for t in tools if t.name == "add")
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]


def test_a_disabled_tool_is_not_listed(served, url, token):
    ToolSetting.objects.create(name="divide", enabled=False)

    async def work(client):
        return sorted(t.name for t in (await client.list_tools()).tools)

    assert mcp(url, token, work) == ["add", "crash"]


def test_calls_return_results_and_error_texts_and_are_recorded(served, url, token, user):
    async def work(client):
        return [
            await client.call_tool("add", {"a": 2, "b": 3}),
            await client.call_tool("divide", {"a": 1, "b": 0}),
            await client.call_tool("crash", {}),
            await client.call_tool("add", {"a": "x"}),
            await client.call_tool("send_mail", {"to": "a@b.c"}),
        ]

    ok, refused, crashed, invalid, held = mcp(url, token, work)
    assert (ok.is_error, ok.content[0].text) == (False, "5")
    assert refused.is_error and refused.content[0].text == (
        'Error: tool "divide" failed: division by zero'
    )
    assert crashed.is_error and crashed.content[0].text == 'Error: tool "crash" failed.'
    assert invalid.is_error and invalid.content[0].text.startswith(
        'Error: invalid arguments for tool "add": '
    )
    assert held.is_error and held.content[0].text == 'Error: unknown tool "send_mail"'

    calls = list(MCPCall.objects.order_by("id"))
    assert [(c.tool, c.status) for c in calls] == [
        ("add", "succeeded"),
        ("divide", "failed"),
        ("crash", "failed"),
        ("add", "rejected"),
        ("send_mail", "rejected"),
    ]
    assert all(c.user_id == user.pk for c in calls)
    assert calls[0].arguments == {"a": 2, "b": 3}
    assert calls[0].result_bytes == 1
    assert "SECRET-42" in calls[2].error  # for admins only


def test_without_a_valid_token_the_answer_is_401(served, url, client):
    response = client.post(url, data="{}", content_type="application/json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    response = client.post(
        url, data="{}", content_type="application/json", HTTP_AUTHORIZATION="Token nope"
    )
    assert response.status_code == 401

    async def work(client):
        return await client.list_tools()

    with pytest.raises(ExceptionGroup) as caught:
        mcp(url, None, work)
    # The SDK client sees the 401 as an error response to its first request.
    assert caught.group_contains(MCPError, match="error response", depth=2)
    assert not MCPCall.objects.exists()


def test_without_a_served_profile_the_endpoint_is_404(url, token, client, settings, profile):
    settings.CONVERSATIONS = {}
    response = client.post(
        url, data="{}", content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}"
    )
    assert response.status_code == 404
    assert response.json()["code"] == "mcp_not_configured"
    Profile.objects.update(is_active=False)
    settings.CONVERSATIONS = {"MCP_SERVER_PROFILE": profile.slug}
    assert (
        client.post(
            url, data="{}", content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}"
        ).status_code
        == 404
    )


def test_calls_are_visible_in_the_admin(served, url, token, admin_client):
    async def work(client):
        return await client.call_tool("add", {"a": 20, "b": 22})

    mcp(url, token, work)
    call = MCPCall.objects.get()
    page = admin_client.get(reverse("admin:conversations_mcpcall_change", args=[call.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "&quot;a&quot;: 20" in text
    assert "succeeded" in text.lower()
    listing = admin_client.get(reverse("admin:conversations_mcpcall_changelist"))
    assert "add" in listing.content.decode()
