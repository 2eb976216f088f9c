"""Structured output over the API: asking for it, invalid schemas, the outputs and schema lists."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations.domain.output import schema_sha256
from conversations.models import Conversation, OutputSchema, Run
from conversations.providers.demo_output import SAMPLE_SCHEMAS
from tests.domain.test_output import RECURSIVE

from .test_ai_sdk import chat_body, chat_url, chunks_of, user_message
from .test_event_deltas import parse as parse_events

pytestmark = pytest.mark.django_db

SENTIMENT = SAMPLE_SCHEMAS["sentiment"]
INVOICE = SAMPLE_SCHEMAS["invoice"]
OUTPUTS = reverse("conversations:output-list")
SCHEMAS = reverse("conversations:output-schema-list")


def messages_url(conversation):
    return reverse("conversations:conversation-messages", args=[conversation.pk])


def post(api, conversation, schema, content="Rate this"):
    return api.post(
        messages_url(conversation), {"content": content, "output_schema": schema}, format="json"
    )


def test_a_posted_schema_makes_the_run_answer_in_it(api, demo_conversation):
    response = post(api, demo_conversation, SENTIMENT)
    assert response.status_code == 201
    run = response.json()["run"]
    assert run["status"] == "completed"
    assert run["output_schema"] == schema_sha256(SENTIMENT)
    assert set(run["output"]) == {"label", "confidence"}
    detail = api.get(reverse("conversations:run-detail", args=[run["id"]])).json()
    assert detail["output"] == run["output"]


def test_a_run_without_a_schema_shows_null_output(api, demo_conversation):
    run = api.post(messages_url(demo_conversation), {"content": "hi"}, format="json").json()["run"]
    assert run["output"] is None
    assert run["output_schema"] is None


def test_a_stored_schema_can_be_named_by_its_sha256(api, demo_conversation):
    first = post(api, demo_conversation, INVOICE).json()["run"]
    second = post(api, demo_conversation, first["output_schema"]).json()["run"]
    assert second["output_schema"] == first["output_schema"]
    assert second["output"] == first["output"]


def test_an_invalid_schema_is_a_400_with_the_pointer_inside_output_schema(api, demo_conversation):
    response = post(api, demo_conversation, {"type": "object", "properties": {"a": {"type": 3}}})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_schema"
    assert body["errors"][0]["pointer"] == "/output_schema/properties/a/type"
    assert not demo_conversation.messages.exists()


def test_a_remote_ref_is_refused_without_fetching_it(api, demo_conversation):
    # Nothing listens on this port: a fetch would fail differently, not with this 400.
    schema = {"$ref": "http://127.0.0.1:9/schema.json"}
    response = post(api, demo_conversation, schema)
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/output_schema/$ref"


def test_a_recursive_schema_is_accepted_and_answered(api, demo_conversation):
    response = post(api, demo_conversation, RECURSIVE)
    assert response.status_code == 201
    assert response.json()["run"]["output"]["name"] == "demo"


def test_a_100_kb_schema_is_a_400(api, demo_conversation):
    schema = {"type": "object", "description": "x" * 100_000}
    response = post(api, demo_conversation, schema)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_schema"
    assert not OutputSchema.objects.exists()


def test_a_schema_that_is_neither_object_nor_digest_is_a_400(api, demo_conversation):
    response = post(api, demo_conversation, ["type"])
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/output_schema"


def test_another_users_schema_digest_is_unknown_to_a_message(
    api, other_api, user, other_user, profile
):
    theirs = Conversation.objects.create(owner=other_user, profile=profile)
    assert post(other_api, theirs, INVOICE).status_code == 201
    mine = Conversation.objects.create(owner=user, profile=profile)
    response = post(api, mine, schema_sha256(INVOICE))
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_schema"


def test_outputs_list_only_the_callers_runs_of_the_schema_newest_first(
    api, other_api, demo_conversation, other_user, profile
):
    first = post(api, demo_conversation, SENTIMENT, "one").json()["run"]
    post(api, demo_conversation, INVOICE, "other schema")
    last = post(api, demo_conversation, SENTIMENT, "two").json()["run"]
    theirs = Conversation.objects.create(owner=other_user, profile=profile)
    post(other_api, theirs, SENTIMENT)
    body = api.get(OUTPUTS, {"schema": schema_sha256(SENTIMENT)}).json()
    assert [item["run"] for item in body["results"]] == [last["id"], first["id"]]
    assert body["results"][0]["output"] == last["output"]
    assert body["results"][0]["schema"] == schema_sha256(SENTIMENT)
    assert len(api.get(OUTPUTS).json()["results"]) == 3


def test_another_users_schema_gives_an_empty_list_not_their_data(
    api, other_api, other_user, profile
):
    theirs = Conversation.objects.create(owner=other_user, profile=profile)
    post(other_api, theirs, INVOICE)
    body = api.get(OUTPUTS, {"schema": schema_sha256(INVOICE)}).json()
    assert body["results"] == []
    assert api.get(SCHEMAS).json()["results"] == []


def test_outputs_are_filtered_by_the_days_runs_started(api, demo_conversation):
    run = post(api, demo_conversation, SENTIMENT).json()["run"]
    day = run["started_at"][:10]
    assert len(api.get(OUTPUTS, {"from": day, "to": day}).json()["results"]) == 1
    assert api.get(OUTPUTS, {"from": "2001-01-01", "to": "2001-01-02"}).json()["results"] == []
    response = api.get(OUTPUTS, {"from": "2001-01-02", "to": "2001-01-01"})
    assert response.status_code == 400
    assert api.get(OUTPUTS, {"schema": "nothex"}).status_code == 400


def test_outputs_are_paginated(api, demo_conversation):
    for n in range(3):
        post(api, demo_conversation, SENTIMENT, f"n{n}")
    page = api.get(OUTPUTS, {"page_size": 2}).json()
    assert len(page["results"]) == 2
    assert len(api.get(page["next"]).json()["results"]) == 1


def test_a_failed_run_is_not_an_output(api, demo_conversation):
    assert post(api, demo_conversation, {"not": {}}).json()["run"]["status"] == "failed"
    assert api.get(OUTPUTS).json()["results"] == []


def test_the_schema_list_shows_the_schemas_the_caller_used(api, demo_conversation):
    post(api, demo_conversation, SENTIMENT)
    post(api, demo_conversation, SENTIMENT)
    (item,) = api.get(SCHEMAS).json()["results"]
    assert item["sha256"] == schema_sha256(SENTIMENT)
    assert item["schema"] == SENTIMENT
    assert item["runs"] == 2


def test_runs_can_be_filtered_by_output_schema(api, demo_conversation):
    post(api, demo_conversation, SENTIMENT)
    api.post(messages_url(demo_conversation), {"content": "plain"}, format="json")
    url = reverse("conversations:conversation-runs", args=[demo_conversation.pk])
    runs = api.get(url, {"output_schema": schema_sha256(SENTIMENT)}).json()["results"]
    assert [run["output_schema"] for run in runs] == [schema_sha256(SENTIMENT)]
    assert len(api.get(url).json()["results"]) == 2
    assert Run.objects.count() == 2


# Live: the event stream and the AI SDK stream --------------------------------------------


def events_of(api, run_id):
    response = api.get(reverse("conversations:run-events", args=[run_id]))
    return parse_events(b"".join(response.streaming_content))


def test_the_event_stream_carries_the_output_before_run_finished(api, demo_conversation):
    run = post(api, demo_conversation, SENTIMENT).json()["run"]
    received = events_of(api, run["id"])
    assert [event["event"] for event in received][-2:] == ["output", "run_finished"]
    output = received[-2]
    assert output["data"] == {"output": run["output"], "output_schema": schema_sha256(SENTIMENT)}
    assert output["id"] == received[-1]["id"] - 1


def test_a_run_without_a_schema_or_that_failed_has_no_output_event(api, demo_conversation):
    plain = api.post(messages_url(demo_conversation), {"content": "hi"}, format="json")
    failed = post(api, demo_conversation, {"not": {}})
    for answer in (plain, failed):
        kinds = [event["event"] for event in events_of(api, answer.json()["run"]["id"])]
        assert "output" not in kinds
        assert kinds[-1] == "run_finished"


@pytest.mark.django_db(transaction=True)
def test_the_ai_sdk_stream_carries_a_data_output_part(api, demo_conversation):
    body = chat_body(user_message("Rate this"), output_schema=SENTIMENT)
    response = api.post(chat_url(demo_conversation), body, format="json")
    assert response.status_code == 200
    chunks = chunks_of(response)
    run = Run.objects.get()
    parts = [chunk for chunk in chunks if chunk["type"] == "data-output"]
    assert parts == [{"type": "data-output", "id": "output", "data": run.output}]
    assert [chunk["type"] for chunk in chunks][-1] == "finish"


def test_the_ai_sdk_request_refuses_an_invalid_schema(api, demo_conversation):
    body = chat_body(user_message("Rate this"), output_schema={"type": "nope"})
    response = api.post(chat_url(demo_conversation), body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/output_schema/type"
    assert not Run.objects.exists()
