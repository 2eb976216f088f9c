"""The admin at 1280 px in a real browser: the busiest lists and forms fit, never scroll sideways.

Every database write happens before Playwright starts (its sync API runs an
event loop in this thread, and Django refuses ORM calls from such a thread).
"""

from __future__ import annotations

import pytest

from conversations.domain import ToolCall, Usage
from conversations.models import Conversation
from conversations.providers.scripted import ScriptedProvider, scripted_calls, scripted_text
from conversations.services import run_tool_loop
from conversations.tools import registry

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "layout-page-password"
TIMEOUT_MS = 15_000
WIDTH = 1280

LISTS = {
    "runs": "/admin/conversations/run/",
    "tool settings": "/admin/conversations/toolsetting/",
}

# How far the list's table reaches beyond the box that holds it, and the page beyond the window.
OVERFLOW = """() => {
  const results = document.querySelector('#changelist .results');
  const table = document.querySelector('#result_list');
  return {
    table: Math.ceil(table.getBoundingClientRect().width),
    box: results.clientWidth,
    boxScroll: results.scrollWidth,
    page: document.documentElement.scrollWidth,
    window: window.innerWidth,
  };
}"""


@pytest.fixture
def busy_admin(django_user_model, profile, language_model):
    """A superuser, runs with calls on a long-titled conversation, every tool's switch row."""
    admin = django_user_model.objects.create_superuser("root", "root@example.com", PASSWORD)
    language_model.model_id = "vendor/some-very-long-model-name-2026-11-30-preview"
    language_model.save()
    conversation = Conversation.objects.create(
        owner=admin,
        profile=profile,
        title="A conversation whose title is long enough to take a whole column on its own",
    )
    weather = ToolCall(id="call_w", name="get_weather", arguments={"city": "Leipzig"})
    for number in range(3):
        provider = ScriptedProvider(
            [
                scripted_calls(weather, usage=Usage(123_456, 7_890)),
                scripted_text("It is sunny.", usage=Usage(234_567, 8_901)),
            ]
        )
        run_tool_loop(conversation=conversation, content=f"Weather {number}?", provider=provider)
        weather = ToolCall(id=f"call_w{number}", name="get_weather", arguments={"city": "Paris"})
    assert registry.names(), "the demo tools are registered"
    return admin


@pytest.mark.parametrize("name", list(LISTS))
def test_the_list_fits_a_1280_px_window_without_scrolling_sideways(
    live_server, busy_admin, browser, name
):
    context, page = log_in(browser, live_server, LISTS[name])
    page.wait_for_selector("#result_list tbody tr")
    sizes = page.evaluate(OVERFLOW)
    context.close()
    assert sizes["boxScroll"] <= sizes["box"], sizes
    assert sizes["table"] <= sizes["box"], sizes
    assert sizes["page"] <= sizes["window"], sizes


def log_in(browser, live_server, url: str):
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/?next={url}")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    return context, page


def test_the_models_of_a_provider_fit_its_page(live_server, busy_admin, browser, language_model):
    url = f"/admin/conversations/provider/{language_model.provider_id}/change/"
    context, page = log_in(browser, live_server, url)
    page.wait_for_selector("#models-group table")
    sizes = page.evaluate(
        """() => {
          const group = document.querySelector('#models-group');
          return {
            table: Math.ceil(group.querySelector('table').getBoundingClientRect().width),
            group: group.clientWidth,
            groupScroll: group.scrollWidth,
            page: document.documentElement.scrollWidth,
            window: window.innerWidth,
          };
        }"""
    )
    change_links = page.locator("#models-group a.inlinechangelink").count()
    context.close()
    assert sizes["table"] <= sizes["group"] and sizes["groupScroll"] <= sizes["group"], sizes
    assert sizes["page"] <= sizes["window"], sizes
    assert change_links == 1  # the model's other fields are one click away
