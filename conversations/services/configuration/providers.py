"""Turn configuration records (Provider, LanguageModel, Profile) into adapters, and test them."""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Any, Final, Literal

from conversations.conf import app_settings, demo_stream_delay
from conversations.domain import ChatMessage, InvalidArgumentError, ProviderTool
from conversations.domain import parse_provider_tools as parse_tools
from conversations.domain.timing import milliseconds
from conversations.exceptions import ConfigurationError, ConversationsError
from conversations.models import LanguageModel, Profile, Provider
from conversations.providers.anthropic import AnthropicProvider
from conversations.providers.anthropic_server_tools import CODE_EXECUTION_BETA
from conversations.providers.base import (
    SAMPLING_PARAMETERS,
    ChatProvider,
    CompletionOptions,
    HTTPProvider,
    redact,
)
from conversations.providers.demo import DemoProvider
from conversations.providers.gemini import GeminiProvider
from conversations.providers.ollama import OllamaProvider
from conversations.providers.openai import PRESETS, OpenAIProvider
from conversations.providers.openai_responses import RESPONSES_PRESETS, OpenAIResponsesProvider
from conversations.providers.provider_tools import unsupported_provider_tools
from conversations.secrets import resolve

__all__ = [
    "HTTP_ADAPTERS",
    "KEYLESS_ADAPTERS",
    "ConnectionCheck",
    "accepted_sampling_parameters",
    "build_provider",
    "check_connection",
    "close_provider",
    "completion_options",
    "offered_provider_tools",
    "profile_provider_tools",
    "provider_from_record",
]

CHECK_TIMEOUT_SECONDS: Final = 20.0
"""Upper bound on a connection check, so an unreachable host does not hang the caller."""
CHECK_MAX_TOKENS: Final = 16

HTTP_ADAPTERS: dict[str, type[HTTPProvider]] = {
    **dict.fromkeys(PRESETS, OpenAIProvider),  # each preset name is an adapter name
    "openai_responses": OpenAIResponsesProvider,
    "anthropic": AnthropicProvider,
    "gemini": GeminiProvider,
    "ollama": OllamaProvider,
}
"""``Provider.adapter`` -> the HTTP adapter class (``demo`` is the offline one).

The one table of adapters: records, the admin and the export all look adapters up here."""

KEYLESS_ADAPTERS: Final[frozenset[str]] = frozenset(
    {
        Provider.Adapter.DEMO.value,  # offline: it sends nothing anywhere
        *(name for name, adapter in HTTP_ADAPTERS.items() if not adapter.requires_api_key),
    }
)
"""The adapters that work without an API key (an empty key reference is fine for them).

Derived from each HTTP adapter's ``requires_api_key``, the one that refuses a
missing key, so the admin cannot tell a different story than the adapter."""


def provider_from_record(provider: Provider, *, http_client: Any = None) -> ChatProvider:
    """The adapter configured by a ``Provider`` record; the key is resolved now."""
    if not provider.is_active:
        raise ConfigurationError(f'provider "{provider.slug}" is not active')
    conf = app_settings()
    adapter = provider.adapter
    if adapter == Provider.Adapter.DEMO:
        return _demo_provider(provider)
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
        "max_response_bytes": provider.max_response_bytes,
        "max_stream_seconds": provider.max_stream_seconds,
    }
    if adapter_class is OpenAIProvider:
        settings["preset"] = adapter
        api_version = (provider.options or {}).get("api_version")
        if adapter == "azure_openai" and api_version:
            settings["api_version"] = api_version
    if adapter_class is OpenAIResponsesProvider:
        # The service behind the Responses API (Azure: its v1 API), from the record's options.
        settings["preset"] = _responses_preset(provider)
    return adapter_class(**settings)


def _responses_preset(provider: Provider) -> str:
    preset = (provider.options or {}).get("preset", "openai")
    if preset not in RESPONSES_PRESETS:
        raise ConfigurationError(
            f'provider "{provider.slug}": option "preset" must be one of '
            f"{', '.join(RESPONSES_PRESETS)}"
        )
    return str(preset)


DEMO_STREAM_DELAY_VARIABLE: Final = "CONVERSATIONS_DEMO_STREAM_DELAY"
"""The environment variable giving demo providers their ``stream_delay_seconds`` by default."""


def _demo_provider(provider: Provider) -> DemoProvider:
    """The demo model of a record; its pause per streamed piece: the record's option, else the
    environment variable, else ``CONVERSATIONS["DEMO_STREAM_DELAY_SECONDS"]``."""
    options = provider.options or {}
    latency = _seconds(provider, "latency_seconds", options.get("latency_seconds", 0))
    if "stream_delay_seconds" in options:
        delay = _seconds(provider, "stream_delay_seconds", options["stream_delay_seconds"])
    elif variable := os.environ.get(DEMO_STREAM_DELAY_VARIABLE, "").strip():
        try:
            delay = float(variable)
        except ValueError:
            delay = -1.0
        if not 0 <= delay < float("inf"):
            raise ConfigurationError(
                f"the environment variable {DEMO_STREAM_DELAY_VARIABLE} must be a number >= 0"
            )
    else:
        delay = demo_stream_delay()
    return DemoProvider(latency=latency, stream_delay=delay)


def _seconds(provider: Provider, option: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value < float("inf")
    ):
        raise ConfigurationError(
            f'provider "{provider.slug}": option "{option}" must be a number >= 0'
        )
    return float(value)


def build_provider(profile: Profile, *, http_client: Any = None) -> ChatProvider:
    """The adapter a profile talks to.

    Raises :class:`ConfigurationError` when the profile asks for a provider
    tool its adapter cannot offer (naming both), so a run is refused before it starts.
    """
    if not profile.is_active:
        raise ConfigurationError(f'profile "{profile.slug}" is not active')
    tools = profile_provider_tools(profile)
    record = profile.language_model.provider
    missing = unsupported_provider_tools(offered_provider_tools(record.adapter), tools)
    if missing:
        offered = ", ".join(sorted(offered_provider_tools(record.adapter))) or "none"
        raise ConfigurationError(
            f'profile "{profile.slug}": the {record.adapter} adapter cannot offer the provider '
            f'tool "{missing[0]}" (it offers: {offered})'
        )
    adapter = provider_from_record(record, http_client=http_client)
    if isinstance(adapter, AnthropicProvider) and any(t.kind == "code_execution" for t in tools):
        # Anthropic's code execution tool is behind a beta flag; added to any the record sets.
        flags = adapter.extra_headers.get("anthropic-beta", "")
        if CODE_EXECUTION_BETA not in flags:
            joined = f"{flags},{CODE_EXECUTION_BETA}" if flags else CODE_EXECUTION_BETA
            adapter.extra_headers["anthropic-beta"] = joined
    return adapter


def offered_provider_tools(adapter: str) -> frozenset[str]:
    """The provider tools the adapter named ``adapter`` (a ``Provider.adapter``) can offer."""
    if adapter == Provider.Adapter.DEMO:
        return DemoProvider.provider_tool_kinds
    adapter_class = HTTP_ADAPTERS.get(adapter)
    return frozenset() if adapter_class is None else adapter_class.provider_tool_kinds


def profile_provider_tools(profile: Profile) -> tuple[ProviderTool, ...]:
    """The profile's ``provider_tools`` as values; :class:`ConfigurationError` for a stored
    list that is not valid (the admin refuses one; this guards rows written otherwise)."""
    try:
        return parse_tools(profile.provider_tools)
    except InvalidArgumentError as exc:
        raise ConfigurationError(
            f'profile "{profile.slug}": {exc.field or "provider_tools"}: {exc.detail}'
        ) from None


def model_sampling_parameters(model: LanguageModel) -> frozenset[str] | None:
    """The sampling parameters a model record accepts; ``None`` = its adapter's default.

    Raises :class:`ConfigurationError` for a stored value that is not a list of
    known names (the admin refuses one; this guards rows written otherwise).
    """
    value = model.sampling_parameters
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ConfigurationError(
            f'language model "{model.model_id}": sampling_parameters must be a list of '
            f"names, got {value!r}"
        )
    unknown = sorted(set(value) - SAMPLING_PARAMETERS)
    if unknown:
        raise ConfigurationError(
            f'language model "{model.model_id}": sampling_parameters names unknown '
            f"parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(SAMPLING_PARAMETERS))}"
        )
    return frozenset(value)


def accepted_sampling_parameters(model: LanguageModel) -> frozenset[str] | None:
    """What a request to ``model`` may carry: its own list, else its adapter's default.

    ``None`` when the adapter sends no sampling at all (the offline demo) or is unknown.
    """
    own = model_sampling_parameters(model)
    if own is not None:
        return own
    adapter_class = HTTP_ADAPTERS.get(model.provider.adapter)
    return None if adapter_class is None else adapter_class.default_sampling_parameters


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
        sampling_parameters=model_sampling_parameters(model),
        provider_tools=profile_provider_tools(profile),
    )


@dataclass(frozen=True, slots=True)
class ConnectionCheck:
    """The outcome of :func:`check_connection`; ``detail`` never holds a key."""

    status: Literal["ok", "failed", "skipped"]
    """``skipped``: there was nothing to test with (a provider without an active model)."""
    detail: str
    """What happened, in words (``gpt-4o answered in 120 ms``, the error's detail, ...)."""
    code: str = ""
    """The error's stable code when ``status`` is ``failed``."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _one_attempt(provider: Provider) -> Provider:
    """An unsaved copy of ``provider`` limited to one short request."""
    trial = copy.copy(provider)
    trial.max_retries = 0
    trial.timeout = min(provider.timeout or CHECK_TIMEOUT_SECONDS, CHECK_TIMEOUT_SECONDS)
    return trial


def check_connection(
    *,
    profile: Profile | None = None,
    provider: Provider | None = None,
    send: bool = True,
    http_client: Any = None,
) -> ConnectionCheck:
    """Build the adapter of ``profile`` (or of ``provider``) and, with ``send``, ask "ping".

    One attempt, at most :data:`CHECK_TIMEOUT_SECONDS`, whatever the record's
    retries and timeout (the record itself is untouched). A profile is tested
    with its own options; a provider with its first active model (``skipped``
    when it has none). Failures of the app's own kinds (a key reference that
    does not resolve, HTTP errors, ...) become a ``failed`` outcome whose
    detail has every key the reference resolves to scrubbed once more;
    anything else propagates.
    """
    if (profile is None) == (provider is None):
        raise TypeError("check_connection needs exactly one of profile and provider")
    record = profile.language_model.provider if profile is not None else provider
    assert record is not None  # for the type checker: exactly one was given
    model: LanguageModel | None
    try:
        if profile is not None:
            model = profile.language_model
            trial = copy.copy(profile)
            trial.language_model = copy.copy(model)
            trial.language_model.provider = _one_attempt(record)
            adapter = build_provider(trial, http_client=http_client)
            # A ping offers no tool, the provider's own ones included (a search costs).
            options = dataclasses.replace(
                completion_options(profile, tools_offered=False), provider_tools=()
            )
        else:
            active = LanguageModel.objects.filter(provider=record, is_active=True)
            model = active.order_by("model_id").first()
            if model is None:
                return ConnectionCheck(
                    "skipped", "no active language model to test with; add one first."
                )
            adapter = provider_from_record(_one_attempt(record), http_client=http_client)
            options = CompletionOptions(
                model=model.model_id,
                max_tokens=min(CHECK_MAX_TOKENS, model.max_output_tokens or CHECK_MAX_TOKENS),
            )
        if not send:
            return ConnectionCheck("ok", "configuration is complete")
        return ConnectionCheck("ok", _ping(adapter, model.model_id, options))
    except ConversationsError as exc:
        return ConnectionCheck("failed", _scrubbed(exc.detail, record.api_key_ref), exc.code)


def _ping(adapter: ChatProvider, model_id: str, options: CompletionOptions) -> str:
    started = time.monotonic()
    try:
        response = adapter.complete([ChatMessage.user("ping")], options=options)
    finally:
        if isinstance(adapter, HTTPProvider):
            adapter.close()
    elapsed = milliseconds(time.monotonic() - started)
    return f"{response.model or model_id} answered in {elapsed} ms"


def _scrubbed(detail: str, reference: str) -> str:
    """``detail`` with the key ``reference`` resolves to replaced (adapters redact already)."""
    try:
        secret = resolve(reference) if reference else None
    except Exception:  # a failing resolver leaves nothing to scrub
        secret = None
    return redact(detail, [secret])


def close_provider(provider: ChatProvider) -> None:
    """Close an adapter someone built for one run (its HTTP client and sockets), if it can be."""
    close = getattr(provider, "close", None)
    if callable(close):
        close()
