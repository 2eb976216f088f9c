"""A PNG and a PDF answered by every adapter against a fake vendor over real HTTP.

Each request body is captured as the vendor received it: the files travel
natively where the model takes them (OpenAI ``image_url`` + ``file``,
Anthropic ``image`` + ``document``, Gemini two ``inlineData`` parts, the
Responses API ``input_image`` + ``input_file``, Ollama ``images`` with the
PDF's extracted text); a model without ``"pdf"`` gets the text, one without
``"image"`` a note; no run fails. Afterwards no stored row, export line or
log record holds a base64 payload over 1 KB.
"""

from __future__ import annotations

import base64
import logging
import re
from typing import Any

import pytest

from conversations.models import LanguageModel, Message, ModelCall, Profile, Provider, Run
from conversations.selectors.export import conversation_lines
from conversations.services import run_tool_loop, store_attachment
from conversations.services.transcript.messages import create_conversation
from tests.fake_provider import WIRES, FakeAnswer, FakeProviderServer

from ..files import pdf, png

pytestmark = pytest.mark.django_db

KEY_VARIABLE = "ATTACHMENT_TEST_KEY"
PNG = png(64, 64)
PDF = pdf("The invoice total is 42 euros.", "Page two says hello.")
PNG_B64 = base64.b64encode(PNG).decode()
PDF_B64 = base64.b64encode(PDF).decode()
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{1024,}={0,2}")


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")


def ask_with_files(
    monkeypatch, user, adapter: str, modalities: list[str]
) -> tuple[dict[str, Any], Run]:
    """Store the PNG and the PDF, ask about them through ``adapter``; the body and the run."""
    monkeypatch.setenv(KEY_VARIABLE, "sk-test-secret")
    wire = WIRES[adapter]
    with FakeProviderServer(FakeAnswer.json(wire.whole("A red square and an invoice."))) as server:
        provider = Provider.objects.create(
            slug=f"fake-{adapter}".replace("_", "-"),
            name="Fake",
            adapter=adapter,
            base_url=server.base_url,
            api_key_ref=f"env:{KEY_VARIABLE}",
            max_retries=0,
        )
        model = LanguageModel.objects.create(
            provider=provider, model_id="fake-model", input_modalities=modalities
        )
        profile = Profile.objects.create(slug=provider.slug, name="Fake", language_model=model)
        conversation = create_conversation(owner=user, profile=profile)
        image = store_attachment(owner=user, file=PNG, name="square.png").attachment
        document = store_attachment(owner=user, file=PDF, name="invoice.pdf").attachment
        run = run_tool_loop(
            conversation=conversation, content="What are these?", attachments=[image, document]
        )
    (request,) = server.requests
    return request["body"], run


def user_content(body: dict[str, Any], key: str = "messages") -> Any:
    """The last user message's content, without the prompt-cache marks (not this test's)."""
    content = [m for m in body[key] if m.get("role") == "user"][-1]["content"]
    if isinstance(content, list):
        return [{k: v for k, v in block.items() if k != "cache_control"} for block in content]
    return content


def test_openai_gets_an_image_url_and_a_file(monkeypatch, user):
    body, run = ask_with_files(monkeypatch, user, "openai_compatible", ["image", "pdf"])
    assert run.status == Run.Status.COMPLETED
    assert user_content(body) == [
        {"type": "text", "text": "What are these?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        {
            "type": "file",
            "file": {
                "filename": "invoice.pdf",
                "file_data": f"data:application/pdf;base64,{PDF_B64}",
            },
        },
    ]


def test_the_responses_api_gets_an_input_image_and_an_input_file(monkeypatch, user):
    body, run = ask_with_files(monkeypatch, user, "openai_responses", ["image", "pdf"])
    assert run.status == Run.Status.COMPLETED
    content = [item for item in body["input"] if item.get("role") == "user"][-1]["content"]
    assert content == [
        {"type": "input_text", "text": "What are these?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}"},
        {
            "type": "input_file",
            "filename": "invoice.pdf",
            "file_data": f"data:application/pdf;base64,{PDF_B64}",
        },
    ]


def test_anthropic_gets_an_image_and_a_document_block(monkeypatch, user):
    body, run = ask_with_files(monkeypatch, user, "anthropic", ["image", "pdf"])
    assert run.status == Run.Status.COMPLETED
    assert user_content(body) == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
            "title": "invoice.pdf",
        },
        {"type": "text", "text": "What are these?"},
    ]


def test_gemini_gets_two_inline_data_parts(monkeypatch, user):
    body, run = ask_with_files(monkeypatch, user, "gemini", ["image", "pdf"])
    assert run.status == Run.Status.COMPLETED
    assert body["contents"][-1]["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
        {"inlineData": {"mimeType": "application/pdf", "data": PDF_B64}},
        {"text": "What are these?"},
    ]


def test_ollama_gets_the_image_and_the_pdfs_text(monkeypatch, user):
    body, run = ask_with_files(monkeypatch, user, "ollama", ["image", "pdf"])
    assert run.status == Run.Status.COMPLETED
    (message,) = [m for m in body["messages"] if m["role"] == "user"]
    assert message["images"] == [PNG_B64]
    assert message["content"].startswith("What are these?\n\n[PDF invoice.pdf: this model cannot")
    assert "pages 1-2 of 2" in message["content"]
    assert "The invoice total is 42 euros." in message["content"]
    assert "Page two says hello." in message["content"]


def test_a_model_without_pdf_gets_the_text_and_one_without_image_a_note(monkeypatch, user):
    body, run = ask_with_files(monkeypatch, user, "anthropic", [])
    assert run.status == Run.Status.COMPLETED
    content = user_content(body)
    text = content if isinstance(content, str) else "".join(b["text"] for b in content)
    assert all(b["type"] == "text" for b in ([] if isinstance(content, str) else content))
    assert "The invoice total is 42 euros." in text
    assert f"[Image square.png (image/png, {len(PNG)} bytes) attached: this model cannot" in text
    assert PNG_B64[:40] not in text


def test_a_file_too_large_for_the_provider_fails_the_run_before_any_request(
    monkeypatch, user, settings
):
    from conversations.providers import parts

    monkeypatch.setitem(
        parts.INLINE_LIMITS,
        "anthropic",
        parts.InlineLimits(per_image=100, per_document=10**6, per_request=10**6),
    )
    monkeypatch.setenv(KEY_VARIABLE, "sk-test-secret")
    with FakeProviderServer() as server:
        provider = Provider.objects.create(
            slug="fake-anthropic",
            name="Fake",
            adapter="anthropic",
            base_url=server.base_url,
            api_key_ref=f"env:{KEY_VARIABLE}",
            max_retries=0,
        )
        model = LanguageModel.objects.create(
            provider=provider, model_id="fake-model", input_modalities=["image"]
        )
        profile = Profile.objects.create(slug="fake", name="Fake", language_model=model)
        conversation = create_conversation(owner=user, profile=profile)
        image = store_attachment(owner=user, file=PNG, name="square.png").attachment
        with pytest.raises(Exception) as info:
            run_tool_loop(conversation=conversation, content="x", attachments=[image])
    assert getattr(info.value, "code", "") == "attachment_too_large_for_provider"
    assert server.requests == []
    run = Run.objects.get()
    assert run.status == Run.Status.FAILED
    assert run.error_code == "attachment_too_large_for_provider"


def test_nothing_stored_exported_or_logged_holds_a_base64_payload(monkeypatch, user, caplog):
    caplog.set_level(logging.DEBUG)
    for adapter in sorted(WIRES):
        ask_with_files(monkeypatch, user, adapter, ["image", "pdf"])
        Provider.objects.filter(slug__startswith="fake-").update(slug=f"done-{adapter}"[:50])
    assert Message.objects.filter(attachment_links__isnull=False).distinct().count() == len(WIRES)
    stored = [
        *Message.objects.values_list("content", "provider_metadata"),
        *ModelCall.objects.values_list("error_code", "model"),
        *Run.objects.values_list("final_content", "error_message"),
    ]
    for row in stored:
        assert not BASE64_RUN.search(repr(row))
    for line in conversation_lines(user=user):
        assert not BASE64_RUN.search(line)
    for record in caplog.records:
        assert not BASE64_RUN.search(record.getMessage())


def test_the_rounds_of_a_run_extract_a_pdf_once_and_read_no_image_for_a_note(
    user, django_assert_num_queries
):
    from conversations.domain import ChatMessage
    from conversations.selectors import attachment_part
    from conversations.services.attachments import prepare_for_model

    image = store_attachment(owner=user, file=PNG, name="square.png").attachment
    document = store_attachment(owner=user, file=PDF, name="cached.pdf").attachment
    history = [ChatMessage.user("x", parts=[attachment_part(image), attachment_part(document)])]
    with django_assert_num_queries(1):  # the PDF's row, to read its bytes; not the image's
        (first,) = prepare_for_model(history, modalities=[], provider_name="anthropic")
    with django_assert_num_queries(0):  # its text is known now: nothing is read
        (again,) = prepare_for_model(history, modalities=[], provider_name="anthropic")
    assert again == first and first.parts == ()
    assert "The invoice total is 42 euros." in first.content


def test_a_deleted_attachment_becomes_a_note_even_for_a_model_that_takes_it(user):
    from conversations.domain import ChatMessage
    from conversations.selectors import attachment_part
    from conversations.services.attachments import prepare_for_model

    image = store_attachment(owner=user, file=PNG, name="gone.png").attachment
    reference = attachment_part(image)
    image.delete()
    (prepared,) = prepare_for_model(
        [ChatMessage.user("x", parts=[reference])], modalities=["image"], provider_name="anthropic"
    )
    assert prepared.parts == ()
    assert prepared.content == "x\n\n[Attachment gone.png (image/png) is no longer available.]"
