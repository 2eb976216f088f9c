"""The management commands: chat, recover_runs, check_providers, setup_demo."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from conversations.domain import ChatMessage, ToolCall
from conversations.models import Conversation, LanguageModel, Profile, Provider, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.services.transcript.messages import append_messages, create_conversation

pytestmark = pytest.mark.django_db


def run_command(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_setup_demo_is_idempotent_and_prints_the_login():
    first = run_command("setup_demo")
    assert "username 'demo'" in first and "password 'demo-password'" in first
    second = run_command("setup_demo")
    assert "username 'demo'" in second
    assert Profile.objects.filter(slug="demo", is_default=True).count() == 1
    assert Provider.objects.filter(slug="demo").count() == 1


def test_setup_demo_prints_the_url_it_is_told_is_served():
    assert "Open http://127.0.0.1:8000/chat/, " in run_command("setup_demo")
    out = run_command("setup_demo", "--url", "http://127.0.0.1:8001/")
    assert "Open http://127.0.0.1:8001/chat/, http://127.0.0.1:8001/admin/ or " in out
    with pytest.raises(CommandError, match="--url must be an http"):
        run_command("setup_demo", "--url", "127.0.0.1:8001")


def test_chat_prints_calls_and_answer():
    run_command("setup_demo")
    out = run_command(
        "chat", "--profile", "demo", "What's the weather in Leipzig and what time is it?"
    )
    assert '-> get_weather({"city":"Leipzig"}) succeeded' in out.replace(", ", ",").replace(
        ": ", ":"
    )
    assert "-> get_current_time({}) succeeded" in out
    assert "In Leipzig it is" in out and "°C" in out
    assert "[completed: 2 round(s)" in out
    conversation = Conversation.objects.get()
    assert conversation.owner.username == "chat-cli"
    assert not conversation.owner.has_usable_password()


def test_chat_fails_with_a_non_zero_exit_for_unknown_profile():
    with pytest.raises(CommandError, match='no active profile "nope"'):
        run_command("chat", "--profile", "nope", "hi")


def test_chat_reports_a_failed_run():
    provider = Provider.objects.create(
        slug="broken",
        name="broken",
        adapter=Provider.Adapter.OPENAI,
        api_key_ref="env:NOPE_NOT_SET",
    )
    model = LanguageModel.objects.create(provider=provider, model_id="gpt-4o-mini")
    Profile.objects.create(slug="broken", name="broken", language_model=model)
    with pytest.raises(CommandError, match="configuration_error"):
        run_command("chat", "--profile", "broken", "hi")


def test_check_providers(monkeypatch):
    run_command("setup_demo")
    provider = Provider.objects.create(
        slug="oai", name="oai", adapter=Provider.Adapter.OPENAI, api_key_ref="env:TEST_OAI_KEY"
    )
    model = LanguageModel.objects.create(provider=provider, model_id="gpt-4o-mini")
    Profile.objects.create(slug="oai", name="oai", language_model=model)
    monkeypatch.delenv("TEST_OAI_KEY", raising=False)
    out = StringIO()
    with pytest.raises(CommandError, match="1 profile"):
        call_command("check_providers", stdout=out)
    assert "demo: ok" in out.getvalue()
    assert 'the API key reference "env:TEST_OAI_KEY" does not resolve' in out.getvalue()
    monkeypatch.setenv("TEST_OAI_KEY", "sk-value-that-must-not-be-printed")
    out = run_command("check_providers")
    assert "oai: ok" in out and "sk-value" not in out


def test_check_providers_ping_uses_the_demo_model():
    run_command("setup_demo")
    assert "demo: ok" in run_command("check_providers", "--ping")


def test_recover_runs_command(django_user_model):
    owner = django_user_model.objects.create_user("bob")
    conversation = create_conversation(owner=owner)
    old = timezone.now() - timedelta(hours=2)
    run = Run.objects.create(
        conversation=conversation, max_iterations=2, started_at=old, heartbeat_at=old
    )
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("hi"),
            ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="get_weather")]),
        ],
        run=run,
    )
    out = run_command("recover_runs")
    assert f"interrupted run {run.pk}" in out and "1 run(s) recovered" in out
    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED
    assert ToolCallRow.objects.get(call_id="c1").status == ToolCallRow.Status.INTERRUPTED
    assert "0 run(s) recovered" in run_command("recover_runs")
