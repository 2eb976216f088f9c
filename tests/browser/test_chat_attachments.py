"""Files on the chat page in a real browser: attach, drop, refuse, and the thumbnail after a reload."""

from __future__ import annotations

import base64
import io

import pytest
from django.core.management import call_command

from ..files import SVG, pdf, png
from .test_chat_page import TIMEOUT_MS, log_in

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - the ``browser`` fixture skips then
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PICTURE = png(width=24, height=16, colour=(20, 120, 220))


@pytest.fixture
def demo():
    call_command("setup_demo", stdout=io.StringIO())


def new_conversation(page):
    page.get_by_label("Profile").select_option("demo")
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator("#llm-title")).to_have_text("New conversation")


def open_page(browser, live_server):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server.url)
    return page, errors


def test_an_attached_png_is_sent_and_its_thumbnail_is_there_after_a_reload(
    live_server, demo, browser
):
    page, errors = open_page(browser, live_server)
    new_conversation(page)

    expect(page.get_by_role("button", name="Attach files")).to_be_visible()
    page.set_input_files(
        "#llm-file", files=[{"name": "blue.png", "mimeType": "image/png", "buffer": PICTURE}]
    )
    tray = page.locator("#llm-attachments")
    expect(tray.locator(".llm-file-chip")).to_have_count(1)
    expect(tray.locator(".llm-file-chip")).to_contain_text("blue.png · image/png · ")
    expect(tray.locator(".llm-uploading")).to_have_count(0)  # uploaded

    box = page.get_by_role("textbox", name="Message")
    box.fill("What colour is this?")
    box.press("Enter")
    expect(page.locator(".llm-msg-assistant .llm-msg-text").last).not_to_be_empty()
    expect(tray.locator(".llm-file-chip")).to_have_count(0)  # sent with the message

    page.reload()
    thumbnail = page.locator(".llm-msg-user .llm-files a.llm-thumb img")
    expect(thumbnail).to_have_count(1)
    expect(thumbnail).to_have_attribute("alt", "blue.png")
    # The picture really loaded (its natural size is the PNG's), and opens full size.
    page.wait_for_function(
        "() => document.querySelector('.llm-msg-user .llm-files img').naturalWidth === 24"
    )
    link = page.locator(".llm-msg-user .llm-files a.llm-thumb")
    expect(link).to_have_attribute("target", "_blank")
    assert link.get_attribute("href").endswith("/content/")
    assert errors == []


def test_a_dropped_pdf_alone_is_sent_and_shows_as_a_chip_that_downloads(live_server, demo, browser):
    page, errors = open_page(browser, live_server)
    new_conversation(page)
    encoded = base64.b64encode(pdf("Minutes of the meeting")).decode()
    page.evaluate(
        """(encoded) => {
            const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], "minutes.pdf", { type: "application/pdf" }));
            const composer = document.getElementById("llm-composer");
            composer.dispatchEvent(new DragEvent("dragover", { dataTransfer: transfer, bubbles: true, cancelable: true }));
            composer.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
        }""",
        encoded,
    )
    expect(page.locator("#llm-attachments .llm-file-chip")).to_contain_text("minutes.pdf")
    expect(page.locator("#llm-attachments .llm-uploading")).to_have_count(0)

    page.get_by_role("button", name="Send").click()  # no text: the file alone
    chip = page.locator(".llm-msg-user .llm-files a.llm-file-chip")
    expect(chip).to_contain_text("minutes.pdf · application/pdf")
    assert chip.get_attribute("download") == "minutes.pdf"
    assert errors == []


def test_a_refused_file_says_why_and_is_not_sent(live_server, demo, browser):
    page, errors = open_page(browser, live_server)
    new_conversation(page)

    page.set_input_files(
        "#llm-file", files=[{"name": "logo.png", "mimeType": "image/png", "buffer": SVG}]
    )

    alert = page.locator("#llm-alert-text")
    expect(alert).to_contain_text(
        "“logo.png” cannot be attached: this type of file is not accepted"
    )
    expect(page.locator("#llm-attachments .llm-file-chip")).to_have_count(0)
    assert errors == []


@pytest.fixture
def tool_picture():
    """A conversation of the demo user whose tool returned a picture (stored before the browser)."""
    from conversations.domain import ChatMessage, ToolCall
    from conversations.models import Conversation
    from conversations.selectors import attachment_part
    from conversations.services import append_messages, store_attachment

    from .transcripts import demo_user

    owner = demo_user()
    picture = store_attachment(owner=owner, file=PICTURE, name="chart.png").attachment
    conversation = Conversation.objects.create(owner=owner, title="A chart")
    append_messages(
        conversation=conversation,
        messages=[
            ChatMessage.user("Draw the chart"),
            ChatMessage.assistant_tool_calls([ToolCall(id="c1", name="chart", arguments={})]),
            ChatMessage.tool_result("c1", "drawn", parts=[attachment_part(picture)]),
            ChatMessage.assistant("Here it is."),
        ],
    )
    return conversation


def test_a_tools_picture_shows_in_its_card(live_server, tool_picture, browser):
    page, errors = open_page(browser, live_server)
    page.goto(f"{live_server.url}/chat/{tool_picture.pk}/")
    card = page.locator("details.llm-tool")
    expect(card).to_have_count(1)
    card.locator("summary").click()
    image = card.locator(".llm-files a.llm-thumb img")
    expect(image).to_have_attribute("alt", "chart.png")
    page.wait_for_function(
        "() => document.querySelector('details.llm-tool .llm-files img').naturalWidth === 24"
    )
    assert errors == []


def test_a_pasted_picture_joins_the_tray(live_server, demo, browser):
    page, errors = open_page(browser, live_server)
    new_conversation(page)
    page.evaluate(
        """(encoded) => {
            const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], "image.png", { type: "image/png" }));
            const box = document.getElementById("llm-message");
            box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: transfer, bubbles: true, cancelable: true }));
        }""",
        base64.b64encode(PICTURE).decode(),
    )
    chip = page.locator("#llm-attachments .llm-file-chip")
    expect(chip).to_contain_text("image.png · image/png")
    expect(page.locator("#llm-attachments .llm-uploading")).to_have_count(0)
    # Removed again before sending: nothing goes with the message.
    page.get_by_role("button", name="Remove image.png").click()
    expect(chip).to_have_count(0)
    assert errors == []
