"""How to ask a provider: the model, sampling and tool use of one request."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conversations.domain import InvalidArgumentError, ProviderTool
from conversations.domain.output import OutputSpec

__all__ = ["SAMPLING_PARAMETERS", "TOOL_CHOICE_KEYWORDS", "CompletionOptions"]

TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})
SAMPLING_PARAMETERS: frozenset[str] = frozenset({"temperature"})
"""The sampling parameters ``CompletionOptions`` can carry, by the names a
``LanguageModel.sampling_parameters`` list uses."""


@dataclass(frozen=True, slots=True)
class CompletionOptions:
    """How to ask: which model, sampling, and how tools may be used."""

    model: str
    """The provider's model id (for Azure: the deployment name)."""
    temperature: float | None = None
    """Sampling temperature; ``None`` leaves the provider's default."""
    max_tokens: int | None = None
    """Upper bound on output tokens; ``None`` leaves the default (Anthropic needs one: 4096)."""
    tool_choice: str | None = None
    """``"auto"``, ``"none"``, ``"required"``, or the name of the one tool to call."""
    parallel_tool_calls: bool | None = None
    """``False`` asks for at most one call per turn; ``None`` leaves the default."""
    stop: tuple[str, ...] = ()
    """Stop sequences."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Provider-specific top-level keys merged into the request body last."""
    sampling_parameters: frozenset[str] | None = None
    """The sampling parameters the model accepts (names from :data:`SAMPLING_PARAMETERS`);
    ``None`` = the adapter's default. A parameter the model does not accept is not sent."""
    output_schema: OutputSpec | None = None
    """The JSON Schema the answer must satisfy (a mapping is taken as one); each adapter
    asks for it its vendor's native way (see :mod:`conversations.providers.structured`)."""
    provider_tools: tuple[ProviderTool, ...] = ()
    """Tools the provider runs itself; an adapter offers each in its own form or refuses
    it (see :mod:`conversations.providers.provider_tools`)."""
    cache_key: str | None = None
    """A stable key of the conversation the request continues: the prefix it shares with the
    conversation's earlier requests may be cached (Anthropic: ``cache_control`` breakpoints;
    ``None``: none asked for). See docs/context.md."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise InvalidArgumentError(
                "a model id is required", code="invalid_model", field="model"
            )
        if self.temperature is not None and (
            isinstance(self.temperature, bool)
            or not isinstance(self.temperature, int | float)
            or self.temperature < 0
        ):
            raise InvalidArgumentError(
                f"temperature must be a number >= 0, got {self.temperature!r}",
                code="invalid_temperature",
                field="temperature",
            )
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise InvalidArgumentError(
                f"max_tokens must be a positive integer, got {self.max_tokens!r}",
                code="invalid_max_tokens",
                field="max_tokens",
            )
        if self.tool_choice is not None and (
            not isinstance(self.tool_choice, str) or not self.tool_choice
        ):
            raise InvalidArgumentError(
                "tool_choice must be auto, none, required or a tool name",
                code="invalid_tool_choice",
                field="tool_choice",
            )
        if self.sampling_parameters is not None:
            accepted = self.sampling_parameters
            if isinstance(accepted, str) or not all(isinstance(name, str) for name in accepted):
                raise InvalidArgumentError(
                    f"sampling_parameters must be a collection of names, got {accepted!r}",
                    code="invalid_sampling_parameters",
                    field="sampling_parameters",
                )
            unknown = sorted(set(accepted) - SAMPLING_PARAMETERS)
            if unknown:
                raise InvalidArgumentError(
                    f"sampling_parameters: unknown parameter(s) {', '.join(unknown)}; "
                    f"known: {', '.join(sorted(SAMPLING_PARAMETERS))}",
                    code="invalid_sampling_parameters",
                    field="sampling_parameters",
                )
            object.__setattr__(self, "sampling_parameters", frozenset(accepted))
        if self.cache_key is not None and (
            not isinstance(self.cache_key, str) or not self.cache_key
        ):
            raise InvalidArgumentError(
                "cache_key must be a non-empty string", code="invalid_cache_key", field="cache_key"
            )
        if self.output_schema is not None and not isinstance(self.output_schema, OutputSpec):
            object.__setattr__(self, "output_schema", OutputSpec(schema=self.output_schema))
        if not all(isinstance(tool, ProviderTool) for tool in self.provider_tools):
            raise InvalidArgumentError(
                "provider_tools must hold ProviderTool values",
                code="invalid_provider_tools",
                field="provider_tools",
            )
        object.__setattr__(self, "provider_tools", tuple(self.provider_tools))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "extra", dict(self.extra))

    @property
    def forced_tool(self) -> str | None:
        """The tool name when ``tool_choice`` names one tool, else ``None``."""
        if self.tool_choice is None or self.tool_choice in TOOL_CHOICE_KEYWORDS:
            return None
        return self.tool_choice
