"""The chat page follows runs live, in a real browser.

The demo provider streams its answer word by word with a pause before each
piece (its ``stream_delay_seconds`` option), so the page can be watched while
the run is active: the answer grows in the in-progress bubble, Stop cancels
the run, and runs that did not complete keep a note in the transcript, also
after a reload. Every database write happens before Playwright starts (its
event loop runs in this thread).
"""

from __future__ import annotations

import io
import itertools
import re

import pytest
from django.core.management import call_command

from conversations.domain import ToolCall
from conversations.models import Provider

from .test_chat_page import TIMEOUT_MS, log_in, unreachable_profile  # noqa: F401  (a fixture)

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HELLO = "Hello, who are you?"
"""Matches none of the demo's tools: it answers with its help text, several dozen words."""


@pytest.fixture
def demo():
    call_command("setup_demo", stdout=io.StringIO())


@pytest.fixture
def slow_demo(demo):
    """The demo provider pauses before each streamed piece of its answer."""
    Provider.objects.filter(slug="demo").update(options={"stream_delay_seconds": 0.15})


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    context.close()


def ask(page, profile: str, text: str) -> None:
    page.get_by_label("Profile").select_option(profile)
    page.get_by_role("button", name="New conversation").click()
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def grown(page, before: str) -> str:
    """The in-progress text, once it is longer than ``before`` (and the run still active)."""
    page.wait_for_function(
        """(length) => {
            const bubble = document.querySelector(".llm-live .llm-msg-text");
            return bubble !== null && bubble.textContent.length > length;
        }""",
        arg=len(before),
    )
    sample = page.locator(".llm-live .llm-msg-text").text_content() or ""
    # The bubble exists only while the run is followed, and Stop shows while it runs.
    assert page.locator("#llm-stop").is_visible()
    return sample


def test_the_answer_grows_while_the_run_is_active(live_server, slow_demo, browser, page):
    log_in(page, live_server.url)
    ask(page, "demo", HELLO)

    samples = [""]
    for _ in range(3):
        samples.append(grown(page, samples[-1]))
    # Each sample extends the one before: deltas are appended, never reordered.
    for shorter, longer in itertools.pairwise(samples):
        assert longer.startswith(shorter) and len(longer) > len(shorter)

    # The stored message replaces the bubble once the run ends.
    answer = page.locator(".llm-msg-assistant:not(.llm-live) .llm-msg-text")
    expect(answer).to_contain_text("offline demo model", timeout=TIMEOUT_MS)
    expect(page.locator(".llm-live")).to_have_count(0)
    expect(page.locator("#llm-stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.locator(".llm-run")).to_have_count(0)
    assert samples[-1] in (answer.text_content() or "")

    # The next message of the same page streams too.
    box = page.get_by_role("textbox", name="Message")
    box.fill(HELLO)
    box.press("Enter")
    grown(page, grown(page, ""))
    expect(answer).to_have_count(2, timeout=TIMEOUT_MS)
    assert page.errors == []


def test_a_reload_while_streaming_picks_up_the_answer_so_far(live_server, slow_demo, browser, page):
    log_in(page, live_server.url)
    ask(page, "demo", HELLO)
    before = grown(page, grown(page, ""))
    page.reload()
    # The ``inflight`` snapshot restores the text at least as far as it was, then it grows on.
    after = grown(page, before)
    assert after.startswith(before)
    answer = page.locator(".llm-msg-assistant:not(.llm-live) .llm-msg-text")
    expect(answer).to_contain_text("offline demo model", timeout=TIMEOUT_MS)
    expect(page.locator(".llm-msg-assistant")).to_have_count(1)
    assert page.errors == []


RECORD_LIVE_CARDS = """() => {
    window.liveCards = [];
    new MutationObserver(() => {
        for (const card of document.querySelectorAll(".llm-live details.llm-tool")) {
            window.liveCards.push([
                card.dataset.status,
                card.querySelector(".llm-tool-name").textContent,
                card.querySelector(".llm-tool-arguments").textContent,
            ]);
        }
    }).observe(document.getElementById("llm-transcript"), {
        subtree: true, childList: true, characterData: true,
    });
}"""
"""Records every state of the in-progress tool cards (a mutation observer misses none)."""


@pytest.fixture
def paced_demo(demo):
    """The demo provider pauses 0.4 s before each piece: each is drawn on its own.

    At 0.15 s a page slowed by a busy machine can draw two pieces of a call's
    arguments as one state, or take the stored turn in the same task.
    """
    Provider.objects.filter(slug="demo").update(options={"stream_delay_seconds": 0.4})


def test_a_tool_card_appears_and_fills_in_while_its_call_streams(
    live_server, paced_demo, browser, page
):
    log_in(page, live_server.url)
    page.evaluate(RECORD_LIVE_CARDS)
    ask(page, "demo", "What's the weather in Leipzig?")

    # The stored call with its result, and the answer.
    stored = page.locator(".llm-msg-assistant:not(.llm-live) details.llm-tool .llm-badge")
    expect(stored).to_have_text("Succeeded", timeout=TIMEOUT_MS)
    answer = page.locator(".llm-msg-assistant:not(.llm-live) .llm-msg-text")
    expect(answer).to_contain_text("In Leipzig it is", timeout=TIMEOUT_MS)
    expect(page.locator(".llm-live")).to_have_count(0)

    stored_arguments = page.locator(
        ".llm-msg-assistant:not(.llm-live) details.llm-tool .llm-tool-arguments"
    )
    expect(stored_arguments).to_contain_text("Leipzig")

    # Before that, the card streamed: named, its arguments growing piece by piece.
    # The stored card replaces it as soon as the turn is stored, so the live card
    # need not show the last piece: a delta that reaches the page after the
    # stored turn is dropped (the stream sends none).
    seen = page.evaluate("window.liveCards")
    assert {(status, name) for status, name, _ in seen} == {("streaming", "get_weather")}
    arguments = list(dict.fromkeys(text for _, _, text in seen))
    whole = ToolCall(id="call", name="get_weather", arguments={"city": "Leipzig"}).arguments_json
    assert len(arguments) >= 2
    assert all(whole.startswith(text) for text in arguments), (arguments, whole)
    for shorter, longer in itertools.pairwise(arguments):
        assert longer.startswith(shorter)
    assert page.errors == []


def test_a_dropped_stream_resumes_after_the_last_stored_event(live_server, demo, browser, page):
    """The POST's stream ends after ``run_started``: the page asks GET events/ for the rest."""
    cut: dict[str, str] = {}

    def cut_short(route):
        if route.request.method != "POST":
            route.continue_()
            return
        response = route.fetch()
        body = response.text()
        end = body.index("\n\n", body.index("event: run_started")) + 2
        cut["id"] = re.search(r"id: (\d+)\nevent: run_started", body).group(1)
        route.fulfill(response=response, body=body[:end])

    log_in(page, live_server.url)
    page.route("**/messages/", cut_short)
    # (Polls run until the POST answers: the transcript alone does not show the resumption.)
    with page.expect_request(lambda request: "/events/" in request.url) as resumed:
        ask(page, "demo", "What's the weather in Leipzig?")
    assert resumed.value.headers.get("last-event-id") == cut["id"]

    answer = page.locator(".llm-msg-assistant .llm-msg-text")
    expect(answer).to_contain_text("In Leipzig it is", timeout=TIMEOUT_MS)
    expect(page.locator("details.llm-tool .llm-badge")).to_have_text("Succeeded")
    expect(page.locator(".llm-msg-user")).to_have_count(1)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.locator("#llm-alert")).to_be_hidden()
    assert page.errors == []


def test_stop_cancels_a_slow_run(live_server, slow_demo, browser, page):
    log_in(page, live_server.url)
    ask(page, "demo", HELLO)
    grown(page, "")
    page.get_by_role("button", name="Stop").click()

    note = page.locator(".llm-run")
    expect(note).to_have_attribute("data-status", "cancelled")
    expect(note).to_contain_text("Stopped")
    expect(page.locator("#llm-stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.locator(".llm-live")).to_have_count(0)
    # Asked for, so no error alert; the answer so far is kept and says it was stopped.
    expect(page.locator("#llm-alert")).to_be_hidden()
    stopped = page.locator(".llm-msg-assistant[data-finish=cancelled]")
    expect(stopped.locator(".llm-msg-meta")).to_contain_text("stopped")
    # The note and the stopped answer stay after a reload.
    page.reload()
    expect(page.locator(".llm-run")).to_contain_text("Stopped")
    expect(stopped.locator(".llm-msg-meta")).to_contain_text("stopped")
    assert page.errors == []


def test_escape_stops_the_answer_being_written(live_server, slow_demo, browser, page):
    log_in(page, live_server.url)
    ask(page, "demo", HELLO)
    grown(page, "")
    page.keyboard.press("Escape")
    expect(page.locator(".llm-run")).to_have_attribute("data-status", "cancelled")
    expect(page.locator("#llm-stop")).to_be_hidden()
    assert page.errors == []


def test_a_failed_run_is_shown_with_its_reason_after_a_reload(
    live_server,
    unreachable_profile,  # noqa: F811
    browser,
    page,
):
    log_in(page, live_server.url)
    ask(page, "down", "Hello?")
    expect(page.get_by_role("alert")).to_contain_text("[provider_")
    note = page.locator(".llm-run")
    expect(note).to_contain_text("Run failed (provider_")

    page.reload()
    note = page.locator(".llm-run")
    expect(note).to_have_attribute("data-status", "failed")
    expect(note).to_contain_text("Run failed (provider_")
    # Where it happened: right after the message the run answered.
    previous = note.locator("xpath=preceding-sibling::article[1]")
    expect(previous.locator(".llm-msg-text")).to_have_text("Hello?")
    assert page.errors == []


def test_a_run_waiting_for_a_worker_says_queued_and_stop_ends_it(
    live_server, demo, broker, settings, browser, page
):
    """EXECUTOR "celery" with no worker running: the run waits in the queue."""
    settings.CONVERSATIONS = {"EXECUTOR": "celery", "MESSAGE_THROTTLE_RATE": None}
    log_in(page, live_server.url)
    ask(page, "demo", HELLO)

    progress = page.get_by_role("status")
    expect(progress).to_contain_text("Queued: waiting for a worker")
    expect(progress).to_have_class("llm-progress llm-progress-queued")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".llm-run")).to_contain_text("Stopped")
    expect(progress).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert page.errors == []
