"""Stop pressed while a turn's calls are still streaming, in a real browser: none of them runs.

The model is a local Ollama-speaking server on 127.0.0.1 whose answer is
two calls of a test tool that counts its executions. The stream check of
the loop looks at the cancel flag only every so often, so the window that
matters is the one after the last delta and before the turn is stored:
the loop is held right there (where it forgets the answer's in-flight
snapshot) until the page's Stop has been answered. The page then still
shows the calls streaming; once the loop goes on, the stored turn reads
the flag, starts none of its calls, and the page marks them skipped.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from conversations.models import LanguageModel, Profile, Provider, Run
from conversations.models import ToolCall as ToolCallRow
from conversations.tools import registry, tool
from tests.fake_provider import FakeAnswer, FakeProviderServer

from .test_chat_page import log_in
from .test_chat_streaming import ask, page  # noqa: F401  (a fixture)

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GATE_SECONDS = 60
"""A bound on each wait for the test's own signal, so a broken run fails instead of hanging."""


def in_thread(action: Callable[[], Any]) -> Any:
    """``action`` in a thread of its own: once Playwright runs, this thread may not query."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = action()
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(GATE_SECONDS)
    assert "value" in result, "the query in its own thread gave no answer"
    return result["value"]


def ollama_line(message: dict[str, Any], **fields: Any) -> bytes:
    line = {"model": "gated-1", "message": {"role": "assistant", "content": "", **message}}
    return json.dumps({**line, **fields}).encode() + b"\n"


def count_call(field: str) -> dict[str, Any]:
    return {"function": {"name": "count_sheep", "arguments": {"field": field}}}


@pytest.fixture
def executed():
    """Every execution of the test tool, in order."""
    calls: list[str] = []
    with registry.isolated(empty=True) as r:

        @tool(registry=r)
        def count_sheep(field: str) -> int:
            """Count the sheep in a field."""
            calls.append(field)
            return 7

        yield calls


@pytest.fixture
def stopped():
    """Set by the test once the page's Stop has been answered."""
    return threading.Event()


@pytest.fixture
def held(snapshot_hook, stopped):
    """Set once the loop is held before storing the turn (its deltas all sent)."""
    reached = threading.Event()

    def hold() -> None:
        reached.set()
        stopped.wait(GATE_SECONDS)

    def answer() -> Iterator[bytes]:
        # The run asked this server, so it exists; hold its loop where the turn is stored.
        try:
            run_id = Run.objects.get(status=Run.Status.RUNNING).pk
        finally:
            connection.close()
        snapshot_hook(run_id, hold)
        yield ollama_line({"tool_calls": [count_call("north")]}, done=False)
        yield ollama_line({"tool_calls": [count_call("south")]}, done=False)
        yield ollama_line({}, done=True, done_reason="stop", prompt_eval_count=9, eval_count=4)

    with FakeProviderServer(
        FakeAnswer(b"", content_type="application/x-ndjson", pieces=answer())
    ) as server:
        call_command("setup_demo", stdout=io.StringIO())
        provider = Provider.objects.create(
            slug="gated",
            name="Gated",
            adapter=Provider.Adapter.OLLAMA,
            base_url=server.base_url.removesuffix("/v1"),
            max_retries=0,
        )
        model = LanguageModel.objects.create(provider=provider, model_id="gated-1")
        Profile.objects.create(slug="gated", name="Gated", language_model=model, stream=True)
        yield reached


def test_stop_while_the_calls_stream_runs_none_of_them_and_marks_them_skipped(
    live_server,
    executed,
    stopped,
    held,
    browser,
    page,  # noqa: F811
):
    log_in(page, live_server.url)
    ask(page, "gated", "How many sheep are there?")

    # The calls are on the page as still streaming, and the loop has not stored the turn.
    live = page.locator(".llm-live details.llm-tool")
    expect(live).to_have_count(2)
    expect(live.first).to_have_attribute("data-status", "streaming")
    assert held.wait(GATE_SECONDS)
    with page.expect_response(
        lambda response: response.url.endswith("/cancel/") and response.request.method == "POST"
    ) as cancel:
        page.get_by_role("button", name="Stop").click()
    assert cancel.value.ok
    stopped.set()

    cards = page.locator(".llm-msg-assistant:not(.llm-live) details.llm-tool")
    expect(cards.locator(".llm-badge")).to_have_text(["Skipped", "Skipped"])
    expect(cards.first).to_have_attribute("data-status", "cancelled")
    note = page.locator(".llm-run")
    expect(note).to_have_attribute("data-status", "cancelled")
    expect(note).to_contain_text("Stopped")
    expect(page.locator("#llm-stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert page.errors == []

    assert executed == []
    rows = in_thread(
        lambda: list(
            ToolCallRow.objects.order_by("index").values_list("name", "status", "started_at")
        )
    )
    assert rows == [
        ("count_sheep", ToolCallRow.Status.CANCELLED, None),
        ("count_sheep", ToolCallRow.Status.CANCELLED, None),
    ]
    assert in_thread(lambda: Run.objects.get().status) == Run.Status.CANCELLED
