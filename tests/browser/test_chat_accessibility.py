"""axe-core on the chat page, its login page, a rendered answer and a held call, light and dark.

axe-core (pinned in frontend/package.json) is vendored for the tests only, in
tests/browser/vendor/ (``make vendor`` refreshes it). A page passes with no
serious or critical violation: labels, names, focusable scrolling regions,
contrast in the theme the browser asks for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_chat_approvals import ask, demo_with_approval  # noqa: F401  (a fixture)
from .test_chat_features import markdown, new_page, opened, owner  # noqa: F401  (fixtures)
from .test_chat_page import log_in

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"

RUN_AXE = """async () => {
    const { violations } = await axe.run(document, { resultTypes: ["violations"] });
    return violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => `${v.id}: ${v.help} -> ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
}"""

THEMES = ["light", "dark"]


def serious_violations(page) -> list[str]:
    page.add_script_tag(path=str(AXE))
    return page.evaluate(RUN_AXE)


@pytest.mark.parametrize("theme", THEMES)
def test_the_login_page_has_no_serious_violations(live_server, owner, browser, theme):  # noqa: F811
    page = new_page(browser, color_scheme=theme)
    page.goto(f"{live_server.url}/chat/login/")
    expect(page.get_by_role("heading", name="Log in to chat")).to_be_visible()
    assert serious_violations(page) == []
    page.context.close()


@pytest.mark.parametrize("theme", THEMES)
def test_the_chat_page_has_no_serious_violations(live_server, owner, browser, theme):  # noqa: F811
    page = new_page(browser, color_scheme=theme)
    log_in(page, live_server.url)
    expect(page.locator("#llm-profile option[value=demo]")).to_have_count(1)
    assert serious_violations(page) == []
    page.context.close()


@pytest.mark.parametrize("theme", THEMES)
def test_an_answer_with_code_and_a_table_has_no_serious_violations(
    live_server,
    markdown,  # noqa: F811
    browser,
    theme,
):
    page = opened(browser, live_server.url, markdown, color_scheme=theme)
    expect(page.locator(".llm-code .hljs-keyword").first).to_be_visible()
    expect(page.locator(".llm-markdown table")).to_be_visible()
    assert serious_violations(page) == []
    page.context.close()


@pytest.mark.parametrize("theme", THEMES)
def test_a_call_waiting_for_approval_has_no_serious_violations(
    live_server,
    demo_with_approval,  # noqa: F811
    browser,
    theme,
):
    page = new_page(browser, color_scheme=theme)
    log_in(page, live_server.url)
    ask(page)
    expect(page.locator("#llm-composer-reason")).to_be_visible()
    assert serious_violations(page) == []
    page.context.close()
