"""Turn configuration records (Provider, LanguageModel, Profile) into adapters."""

from __future__ import annotations

from typing import Any

from conversations.conf import app_settings
from conversations.exceptions import ConfigurationError
from conversations.models import Profile, Provider
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.base import ChatProvider, CompletionOptions, HTTPProvider
from conversations.providers.demo import DemoProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import PRESETS, OpenAIProvider
from conversations.secrets import resolve

__all__ = [
    "build_provider",
    "completion_options",
    "provider_from_record",
]

HTTP_ADAPTERS: dict[str, type[HTTPProvider]] = {
    **dict.fromkeys(PRESETS, OpenAIProvider),  # each preset name is an adapter name
    "anthropic": AnthropicProvider,
    "gemini": GeminiProvider,
    "ollama": OllamaProvider,
}
"""``Provider.adapter`` -> the HTTP adapter class (``demo`` is the offline one)."""


def provider_from_record(provider: Provider, *, http_client: Any = None) -> ChatProvider:
    """The adapter configured by a ``Provider`` record; the key is resolved now."""
    if not provider.is_active:
        raise ConfigurationError(f'provider "{provider.slug}" is not active')
    conf = app_settings()
    adapter = provider.adapter
    if adapter == "demo":
        latency = (provider.options or {}).get("latency_seconds", 0)
        if isinstance(latency, bool) or not isinstance(latency, int | float) or latency < 0:
            raise ConfigurationError(
                f'provider "{provider.slug}": option "latency_seconds" must be a number >= 0'
            )
        return DemoProvider(latency=float(latency))
    adapter_class = HTTP_ADAPTERS.get(adapter)
    if adapter_class is None:
        raise ConfigurationError(f'provider "{provider.slug}": unknown adapter "{adapter}"')
    api_key = resolve(provider.api_key_ref)
    if adapter_class.requires_api_key and not api_key:
        # Say which reference failed, never what a key looks like.
        raise ConfigurationError(
            f'provider "{provider.slug}": the API key reference '
            f'"{provider.api_key_ref or "(empty)"}" does not resolve'
        )
    settings: dict[str, Any] = {
        "api_key": api_key,
        "base_url": provider.base_url or None,
        "timeout": provider.timeout or conf.HTTP_TIMEOUT,
        "max_retries": (
            provider.max_retries if provider.max_retries is not None else conf.HTTP_MAX_RETRIES
        ),
        "extra_headers": dict(provider.extra_headers or {}),
        "http_client": http_client,
    }
    if adapter_class is OpenAIProvider:
        settings["preset"] = adapter
        api_version = (provider.options or {}).get("api_version")
        if adapter == "azure_openai" and api_version:
            settings["api_version"] = api_version
    return adapter_class(**settings)


def build_provider(profile: Profile, *, http_client: Any = None) -> ChatProvider:
    """The adapter a profile talks to."""
    if not profile.is_active:
        raise ConfigurationError(f'profile "{profile.slug}" is not active')
    return provider_from_record(profile.language_model.provider, http_client=http_client)


def completion_options(profile: Profile | None, *, tools_offered: bool = True) -> CompletionOptions:
    """The request options a profile asks for (no profile: the provider's defaults)."""
    if profile is None:
        return CompletionOptions(model="default")
    model = profile.language_model
    max_tokens = profile.max_tokens or model.max_output_tokens
    tool_choice = profile.tool_choice or None
    return CompletionOptions(
        model=model.model_id,
        temperature=profile.temperature,
        max_tokens=max_tokens,
        tool_choice=tool_choice if tools_offered else None,
    )
