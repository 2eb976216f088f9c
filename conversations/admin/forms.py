"""The configuration forms of the admin: JSON shapes, key references and tool policy checked."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.contrib.admin.widgets import AdminURLFieldWidget
from django.core.exceptions import ValidationError
from django.http import QueryDict

from conversations.domain import InvalidArgumentError, parse_provider_tools
from conversations.exceptions import ConfigurationError
from conversations.models import LanguageModel, Profile, Provider
from conversations.providers.base import SAMPLING_PARAMETERS, TOOL_CHOICE_KEYWORDS
from conversations.services.configuration import (
    accepted_sampling_parameters,
    check_agents,
    offered_provider_tools,
)
from conversations.tools import registry

__all__ = ["LanguageModelForm", "ProfileForm", "ProviderForm", "temperature_warning"]

CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key"}
)
"""Headers that carry a key: stored in extra_headers they would sit in plain text."""

_REFERENCE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ProviderForm(forms.ModelForm):
    """Checks JSON shapes and that the key field holds a reference, not a key."""

    base_url = forms.URLField(
        required=False,
        max_length=Provider._meta.get_field("base_url").max_length,
        assume_scheme="https",
        widget=AdminURLFieldWidget,
        help_text="Empty = the vendor's public endpoint (Ollama: http://localhost:11434).",
    )

    class Meta:
        model = Provider
        fields = (
            "name",
            "slug",
            "adapter",
            "base_url",
            "api_key_ref",
            "timeout",
            "max_retries",
            "extra_headers",
            "options",
            "is_active",
        )

    def clean_api_key_ref(self) -> str:
        reference = (self.cleaned_data.get("api_key_ref") or "").strip()
        if not reference:
            return reference
        scheme, _, name = reference.partition(":")
        if not _REFERENCE.fullmatch(reference) or (
            scheme == "env" and not _ENV_NAME.fullmatch(name)
        ):
            # Whatever was typed might be a pasted key: never echo it back.
            # Bound data is a QueryDict (a dict in some tests): both copy to a mutable one.
            data = cast(QueryDict, self.data).copy()
            data[self.add_prefix("api_key_ref")] = ""
            self.data = data
            raise ValidationError(
                'api_key_ref must be a reference such as "env:OPENAI_API_KEY" '
                "(scheme:name), never the key itself. The value was cleared.",
                code="invalid_reference",
            )
        return reference

    def clean_extra_headers(self) -> dict[str, str]:
        value = _json_object(self.cleaned_data.get("extra_headers"), "extra_headers")
        bad = [name for name, item in value.items() if not isinstance(item, str) or not name]
        if bad:
            raise ValidationError(
                "extra_headers must map header names to string values; not a string: %(names)s",
                params={"names": ", ".join(bad)},
                code="invalid_headers",
            )
        credentials = sorted(name for name in value if name.lower() in CREDENTIAL_HEADERS)
        if credentials:
            raise ValidationError(
                "extra_headers must not carry credentials (%(names)s): keys are stored "
                "only as a reference, in api_key_ref.",
                params={"names": ", ".join(credentials)},
                code="credential_header",
            )
        return value

    def clean_options(self) -> dict[str, Any]:
        return _json_object(self.cleaned_data.get("options"), "options")


def _json_object(value: Any, field: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            "%(field)s must be a JSON object ({...}), got a JSON %(kind)s.",
            params={"field": field, "kind": _json_kind(value)},
            code="not_an_object",
        )
    return dict(value)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


class LanguageModelForm(forms.ModelForm):
    """Checks that ``sampling_parameters`` is empty or a list of known parameter names,
    and ``input_modalities`` a list of ``image`` and ``pdf`` (empty: text only)."""

    class Meta:
        model = LanguageModel
        fields = (
            "provider",
            "model_id",
            "name",
            "context_window",
            "max_output_tokens",
            "input_price_per_million",
            "cached_input_price_per_million",
            "output_price_per_million",
            "reasoning_price_per_million",
            "web_search_price_per_call",
            "sampling_parameters",
            "input_modalities",
            "is_active",
        )

    def clean_input_modalities(self) -> list[str]:
        # Left empty: text only (the column is a list, never null).
        value = self.cleaned_data.get("input_modalities")
        return [] if value is None else value

    def clean_sampling_parameters(self) -> list[str] | None:
        value = self.cleaned_data.get("sampling_parameters")
        if value is None:
            return None
        known = ", ".join(sorted(SAMPLING_PARAMETERS))
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValidationError(
                "sampling_parameters must be empty (the adapter's default) or a JSON list of "
                'parameter names such as ["temperature"] ([] = none); got %(value)s. '
                "Known: %(known)s.",
                params={"value": json.dumps(value), "known": known},
                code="invalid_sampling_parameters",
            )
        unknown = sorted({name for name in value if name not in SAMPLING_PARAMETERS})
        if unknown:
            raise ValidationError(
                "sampling_parameters names unknown parameter(s): %(names)s. Known: %(known)s.",
                params={"names": ", ".join(unknown), "known": known},
                code="unknown_sampling_parameter",
            )
        return list(dict.fromkeys(value))


def temperature_warning(profile: Profile, *, always: bool = False) -> str:
    """Why the profile's temperature will not be sent to its model; ``""`` when it will.

    ``always`` also explains it for a profile without a temperature (as help on the form).
    """
    if profile.temperature is None and not always:
        return ""
    try:
        accepted = accepted_sampling_parameters(profile.language_model)
    except ConfigurationError as exc:
        return f"The model's sampling_parameters are invalid: {exc.detail}"
    if accepted is None or "temperature" in accepted:
        return ""
    subject = (
        f"The temperature {profile.temperature:g}"
        if profile.temperature is not None
        else "A temperature"
    )
    return (
        f'{subject} will not be sent: model "{profile.language_model.model_id}" does not '
        "accept it (see its sampling_parameters, or its adapter's default)."
    )


def _model_label(obj: LanguageModel) -> str:
    """A language model as the profile form lists it: its provider first."""
    return f"{obj.provider.name} · {obj}"


class ProfileForm(forms.ModelForm):
    """Checks the tool policy against the registry."""

    class Meta:
        model = Profile
        fields = (
            "name",
            "slug",
            "description",
            "language_model",
            "system_prompt",
            "temperature",
            "max_tokens",
            "max_iterations",
            "allowed_tools",
            "tool_choice",
            "provider_tools",
            "approval",
            "stream",
            "agents",
            "agent_timeout",
            "context_strategy",
            "summary_profile",
            "is_active",
            "is_default",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields.get("language_model")
        if isinstance(field, forms.ModelChoiceField) and field.queryset is not None:
            field.queryset = field.queryset.select_related("provider")
            # Django's documented per-instance hook; the stubs only know the method.
            field.label_from_instance = _model_label  # type: ignore[method-assign]
        timeout = self.fields.get("agent_timeout")
        if timeout is not None:
            timeout.required = False
        temperature = self.fields.get("temperature")
        if temperature is not None:
            help_text = "Empty = the model's default."
            if self.instance.pk is not None:
                warning = temperature_warning(self.instance, always=True)
                help_text = f"{help_text} {warning}" if warning else help_text
            temperature.help_text = help_text

    def clean_agent_timeout(self) -> float:
        # Left empty (a form that does not show it): the profile keeps what it has.
        value = self.cleaned_data.get("agent_timeout")
        if value is None:
            return float(self.instance.agent_timeout)
        return float(value)

    def clean_agents(self) -> Any:
        agents = self.cleaned_data.get("agents")
        if agents is None:
            return agents
        profile = self.instance if self.instance.pk is not None else None
        try:
            check_agents(profile=profile, agents=agents)
        except InvalidArgumentError as exc:
            raise ValidationError(exc.detail.removeprefix("agents: "), code=exc.code) from None
        return agents

    def clean_allowed_tools(self) -> list[str] | None:
        value = self.cleaned_data.get("allowed_tools")
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise ValidationError(
                "allowed_tools must be empty (every tool) or a JSON list of tool names, e.g. "
                '["get_weather", "calculate"].',
                code="invalid_allowed_tools",
            )
        unknown = sorted({name for name in value if name not in registry})
        if unknown:
            raise ValidationError(
                "allowed_tools names tools that are not registered: %(names)s. Registered: "
                "%(known)s.",
                params={"names": ", ".join(unknown), "known": ", ".join(registry.names())},
                code="unknown_tool",
            )
        return list(dict.fromkeys(value))

    def clean_provider_tools(self) -> list[Any]:
        value = self.cleaned_data.get("provider_tools")
        try:
            tools = parse_provider_tools(value)
        except InvalidArgumentError as exc:
            raise ValidationError(
                '%(field)s: %(detail)s. Write a list of "web_search", "code_execution" '
                'and {"type": "file_search", "vector_store_ids": ["vs_..."]}.',
                params={"field": exc.field or "provider_tools", "detail": exc.detail},
                code=exc.code,
            ) from None
        return [tool.to_json() for tool in tools]

    def _check_provider_tools(self, cleaned: Mapping[str, Any]) -> None:
        model = cleaned.get("language_model")
        tools = cleaned.get("provider_tools") or []
        if not isinstance(model, LanguageModel) or not tools:
            return
        adapter = model.provider.adapter
        offered = offered_provider_tools(adapter)
        for tool in parse_provider_tools(tools):
            if tool.kind not in offered:
                self.add_error(
                    "provider_tools",
                    ValidationError(
                        'The %(adapter)s adapter cannot offer the provider tool "%(tool)s" '
                        "(it offers: %(offered)s).",
                        params={
                            "adapter": adapter,
                            "tool": tool.kind,
                            "offered": ", ".join(sorted(offered)) or "none",
                        },
                        code="unsupported_provider_tool",
                    ),
                )
                return

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        self._check_provider_tools(cleaned)
        choice = (cleaned.get("tool_choice") or "").strip()
        if choice and choice not in TOOL_CHOICE_KEYWORDS:
            allowed = cleaned.get("allowed_tools")
            if choice not in registry:
                self.add_error(
                    "tool_choice",
                    ValidationError(
                        'tool_choice must be "auto", "none", "required" or a registered '
                        'tool\'s name; "%(name)s" is none of these.',
                        params={"name": choice},
                        code="unknown_tool",
                    ),
                )
            elif allowed is not None and choice not in allowed:
                self.add_error(
                    "tool_choice",
                    ValidationError(
                        'tool_choice "%(name)s" is not among allowed_tools.',
                        params={"name": choice},
                        code="tool_not_allowed",
                    ),
                )
        return cleaned
