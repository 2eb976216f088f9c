"""Configuration records (Provider, LanguageModel, Profile) turned into adapters, and tested.

``build_provider`` makes the adapter a profile asks for, ``completion_options``
the options of its requests, ``check_agents`` keeps the graph of sub-agents
without a cycle and within ``MAX_AGENT_DEPTH``, and ``check_connection`` asks a provider for one
short answer to tell whether its settings work.
"""

from .agents import AGENT_TOOL_PREFIX, agent_tool_name, check_agents
from .providers import (
    KEYLESS_ADAPTERS,
    ConnectionCheck,
    accepted_sampling_parameters,
    build_provider,
    check_connection,
    completion_options,
    offered_provider_tools,
    profile_provider_tools,
    provider_from_record,
)

__all__ = [
    "AGENT_TOOL_PREFIX",
    "KEYLESS_ADAPTERS",
    "ConnectionCheck",
    "accepted_sampling_parameters",
    "agent_tool_name",
    "build_provider",
    "check_agents",
    "check_connection",
    "completion_options",
    "offered_provider_tools",
    "profile_provider_tools",
    "provider_from_record",
]
