"""Syncing MCP servers' tools: real SDK servers over stdio and streamable HTTP."""

from __future__ import annotations

import html
import sys

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError
from django.urls import reverse

from conversations.exceptions import MCPServerError
from conversations.mcp.sync import schema_hash, sync_server_tools
from conversations.models import MCPServer, MCPTool, MCPTransport

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ["add", "die", "echo", "picture", "pid", "refuse", "whoami"]


def test_sync_over_stdio_stores_the_tools_enabled_on_a_trusted_server(stdio_server, monkeypatch):
    monkeypatch.setenv("TEST_MCP_SECRET", "s3cret")
    report = sync_server_tools(server=stdio_server)
    assert sorted(report.added) == NAMES
    tools = {t.name: t for t in MCPTool.objects.filter(server=stdio_server)}
    assert sorted(tools) == NAMES
    add = tools["add"]
    assert add.enabled is True
    assert add.description == "Add numbers."
    assert add.input_schema["required"] == ["a", "b"]
    assert add.schema_hash == schema_hash(description="Add numbers.", input_schema=add.input_schema)
    stdio_server.refresh_from_db()
    assert stdio_server.last_synced_at is not None
    assert stdio_server.last_sync_error == ""


def test_sync_over_streamable_http_leaves_new_tools_of_an_untrusted_server_disabled(http_server):
    report = sync_server_tools(server=http_server)
    assert sorted(report.added) == NAMES
    assert not MCPTool.objects.filter(server=http_server, enabled=True).exists()


def test_a_changed_schema_disables_the_tool_and_keeps_the_old_one(http_server_url, db):
    server = MCPServer.objects.create(
        slug="remote", name="r", transport=MCPTransport.STREAMABLE_HTTP, url=http_server_url()
    )
    sync_server_tools(server=server)
    MCPTool.objects.filter(server=server).update(enabled=True)
    old = MCPTool.objects.get(server=server, name="add")

    server.url = http_server_url(MCP_DEMO_VARIANT="changed")
    server.save()
    report = sync_server_tools(server=server)

    assert report.changed == ("add",)
    assert report.unchanged == 6
    add = MCPTool.objects.get(server=server, name="add")
    assert add.enabled is False
    assert add.schema_hash != old.schema_hash
    assert "c" in add.input_schema["properties"]
    assert add.previous_input_schema == old.input_schema
    assert add.schema_changed_at is not None
    assert MCPTool.objects.filter(server=server, enabled=True).count() == 6


def test_a_tool_no_longer_listed_is_marked_absent(stdio_server, monkeypatch):
    monkeypatch.setenv("TEST_MCP_SECRET", "x")
    sync_server_tools(server=stdio_server)
    MCPTool.objects.create(
        server=stdio_server, name="gone", schema_hash="0" * 64, synced_at=stdio_server.created_at
    )
    report = sync_server_tools(server=stdio_server)
    assert report.removed == ("gone",)
    assert MCPTool.objects.get(name="gone").present is False


def test_an_unresolvable_secret_reference_fails_naming_the_reference_not_a_value(stdio_server):
    with pytest.raises(
        MCPServerError, match=r'"MCP_DEMO_SECRET" refers to \'env:TEST_MCP_SECRET\''
    ):
        sync_server_tools(server=stdio_server)


def test_a_server_that_cannot_start_fails_and_the_error_is_kept_for_admins(db):
    server = MCPServer.objects.create(
        slug="broken",
        name="b",
        transport=MCPTransport.STDIO,
        command=sys.executable,
        args=["-c", "import sys; sys.exit(2)"],
        connect_timeout=20,
    )
    with pytest.raises(MCPServerError, match='MCP server "broken" could not list its tools'):
        sync_server_tools(server=server)
    server.refresh_from_db()
    assert "could not list its tools" in server.last_sync_error
    assert not MCPTool.objects.exists()


def test_a_server_that_does_not_answer_times_out(db):
    server = MCPServer.objects.create(
        slug="silent",
        name="s",
        transport=MCPTransport.STDIO,
        command=sys.executable,
        args=["-c", "import time; time.sleep(60)"],
        connect_timeout=1,
    )
    with pytest.raises(MCPServerError, match="TimeoutError"):
        sync_server_tools(server=server)


def test_the_command_syncs_named_servers_and_reports_changes(stdio_server, monkeypatch, capsys):
    monkeypatch.setenv("TEST_MCP_SECRET", "x")
    call_command("sync_mcp_tools", "local")
    out = capsys.readouterr().out
    assert "local: 7 added, 0 changed (disabled), 0 removed, 0 unchanged." in out
    with pytest.raises(CommandError, match="No MCP server with slug: nope"):
        call_command("sync_mcp_tools", "nope")


def test_the_command_fails_when_a_server_cannot_be_synced(stdio_server):
    with pytest.raises(CommandError, match="Could not sync: local"):
        call_command("sync_mcp_tools")


def test_the_database_refuses_a_stdio_server_without_a_command(db):
    with pytest.raises(IntegrityError):
        MCPServer.objects.create(slug="x", name="x", transport=MCPTransport.STDIO)


def test_the_default_prefix_is_the_slug_and_two_underscores(db):
    server = MCPServer(slug="gh", name="g", transport=MCPTransport.STDIO, command="x")
    assert server.prefix == "gh__"
    server.tool_prefix = "git_"
    assert server.prefix == "git_"


@pytest.fixture
def mcp_admin(settings, admin_client):
    settings.ROOT_URLCONF = "tests.admin.urls"
    return admin_client


def test_the_admin_action_syncs_and_the_tool_page_shows_the_schema_difference(
    mcp_admin, http_server_url
):
    server = MCPServer.objects.create(
        slug="remote", name="r", transport=MCPTransport.STREAMABLE_HTTP, url=http_server_url()
    )
    changelist = reverse("admin:conversations_mcpserver_changelist")
    response = mcp_admin.post(
        changelist, {"action": "sync_tools", "_selected_action": [server.pk]}, follow=True
    )
    assert "Remote: 7 added, 0 changed, 0 removed." in response.content.decode()

    server.url = http_server_url(MCP_DEMO_VARIANT="changed")
    server.save()
    response = mcp_admin.post(
        changelist, {"action": "sync_tools", "_selected_action": [server.pk]}, follow=True
    )
    assert "Schema changed (disabled): add." in response.content.decode()

    add = MCPTool.objects.get(name="add")
    page = mcp_admin.get(reverse("admin:conversations_mcptool_change", args=[add.pk]))
    text = html.unescape(page.content.decode())
    assert '+    "c": {' in text
    assert "--- before" in text


def test_an_admin_enables_a_tool_again(mcp_admin, stdio_server):
    tool = MCPTool.objects.create(
        server=stdio_server, name="t", schema_hash="0" * 64, synced_at=stdio_server.created_at
    )
    url = reverse("admin:conversations_mcptool_change", args=[tool.pk])
    response = mcp_admin.post(url, {"enabled": "on"})
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.enabled is True


def test_the_system_check_names_the_missing_sdk_when_servers_are_enabled(stdio_server, monkeypatch):
    from conversations.checks import check_mcp_sdk

    assert check_mcp_sdk() == []
    monkeypatch.setitem(sys.modules, "mcp", None)
    [error] = check_mcp_sdk()
    assert error.id == "conversations.E020"
    assert "(local)" in error.msg
    assert "django-llm-conversations[mcp]" in error.hint
    with pytest.raises(CommandError, match=r"django-llm-conversations\[mcp\]"):
        call_command("sync_mcp_tools")
    MCPServer.objects.update(enabled=False)
    assert check_mcp_sdk() == []
