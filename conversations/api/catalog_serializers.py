"""Response bodies of the configuration the API lists: tools and profiles."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from conversations.domain import InvalidArgumentError, parse_provider_tools
from conversations.models import Profile, Provider

__all__ = ["ProfileSerializer", "ToolSerializer"]


class ToolSerializer(serializers.Serializer[Any]):
    """A tool the model may be offered."""

    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.DictField(help_text="JSON Schema of the arguments.")


class ProfileSerializer(serializers.Serializer[Any]):
    """An active profile (never any key or key reference)."""

    slug = serializers.SlugField()
    name = serializers.CharField()
    model = serializers.CharField(source="language_model.model_id")
    provider = serializers.CharField(source="language_model.provider.slug")
    adapter = serializers.ChoiceField(
        source="language_model.provider.adapter",
        choices=Provider.Adapter.choices,
    )
    is_default = serializers.SerializerMethodField()
    max_iterations = serializers.IntegerField()
    allowed_tools = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="Tool names the profile may offer; null means every enabled tool.",
    )
    stream = serializers.BooleanField(
        help_text="Whether answers stream (deltas on the run's events) while they are written."
    )
    provider_tools = serializers.SerializerMethodField(
        help_text="The tools the provider runs itself for this profile, by kind (web_search...)."
    )

    def get_provider_tools(self, obj: Profile) -> list[str]:
        try:
            return [tool.kind for tool in parse_provider_tools(obj.provider_tools)]
        except InvalidArgumentError:  # a list the admin would refuse: a run says why
            return []

    def get_is_default(self, obj: Profile) -> bool:
        return obj.slug == self.context.get("default_profile")
