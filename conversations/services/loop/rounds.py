"""What the rounds of a run work with: the same for each round, and what changes between them.

A :class:`Round` holds what does not change while a run is driven (the run,
its provider, what each request offers, the cancel watch, the live events);
a :class:`TurnState` holds what each round moves on (the history, the
conversation's tail, whether budgets apply, the prices). The tool loop, the
model call (``asking``) and the turn's write (``turns``) take these two
instead of a long list of positional arguments.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from conversations.domain import ChatMessage, ToolSpec
from conversations.models import Profile, Run
from conversations.providers.base import ChatProvider, CompletionOptions
from conversations.selectors import ToolSettings, TranscriptTail, available_tools, tool_settings
from conversations.tools import Tool

from ..configuration.providers import completion_options
from ..usage.prices import Prices
from .agents import RunChild, agent_tools
from .approvals import approval_levels
from .context import ContextWindow
from .live import LiveRun
from .runs import CancelWatch

__all__ = [
    "RequestSetup",
    "Round",
    "TurnState",
    "prompt_cache_key",
    "request_setup",
    "with_prompt_cache",
]


@dataclass(frozen=True, slots=True)
class RequestSetup:
    """What a profile offers and asks for in every request of a run."""

    tools: dict[str, Tool]
    """The tools a run may execute, by name."""
    specs: list[ToolSpec]
    """Their specs, as offered to the model (empty: no ``tools`` key at all)."""
    options: CompletionOptions
    """Model, sampling and tool choice (``None`` when no tool is offered)."""
    approvals: Mapping[str, str] = field(default_factory=dict)
    """Who must approve the calls of each tool that needs approval (``owner``/``staff``)."""
    input_modalities: frozenset[str] = frozenset()
    """What the language model reads beside text (``image``, ``pdf``); other files are sent
    as text (``services.attachments.prepare_for_model``)."""


def request_setup(
    *,
    profile: Profile | None,
    settings: ToolSettings | None = None,
    run_child: RunChild | None = None,
) -> RequestSetup:
    """Tools and options of a request for ``profile``: the loop and the dry-run export share it.

    ``settings``: the tool settings as the caller has just read them (else one query reads them).
    The profile's agents are offered as ``agent_<slug>`` tools (whatever ``allowed_tools``
    says: they are chosen one by one already), run by ``run_child`` (``None``: a dry run).
    """
    settings = settings if settings is not None else tool_settings()
    tools = available_tools(allowed=profile.allowed_tools if profile else None, settings=settings)
    tools.update(agent_tools(profile, run_child=run_child))
    # By name: every request of a conversation offers them in the same order, so the
    # prefix a provider cached (tools first) matches the next request's.
    specs = sorted((tool.spec for tool in tools.values()), key=lambda spec: spec.name)
    options = completion_options(profile, tools_offered=bool(specs))
    levels = approval_levels(profile=profile, tools=tools.values(), settings=settings)
    modalities = (
        frozenset(profile.language_model.input_modalities or ()) if profile else frozenset()
    )
    return RequestSetup(tools, specs, options, levels, modalities)


PROMPT_CACHE_KEY_ADAPTERS = frozenset({"openai", "openai_responses"})
"""The adapters whose vendor takes a ``prompt_cache_key`` (OpenAI's own API)."""


def prompt_cache_key(conversation_id: object) -> str:
    """The stable cache key of a conversation (a digest: its id is not sent)."""
    return "conv-" + hashlib.sha256(str(conversation_id).encode()).hexdigest()[:32]


def with_prompt_cache(
    request: RequestSetup, *, conversation_id: object, adapter: str
) -> RequestSetup:
    """``request`` asking for its conversation's prefix to be cached (see ``providers.caching``)."""
    key = prompt_cache_key(conversation_id)
    extra = request.options.extra
    if adapter in PROMPT_CACHE_KEY_ADAPTERS and "prompt_cache_key" not in extra:
        extra = {**extra, "prompt_cache_key": key}
    options = dataclasses.replace(request.options, cache_key=key, extra=extra)
    return dataclasses.replace(request, options=options)


@dataclass(frozen=True, slots=True)
class Round:
    """What every round of one run works with; none of it changes while the run is driven."""

    run: Run
    """The run, held by this process."""
    provider: ChatProvider
    """Who answers."""
    request: RequestSetup
    """The tools offered and the options of each request."""
    watch: CancelWatch
    """Whether the run was asked to stop."""
    live: LiveRun
    """What watchers of the run see."""

    def offering_none(self) -> Round:
        """The same, for the last call of a run at its cap: no tool offered, none to choose."""
        options = dataclasses.replace(
            self.request.options, tool_choice=None, parallel_tool_calls=None
        )
        request = dataclasses.replace(
            self.request, tools={}, specs=[], options=options, approvals={}
        )
        return dataclasses.replace(self, request=request)


@dataclass(slots=True)
class TurnState:
    """What the loop knows between rounds without reading it again (it holds the conversation)."""

    history: list[ChatMessage]
    """The conversation as the next request sends it, kept in step with each round's writes."""
    tail: TranscriptTail
    """The conversation's end: next position, open calls, call ids taken."""
    budgets_apply: bool | None = None
    """Whether a budget covers the run, as last read (``None``: not read yet)."""
    prices: Prices | None = None
    """The language model's prices, read once per run (``None``: not read yet)."""
    context: ContextWindow | None = None
    """The context window each call's view fits (``None``: the whole history is sent)."""
