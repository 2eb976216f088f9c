"""useChat's endpoint: the request it sends, the UI message stream we answer, the history as UIMessages.

The endpoint tests post what the AI SDK's default transport posts and run
the loop on the demo adapter (in the endpoint's background thread, hence
``transaction=True`` where a run executes). How deltas, rows and endings
become chunks is checked on :class:`ChatStream` directly, with runs executed
by a scripted provider. tests/api/test_ai_sdk_node.py reads the same stream
with the SDK itself.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations import events
from conversations.domain import ToolCall
from conversations.exceptions import ProviderError
from conversations.models import Message, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import execute_run, start_run
from conversations.tools import registry, tool

from .conftest import scripted_turn

pytestmark = pytest.mark.django_db

QUESTION = "What's the weather in Leipzig and what time is it?"
STREAMED_RUN = [
    "start",
    "start-step",
    "tool-input-start",
    "tool-input-delta",
    "tool-input-start",
    "tool-input-delta",
    "tool-input-available",
    "tool-input-available",
    "tool-output-available",
    "tool-output-available",
    "finish-step",
    "start-step",
    "text-start",
    "text-delta",
    "text-end",
    "finish-step",
    "finish",
]
"""The demo model's run as it happens: deltas first, then what the stored rows add.

(Consecutive deltas of one kind count once: how finely the model streams is its own business.)"""


def kinds(chunks):
    """The chunk types in order, each run of ``*-delta`` chunks of one type counted once."""
    types = [c["type"] for c in chunks]
    return [
        kind
        for index, kind in enumerate(types)
        if not (kind.endswith("-delta") and index and types[index - 1] == kind)
    ]


ROWS_RUN = [
    "start",
    "start-step",
    "tool-input-available",
    "tool-input-available",
    "tool-output-available",
    "tool-output-available",
    "finish-step",
    "start-step",
    "text-start",
    "text-delta",
    "text-end",
    "finish-step",
    "finish",
]
"""The same run read from its rows alone (it had ended when the stream started)."""


def chat_url(conversation):
    return reverse("conversations:conversation-chat", args=[conversation.pk])


def user_message(text, id="m1"):
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}


def chat_body(*messages, **extra):
    """What DefaultChatTransport posts for sendMessage({text})."""
    return {
        "id": "chat-1",
        "messages": list(messages) or [user_message(QUESTION)],
        "trigger": "submit-message",
        **extra,
    }


def parse(raw: bytes) -> list[dict]:
    """The chunks of a UI message stream, which must end with ``[DONE]``."""
    blocks = [block for block in raw.decode().split("\n\n") if block]
    assert blocks[-1] == "data: [DONE]"
    return [json.loads(b.removeprefix("data: ")) for b in blocks[:-1] if not b.startswith(":")]


def chunks_of(response) -> list[dict]:
    return parse(b"".join(response.streaming_content))


# The request ---------------------------------------------------------------------------------

USER = user_message("hi")


@pytest.mark.parametrize(
    ("body", "code", "pointer"),
    [
        ([USER], "invalid", ""),
        ({"id": "x"}, "required", "/messages"),
        (chat_body(USER, id=5), "invalid", "/id"),
        ({"messages": []}, "invalid", "/messages"),
        ({"messages": [USER, "hi"]}, "invalid", "/messages/1"),
        ({"messages": [USER, {"role": "robot", "parts": []}]}, "invalid", "/messages/1/role"),
        (
            {"messages": [USER, USER, USER, {"role": "user", "parts": "hi"}]},
            "invalid",
            "/messages/3/parts",
        ),
        (
            {"messages": [USER, {"id": "a", "role": "assistant", "parts": []}]},
            "invalid",
            "/messages/1/role",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "parts": [
                            {"type": "text", "text": "see"},
                            {"type": "file", "url": "x", "mediaType": "image/png"},
                        ],
                    }
                ]
            },
            "unsupported_file_url",
            "/messages/0/parts/1/url",
        ),
        (
            {"messages": [{"role": "user", "parts": [{"type": "source-url", "url": "x"}]}]},
            "invalid",
            "/messages/0/parts/0/type",
        ),
        (
            {"messages": [{"role": "user", "parts": [{"type": "text", "text": 3}]}]},
            "invalid",
            "/messages/0/parts/0/text",
        ),
        ({"messages": [{"role": "user", "parts": ["hi"]}]}, "invalid", "/messages/0/parts/0/type"),
        (
            {"messages": [{"role": "user", "parts": [{"type": "text", "text": "  "}]}]},
            "invalid",
            "/messages/0/parts",
        ),
        ({"messages": [{"role": "user", "parts": []}]}, "invalid", "/messages/0/parts"),
        (chat_body(USER, trigger="regenerate-message"), "unsupported_trigger", "/trigger"),
        (chat_body(USER, trigger="resume"), "invalid", "/trigger"),
        (chat_body(USER, messageId="m1"), "unsupported_message_id", "/messageId"),
    ],
)
def test_a_bad_body_is_400_naming_the_field_and_stores_nothing(
    api, demo_conversation, body, code, pointer
):
    response = api.post(chat_url(demo_conversation), body, format="json")
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["code"] == code
    assert [e["pointer"] for e in answer["errors"]] == [pointer]
    # The summary names the place of the one problem, then says what it is.
    place = f'Field "{pointer[1:]}": ' if pointer else ""
    assert answer["detail"] == place + answer["errors"][0]["detail"]
    assert not Message.objects.exists() and not Run.objects.exists()


def test_too_long_a_message_is_413_located_in_its_parts(api, settings, demo_conversation):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_CONTENT_BYTES": 10}
    body = chat_body(
        user_message("hi"),
        {"id": "m2", "role": "user", "parts": [{"type": "text", "text": "x" * 11}]},
    )
    response = api.post(chat_url(demo_conversation), body, format="json")
    assert response.status_code == 413
    assert response.json()["code"] == "content_too_large"
    assert [e["pointer"] for e in response.json()["errors"]] == ["/messages/1/parts"]
    assert not Run.objects.exists()


def test_a_busy_conversation_is_409_and_nothing_is_stored(api, demo_conversation, running_run):
    response = api.post(chat_url(demo_conversation), chat_body(), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "conversation_busy"
    assert not Message.objects.exists()
    assert Run.objects.get() == running_run


def test_a_conversation_without_a_profile_is_503(api, conversation):
    response = api.post(chat_url(conversation), chat_body(), format="json")
    assert response.status_code == 503
    assert response.json()["code"] == "configuration_error"
    assert not Message.objects.exists()


def test_all_streams_taken_is_429_and_no_run_starts(api, settings, demo_conversation):
    settings.CONVERSATIONS = {"MESSAGE_THROTTLE_RATE": None, "MAX_STREAMS_PER_USER": 0}
    response = api.post(chat_url(demo_conversation), chat_body(), format="json")
    assert response.status_code == 429
    assert response.json()["code"] == "too_many_streams"
    assert not Run.objects.exists()


def test_a_session_needs_the_csrf_token_to_post(user, demo_conversation):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get(chat_url(demo_conversation)).status_code == 200
    response = client.post(chat_url(demo_conversation), chat_body(), format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert not Message.objects.exists()


def test_a_token_authenticates_and_other_users_get_404(user, other_user, demo_conversation):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    assert client.get(chat_url(demo_conversation)).json() == []
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=other_user).key}")
    for method in ("get", "post"):
        response = getattr(client, method)(chat_url(demo_conversation), chat_body(), format="json")
        assert response.status_code == 404
        assert response.json() == {"code": "not_found", "detail": "Not found.", "errors": []}


# The stream of a real run ------------------------------------------------------------------
# The loop runs in the endpoint's thread while the test reads the stream: on
# SQLite the two contend for the one database lock, so these need PostgreSQL.


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_run_with_tool_calls_streams_every_step(api, demo_conversation):
    earlier = user_message("ignored: the stored history counts", id="old")
    response = api.post(
        chat_url(demo_conversation), chat_body(earlier, user_message(QUESTION)), format="json"
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["x-vercel-ai-ui-message-stream"] == "v1"
    chunks = chunks_of(response)
    assert kinds(chunks) == STREAMED_RUN

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED
    assert chunks[0] == {
        "type": "start",
        "messageId": f"run-{run.pk}",
        "messageMetadata": {"runId": str(run.pk)},
    }
    calls = {c["toolName"]: c for c in chunks if c["type"] == "tool-input-available"}
    assert calls["get_weather"]["input"] == {"city": "Leipzig"}
    outputs = {c["toolCallId"]: c["output"] for c in chunks if c["type"] == "tool-output-available"}
    assert json.loads(outputs[calls["get_weather"]["toolCallId"]])["city"] == "Leipzig"
    assert chunks[-1]["finishReason"] == "stop"
    stored = list(Message.objects.filter(run=run).exclude(role="user").values_list("pk", flat=True))
    answer = Message.objects.filter(run=run, role="assistant").order_by("position").last()
    called = ToolCallRow.objects.filter(message__run=run)
    assert chunks[-1]["messageMetadata"] == {
        "runId": str(run.pk),
        "runStatus": "completed",
        "messageIds": stored,
        "position": answer.position,
        "toolCalls": {call.call_id: call.pk for call in called},
    }
    # Only the last message was read.
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == [QUESTION]

    history = api.get(chat_url(demo_conversation)).json()
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["id"] == f"run-{run.pk}"
    assert history[1]["metadata"] == chunks[-1]["messageMetadata"]
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert history[1]["parts"][-1] == {"type": "text", "text": text, "state": "done"}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_under_asgi_the_same_stream_comes_from_an_async_generator(user, demo_conversation):
    client = AsyncClient()
    client.force_login(user)

    async def post():
        response = await client.post(
            chat_url(demo_conversation), chat_body(), content_type="application/json"
        )
        assert response.status_code == 200
        assert response.is_async
        return b"".join([chunk async for chunk in response.streaming_content])

    assert kinds(parse(async_to_sync(post)())) == STREAMED_RUN
    assert Run.objects.get().status == Run.Status.COMPLETED


# Deltas, rows and endings as chunks ---------------------------------------------------------


def follow(conversation, profile, content="hi"):
    """A started run (no process executes it yet) and a stream following it."""
    from conversations.api.ai_sdk.stream import ChatStream

    run = start_run(conversation=conversation, content=content, profile=profile)
    return run, ChatStream(run, events.subscribe(run.pk))


def delta(run, kind, seq, **data):
    return events.LiveEvent(str(run.pk), kind, {"seq": seq, **data})


@pytest.mark.parametrize(
    "transport",
    # ASGI reads in a pool thread: it sees committed rows only.
    ["wsgi", pytest.param("asgi", marks=pytest.mark.django_db(transaction=True))],
)
def test_a_finished_run_streams_whole_under_either_transport(demo_conversation, profile, transport):
    run, stream = follow(demo_conversation, profile, content=QUESTION)
    execute_run(run=run)  # the demo model: two calls, then the answer

    async def read_async():
        return b"".join([chunk async for chunk in stream.iter_async()])

    raw = b"".join(stream.iter_sync()) if transport == "wsgi" else async_to_sync(read_async)()
    assert [c["type"] for c in parse(raw)] == ROWS_RUN
    assert stream.subscription.closed


def test_deltas_stream_and_the_stored_rows_complete_them(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    assert [c["type"] for c in stream.opening()] == ["start"]
    shown = []
    for event in [
        delta(run, "reasoning.delta", 1, text="Rain? "),
        delta(run, "text.delta", 2, text="Paris: "),
        delta(run, "text.delta", 2, text="Paris: "),  # a duplicate: dropped
        delta(run, "tool_call.delta", 3, index=0, id=None, name=None, arguments='{"city":'),
        delta(run, "tool_call.delta", 4, index=0, id="c1", name="get_weather", arguments=""),
        delta(run, "tool_call.delta", 5, index=0, id=None, name=None, arguments='"Paris"}'),
    ]:
        shown += stream.on_event(event)
    assert shown == [
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "reasoning-1"},
        {"type": "reasoning-delta", "id": "reasoning-1", "delta": "Rain? "},
        {"type": "reasoning-end", "id": "reasoning-1"},
        {"type": "text-start", "id": "text-1"},
        {"type": "text-delta", "id": "text-1", "delta": "Paris: "},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '"Paris"}'},
    ]
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    provider = ScriptedProvider(
        [scripted_calls(call, content="Paris: light rain"), scripted_text("Done.")]
    )
    execute_run(run=run, provider=provider)
    rest = stream.poll()
    assert [c["type"] for c in rest] == [
        "text-delta",
        "text-end",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert rest[0] == {"type": "text-delta", "id": "text-1", "delta": "light rain"}
    assert rest[2] == {
        "type": "tool-input-available",
        "toolCallId": "c1",
        "toolName": "get_weather",
        "input": {"city": "Paris"},
    }
    assert rest[3]["toolCallId"] == "c1" and "Paris" in rest[3]["output"]
    assert rest[7] == {"type": "text-delta", "id": "text-2", "delta": "Done."}
    assert stream.finished and stream.poll() == []


@pytest.mark.django_db(transaction=True)  # "changed" is published when a write commits
def test_deltas_of_an_answer_already_read_from_the_rows_are_dropped(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    shown = stream.opening()

    def drain():
        chunks = []
        while (event := stream.subscription.get(0)) is not None:
            chunks += stream.on_event(event)
        return chunks

    with registry.isolated() as tools:

        @tool(registry=tools)
        def peek(label: str) -> str:
            """Reads the stream while the turn that called it is stored but unanswered."""
            # The rows first: the turn's deltas are still queued behind them.
            shown.extend(stream.poll())
            shown.extend(drain())
            return label

        call = ToolCall(id="c1", name="peek", arguments={"label": "x"})
        provider = ScriptedProvider(
            [scripted_calls(call, content="Looking"), scripted_text("Seen.")]
        )
        execute_run(run=run, provider=provider)
    shown += drain()
    assert [c["type"] for c in shown] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert [c["delta"] for c in shown if c["type"] == "text-delta"] == ["Looking", "Seen."]


def test_a_call_streamed_under_another_id_keeps_that_id(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    stream.opening()
    stream.on_event(delta(run, "tool_call.delta", 1, index=0, id="tmp", name="calculate"))
    call = ToolCall(id="stored", name="calculate", arguments={"expression": "6*7"})
    execute_run(run=run, provider=ScriptedProvider([scripted_calls(call), scripted_text("42")]))
    chunks = stream.poll()
    ids = {c["toolCallId"] for c in chunks if c["type"].startswith("tool-")}
    assert ids == {"tmp"}


def test_an_answer_already_streaming_is_shown_from_its_snapshot(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    events.set_inflight(run.pk, {"seq": 3, "text": "Hel", "reasoning": "", "tool_calls": []})
    try:
        assert stream.opening()[1:] == [
            {"type": "start-step"},
            {"type": "text-start", "id": "text-1"},
            {"type": "text-delta", "id": "text-1", "delta": "Hel"},
        ]
    finally:
        events.clear_inflight(run.pk)
    assert stream.on_event(delta(run, "text.delta", 3, text="l")) == []
    assert stream.on_event(delta(run, "text.delta", 4, text="lo")) == [
        {"type": "text-delta", "id": "text-1", "delta": "lo"}
    ]


def test_a_provider_error_is_an_error_chunk_with_its_message(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    stream.opening()
    execute_run(run=run, provider=ScriptedProvider([ProviderError("the model is overloaded")]))
    chunks = stream.poll()
    assert chunks == [
        {"type": "error", "errorText": "the model is overloaded (provider_error)"},
        {
            "type": "finish",
            "finishReason": "error",
            "messageMetadata": {
                "runId": str(run.pk),
                "runStatus": "failed",
                "messageIds": [],
                "position": None,
                "toolCalls": {},
            },
        },
    ]


def test_an_unexpected_error_never_shows_its_text(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    stream.opening()
    secret = "password=hunter2 in the adapter"
    with pytest.raises(RuntimeError):
        execute_run(run=run, provider=ScriptedProvider([RuntimeError(secret)]))
    chunks = stream.poll()
    assert chunks[0] == {"type": "error", "errorText": "The run ended failed (internal_error)."}
    assert "hunter2" not in json.dumps(chunks)


def test_a_cancelled_run_finishes_without_an_error(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    stream.opening()
    stream.on_event(delta(run, "text.delta", 1, text="Wait"))
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    assert [(c["type"], c.get("finishReason")) for c in stream.poll()] == [
        ("text-end", None),
        ("finish-step", None),
        ("finish", "other"),
    ]


# The history -----------------------------------------------------------------------------------


def test_the_history_is_one_assistant_message_per_run(api, demo_conversation):
    run = scripted_turn(demo_conversation)
    history = api.get(chat_url(demo_conversation)).json()
    user, assistant = history
    stored = list(Message.objects.order_by("position"))
    assert user == {
        "id": str(stored[0].pk),
        "role": "user",
        "parts": [{"type": "text", "text": "Weather in Paris, and 6*7?"}],
        "metadata": {"runId": str(run.pk), "messageIds": [stored[0].pk]},
    }
    assert assistant["id"] == f"run-{run.pk}"
    weather, calculate = stored[1].tool_calls.order_by("index")
    assert assistant["metadata"] == {
        "runId": str(run.pk),
        "runStatus": "completed",
        "messageIds": [m.pk for m in stored[1:]],
        "position": stored[-1].position,
        "toolCalls": {weather.call_id: weather.pk, calculate.call_id: calculate.pk},
    }
    assert assistant["parts"] == [
        {"type": "step-start"},
        {
            "type": "tool-get_weather",
            "toolCallId": weather.call_id,
            "state": "output-available",
            "input": {"city": "Paris"},
            "output": stored[2].content,
        },
        {
            "type": "tool-calculate",
            "toolCallId": calculate.call_id,
            "state": "output-available",
            "input": {"expression": "6*7"},
            "output": stored[3].content,
        },
        {"type": "step-start"},
        {"type": "text", "text": "Paris: light rain; 6*7 = 42.", "state": "done"},
    ]


def test_a_failed_call_is_an_output_error_part(api, demo_conversation):
    provider = ScriptedProvider([scripted_calls(("no_such_tool", {})), scripted_text("Sorry.")])
    from conversations.services import run_tool_loop

    run_tool_loop(conversation=demo_conversation, content="?", provider=provider)
    part = api.get(chat_url(demo_conversation)).json()[1]["parts"][1]
    assert part["type"] == "tool-no_such_tool"
    assert part["state"] == "output-error"
    assert part["errorText"] == 'Error: unknown tool "no_such_tool"'
    assert "output" not in part


def test_a_quiet_stream_sends_keep_alives_then_ends_with_its_run(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    stream.keepalive_seconds, stream.poll_seconds = 0, 0.01
    frames = stream.iter_sync()
    assert [c["type"] for c in parse(next(frames) + b"data: [DONE]\n\n")] == ["start"]
    assert next(frames) == b": keep-alive\n\n"
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    rest = b"".join(frames)
    assert [c["type"] for c in parse(rest)] == ["finish"]
    assert stream.subscription.closed


def test_a_stream_outliving_its_limit_says_so_and_ends(demo_conversation, profile):
    run, stream = follow(demo_conversation, profile)
    stream.max_seconds, stream.poll_seconds = 0, 0.01
    chunks = parse(b"".join(stream.iter_sync()))
    assert [c["type"] for c in chunks] == ["start", "error", "finish"]
    assert chunks[1]["errorText"] == "The stream ended before the run; load the conversation again."
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # the run is not touched
