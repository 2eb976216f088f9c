"""MCP tools in runs: real SDK servers over stdio and streamable HTTP, through the tool loop."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conversations.domain import Role, ToolCall
from conversations.models import MCPServer, MCPTool, MCPTransport, Profile, Run, ToolSetting
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.selectors import available_tools, get_history
from conversations.services import run_tool_loop
from conversations.services.loop.approvals import approval_required
from conversations.tools import registry, tool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _secret(monkeypatch):
    monkeypatch.setenv("TEST_MCP_SECRET", "s3cret")


def sync(*servers, enable=True):
    from conversations.mcp.sync import sync_server_tools

    for server in servers:
        sync_server_tools(server=server)
    if enable:
        MCPTool.objects.update(enabled=True)


def call(name, arguments=None, id=None):
    return ToolCall(id=id or f"c_{name}", name=name, arguments=arguments or {})


def results(conversation):
    return {
        m.tool_call_id: m.content
        for m in get_history(conversation=conversation)
        if m.role is Role.TOOL
    }


def run(conversation, *calls):
    provider = ScriptedProvider([scripted_calls(*calls), scripted_text("done")])
    return run_tool_loop(conversation=conversation, content="go", provider=provider), provider


def test_a_run_calls_the_tools_of_two_servers_offering_the_same_names(
    conversation, stdio_server, http_server
):
    http_server.trusted = True
    http_server.save()
    sync(stdio_server, http_server)

    finished, provider = run(
        conversation,
        call("local__echo", {"text": "from stdio"}, id="a"),
        call("remote__echo", {"text": "over http"}, id="b"),
        call("local__add", {"a": 2, "b": 3}, id="c"),
        call("local__whoami", id="d"),
    )

    assert finished.status == Run.Status.COMPLETED
    offered = {spec.name for spec in provider.requests[0].tools}
    assert {"local__echo", "remote__echo", "local__add", "remote__add"} <= offered
    # The SDK's server sends a return value as structured content too: the model gets its JSON.
    # The secret reference was resolved into the stdio server's environment.
    assert results(conversation) == {
        "a": '{"result":"from stdio"}',
        "b": '{"result":"over http"}',
        "c": '{"result":5}',
        "d": '{"result":"s3cret"}',
    }
    assert set(ToolCallRow.objects.values_list("status", flat=True)) == {"succeeded"}


def test_one_connection_per_server_for_a_run_closed_after_it(conversation, stdio_server):
    sync(stdio_server)
    run(conversation, call("local__pid", id="p1"), call("local__pid", id="p2"))
    answers = results(conversation)
    assert answers["p1"] == answers["p2"]
    pid = int(json.loads(answers["p1"])["result"])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_is_error_result_is_a_failed_call_whose_text_the_model_reads(conversation, stdio_server):
    sync(stdio_server)
    run(conversation, call("local__refuse", {"reason": "not today"}, id="r"))
    assert results(conversation)["r"] == (
        'Error: tool "local__refuse" failed: Error executing tool refuse: refused: not today'
    )
    assert ToolCallRow.objects.get(call_id="r").status == ToolCallRow.Status.FAILED


def test_a_server_dying_mid_call_fails_only_that_call(conversation, stdio_server):
    sync(stdio_server)
    # Two turns: the calls of one turn run at once and would share the dying connection.
    provider = ScriptedProvider(
        [
            scripted_calls(call("local__die", id="dead")),
            scripted_calls(call("local__echo", {"text": "back again"}, id="next")),
            scripted_text("done"),
        ]
    )
    run_tool_loop(conversation=conversation, content="go", provider=provider)
    answers = results(conversation)
    assert answers["dead"] == 'Error: tool "local__die" failed.'
    row = ToolCallRow.objects.get(call_id="dead")
    assert row.status == ToolCallRow.Status.FAILED
    assert "MCP server \"local\" failed calling 'die'" in row.error
    # The next call reconnects (a new process) instead of talking to the dead one.
    assert answers["next"] == '{"result":"back again"}'


def test_a_server_answering_garbage_fails_the_call(conversation):
    server = MCPServer.objects.create(
        slug="junk",
        name="junk",
        transport=MCPTransport.STDIO,
        command=sys.executable,
        args=["-c", "import time; print('this is not JSON-RPC', flush=True); time.sleep(30)"],
        trusted=True,
        connect_timeout=2,
    )
    MCPTool.objects.create(
        server=server,
        name="anything",
        input_schema={"type": "object"},
        schema_hash="0" * 64,
        enabled=True,
        synced_at=server.created_at,
    )
    run(conversation, call("junk__anything", id="j"))
    assert results(conversation)["j"] == 'Error: tool "junk__anything" failed.'
    assert 'MCP server "junk"' in ToolCallRow.objects.get(call_id="j").error


def test_arguments_are_validated_against_the_servers_schema_before_any_call(
    conversation, stdio_server
):
    sync(stdio_server)
    run(conversation, call("local__add", {"a": "two"}, id="v"))
    assert results(conversation)["v"] == (
        "Error: invalid arguments for tool \"local__add\": $.a: 'two' is not of type 'integer'; "
        "$: 'b' is a required property"
    )
    assert ToolCallRow.objects.get(call_id="v").status == ToolCallRow.Status.REJECTED


def test_results_are_cut_at_the_servers_cap(conversation, stdio_server):
    stdio_server.max_result_bytes = 60
    stdio_server.save()
    sync(stdio_server)
    run(conversation, call("local__echo", {"text": "x" * 500}, id="big"))
    text = results(conversation)["big"]
    assert len(text.encode()) <= 60
    assert text.endswith("[tool result truncated at 60 bytes]")


def test_only_enabled_tools_of_enabled_servers_are_offered_and_settings_apply(
    stdio_server, http_server
):
    sync(stdio_server, http_server, enable=False)
    names = set(available_tools())
    assert "remote__echo" not in names  # untrusted: new tools start disabled
    assert "local__echo" in names  # trusted: enabled on sync
    ToolSetting.objects.create(name="local__echo", enabled=False)
    assert "local__echo" not in set(available_tools())
    assert set(available_tools(allowed=["local__add"])) == {"local__add"}
    MCPServer.objects.filter(slug="local").update(enabled=False)
    assert not any(name.startswith("local__") for name in available_tools())


def test_tools_of_untrusted_servers_require_approval_by_default(
    conversation, stdio_server, http_server, profile
):
    sync(stdio_server, http_server)
    tools = available_tools()
    assert approval_required(profile=None, tool=tools["remote__echo"]) == "owner"
    assert approval_required(profile=None, tool=tools["local__echo"]) is None
    ToolSetting.objects.create(name="remote__echo", approval="never")
    assert approval_required(profile=None, tool=tools["remote__echo"]) is None

    finished, _ = run(conversation, call("remote__add", {"a": 1, "b": 1}, id="held"))
    assert finished.status == Run.Status.AWAITING_APPROVAL
    assert ToolCallRow.objects.get(call_id="held").status == ToolCallRow.Status.AWAITING_APPROVAL


def test_a_name_taken_by_a_python_tool_or_invalid_is_left_out(stdio_server, caplog):
    sync(stdio_server)
    stdio_server.tool_prefix = "bad.prefix."
    stdio_server.save()
    assert not any(name.startswith("bad") for name in available_tools())
    stdio_server.tool_prefix = ""
    stdio_server.save()
    with registry.isolated() as r:

        @tool(registry=r, name="local__echo")
        def echo(text: str) -> str:
            """Python's echo."""
            return text

        tools = available_tools()
        assert tools["local__echo"].func is echo
        assert "local__echo" in caplog.text and "is taken" in caplog.text


def test_a_profile_offering_only_mcp_tools(conversation, stdio_server, profile):
    sync(stdio_server)
    Profile.objects.filter(pk=profile.pk).update(allowed_tools=["local__echo"])
    profile.refresh_from_db()
    assert set(available_tools(allowed=profile.allowed_tools)) == {"local__echo"}


def test_without_the_sdk_no_mcp_tool_is_offered(stdio_server, monkeypatch):
    sync(stdio_server)
    assert "local__echo" in available_tools()
    monkeypatch.setitem(sys.modules, "mcp", None)
    assert not any(name.startswith("local__") for name in available_tools())


def test_a_tool_whose_schema_is_not_json_schema_is_left_out_with_the_reason(stdio_server, caplog):
    from conversations.exceptions import InvalidArgumentError
    from conversations.mcp.tools import MCPRemoteTool, RemoteCall, enabled_mcp_tools

    broken = {"type": "object", "properties": {"city": {"type": 12}}}
    MCPTool.objects.create(
        server=stdio_server,
        name="broken",
        input_schema=broken,
        schema_hash="0" * 64,
        synced_at=stdio_server.created_at,
        enabled=True,
    )
    with caplog.at_level("WARNING", logger="conversations"):
        assert enabled_mcp_tools(taken=()) == []
    assert "local.broken left out" in caplog.text
    with pytest.raises(InvalidArgumentError) as info:
        MCPRemoteTool(
            name="local__broken",
            description="",
            parameters=broken,
            func=RemoteCall(server=stdio_server, remote_name="broken"),
        )
    assert info.value.code == "invalid_tool_spec" and info.value.field == "parameters"
    assert str(info.value).startswith("MCP tool 'local__broken': parameters are not a valid JSON")


def test_an_mcp_image_and_blob_become_attachments_the_tool_message_references(
    conversation, stdio_server, tmp_path, settings
):
    from conversations.models import Attachment, MessageAttachment

    settings.MEDIA_ROOT = str(tmp_path / "media")
    sync(stdio_server)

    finished, provider = run(conversation, call("local__picture", id="p"))

    assert finished.status == Run.Status.COMPLETED
    (message,) = [m for m in get_history(conversation=conversation) if m.role is Role.TOOL]
    # The text blocks only: no "[image: ...]" placeholder; the files travel as parts.
    assert message.content == "a picture and a report"
    assert [(p.media_type, p.name) for p in message.parts] == [
        ("image/png", ""),
        ("application/pdf", "q3.pdf"),
    ]
    owners = set(Attachment.objects.values_list("owner_id", flat=True))
    assert owners == {conversation.owner_id}
    assert MessageAttachment.objects.count() == 2
    # The scripted adapter sends no file natively: the model reads about them instead.
    (sent,) = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert "q3.pdf" in sent.content
