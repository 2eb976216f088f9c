"""Tools and profiles: what a client may choose from, and never a key."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from conversations.models import LanguageModel, Profile, Provider, ToolSetting
from conversations.tools import registry

pytestmark = pytest.mark.django_db


def test_tools_lists_the_enabled_tools_with_their_schemas(api):
    ToolSetting.objects.create(name="get_current_time", enabled=False)
    response = api.get(reverse("conversations:tool-list"))
    assert response.status_code == 200
    tools = {tool["name"]: tool for tool in response.json()}
    assert "get_current_time" not in tools
    weather = registry.get("get_weather")
    assert tools["get_weather"] == {
        "name": "get_weather",
        "description": weather.description,
        "parameters": json.loads(json.dumps(weather.parameters)),
    }
    assert tools["get_weather"]["parameters"]["type"] == "object"


def test_profiles_lists_active_profiles_without_any_key(api, profile):
    provider = Provider.objects.create(
        slug="openai", name="OpenAI", adapter="openai", api_key_ref="env:SECRET_REF_NAME"
    )
    model = LanguageModel.objects.create(provider=provider, model_id="gpt-4o-mini")
    Profile.objects.create(
        slug="tools-only",
        name="Tools",
        language_model=model,
        allowed_tools=["calculate"],
        stream=False,
    )
    Profile.objects.create(slug="off", name="Off", language_model=model, is_active=False)
    response = api.get(reverse("conversations:profile-list"))
    assert response.status_code == 200
    assert response.json() == [
        {
            "slug": "demo",
            "name": "Demo",
            "model": "demo-model",
            "provider": "demo",
            "adapter": "demo",
            "is_default": True,
            "max_iterations": 4,
            "allowed_tools": None,
            "stream": True,
            "provider_tools": [],
        },
        {
            "slug": "tools-only",
            "name": "Tools",
            "model": "gpt-4o-mini",
            "provider": "openai",
            "adapter": "openai",
            "is_default": False,
            "max_iterations": 10,
            "allowed_tools": ["calculate"],
            "stream": False,
            "provider_tools": [],
        },
    ]
    assert "SECRET_REF_NAME" not in response.content.decode()
    assert "api_key" not in response.content.decode()


def test_the_default_profile_setting_decides_is_default(api, profile, language_model, settings):
    Profile.objects.create(slug="chosen", name="Chosen", language_model=language_model)
    settings.CONVERSATIONS = {"DEFAULT_PROFILE": "chosen"}
    defaults = [
        p["slug"] for p in api.get(reverse("conversations:profile-list")).json() if p["is_default"]
    ]
    assert defaults == ["chosen"]
