"""The chat page in a real browser: Debian's headless Chromium driven by Playwright.

The demo is set up, the demo user logs in through the admin's login page, starts
a conversation on the offline demo profile and asks the demo question; the page
must show one card per tool call and the answer. The screenshots for the README
are taken on the way (see ``save_screenshot``).

Every database write happens before Playwright starts: its sync API runs an
event loop in this thread, and Django refuses ORM calls from such a thread.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import time
from pathlib import Path
from typing import Annotated

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.urls import reverse

from conversations.models import Conversation, LanguageModel, Profile, Provider
from conversations.tools import registry, tool
from project.demo_tools.management.commands.setup_demo import DEMO_PASSWORD, DEMO_USERNAME

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # git-ignored
QUESTION = "What's the weather in Leipzig and what time is it?"
TIMEOUT_MS = 15_000


@pytest.fixture
def demo():
    call_command("setup_demo", stdout=io.StringIO())


def save_screenshot(page, name: str, **options) -> None:
    """Into the git-ignored artifacts, and the README's copy in docs/screenshots/.

    The README's copy is written when it is missing or UPDATE_SCREENSHOTS=1 is
    set, so that running the tests does not keep changing committed images
    (each run shows other times and ids).
    """
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), **options)
    readme_copy = SCREENSHOTS / name
    if os.environ.get("UPDATE_SCREENSHOTS") == "1" or not readme_copy.exists():
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / name, readme_copy)


def log_in(page, base_url: str) -> None:
    """Through the chat's login page, as a person would, landing back on the chat page."""
    page.goto(f"{base_url}/chat/")
    expect(page).to_have_url(f"{base_url}/chat/login/?next=/chat/")
    page.fill("#id_username", DEMO_USERNAME)
    page.fill("#id_password", DEMO_PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{base_url}/chat/")


def test_the_demo_question_shows_two_tool_cards_and_the_answer(live_server, demo, browser):
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    console_errors: list[str] = []
    failed: list[str] = []

    def on_console(message):
        if message.type == "error":
            console_errors.append(f"{message.text} ({message.location.get('url')})")

    def on_response(response):
        if response.status >= 400:
            failed.append(f"{response.status} {response.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    page.on("response", on_response)

    log_in(page, live_server.url)
    page.wait_for_load_state("networkidle")
    # The admin's login page has no icon, so Chromium logs a 404 for /favicon.ico there.
    console_errors.clear()

    # New conversation on the offline demo profile.
    profile = page.get_by_label("Profile")
    expect(profile.locator("option[value=demo]")).to_have_count(1)
    expect(profile.locator("option[value=demo]")).to_contain_text("Offline demo")
    profile.select_option("demo")
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator("#llm-title")).to_have_text("New conversation")

    # Enter submits.
    box = page.get_by_role("textbox", name="Message")
    box.fill(QUESTION)
    box.press("Enter")

    answer = page.locator(".llm-msg-assistant .llm-msg-text").last
    expect(answer).to_contain_text("In Leipzig it is", timeout=TIMEOUT_MS)
    expect(answer).to_contain_text("Leipzig")
    cards = page.locator("details.llm-tool")
    expect(cards).to_have_count(2)
    expect(cards.locator(".llm-tool-name")).to_have_text(["get_weather", "get_current_time"])
    expect(cards.locator(".llm-badge")).to_have_text(["Succeeded", "Succeeded"])
    for index in range(2):
        # Collapsed once the run ended, with a one-line summary of the result.
        assert cards.nth(index).get_attribute("open") is None
    expect(cards.nth(0).locator(".llm-tool-summary")).to_contain_text('"city":"Leipzig"')
    expect(page.locator("#llm-alert")).to_be_hidden()
    expect(page.locator("#llm-progress")).to_be_hidden()

    # The conversation is stored, listed first and addressable.
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}/$"))
    first = page.locator("#llm-conversations a").first
    expect(first).to_have_attribute("aria-current", "page")
    expect(first).to_contain_text(QUESTION)

    # A card pairs the call with its result.
    weather = cards.nth(0)
    weather.locator("summary").click()
    expect(weather.locator(".llm-tool-arguments")).to_have_text('{\n  "city": "Leipzig"\n}')
    expect(weather.locator(".llm-tool-result")).to_contain_text('"city": "Leipzig"')

    page.locator("#llm-transcript").evaluate("node => { node.scrollTop = node.scrollHeight; }")
    save_screenshot(page, "chat.png")

    # Reloading shows the same transcript from the API.
    page.reload()
    expect(page.locator("details.llm-tool")).to_have_count(2)
    expect(page.locator(".llm-msg-assistant .llm-msg-text").last).to_contain_text(
        "In Leipzig it is"
    )

    assert failed == []
    assert console_errors == []
    context.close()


def test_text_stays_text_and_errors_show_in_the_page(live_server, demo, browser):
    context = browser.new_context(viewport={"width": 375, "height": 740})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log_in(page, live_server.url)
    expect(page.locator("#llm-profile option[value=demo]")).to_have_count(1)

    # Phone width: nothing sticks out sideways, the message box and its button are reachable.
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_visible()

    # Markup typed by the user (and echoed anywhere) is shown as text, never parsed.
    box = page.get_by_role("textbox", name="Message")
    box.fill('<img src=x onerror="window.injected=1"> <b>bold?</b>')
    box.press("Shift+Enter")
    box.type("second line")
    expect(box).to_have_value('<img src=x onerror="window.injected=1"> <b>bold?</b>\nsecond line')
    box.press("Enter")
    reply = page.locator(".llm-msg-assistant .llm-msg-text").last
    expect(reply).to_contain_text("offline demo model")
    user = page.locator(".llm-msg-user .llm-msg-text").last
    expect(user).to_have_text('<img src=x onerror="window.injected=1"> <b>bold?</b>\nsecond line')
    assert page.locator("#llm-transcript img, #llm-transcript b").count() == 0
    assert page.evaluate("window.injected") is None

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "chat-phone.png"))  # for a person to look at

    # An error of the API appears in the alert region with its detail.
    box.fill("x" * 40_000)
    page.get_by_role("button", name="Send").click()
    alert = page.get_by_role("alert")
    expect(alert).to_be_visible()
    expect(alert).not_to_have_text("")
    # The text is given back, so nothing typed is lost.
    expect(box).to_have_value("x" * 40_000)
    page.get_by_role("button", name="Dismiss the error").click()
    expect(alert).to_be_hidden()
    context.close()


@pytest.fixture
def slow_weather():
    """The demo's get_weather, taking long enough for the page to show progress."""
    with registry.isolated():
        fast = registry["get_weather"].func
        registry.unregister("get_weather")

        @tool
        def get_weather(city: Annotated[str, "City name"]) -> dict:
            """Get the current weather for a city (slowly)."""
            time.sleep(2.5)
            return fast(city)

        yield


def test_progress_shows_the_calls_while_the_run_goes_on(live_server, demo, slow_weather, browser):
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log_in(page, live_server.url)
    expect(page.locator("#llm-profile option[value=demo]")).to_have_count(1)

    box = page.get_by_role("textbox", name="Message")
    box.fill(QUESTION)
    box.press("Enter")

    # While get_weather sleeps, the polled calls are already on the page.
    progress = page.get_by_role("status")
    expect(progress).to_contain_text("Working… 2 tool calls (get_weather, get_current_time)")
    expect(page.locator("details.llm-tool")).to_have_count(2)
    expect(page.locator(".llm-msg-assistant .llm-msg-text")).to_have_count(0)
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.locator("details.llm-tool").first.locator(".llm-badge")).to_have_text("Running")
    # While the run goes on the cards are open, so each result shows as it arrives.
    expect(page.locator("details.llm-tool[open]")).to_have_count(2)

    # Then the answer, with the final state of each call.
    expect(page.locator(".llm-msg-assistant .llm-msg-text")).to_contain_text("In Leipzig it is")
    expect(progress).to_be_hidden()
    expect(page.locator("details.llm-tool .llm-badge")).to_have_text(["Succeeded", "Succeeded"])
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    context.close()


@pytest.fixture
def unreachable_profile(demo):
    """A profile whose provider listens nowhere (a closed port on this machine)."""
    provider = Provider.objects.create(
        slug="down",
        name="Down",
        adapter=Provider.Adapter.OLLAMA,
        base_url="http://127.0.0.1:9",
        timeout=2,
        max_retries=0,
    )
    model = LanguageModel.objects.create(provider=provider, model_id="nothing")
    Profile.objects.create(slug="down", name="Unreachable", language_model=model)


def test_a_provider_failure_is_shown_and_the_stored_message_kept(
    live_server, unreachable_profile, browser
):
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log_in(page, live_server.url)
    page.get_by_label("Profile").select_option("down")
    page.get_by_role("button", name="New conversation").click()

    box = page.get_by_role("textbox", name="Message")
    box.fill("Hello?")
    box.press("Enter")

    alert = page.get_by_role("alert")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("[provider_")
    # The user's message was stored before the provider failed: it stays, the box is empty.
    expect(page.locator(".llm-msg-user:not(.llm-pending) .llm-msg-text")).to_have_text("Hello?")
    expect(box).to_have_value("")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    context.close()


@pytest.fixture
def demo_transcript(demo):
    """A finished demo run, made through the management command."""
    call_command("chat", QUESTION, profile="demo", user=DEMO_USERNAME, stdout=io.StringIO())
    return Conversation.objects.get(owner__username=DEMO_USERNAME)


@pytest.fixture
def admin_account(django_user_model):
    """The demo user is an ordinary user; the admin needs a staff account (not setup_demo's
    ``admin``, whose password is random)."""
    django_user_model.objects.create_superuser("root", password="admin-password-1")


def test_screenshot_of_the_admin_transcript(live_server, demo_transcript, admin_account, browser):
    if not admin.site.is_registered(Conversation):
        pytest.skip("the admin for conversations is not there yet")
    url = reverse("admin:conversations_conversation_change", args=[demo_transcript.pk])
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/?next={url}")
    page.fill("#id_username", "root")
    page.fill("#id_password", "admin-password-1")
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{live_server.url}{url}")
    expect(page.locator("body")).to_contain_text("get_weather")
    expect(page.locator("body")).to_contain_text("get_current_time")
    save_screenshot(page, "admin.png", full_page=True)
    context.close()


@pytest.mark.postgres
def test_with_workers_the_page_follows_the_run_events(
    live_server, demo, browser, workers, settings, tmp_path
):
    """EXECUTOR "celery": the POST answers with the run's SSE stream, which the page follows.

    A Celery worker (a real process) runs the loop; the slow tool lets the test
    see the card "running" from a ``tool_call_started`` event, and a reload in
    the middle of the run picks the run up again through ``GET runs/ID/events/``.
    """
    settings.CONVERSATIONS = {"EXECUTOR": "celery", "MESSAGE_THROTTLE_RATE": None}
    workers(WORKER_TOOL_LOG=str(tmp_path / "tools.log"))
    context = browser.new_context(viewport={"width": 1000, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    streams: list[str] = []
    statuses: list[int] = []
    page.on("request", lambda request: "/events/" in request.url and streams.append(request.url))
    page.on(
        "response",
        lambda response: (
            "/messages/" in response.url
            and response.request.method == "POST"
            and statuses.append(response.status)
        ),
    )
    console_errors: list[str] = []
    page.on("pageerror", lambda error: console_errors.append(str(error)))
    log_in(page, live_server.url)
    expect(page.locator("#llm-profile option[value=demo]")).to_have_count(1)

    box = page.get_by_role("textbox", name="Message")
    # Long enough that the reload below lands while the tool still runs, even on a busy machine.
    box.fill('/call slow_step {"label": "one", "seconds": 8}')
    box.press("Enter")
    card = page.locator("details.llm-tool")
    expect(card.locator(".llm-badge")).to_have_text("Running")
    expect(page.get_by_role("status")).to_contain_text("Working… 1 tool call (slow_step)")
    assert statuses == [200] and streams == []

    # A reload while the worker still runs the tool: the page follows the run again.
    page.reload()
    expect(page.get_by_role("button", name="Send")).to_be_disabled(timeout=TIMEOUT_MS)
    answer = page.locator(".llm-msg-assistant .llm-msg-text").last
    expect(answer).to_contain_text("slow_step", timeout=TIMEOUT_MS)
    expect(page.locator("details.llm-tool .llm-badge")).to_have_text("Succeeded")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(page.locator("#llm-alert")).to_be_hidden()
    assert len(streams) == 1
    assert console_errors == []
    context.close()
