"""Realistic history for the admin tests, written through the services so every DB rule holds."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from conversations.domain import ChatMessage, ToolCall, Usage
from conversations.models import Conversation, LanguageModel, Profile, Provider, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.services import MessageDetails, append_messages, create_conversation

KEY_VARIABLE = "LLM_ADMIN_TEST_KEY"
SECRET = "sk-admin-test-SECRET-4f9c2b7e1d"

# Model output and arguments that would run script if the admin did not escape them.
USER_TEXT = "Weather in Paris and 2+2? <script>alert('user')</script>"
ASSISTANT_TEXT = "Checking <img src=x onerror=alert('assistant')>"
CITY = "<script>alert('args')</script>Paris"
WEATHER_RESULT = '{"city": "Paris", "temperature_c": 18, "note": "<b>sunny</b>"}'
FINAL_TEXT = "It is 18C in Paris. <script>alert('final')</script>"
RAW_ARGUMENTS = "{city: <i>Paris</i>"


def admin_url(obj_or_model, action="change", *args):
    opts = obj_or_model._meta
    if action in ("change", "delete", "history"):
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_{action}", args=[obj_or_model.pk])
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{action}", args=args)


@pytest.fixture(autouse=True)
def _admin_settings(settings):
    settings.ROOT_URLCONF = "tests.admin.urls"
    # admin_client logs in with a password: hashing it properly costs ~0.3 s a test.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def openai_provider(db):
    """An OpenAI provider whose key comes from an environment variable."""
    return Provider.objects.create(
        slug="openai",
        name="OpenAI",
        adapter=Provider.Adapter.OPENAI,
        api_key_ref=f"env:{KEY_VARIABLE}",
    )


@pytest.fixture
def openai_model(openai_provider):
    return LanguageModel.objects.create(
        provider=openai_provider, model_id="gpt-test", name="GPT test", max_output_tokens=1000
    )


@pytest.fixture
def openai_profile(openai_model):
    return Profile.objects.create(
        slug="assistant", name="Assistant", language_model=openai_model, is_default=True
    )


def _traceback() -> str:
    try:
        raise RuntimeError("calculator crashed <b>boom</b>")
    except RuntimeError:
        return traceback.format_exc()


@dataclass
class History:
    conversation: Conversation
    run: Run
    calls: dict[str, ToolCallRow]
    runs: dict[str, Run] = field(default_factory=dict)
    open_conversation: Conversation | None = None
    stale_run: Run | None = None


def add_run(conversation, profile, status, **fields) -> Run:
    now = timezone.now()
    defaults = {
        "profile": profile,
        "status": status,
        "max_iterations": 5,
        "provider": "openai",
        "model": "gpt-test",
        "started_at": now - timedelta(seconds=3),
    }
    if status != Run.Status.RUNNING:
        defaults["finished_at"] = now
    defaults.update(fields)
    return Run.objects.create(conversation=conversation, **defaults)


def build_history(owner, profile) -> History:
    """One complete turn with three parallel calls (ok, failed, raw) plus a run of each status."""
    conversation = create_conversation(owner=owner, title="Trip <b>planning</b>", profile=profile)
    run = add_run(conversation, profile, Run.Status.RUNNING)
    append_messages(conversation=conversation, messages=[ChatMessage.user(USER_TEXT)], run=run)
    turn = ChatMessage.assistant_tool_calls(
        [
            ToolCall("call_weather", "get_weather", {"city": CITY}),
            ToolCall("call_calc", "calculate", {"expression": "2+2"}),
            ToolCall("call_raw", "get_weather", raw_arguments=RAW_ARGUMENTS),
        ],
        ASSISTANT_TEXT,
    )
    usage = Usage(120, 30, cached_prompt_tokens=100, reasoning_tokens=10)
    append_messages(
        conversation=conversation,
        messages=[turn],
        run=run,
        details=[MessageDetails("gpt-test", "tool_calls", usage, 850)],
    )
    calls = {c.call_id: c for c in ToolCallRow.objects.filter(conversation=conversation)}
    started = timezone.now() - timedelta(seconds=2)
    ToolCallRow.objects.filter(pk=calls["call_weather"].pk).update(
        status="succeeded", started_at=started, finished_at=started + timedelta(milliseconds=420)
    )
    ToolCallRow.objects.filter(pk=calls["call_calc"].pk).update(
        status="failed",
        started_at=started,
        finished_at=started + timedelta(milliseconds=1500),
        error=_traceback(),
    )
    ToolCallRow.objects.filter(pk=calls["call_raw"].pk).update(
        status="rejected", finished_at=started
    )
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.tool_result("call_weather", WEATHER_RESULT),
            ChatMessage.tool_result("call_calc", 'Error: tool "calculate" failed.'),
            ChatMessage.tool_result(
                "call_raw", 'Error: arguments for tool "get_weather" are not a JSON object'
            ),
        ],
        run=run,
    )
    append_messages(
        conversation=conversation,
        messages=[ChatMessage.assistant(FINAL_TEXT)],
        run=run,
        details=[MessageDetails("gpt-test", "stop", Usage(200, 20), 640)],
    )
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.COMPLETED,
        finished_at=timezone.now(),
        iterations=2,
        prompt_tokens=320,
        completion_tokens=50,
        total_tokens=370,
    )
    run.refresh_from_db()
    history = History(
        conversation=conversation,
        run=run,
        calls={c.call_id: c for c in ToolCallRow.objects.filter(conversation=conversation)},
    )
    history.runs[Run.Status.COMPLETED] = run
    endings = {
        Run.Status.MAX_ITERATIONS: {"iterations": 5},
        Run.Status.FAILED: {"error_code": "provider_timeout", "error_message": "no answer"},
        Run.Status.INTERRUPTED: {"error_code": "interrupted"},
        Run.Status.CANCELLED: {"error_code": "run_cancelled"},
    }
    for status, fields in endings.items():
        other = create_conversation(owner=owner, title=f"Run {status}", profile=profile)
        append_messages(conversation=other, messages=[ChatMessage.user("hello")])
        history.runs[status] = add_run(other, profile, status, **fields)

    # A run whose process died: heartbeat long expired, one call left open.
    stale = create_conversation(owner=owner, title="Stale run", profile=profile)
    stale_run = add_run(
        stale,
        profile,
        Run.Status.RUNNING,
        heartbeat_at=timezone.now() - timedelta(hours=1),
        started_at=timezone.now() - timedelta(hours=1),
    )
    append_messages(conversation=stale, messages=[ChatMessage.user("time?")], run=stale_run)
    append_messages(
        conversation=stale,
        messages=[ChatMessage.assistant_tool_calls([ToolCall("call_open", "get_current_time")])],
        run=stale_run,
        details=[MessageDetails("gpt-test", "tool_calls", Usage(10, 5), 100)],
    )
    ToolCallRow.objects.filter(conversation=stale).update(
        status="running", started_at=timezone.now() - timedelta(hours=1)
    )
    history.runs[Run.Status.RUNNING] = stale_run
    history.stale_run = stale_run

    # Calls left open without any run in progress (e.g. an import or a crash before a run row).
    open_conversation = create_conversation(owner=owner, title="Open calls")
    append_messages(
        conversation=open_conversation,
        messages=[
            ChatMessage.user("weather?"),
            ChatMessage.assistant_tool_calls([ToolCall("call_x", "get_weather", {"city": "Rome"})]),
        ],
    )
    history.open_conversation = open_conversation
    return history


@pytest.fixture
def history(user, openai_profile) -> History:
    return build_history(user, openai_profile)
