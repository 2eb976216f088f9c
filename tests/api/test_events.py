"""Run events (Server-Sent Events): order, resuming with Last-Event-ID, access, both transports.

The stream is read through Django's test clients (the WSGI generator with
``Client``, the ASGI one with ``AsyncClient``). The live tests with real
servers and workers are in ``test_live_events.py``.
"""

from __future__ import annotations

import json
import time

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from conversations.api.base import ConversationsAPIView
from conversations.api.sse.views import STRIDE, RunEventStream, RunEventsView
from conversations.domain import ToolCall
from conversations.models import Run
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import execute_run
from conversations.services.loop.runs import (
    CANCEL_CHECK_INTERVAL,
    cancel_run,
    claim_run,
    start_run,
)
from conversations.tools import ToolContext, registry, tool

pytestmark = pytest.mark.django_db

EXPECTED = [
    (0, "run_started"),
    (1 * STRIDE + 1, "assistant_turn"),
    (1 * STRIDE + 2, "tool_call_started"),
    (1 * STRIDE + 3, "tool_call_started"),
    (2 * STRIDE + 1, "tool_call_finished"),
    (3 * STRIDE + 1, "tool_call_finished"),
    (4 * STRIDE + 1, "assistant_turn"),
    (4 * STRIDE + STRIDE - 1, "run_finished"),
]
"""The ``history`` fixture's run: user, assistant (2 calls), 2 results, the answer."""


def events_url(run):
    return reverse("conversations:run-events", args=[run.pk])


def parse(raw: bytes) -> list[dict]:
    """Server-Sent Events as dicts (id, event, data); comments and ``retry`` skipped."""
    events = []
    for block in raw.decode().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if "event" in fields:
            events.append(
                {
                    "id": int(fields["id"]),
                    "event": fields["event"],
                    "data": json.loads(fields["data"]),
                }
            )
    return events


def ids(events):
    return [(e["id"], e["event"]) for e in events]


@pytest.fixture
def browser(user):
    """A logged-in session, like the chat page's."""
    client = Client()
    client.force_login(user)
    return client


def read(client, run, **headers):
    response = client.get(events_url(run), headers=headers)
    if response.status_code != 200:
        return response, []
    return response, parse(b"".join(response.streaming_content))


# A finished run ---------------------------------------------------------------------------------


def test_the_events_of_a_run_come_in_order_with_their_data(browser, history, demo_conversation):
    response, events = read(browser, history)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response["Cache-Control"] == "no-cache"
    assert ids(events) == EXPECTED

    started, turn, weather, product, first, second, answer, finished = (e["data"] for e in events)
    assert started["message"]["role"] == "user"
    assert started["message"]["content"] == "Weather in Paris, and 6*7?"
    assert started["run"]["id"] == str(history.pk)
    assert [c["name"] for c in turn["message"]["tool_calls"]] == ["get_weather", "calculate"]
    assert weather["position"] == 1 and weather["call"]["name"] == "get_weather"
    assert product["call"]["arguments"] == {"expression": "6*7"}
    assert first["message"]["tool_call_id"] == weather["call"]["id"]
    assert first["call"]["status"] == "succeeded"
    assert second["message"]["content"] == "42"
    assert answer["message"]["content"] == "Paris: light rain; 6*7 = 42."
    assert finished["run"]["status"] == "completed"
    assert finished["run"]["final_content"] == "Paris: light rain; 6*7 = 42."


def test_resuming_with_last_event_id_gets_exactly_the_missing_events(browser, history):
    _, everything = read(browser, history)
    for cut in [-1, *(e["id"] for e in everything[:-1])]:
        _, rest = read(browser, history, **{"Last-Event-ID": str(cut)})
        assert rest == [e for e in everything if e["id"] > cut], cut
    # Between two ids, as well (a client may only know a lower one).
    _, rest = read(browser, history, **{"Last-Event-ID": str(2 * STRIDE)})
    assert ids(rest) == EXPECTED[4:]


def test_the_query_parameter_works_like_the_header(browser, history):
    response = browser.get(events_url(history) + f"?last_event_id={3 * STRIDE + 1}")
    assert ids(parse(b"".join(response.streaming_content))) == EXPECTED[6:]


def test_nothing_left_is_a_204_so_event_source_stops(browser, history):
    response = browser.get(events_url(history), headers={"Last-Event-ID": str(EXPECTED[-1][0])})
    assert response.status_code == 204


def test_a_run_that_ended_without_messages(browser, demo_conversation):
    run = Run.objects.create(
        conversation=demo_conversation,
        status=Run.Status.FAILED,
        max_iterations=1,
        finished_at=timezone.now(),
        error_code="configuration_error",
    )
    _, events = read(browser, run)
    assert ids(events) == [(0, "run_started"), (STRIDE - 1, "run_finished")]
    assert events[0]["data"]["message"] is None
    assert events[1]["data"]["run"]["error_code"] == "configuration_error"


# Access -------------------------------------------------------------------------------------------


def test_another_users_run_is_not_found(other_user, history):
    client = Client()
    client.force_login(other_user)
    response = client.get(events_url(history))
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "detail": "Not found.", "errors": []}


def test_without_credentials_401_like_the_api(history):
    response = Client().get(events_url(history))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["code"] == "not_authenticated"


def test_a_token_works_and_a_bad_one_is_refused(user, history):
    token = Token.objects.create(user=user)
    response, events = read(Client(), history, Authorization=f"Token {token.key}")
    assert response.status_code == 200 and ids(events) == EXPECTED
    bad = Client().get(events_url(history), headers={"Authorization": "Token nope"})
    assert bad.status_code == 401 and bad.json()["code"] == "authentication_failed"


def test_the_stream_view_is_an_api_view_with_the_apis_authentication():
    assert issubclass(RunEventsView, ConversationsAPIView)
    assert RunEventsView.authentication_classes == ConversationsAPIView.authentication_classes
    assert RunEventsView.permission_classes == ConversationsAPIView.permission_classes


def _credentials(kind, user, django_user_model):
    """A client carrying one kind of credentials (or none, or bad ones)."""
    client = Client()
    if kind == "session":
        client.force_login(user)
    elif kind == "token":
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=user).key}"
    elif kind == "unknown token":
        client.defaults["HTTP_AUTHORIZATION"] = "Token nope"
    elif kind == "token without a key":
        client.defaults["HTTP_AUTHORIZATION"] = "Token"
    elif kind == "inactive user's token":
        idle = django_user_model.objects.create_user(username="idle", is_active=False)
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=idle).key}"
    elif kind == "unknown token with a session":
        client.force_login(user)
        client.defaults["HTTP_AUTHORIZATION"] = "Token nope"
    return client


def _answer(response):
    code = None if response.status_code in (200, 204) else response.json()["code"]
    return response.status_code, code, response.get("WWW-Authenticate")


CREDENTIALS = [
    "none",
    "session",
    "token",
    "unknown token",
    "token without a key",
    "inactive user's token",
    "unknown token with a session",
]


@pytest.mark.parametrize("kind", CREDENTIALS)
@pytest.mark.parametrize("tokens", [True, False], ids=["authtoken", "no authtoken"])
def test_every_kind_of_credentials_gets_the_answer_a_json_view_gives(
    kind, tokens, user, django_user_model, history, settings
):
    if not tokens:
        settings.INSTALLED_APPS = [
            app for app in settings.INSTALLED_APPS if app != "rest_framework.authtoken"
        ]
    client = _credentials(kind, user, django_user_model)
    json_view = client.get(reverse("conversations:run-detail", args=[history.pk]))
    stream = client.get(events_url(history))
    assert _answer(stream)[1:] == _answer(json_view)[1:]
    if json_view.status_code == 200:
        assert (
            stream.status_code == 200 and ids(parse(b"".join(stream.streaming_content))) == EXPECTED
        )
    else:
        assert stream.status_code == json_view.status_code


def test_a_malformed_last_event_id_is_a_400(browser, history):
    response = browser.get(events_url(history), headers={"Last-Event-ID": "abc"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and body["errors"][0]["parameter"] == "last_event_id"


@pytest.mark.parametrize("method", ["post", "options"])
def test_only_get(browser, history, method):
    response = getattr(browser, method)(events_url(history))
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed" and response["Allow"] == "GET"


def test_head_is_refused_too_not_streamed(browser, history):
    response = browser.head(events_url(history))
    assert response.status_code == 405 and response["Allow"] == "GET"


# While the loop works -----------------------------------------------------------------------------


@pytest.fixture
def probe_tools():
    with registry.isolated(empty=True) as r:
        yield r


@pytest.mark.django_db(transaction=True)  # the tools poll from their worker threads
def test_polls_during_a_run_only_ever_append(demo_conversation, probe_tools, settings):
    """Poll between every step of a real loop: no id ever goes back, nothing is missed."""
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 1}  # one stream, polled by one call at a time
    seen: list = []
    polls: list[list[tuple[int, str]]] = []

    def look():
        found = stream.poll()
        polls.append(ids([{"id": e.id, "event": e.type} for e in found]))
        seen.extend(found)

    @tool(registry=probe_tools)
    def probe(step: str) -> str:
        """Looks at the stream while the tool runs."""
        look()
        return f"{step} looked"

    def ask(*answer_and_calls):
        def responder(messages, tools, options):
            look()
            return answer_and_calls[0]

        return responder

    provider = ScriptedProvider(
        [
            ask(
                scripted_calls(
                    ToolCall(id="c1", name="probe", arguments={"step": "one"}),
                    ToolCall(id="c2", name="unknown_tool", arguments={}),  # rejected
                    ToolCall(id="c3", name="probe", arguments={"step": "two"}),
                )
            ),
            ask(scripted_calls(ToolCall(id="c4", name="probe", arguments={"step": "three"}))),
            ask(scripted_text("all done")),
        ]
    )
    run = start_run(conversation=demo_conversation, content="go", provider=provider)
    stream = RunEventStream(run.pk)
    look()
    execute_run(run=run, provider=provider)
    look()

    sent = [e.id for e in seen]
    assert sent == sorted(sent) and len(set(sent)) == len(sent)
    replay = RunEventStream(run.pk).poll()
    assert [(e.id, e.type) for e in seen] == [(e.id, e.type) for e in replay]
    # While the first tool ran, both runnable calls had started; the rejected one never does.
    first_tool_poll = polls[2]
    assert first_tool_poll == [
        (1 * STRIDE + 1, "assistant_turn"),
        (1 * STRIDE + 2, "tool_call_started"),
        (1 * STRIDE + 4, "tool_call_started"),
    ]
    assert 1 * STRIDE + 3 not in sent
    assert [e.type for e in replay].count("tool_call_finished") == 4
    assert replay[-1].type == "run_finished" and replay[-1].data["run"]["status"] == "completed"


@pytest.mark.django_db(transaction=True)  # the tool cancels from its worker thread
def test_a_cancelled_call_keeps_its_started_event(demo_conversation, probe_tools, settings):
    settings.CONVERSATIONS = {"TOOL_CONCURRENCY": 1}  # "later" waits until "stop" has cancelled

    @tool(registry=probe_tools)
    def stop(context: ToolContext) -> str:
        """Cancels its own run."""
        cancel_run(run=Run.objects.get(pk=context.run_id))
        time.sleep(CANCEL_CHECK_INTERVAL + 0.05)
        return "stopping"

    @tool(registry=probe_tools)
    def later() -> str:
        """Never runs."""
        raise AssertionError("a cancelled call ran")

    provider = ScriptedProvider(
        [
            scripted_calls(
                ToolCall(id="s", name="stop", arguments={}),
                ToolCall(id="l", name="later", arguments={}),
            )
        ]
    )
    run = start_run(conversation=demo_conversation, content="go", provider=provider)
    live = RunEventStream(run.pk)
    live.poll()
    execute_run(run=run, provider=provider)
    events = live.poll()
    assert [e.type for e in events] == [
        "assistant_turn",
        "tool_call_started",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_finished",
        "run_finished",
    ]
    assert events[2].data["call"]["status"] == "cancelled"
    assert events[-1].data["run"]["status"] == "cancelled"
    assert [e.id for e in RunEventStream(run.pk).poll()][1:] == [e.id for e in events]


class QuickStream(RunEventStream):
    poll_seconds = 0.01
    keepalive_seconds = 0.05


def test_an_idle_stream_sends_keep_alives_and_ends_with_the_run(demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi", provider=ScriptedProvider())
    claim_run(run=run)
    stream = QuickStream(run.pk)
    chunks = stream.iter_sync(stream.poll())
    assert next(chunks) == b"retry: 1000\n\n"
    assert [e["event"] for e in parse(next(chunks))] == ["run_started"]
    assert next(chunks) == b": keep-alive\n\n"
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED, finished_at=timezone.now())
    rest = b"".join(chunks)  # ends by itself after run_finished
    assert [e["event"] for e in parse(rest)] == ["run_finished"]


def test_a_stream_ends_after_its_time_and_the_client_resumes(demo_conversation):
    run = start_run(conversation=demo_conversation, content="hi", provider=ScriptedProvider())
    claim_run(run=run)

    class Short(QuickStream):
        max_seconds = 0.05

    stream = Short(run.pk)
    chunks = list(stream.iter_sync(stream.poll()))
    assert [e["event"] for e in parse(b"".join(chunks))] == ["run_started"]
    assert not stream.finished


# The ASGI transport -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_under_asgi_the_same_events_come_from_an_async_generator(user, history):
    client = AsyncClient()
    client.force_login(user)

    async def fetch(**headers):
        response = await client.get(events_url(history), headers=headers)
        assert response.is_async
        return b"".join([chunk async for chunk in response.streaming_content])

    assert ids(parse(async_to_sync(fetch)())) == EXPECTED
    assert ids(parse(async_to_sync(fetch)(**{"Last-Event-ID": str(STRIDE + 2)}))) == EXPECTED[3:]
