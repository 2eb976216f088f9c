"""The configuration admin: providers, models, profiles and tool switches; keys never shown."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conversations.models import LanguageModel, Profile, Provider, ToolSetting
from conversations.selectors import available_tools, disabled_tool_names
from conversations.services.configuration import KEYLESS_ADAPTERS
from conversations.tools import registry

from .conftest import KEY_VARIABLE, SECRET, admin_url

pytestmark = pytest.mark.django_db


def html(response) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def key_set(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, SECRET)


@pytest.fixture
def key_unset(monkeypatch):
    monkeypatch.delenv(KEY_VARIABLE, raising=False)


class FakeVendor:
    """A local HTTP server answering every POST with one status; it echoes the auth header."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.requests: list[str] = []
        vendor = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                vendor.requests.append(self.path)
                echoed = self.headers.get("authorization", "")
                body = json.dumps({"error": {"message": f"rejected {echoed}"}}).encode()
                self.send_response(vendor.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def vendor():
    server = FakeVendor(401)
    yield server
    server.close()


def run_action(client, model, action, objects):
    response = client.post(
        admin_url(model, "changelist"),
        {"action": action, "_selected_action": [obj.pk for obj in objects]},
        follow=True,
    )
    return html(response)


# Keys ----------------------------------------------------------------------------------


def test_key_value_never_appears_on_any_page(
    admin_client, key_set, openai_profile, openai_provider, history
):
    language_model = openai_profile.language_model
    pages = [
        admin_url(Provider, "changelist"),
        admin_url(openai_provider),
        admin_url(Provider, "add"),
        admin_url(LanguageModel, "changelist"),
        admin_url(language_model),
        admin_url(Profile, "changelist"),
        admin_url(openai_profile),
        admin_url(ToolSetting, "changelist"),
        admin_url(history.conversation),
        admin_url(history.run),
        "/admin/",
    ]
    for url in pages:
        assert SECRET not in html(admin_client.get(url)), url
    listing = html(admin_client.get(admin_url(Provider, "changelist")))
    assert f"env:{KEY_VARIABLE}" in listing
    assert 'alt="True"' in listing  # the "key resolves" icon
    detail = html(admin_client.get(admin_url(openai_provider)))
    assert "The reference resolves (the value is never shown)." in detail


def test_unresolvable_key_is_reported(admin_client, key_unset, openai_provider):
    listing = html(admin_client.get(admin_url(Provider, "changelist")))
    assert 'alt="False"' in listing
    detail = html(admin_client.get(admin_url(openai_provider)))
    assert "The reference does not resolve." in detail
    assert f"Set the environment variable {KEY_VARIABLE}." in detail


def test_keyless_adapter_shows_unknown_not_false(admin_client):
    Provider.objects.create(slug="local", name="Local", adapter=Provider.Adapter.OLLAMA)
    listing = html(admin_client.get(admin_url(Provider, "changelist")))
    assert 'alt="None"' in listing


@pytest.mark.parametrize("adapter", Provider.Adapter.values)
def test_the_admin_says_a_provider_needs_no_key_exactly_for_the_keyless_adapters(
    admin_client, adapter
):
    record = Provider.objects.create(slug="p", name="P", adapter=adapter)
    detail = html(admin_client.get(admin_url(record)))
    assert ("This adapter needs none." in detail) == (adapter in KEYLESS_ADAPTERS)


# Test connection -----------------------------------------------------------------------


def test_test_connection_with_unresolvable_key_sends_nothing(
    admin_client, key_unset, openai_provider, openai_model, vendor
):
    openai_provider.base_url = vendor.url
    openai_provider.save()
    page = run_action(admin_client, Provider, "test_connection", [openai_provider])
    assert "Provider &quot;openai&quot;: configuration_error:" in page
    assert f"env:{KEY_VARIABLE}" in page and "does not resolve" in page
    assert vendor.requests == []


def test_test_connection_reports_code_and_detail_never_the_key(
    admin_client, key_set, openai_provider, openai_model, vendor
):
    openai_provider.base_url = vendor.url
    openai_provider.save()
    page = run_action(admin_client, Provider, "test_connection", [openai_provider])
    assert vendor.requests == ["/v1/chat/completions"]
    assert "provider_authentication_failed" in page and "HTTP 401" in page
    assert SECRET not in page


def test_test_connection_sends_exactly_one_request(
    admin_client, key_set, openai_provider, openai_model
):
    failing = FakeVendor(503)
    try:
        openai_provider.base_url = failing.url
        openai_provider.max_retries = 3
        openai_provider.save()
        page = run_action(admin_client, Provider, "test_connection", [openai_provider])
    finally:
        failing.close()
    assert len(failing.requests) == 1  # no retries, whatever the record says
    assert "provider_http_error" in page and "HTTP 503" in page
    assert SECRET not in page
    openai_provider.refresh_from_db()
    assert openai_provider.max_retries == 3  # the record is untouched


def test_test_connection_succeeds_on_the_offline_demo(admin_client):
    demo = Provider.objects.create(slug="demo", name="Demo", adapter=Provider.Adapter.DEMO)
    LanguageModel.objects.create(provider=demo, model_id="demo-1")
    page = run_action(admin_client, Provider, "test_connection", [demo])
    assert "Provider &quot;demo&quot;: connection OK (demo-1 answered in" in page


def test_test_connection_without_a_model_warns(admin_client, key_set, openai_provider):
    page = run_action(admin_client, Provider, "test_connection", [openai_provider])
    assert "no active language model to test with" in page


def test_profile_test_connection(admin_client, key_set, openai_profile, openai_provider, vendor):
    openai_provider.base_url = vendor.url
    openai_provider.save()
    page = run_action(admin_client, Profile, "test_connection", [openai_profile])
    assert "Profile &quot;assistant&quot;: provider_authentication_failed" in page
    assert SECRET not in page
    assert len(vendor.requests) == 1


def test_profile_test_connection_reports_an_inactive_provider(
    admin_client, key_set, openai_profile
):
    Provider.objects.update(is_active=False)
    page = run_action(admin_client, Profile, "test_connection", [openai_profile])
    assert "Profile &quot;assistant&quot;: configuration_error" in page


# Validation on save --------------------------------------------------------------------


def provider_data(**overrides):
    data = {
        "name": "Mistral",
        "slug": "mistral",
        "adapter": "mistral",
        "base_url": "",
        "api_key_ref": "env:MISTRAL_API_KEY",
        "timeout": "",
        "max_retries": "",
        "max_stream_seconds": "600",
        "extra_headers": "{}",
        "options": "{}",
        "is_active": "on",
        "models-TOTAL_FORMS": "0",
        "models-INITIAL_FORMS": "0",
        "models-MIN_NUM_FORMS": "0",
        "models-MAX_NUM_FORMS": "1000",
    }
    data.update(overrides)
    return data


def test_valid_provider_saves(admin_client):
    response = admin_client.post(
        admin_url(Provider, "add"),
        provider_data(extra_headers='{"X-Team": "blue"}', options='{"api_version": "1"}'),
    )
    assert response.status_code == 302
    saved = Provider.objects.get(slug="mistral")
    assert saved.extra_headers == {"X-Team": "blue"} and saved.options == {"api_version": "1"}


def test_empty_json_fields_save_as_empty_objects(admin_client):
    response = admin_client.post(
        admin_url(Provider, "add"), provider_data(extra_headers="", options="")
    )
    assert response.status_code == 302
    saved = Provider.objects.get(slug="mistral")
    assert saved.extra_headers == {} and saved.options == {}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "extra_headers",
            "[1, 2]",
            "extra_headers must be a JSON object ({...}), got a JSON array.",
        ),
        ("extra_headers", '{"X-Retry": 3}', "not a string: X-Retry"),
        ("extra_headers", '{"Authorization": "Bearer x"}', "must not carry credentials"),
        ("extra_headers", '{"X-API-Key": "x"}', "must not carry credentials (X-API-Key)"),
        ("options", '"fast"', "options must be a JSON object ({...}), got a JSON string."),
        ("options", "7", "options must be a JSON object ({...}), got a JSON number."),
    ],
)
def test_provider_json_fields_must_be_objects(admin_client, field, value, message):
    response = admin_client.post(admin_url(Provider, "add"), provider_data(**{field: value}))
    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors[field]
    assert message in error
    assert not Provider.objects.filter(slug="mistral").exists()


@pytest.mark.parametrize("typed", [SECRET, "env:", "env:NOT VALID", "just-a-name"])
def test_key_field_refuses_anything_but_a_reference_and_never_echoes_it(admin_client, typed):
    response = admin_client.post(admin_url(Provider, "add"), provider_data(api_key_ref=typed))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["api_key_ref"]
    assert "never the key itself" in errors[0]
    page = response.content.decode()
    assert f'value="{typed}"' not in page
    if typed == SECRET:
        assert SECRET not in page


def profile_data(openai_model, **overrides):
    data = {
        "name": "Research",
        "slug": "research",
        "language_model": str(openai_model.pk),
        "system_prompt": "",
        "temperature": "",
        "max_tokens": "",
        "max_iterations": "10",
        "allowed_tools": "",
        "tool_choice": "auto",
        "approval": "default",
        "context_strategy": "truncate",
        "is_active": "on",
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize("strategy", ["truncate", "summarize", "fail"])
def test_a_profiles_context_strategy_is_chosen_in_the_admin(
    admin_client, openai_model, openai_profile, strategy
):
    data = profile_data(
        openai_model, context_strategy=strategy, summary_profile=str(openai_profile.pk)
    )
    response = admin_client.post(admin_url(Profile, "add"), data)
    assert response.status_code == 302
    saved = Profile.objects.get(slug="research")
    assert (saved.context_strategy, saved.summary_profile) == (strategy, openai_profile)


def test_an_unknown_context_strategy_is_refused_by_the_admin(admin_client, openai_model):
    response = admin_client.post(
        admin_url(Profile, "add"), profile_data(openai_model, context_strategy="shrink")
    )
    assert response.status_code == 200
    assert "context_strategy" in response.context["adminform"].form.errors
    assert not Profile.objects.filter(slug="research").exists()


@pytest.mark.parametrize(
    ("value", "saved"),
    [("", None), ("null", None), ('["get_weather", "calculate"]', ["get_weather", "calculate"])],
)
def test_profile_allowed_tools_accepts_null_or_names(admin_client, openai_model, value, saved):
    response = admin_client.post(
        admin_url(Profile, "add"), profile_data(openai_model, allowed_tools=value)
    )
    assert response.status_code == 302
    assert Profile.objects.get(slug="research").allowed_tools == saved


@pytest.mark.parametrize(
    ("field", "overrides", "message"),
    [
        ("allowed_tools", {"allowed_tools": '{"get_weather": true}'}, "a JSON list of tool names"),
        ("allowed_tools", {"allowed_tools": "[1, 2]"}, "a JSON list of tool names"),
        ("allowed_tools", {"allowed_tools": '"get_weather"'}, "a JSON list of tool names"),
        ("allowed_tools", {"allowed_tools": '["no_such_tool"]'}, "not registered: no_such_tool"),
        ("tool_choice", {"tool_choice": "no_such_tool"}, '"no_such_tool" is none of these'),
        (
            "tool_choice",
            {"tool_choice": "calculate", "allowed_tools": '["get_weather"]'},
            'tool_choice "calculate" is not among allowed_tools',
        ),
    ],
)
def test_profile_validation_names_the_field(admin_client, openai_model, field, overrides, message):
    response = admin_client.post(admin_url(Profile, "add"), profile_data(openai_model, **overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field]
    assert message in errors[field][0]


def test_profile_form_labels_models_with_their_provider(admin_client, openai_model):
    page = html(admin_client.get(admin_url(Profile, "add")))
    assert "OpenAI · GPT test" in page


def test_configuration_pages_render(admin_client, key_set, openai_profile):
    language_model = openai_profile.language_model
    for model in (Provider, LanguageModel, Profile, ToolSetting):
        html(admin_client.get(admin_url(model, "changelist") + "?_facets=1"))
    for url in (
        admin_url(LanguageModel, "add"),
        admin_url(Profile, "add"),
        admin_url(language_model),
        admin_url(openai_profile),
    ):
        html(admin_client.get(url))


# Tools ---------------------------------------------------------------------------------


def test_tool_changelist_lists_every_registered_tool(admin_client, history):
    assert not ToolSetting.objects.exists()
    response = admin_client.get(admin_url(ToolSetting, "changelist"))
    page = html(response)
    assert set(ToolSetting.objects.values_list("name", flat=True)) == set(registry.names())
    counts = {row.name: row.call_count for row in response.context["cl"].result_list}
    assert counts["get_weather"] == 3 and counts["calculate"] == 1
    assert counts["get_current_time"] == 1
    tool = registry.get("get_weather")
    assert tool.description.strip().splitlines()[0][:40] in page
    # Opening it again creates nothing new.
    html(admin_client.get(admin_url(ToolSetting, "changelist")))
    assert ToolSetting.objects.count() == len(registry)


def test_tool_switch_by_action(admin_client):
    html(admin_client.get(admin_url(ToolSetting, "changelist")))
    weather = ToolSetting.objects.get(name="get_weather")
    page = run_action(admin_client, ToolSetting, "disable_tools", [weather])
    assert "Disabled 1 tool(s)." in page
    assert disabled_tool_names() == {"get_weather"}
    assert "get_weather" not in available_tools()
    run_action(admin_client, ToolSetting, "enable_tools", [weather])
    assert disabled_tool_names() == frozenset()


def test_tool_switch_by_list_editable(admin_client):
    url = admin_url(ToolSetting, "changelist")
    formset = admin_client.get(url).context["cl"].formset
    data = {
        "form-TOTAL_FORMS": str(len(formset.forms)),
        "form-INITIAL_FORMS": str(len(formset.forms)),
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    for index, form in enumerate(formset.forms):
        data[f"form-{index}-id"] = str(form.instance.pk)
        if form.instance.name != "calculate":
            data[f"form-{index}-enabled"] = "on"
    assert admin_client.post(url, data).status_code == 302
    assert disabled_tool_names() == {"calculate"}
    assert set(available_tools()) == set(registry.names()) - {"calculate"}


def test_tool_rows_cannot_be_added_or_deleted(admin_client):
    html(admin_client.get(admin_url(ToolSetting, "changelist")))
    setting = ToolSetting.objects.first()
    assert admin_client.get(admin_url(ToolSetting, "add")).status_code == 403
    assert admin_client.get(admin_url(setting, "delete")).status_code == 403
    page = html(admin_client.get(admin_url(setting)))
    assert "JSON Schema" in page


def test_unregistered_tool_is_marked(admin_client):
    ToolSetting.objects.create(name="retired_tool", enabled=False)
    page = html(admin_client.get(admin_url(ToolSetting, "changelist")))
    assert "(no longer registered)" in page


# Sampling parameters -------------------------------------------------------------------


def model_data(openai_provider, **overrides):
    data = {
        "provider": str(openai_provider.pk),
        "model_id": "claude-test",
        "name": "",
        "context_window": "",
        "max_output_tokens": "",
        "input_price_per_million": "",
        "output_price_per_million": "",
        "sampling_parameters": "",
        "is_active": "on",
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    ("value", "saved"), [("", None), ("[]", []), ('["temperature"]', ["temperature"])]
)
def test_model_sampling_parameters_accepts_empty_none_or_known_names(
    admin_client, openai_provider, value, saved
):
    response = admin_client.post(
        admin_url(LanguageModel, "add"), model_data(openai_provider, sampling_parameters=value)
    )
    assert response.status_code == 302
    assert LanguageModel.objects.get(model_id="claude-test").sampling_parameters == saved


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('["top_q"]', "unknown parameter(s): top_q. Known: temperature"),
        ('"temperature"', 'a JSON list of parameter names such as ["temperature"]'),
        ("[1]", "got [1]"),
        ('{"temperature": true}', "a JSON list of parameter names"),
    ],
)
def test_model_sampling_parameters_errors_name_the_field_and_value(
    admin_client, openai_provider, value, message
):
    response = admin_client.post(
        admin_url(LanguageModel, "add"), model_data(openai_provider, sampling_parameters=value)
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["sampling_parameters"]
    assert "sampling_parameters" in errors["sampling_parameters"][0]
    assert message in errors["sampling_parameters"][0]


def test_model_admin_shows_sampling_parameters_with_help(admin_client, openai_model):
    page = html(admin_client.get(admin_url(openai_model)))
    assert 'name="sampling_parameters"' in page
    assert "The sampling parameters this model accepts" in page


@pytest.fixture
def claude(db):
    provider = Provider.objects.create(
        slug="claude", name="Claude", adapter=Provider.Adapter.ANTHROPIC, api_key_ref="env:X"
    )
    return LanguageModel.objects.create(provider=provider, model_id="claude-sonnet-4-5")


def test_saving_a_profile_whose_temperature_is_not_sent_warns(admin_client, claude):
    response = admin_client.post(
        admin_url(Profile, "add"), profile_data(claude, temperature="0.7"), follow=True
    )
    page = html(response)
    assert Profile.objects.filter(slug="research").exists()  # a warning, not an error
    assert "The temperature 0.7 will not be sent" in page
    assert "claude-sonnet-4-5" in page


def test_no_warning_when_the_model_accepts_the_temperature(admin_client, claude):
    claude.sampling_parameters = ["temperature"]
    claude.save()
    page = html(
        admin_client.post(
            admin_url(Profile, "add"), profile_data(claude, temperature="0.7"), follow=True
        )
    )
    assert "will not be sent" not in page


def test_the_profile_form_explains_it_as_help(admin_client, claude):
    profile = Profile.objects.create(slug="p", name="P", language_model=claude)
    assert "A temperature will not be sent" in html(admin_client.get(admin_url(profile)))
