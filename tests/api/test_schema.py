"""The OpenAPI document: generated without a warning, valid, and served with a docs page."""

from __future__ import annotations

import json

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

OPERATIONS = {
    ("/api/attachments/", "post"): {"200", "201", "400", "401", "403", "413", "415", "503"},
    ("/api/attachments/{attachment_id}/", "get"): {"200", "401", "403", "404", "503"},
    ("/api/attachments/{attachment_id}/content/", "get"): {"200", "401", "403", "404", "503"},
    ("/api/conversations/", "get"): {"200", "400", "401", "403", "503"},
    ("/api/conversations/", "post"): {"201", "400", "401", "403", "503"},
    ("/api/conversations/import/", "post"): {"201", "400", "401", "403", "503"},
    ("/api/conversations/{conversation_id}/", "get"): {"200", "401", "403", "404", "503"},
    ("/api/conversations/{conversation_id}/", "patch"): {"200", "400", "401", "403", "404", "503"},
    ("/api/conversations/{conversation_id}/", "delete"): {"204", "401", "403", "404", "409", "503"},
    ("/api/conversations/{conversation_id}/messages/", "get"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "503",
    },
    ("/api/conversations/{conversation_id}/messages/", "post"): {
        "200",  # with Accept: text/event-stream
        "201",
        "202",
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "429",
        "502",
        "503",
        "504",
    },
    ("/api/conversations/{conversation_id}/runs/", "get"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "503",
    },
    ("/api/conversations/{conversation_id}/chat/", "get"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "503",
    },
    ("/api/conversations/{conversation_id}/chat/", "post"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
        "429",
        "503",
    },
    ("/api/conversations/{conversation_id}/export/", "get"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "503",
    },
    ("/api/runs/{run_id}/", "get"): {"200", "401", "403", "404", "503"},
    ("/api/runs/{run_id}/scores/", "get"): {"200", "401", "403", "404", "503"},
    ("/api/runs/{run_id}/scores/", "post"): {"201", "400", "401", "403", "404", "503"},
    ("/api/conversations/{conversation_id}/feedback/", "get"): {"200", "401", "403", "404", "503"},
    **{
        (path, method): codes
        for path in (
            "/api/conversations/{conversation_id}/messages/{position}/feedback/",
            "/api/tool-calls/{tool_call_id}/feedback/",
            "/api/runs/{run_id}/feedback/",
        )
        for method, codes in (
            ("get", {"200", "401", "403", "404", "503"}),
            ("put", {"200", "201", "400", "401", "403", "404", "503"}),
            ("delete", {"204", "401", "403", "404", "503"}),
        )
    },
    ("/api/runs/{run_id}/cancel/", "post"): {"202", "401", "403", "404", "409", "503"},
    ("/api/conversations/{conversation_id}/fork/", "post"): {
        "201",
        "400",
        "401",
        "403",
        "404",
        "409",
        "503",
    },
    ("/api/conversations/{conversation_id}/messages/{position}/edit/", "post"): {
        "200",
        "201",
        "202",
        "400",
        "401",
        "403",
        "404",
        "413",
        "429",
        "502",
        "503",
        "504",
    },
    ("/api/conversations/{conversation_id}/regenerate/", "post"): {
        "200",
        "201",
        "202",
        "400",
        "401",
        "403",
        "404",
        "429",
        "502",
        "503",
        "504",
    },
    ("/api/conversations/{conversation_id}/branches/", "get"): {"200", "401", "403", "404", "503"},
    ("/api/search/", "get"): {"200", "400", "401", "403", "503"},
    ("/api/export/", "get"): {"200", "401", "403", "503"},
    ("/api/datasets/export/", "get"): {"200", "400", "401", "403", "503"},
    ("/api/tools/", "get"): {"200", "401", "403", "503"},
    ("/api/profiles/", "get"): {"200", "401", "403", "503"},
    ("/api/approvals/", "get"): {"200", "400", "401", "403", "503"},
    ("/api/tool-calls/{tool_call_id}/approve/", "post"): {
        "200",
        "202",
        "401",
        "403",
        "404",
        "409",
        "503",
    },
    ("/api/tool-calls/{tool_call_id}/reject/", "post"): {
        "200",
        "202",
        "400",
        "401",
        "403",
        "404",
        "409",
        "503",
    },
    ("/api/usage/", "get"): {"200", "400", "401", "403", "503"},
    ("/api/outputs/", "get"): {"200", "400", "401", "403", "503"},
    ("/api/output-schemas/", "get"): {"200", "400", "401", "403", "503"},
}

WITHOUT_BODY = {
    ("/api/runs/{run_id}/cancel/", "post"),
    ("/api/tool-calls/{tool_call_id}/approve/", "post"),
    ("/api/conversations/{conversation_id}/regenerate/", "post"),
}
"""Unsafe operations that take no request body."""
MULTIPART = {("/api/attachments/", "post")}
"""Operations whose body is multipart (a file), not JSON."""
DOWNLOADS = {
    ("/api/attachments/{attachment_id}/content/", "get", "200"): "*/*",
    ("/api/export/", "get", "200"): "application/jsonl",
    ("/api/datasets/export/", "get", "200"): "application/jsonl",
    ("/api/conversations/{conversation_id}/messages/", "post", "200"): "text/event-stream",
    ("/api/conversations/{conversation_id}/messages/{position}/edit/", "post", "200"): (
        "text/event-stream"
    ),
    ("/api/conversations/{conversation_id}/regenerate/", "post", "200"): "text/event-stream",
    ("/api/conversations/{conversation_id}/chat/", "post", "200"): "text/event-stream",
}
"""Answers that are files or streams, not JSON: their media type."""


@pytest.fixture
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def test_the_command_generates_a_valid_schema_without_warnings(tmp_path):
    GENERATOR_STATS.reset()
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    document = yaml.safe_load(target.read_text())
    validate_schema(document)
    assert document["openapi"].startswith("3.")


def test_every_operation_describes_its_bodies_and_errors(schema):
    operations = {
        (path, method): set(operation["responses"])
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }
    assert operations == OPERATIONS
    for (path, method), codes in OPERATIONS.items():
        operation = schema["paths"][path][method]
        assert operation["operationId"] and operation["summary"]
        assert {"tokenAuth": []} in operation["security"]
        for code in codes - {"204"}:
            media = DOWNLOADS.get((path, method, code), "application/json")
            assert media in operation["responses"][code]["content"], (path, code)
        if (path, method) in MULTIPART:
            assert "multipart/form-data" in operation["requestBody"]["content"]
        elif method in {"post", "patch"} and (path, method) not in WITHOUT_BODY:
            assert "application/json" in operation["requestBody"]["content"]
        if (path, method) in WITHOUT_BODY:
            assert "requestBody" not in operation
    post = schema["paths"]["/api/conversations/{conversation_id}/messages/"]["post"]
    failure = post["responses"]["502"]["content"]["application/json"]["schema"]
    assert failure == {"$ref": "#/components/schemas/RunFailure"}
    error = schema["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"code", "detail", "errors"}


def test_every_created_answer_documents_its_location_header(schema):
    created = {
        (path, method, code): operation["responses"][code]
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        for code in operation["responses"]
        # Cancelling a run and deciding an approval create nothing: no Location there.
        if code in {"201", "202"} and method == "post"
        if not path.endswith(("/cancel/", "/approve/", "/reject/"))
    }
    assert set(created) == {
        ("/api/attachments/", "post", "201"),
        ("/api/conversations/", "post", "201"),
        ("/api/conversations/import/", "post", "201"),
        ("/api/conversations/{conversation_id}/messages/", "post", "201"),
        ("/api/conversations/{conversation_id}/messages/", "post", "202"),
        ("/api/conversations/{conversation_id}/fork/", "post", "201"),
        ("/api/conversations/{conversation_id}/messages/{position}/edit/", "post", "201"),
        ("/api/conversations/{conversation_id}/messages/{position}/edit/", "post", "202"),
        ("/api/conversations/{conversation_id}/regenerate/", "post", "201"),
        ("/api/conversations/{conversation_id}/regenerate/", "post", "202"),
        ("/api/runs/{run_id}/scores/", "post", "201"),
    }
    for response in created.values():
        assert response["headers"]["Location"]["schema"] == {"type": "string", "format": "uri"}


def test_the_schema_names_status_enums_once(schema):
    components = schema["components"]["schemas"]
    assert components["RunStatus"]["enum"] == [
        "running",
        "completed",
        "max_iterations",
        "failed",
        "interrupted",
        "cancelled",
        "awaiting_approval",
        "budget_exhausted",
    ]
    assert "pending" in components["ToolCallStatus"]["enum"]
    assert "awaiting_approval" in components["ToolCallStatus"]["enum"]


@pytest.mark.django_db
def test_the_schema_is_served_as_yaml_and_json(client):
    url = reverse("conversations:schema")
    response = client.get(url)
    assert response.status_code == 200
    assert "/api/conversations/" in yaml.safe_load(response.content)["paths"]
    response = client.get(url, HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert "/api/runs/{run_id}/" in json.loads(response.content)["paths"]


@pytest.mark.django_db
def test_the_docs_page_uses_the_sidecar_when_installed(client, settings):
    url = reverse("conversations:docs")
    if "drf_spectacular_sidecar" not in settings.INSTALLED_APPS:
        settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, "drf_spectacular_sidecar"]
    page = client.get(url).content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert reverse("conversations:schema") in page


@pytest.mark.django_db
def test_the_docs_page_falls_back_to_the_cdn(client, settings):
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "drf_spectacular_sidecar"]
    page = client.get(reverse("conversations:docs")).content.decode()
    assert "swagger-ui-dist" in page and "/static/drf_spectacular_sidecar/" not in page


@pytest.mark.django_db
def test_the_schema_names_the_api_and_the_installed_version_by_itself(client, settings):
    from importlib.metadata import version

    # The app's schema view sets these; a host without SPECTACULAR_SETTINGS gets them too.
    if hasattr(settings, "SPECTACULAR_SETTINGS"):
        del settings.SPECTACULAR_SETTINGS
    response = client.get(
        reverse("conversations:schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )
    info = json.loads(response.content)["info"]
    assert info["title"] == "django-llm-conversations API"
    assert info["version"] == version("django-llm-conversations") != ""
    assert info["description"]


@pytest.mark.django_db
def test_a_hosts_own_title_does_not_rename_the_apps_api(client, settings):
    settings.SPECTACULAR_SETTINGS = {"TITLE": "Host shop API", "VERSION": "9.9.9"}
    response = client.get(
        reverse("conversations:schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )
    info = json.loads(response.content)["info"]
    assert info["title"] == "django-llm-conversations API"
    assert info["version"] != "9.9.9"


def test_every_operation_documents_the_503_of_a_busy_database(schema):
    from conversations.api.schema import DATABASE_BUSY

    for path, item in schema["paths"].items():
        for method, operation in item.items():
            busy = operation["responses"]["503"]
            assert busy["description"].endswith(DATABASE_BUSY), (path, method)
            assert busy["headers"]["Retry-After"]["schema"] == {"type": "integer"}
            error = busy["content"]["application/json"]["schema"]["$ref"]
            # RunFailure is the error shape plus the failed run, absent when none started.
            assert error.rpartition("/")[2] in {"Error", "RunFailure"}, (path, method)
    # A 503 a view documents itself keeps its own words in front.
    post = schema["paths"]["/api/conversations/{conversation_id}/messages/"]["post"]
    assert "`executor_unavailable`" in post["responses"]["503"]["description"]


def test_the_approvals_and_the_chat_history_are_documented_as_pages(schema):
    approvals = schema["paths"]["/api/approvals/"]["get"]
    ref = approvals["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    page = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"next", "previous", "results"} <= set(page["properties"])
    assert {p["name"] for p in approvals["parameters"]} >= {"cursor", "page_size"}
    # The history stays the array useChat takes; the other pages are in the Link header.
    chat = schema["paths"]["/api/conversations/{conversation_id}/chat/"]["get"]
    assert chat["responses"]["200"]["content"]["application/json"]["schema"]["type"] == "array"
    assert {p["name"] for p in chat["parameters"]} >= {"cursor", "page_size"}
    assert chat["responses"]["200"]["headers"]["Link"]["schema"] == {"type": "string"}


def test_structured_output_is_documented_in_requests_runs_and_lists(schema):
    components = schema["components"]["schemas"]
    assert {"output", "output_schema"} <= set(components["Run"]["properties"])
    assert "output_schema" in components["MessageInput"]["properties"]
    runs = schema["paths"]["/api/conversations/{conversation_id}/runs/"]["get"]
    assert "output_schema" in {p["name"] for p in runs["parameters"]}
    outputs = schema["paths"]["/api/outputs/"]["get"]
    assert {"schema", "from", "to"} <= {p["name"] for p in outputs["parameters"]}


def test_the_import_body_and_the_export_document_provider_tool_calls_and_citations(schema):
    components = schema["components"]["schemas"]
    messages = components["ImportInput"]["properties"]["messages"]
    assert messages["items"] == {"$ref": "#/components/schemas/ImportMessage"}
    message = components["ImportMessage"]["properties"]
    assert message["provider_tool_calls"]["items"] == {
        "$ref": "#/components/schemas/ImportedProviderToolCall"
    }
    assert message["citations"]["items"] == {"$ref": "#/components/schemas/ImportedCitation"}
    # The fields the message list shows, the required ones what the import needs.
    for imported, shown, required in (
        ("ImportedProviderToolCall", "ProviderToolCall", {"kind", "provider", "status"}),
        ("ImportedCitation", "Citation", {"start", "end", "url"}),
    ):
        assert set(components[imported]["properties"]) == set(components[shown]["properties"])
        assert set(components[imported]["required"]) == required
    export = schema["paths"]["/api/export/"]["get"]["description"]
    assert "`provider_tool_calls`" in export and "`citations`" in export
