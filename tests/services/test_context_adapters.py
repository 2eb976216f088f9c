"""Views on the wire: what each HTTP adapter is handed fits the window, and a vendor's
context-length 400 gets exactly one retry with a smaller view."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conversations.domain import ChatMessage, ToolCall
from conversations.domain.estimates import estimate_tokens
from conversations.models import Message, ModelCall, Run
from conversations.services import append_messages, run_tool_loop
from conversations.tools import registry, tool
from tests.providers.mock_http import Recorder
from tests.providers.test_context_errors import CONTEXT_ERRORS
from tests.providers.test_errors import CASES, KEY
from tests.providers.wire_anthropic import validate_anthropic_request
from tests.providers.wire_gemini import validate_gemini_request
from tests.providers.wire_ollama import validate_ollama_request
from tests.providers.wire_openai import validate_openai_request

pytestmark = pytest.mark.django_db

WINDOW = 3000
VALIDATORS = {
    "openai": validate_openai_request,
    "anthropic": validate_anthropic_request,
    "gemini": validate_gemini_request,
    "ollama": validate_ollama_request,
}


def system_prompt(vendor: str, body: dict[str, Any]) -> str:
    """The system prompt as the vendor's body carries it."""
    if vendor == "anthropic":
        system = body["system"]
        return system if isinstance(system, str) else "".join(b["text"] for b in system)
    if vendor == "gemini":
        return "".join(part["text"] for part in body["systemInstruction"]["parts"])
    first = body["messages"][0]
    assert first["role"] == "system"
    return first["content"]


@pytest.fixture(autouse=True)
def weather_tool():
    """The one tool the histories call (Anthropic wants calls' tools defined), nothing more."""
    with registry.isolated(empty=True) as tools:

        @tool(registry=tools)
        def get_weather(city: str) -> str:
            """The weather in a city."""
            return "sunny"

        yield


@pytest.fixture
def windowed(profile):
    profile.stream = False
    profile.save()
    model = profile.language_model
    model.context_window = WINDOW
    model.save()
    return profile


def fill(conversation, *, turns: int) -> None:
    """Turns of a question, a call with its result and an answer: about 1,000 tokens each."""
    messages: list[ChatMessage] = []
    for index in range(turns):
        call = ToolCall(id=f"call_{index}", name="get_weather", arguments={"city": "Leipzig"})
        messages += [
            ChatMessage.user(f"question {index} " + "q" * 1000),
            ChatMessage.assistant_tool_calls([call]),
            ChatMessage.tool_result(f"call_{index}", "r" * 1800),
            ChatMessage.assistant(f"answer {index} " + "a" * 1000),
        ]
    append_messages(conversation=conversation, messages=messages)


@pytest.mark.parametrize("vendor", sorted(CASES))
def test_a_history_three_windows_long_is_sent_as_a_paired_view_that_fits(
    demo_conversation, windowed, vendor
):
    fill(demo_conversation, turns=9)  # about 3 windows
    case = CASES[vendor]
    recorder = Recorder(httpx.Response(200, json=case.text_reply), strict=True)
    provider = case.adapter(api_key=KEY, http_client=recorder.client)
    before = list(Message.objects.filter(conversation=demo_conversation).values())
    run = run_tool_loop(conversation=demo_conversation, content="And now?", provider=provider)
    assert run.status == Run.Status.COMPLETED, run.error_message
    (body,) = recorder.bodies
    assert VALIDATORS[vendor](body) == []  # every call with its result, nothing orphaned
    assert system_prompt(vendor, body) == windowed.system_prompt
    assert estimate_tokens(json.dumps(body)) <= WINDOW - windowed.max_tokens
    assert "question 8" in json.dumps(body) and "question 0" not in json.dumps(body)
    assert ModelCall.objects.get(run=run).first_position > 0
    after = list(Message.objects.filter(conversation=demo_conversation).values())
    assert after[: len(before)] == before


@pytest.mark.parametrize("vendor", sorted(CASES))
def test_a_vendors_context_400_is_retried_once_with_a_smaller_view(
    demo_conversation, windowed, vendor
):
    fill(demo_conversation, turns=2)  # fits the estimate; the vendor counts more
    case = CASES[vendor]
    refusal = httpx.Response(400, json=CONTEXT_ERRORS[vendor])
    recorder = Recorder(refusal, httpx.Response(200, json=case.text_reply), strict=True)
    provider = case.adapter(api_key=KEY, http_client=recorder.client)
    run = run_tool_loop(conversation=demo_conversation, content="And now?", provider=provider)
    assert run.status == Run.Status.COMPLETED, run.error_message
    first, second = (json.dumps(body) for body in recorder.bodies)
    assert len(second) < len(first) * 0.8
    assert "question 0" in first and "question 0" not in second and "question 1" in second
    assert VALIDATORS[vendor](recorder.bodies[1]) == []
    calls = ModelCall.objects.filter(run=run).order_by("started_at")
    assert [(c.status, c.error_code, c.first_position) for c in calls] == [
        ("error", "context_too_large", 0),
        ("ok", "", 4),
    ]


@pytest.mark.parametrize("vendor", sorted(CASES))
def test_a_second_context_400_ends_the_run_context_too_large(demo_conversation, windowed, vendor):
    fill(demo_conversation, turns=2)
    refusal = httpx.Response(400, json=CONTEXT_ERRORS[vendor])
    recorder = Recorder(refusal, refusal, strict=True)
    provider = CASES[vendor].adapter(api_key=KEY, http_client=recorder.client)
    run = run_tool_loop(conversation=demo_conversation, content="And now?", provider=provider)
    assert (run.status, run.error_code) == (Run.Status.FAILED, "context_too_large")
    assert len(recorder.requests) == 2


def test_a_model_without_a_recorded_window_also_retries_smaller(demo_conversation, profile):
    profile.stream = False
    profile.save()
    fill(demo_conversation, turns=3)
    case = CASES["openai"]
    refusal = httpx.Response(400, json=CONTEXT_ERRORS["openai"])
    recorder = Recorder(refusal, httpx.Response(200, json=case.text_reply), strict=True)
    provider = case.adapter(api_key=KEY, http_client=recorder.client)
    run = run_tool_loop(conversation=demo_conversation, content="And now?", provider=provider)
    assert run.status == Run.Status.COMPLETED, run.error_message
    first, second = recorder.bodies
    assert len(second["messages"]) < len(first["messages"])
    assert validate_openai_request(second) == []
