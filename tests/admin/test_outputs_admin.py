"""Structured output in the admin: the run page shows the output beside its schema."""

from __future__ import annotations

import html as html_module

import pytest

from conversations.models import OutputSchema, Run
from conversations.providers.scripted import ScriptedProvider, scripted_text
from conversations.services import extract, run_tool_loop

from .conftest import admin_url

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "note": {"type": "string"}},
    "required": ["city", "note"],
    "additionalProperties": False,
}


def page_of(response) -> str:
    assert response.status_code == 200
    return html_module.unescape(response.content.decode())


@pytest.fixture
def repaired_run(conversation):
    provider = ScriptedProvider(
        [
            scripted_text('{"city": 3, "note": "n"}'),
            scripted_text('{"city": "Paris", "note": "<b>x</b>"}'),
        ]
    )
    return run_tool_loop(
        conversation=conversation, content="Where?", provider=provider, output_schema=SCHEMA
    )


def test_the_run_page_shows_the_output_next_to_its_schema_and_the_repair_turn(
    admin_client, repaired_run
):
    raw = admin_client.get(admin_url(repaired_run)).content.decode()
    assert "<b>x</b>" not in raw  # the output is escaped like every model text
    page = page_of(admin_client.get(admin_url(repaired_run)))
    assert "Structured output" in page
    assert '"city": "Paris"' in page
    assert '"additionalProperties": false' in page
    assert admin_url(repaired_run.output_schema) in page
    assert "does not satisfy the required JSON Schema at /city" in page


def test_the_schema_page_links_the_runs_that_used_it(admin_client, repaired_run):
    schema = OutputSchema.objects.get()
    page = page_of(admin_client.get(admin_url(schema)))
    assert schema.sha256 in page
    assert f"output_schema__id__exact={schema.pk}" in page
    assert "1 run(s)" in page
    listed = admin_client.get(admin_url(Run, "changelist"), {"output_schema__id__exact": schema.pk})
    assert str(repaired_run.started_at.year) in page_of(listed)
    assert listed.context["cl"].result_count == 1


def test_an_extracted_run_and_its_conversation_are_in_the_admin(admin_client, admin_user, profile):
    extract(profile=profile, content="Invoice 17", schema=SCHEMA, owner=admin_user)
    run = Run.objects.get()
    assert '"city": "demo"' in page_of(admin_client.get(admin_url(run)))
    assert "Invoice 17" in page_of(admin_client.get(admin_url(run.conversation)))
    assert page_of(admin_client.get(admin_url(OutputSchema, "changelist")))
