"""Messages: the history (fields, polling, constant queries) and posting a user message."""

from __future__ import annotations

import socket

import pytest
from django.urls import reverse

from conversations.models import Conversation, LanguageModel, Message, Profile, Provider, Run

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db


def messages_url(demo_conversation):
    return reverse("conversations:conversation-messages", args=[demo_conversation.pk])


# Listing ---------------------------------------------------------------------------------


def test_history_has_every_field(api, history, demo_conversation):
    response = api.get(messages_url(demo_conversation))
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    user, calling, weather, product, answer = body["results"]
    assert [m["position"] for m in body["results"]] == [0, 1, 2, 3, 4]
    assert [m["role"] for m in body["results"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert user["content"] == "Weather in Paris, and 6*7?"
    assert user["tool_calls"] == [] and user["tool_call_id"] is None
    assert user["model"] is None and user["usage"] is None and user["latency_ms"] is None
    assert user["run"] == str(history.pk)

    first, second = calling["tool_calls"]
    assert first["name"] == "get_weather" and first["arguments"] == {"city": "Paris"}
    assert first["raw_arguments"] is None and first["status"] == "succeeded"
    assert isinstance(first["duration_ms"], int) and first["duration_ms"] >= 0
    assert second["name"] == "calculate" and second["arguments"] == {"expression": "6*7"}
    assert calling["model"] == "scripted" and calling["finish_reason"] == "tool_calls"
    assert calling["usage"] == {
        "prompt_tokens": 20,
        "completion_tokens": 5,
        "total_tokens": 25,
        "cached_prompt_tokens": 4,
        "reasoning_tokens": 0,
        "estimated": False,
    }
    assert isinstance(calling["latency_ms"], int)

    assert weather["tool_call_id"] == first["id"] and product["tool_call_id"] == second["id"]
    assert product["content"] == "42"
    assert weather["model"] is None and weather["usage"] is None
    assert [m["is_error"] for m in body["results"]] == [False] * 5

    assert answer["content"] == "Paris: light rain; 6*7 = 42."
    assert answer["finish_reason"] == "stop" and answer["tool_calls"] == []
    assert answer["usage"]["reasoning_tokens"] == 3
    assert set(answer) == {
        "position",
        "role",
        "content",
        "tool_calls",
        "provider_tool_calls",
        "citations",
        "is_error",
        "tool_call_id",
        "run",
        "created_at",
        "model",
        "finish_reason",
        "usage",
        "latency_ms",
        "cost",
        "context_view",
        "attachments",
    }
    # The whole history was sent (no context window): the view starts at 0, nothing summarised.
    assert answer["context_view"] == {"first_position": 0, "summarized": False}
    assert user["context_view"] is None and weather["context_view"] is None
    assert answer["attachments"] == []


def test_after_returns_only_newer_messages(api, history, demo_conversation):
    response = api.get(messages_url(demo_conversation), {"after": 2})
    assert [m["position"] for m in response.json()["results"]] == [3, 4]
    assert api.get(messages_url(demo_conversation), {"after": 4}).json()["results"] == []
    everything = api.get(messages_url(demo_conversation), {"after": -1}).json()["results"]
    assert len(everything) == 5


@pytest.mark.parametrize("after", ["x", "-2", "1.5", str(2**31)])
def test_after_must_be_a_position(api, demo_conversation, after):
    response = api.get(messages_url(demo_conversation), {"after": after})
    assert response.status_code == 400
    assert response.json()["errors"][0]["parameter"] == "after"


def test_cursor_pages_through_the_history_in_order(api, history, demo_conversation):
    scripted_turn(demo_conversation, content="Again?")
    positions, url = [], messages_url(demo_conversation) + "?page_size=3"
    while url:
        body = api.get(url).json()
        positions += [m["position"] for m in body["results"]]
        url = body["next"]
    assert positions == list(range(10))


@pytest.mark.parametrize("turns", [1, 10])
def test_history_queries_do_not_grow(api, demo_conversation, turns, django_assert_max_num_queries):
    for index in range(turns):
        scripted_turn(demo_conversation, content=f"turn {index}")
    # The page, then the calls, the provider's own tool calls and the citations of its
    # messages, and their attachments.
    with django_assert_max_num_queries(6):
        response = api.get(messages_url(demo_conversation), {"page_size": 100})
    assert len(response.json()["results"]) == 5 * turns


# Posting ---------------------------------------------------------------------------------------


def test_post_runs_the_loop_and_answers_201(api, demo_conversation):
    response = api.post(
        messages_url(demo_conversation),
        {"content": "What is the weather in Paris and 2 * (3 + 4)?"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    run = body["run"]
    assert run["status"] == "completed" and run["termination_reason"] == "completed"
    assert run["iterations"] == 2 and run["max_iterations"] == 4
    assert run["provider"] == "demo" and run["model"] == "demo-model"
    assert run["profile"] == "demo"
    assert run["final_content"] == body["messages"][-1]["content"]
    assert {c["name"] for c in run["tool_calls"]} == {"get_weather", "calculate"}
    assert all(c["status"] == "succeeded" for c in run["tool_calls"])
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    assert body["messages"][0]["content"] == "What is the weather in Paris and 2 * (3 + 4)?"
    assert all(m["run"] == run["id"] for m in body["messages"])
    assert Message.objects.filter(conversation=demo_conversation).count() == 5


def test_post_answers_only_the_messages_of_this_run(api, history, demo_conversation):
    response = api.post(messages_url(demo_conversation), {"content": "Hello"}, format="json")
    assert response.status_code == 201
    assert [m["position"] for m in response.json()["messages"]] == [5, 6]


def test_post_to_a_busy_conversation_is_409(api, demo_conversation, running_run):
    response = api.post(messages_url(demo_conversation), {"content": "Hello"}, format="json")
    assert response.status_code == 409
    assert response.json() == {
        "code": "conversation_busy",
        "detail": "Another run is already running on this conversation",
        "errors": [],
    }
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "required"),
        ({"content": ""}, "blank"),
        ({"content": "  \n\t "}, "blank"),
        ({"content": None}, "null"),
        ({"content": "a\x00b"}, "null_characters_not_allowed"),
        ({"content": ["a"]}, "invalid"),
    ],
)
def test_post_rejects_empty_or_invalid_content(api, demo_conversation, body, code):
    response = api.post(messages_url(demo_conversation), body, format="json")
    assert response.status_code == 400
    data = response.json()
    assert data["code"] == "invalid"
    assert [(e["pointer"], e["code"]) for e in data["errors"]] == [("/content", code)]
    assert not Run.objects.exists()


def test_post_over_the_size_limit_is_413(api, demo_conversation, settings):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_CONTENT_BYTES": 10}
    # Ten characters but twelve UTF-8 bytes: the limit counts bytes.
    response = api.post(messages_url(demo_conversation), {"content": "ééabcdefgh"}, format="json")
    assert response.status_code == 413
    assert response.json() == {
        "code": "content_too_large",
        "detail": 'Field "content": The content is 12 bytes (UTF-8); at most 10 are accepted.',
        "errors": [
            {
                "pointer": "/content",
                "parameter": None,
                "code": "content_too_large",
                "detail": "The content is 12 bytes (UTF-8); at most 10 are accepted.",
            }
        ],
    }
    ok = api.post(messages_url(demo_conversation), {"content": "éé€ab"}, format="json")  # 9 bytes
    assert ok.status_code == 201


def test_the_default_limit_is_32_kib(api, demo_conversation):
    response = api.post(messages_url(demo_conversation), {"content": "a" * 32_769}, format="json")
    assert response.status_code == 413


def test_posting_is_throttled_per_user(
    api, other_api, demo_conversation, other_users_conversation, settings
):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": "2/min"}
    for _ in range(2):
        assert (
            api.post(messages_url(demo_conversation), {"content": "hi"}, format="json").status_code
            == 201
        )
    response = api.post(messages_url(demo_conversation), {"content": "hi"}, format="json")
    assert response.status_code == 429
    assert response.json()["code"] == "throttled"
    assert int(response["Retry-After"]) > 0
    # Reading is not throttled, and other users have their own budget.
    assert api.get(messages_url(demo_conversation)).status_code == 200
    other = other_api.post(messages_url(other_users_conversation), {"content": "hi"}, format="json")
    assert other.status_code == 201


def _provider_profile(slug, *, adapter, base_url="", api_key_ref="", timeout=None):
    provider = Provider.objects.create(
        slug=slug,
        name=slug,
        adapter=adapter,
        base_url=base_url,
        api_key_ref=api_key_ref,
        timeout=timeout,
        max_retries=0,
    )
    model = LanguageModel.objects.create(provider=provider, model_id="m")
    return Profile.objects.create(slug=slug, name=slug, language_model=model)


def test_an_unresolvable_key_is_503_configuration_error(api, user):
    # A reference to an environment variable that no environment sets.
    profile = _provider_profile(
        "broken", adapter="openai", api_key_ref="env:CONVERSATIONS_API_TEST_UNSET_KEY_7F3A"
    )
    conversation = Conversation.objects.create(owner=user, profile=profile)
    response = api.post(messages_url(conversation), {"content": "hi"}, format="json")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "configuration_error" and body["errors"] == []
    assert "env:CONVERSATIONS_API_TEST_UNSET_KEY_7F3A" in body["detail"]
    assert not Run.objects.exists() and not Message.objects.exists()


def test_no_profile_at_all_is_503(api, user):
    conversation = Conversation.objects.create(owner=user)
    response = api.post(messages_url(conversation), {"content": "hi"}, format="json")
    assert response.status_code == 503
    assert response.json()["code"] == "configuration_error"


def test_an_unreachable_provider_fails_the_run_and_answers_503(api, user):
    # A port nobody listens on: the connection is refused at once.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    profile = _provider_profile("down", adapter="ollama", base_url=f"http://127.0.0.1:{port}")
    conversation = Conversation.objects.create(owner=user, profile=profile)
    response = api.post(messages_url(conversation), {"content": "hi"}, format="json")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "provider_unavailable"
    assert body["detail"] == "Ollama: connection failed (ConnectError)"
    assert body["errors"] == []
    assert body["run"]["status"] == "failed"
    assert body["run"]["error_code"] == "provider_unavailable"
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert Run.objects.get().status == "failed"


def test_a_provider_that_does_not_answer_in_time_is_504(api, user):
    # Accepts the connection (backlog) but never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        profile = _provider_profile(
            "slow", adapter="ollama", base_url=f"http://127.0.0.1:{port}", timeout=0.2
        )
        conversation = Conversation.objects.create(owner=user, profile=profile)
        response = api.post(messages_url(conversation), {"content": "hi"}, format="json")
    assert response.status_code == 504
    assert response.json()["code"] == "provider_timeout"
    assert response.json()["run"]["status"] == "failed"


def test_a_forged_message_cursor_is_400(api, history, demo_conversation):
    import base64

    cursor = base64.b64encode(b"p=abc").decode()
    response = api.get(messages_url(demo_conversation), {"cursor": cursor})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_cursor"


def test_a_profile_the_adapter_refuses_is_503_with_the_adapters_code(api, user):
    # Ollama emulates tool_choice by offering only the named tool; naming a tool
    # the profile does not allow is refused while building the body, before any
    # connection (the port would refuse it anyway).
    profile = _provider_profile("forcing", adapter="ollama", base_url="http://127.0.0.1:9")
    profile.allowed_tools = ["get_weather"]
    profile.tool_choice = "calculate"
    profile.save()
    conversation = Conversation.objects.create(owner=user, profile=profile)
    response = api.post(messages_url(conversation), {"content": "hi"}, format="json")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "unknown_tool_choice" and body["errors"] == []
    assert "calculate" in body["detail"]
    run = Run.objects.get()
    assert run.status == "failed" and run.error_code == "unknown_tool_choice"
    # The same profile cannot be exported either, and says why the same way.
    export = reverse("conversations:conversation-export", args=[conversation.pk])
    response = api.get(export, {"format": "openai"})
    assert response.status_code == 503
    assert response.json()["code"] == "unknown_tool_choice"
