"""Configuration records (Provider, LanguageModel, Profile) turned into adapters, and tested.

``build_provider`` makes the adapter a profile asks for, ``completion_options``
the options of its requests, and ``check_connection`` asks a provider for one
short answer to tell whether its settings work.
"""

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
    "KEYLESS_ADAPTERS",
    "ConnectionCheck",
    "accepted_sampling_parameters",
    "build_provider",
    "check_connection",
    "completion_options",
    "offered_provider_tools",
    "profile_provider_tools",
    "provider_from_record",
]
