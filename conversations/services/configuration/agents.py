"""The graph of sub-agents (``Profile.agents``): no cycle, no chain deeper than MAX_AGENT_DEPTH.

The database refuses an edge that breaks either rule (the triggers
``conversations_profile_agents_*``); this check says why in words a form or
an API can show, before anything is written. Edges are few (one per agent a
profile may call), so the whole graph is read in one query and walked here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from conversations.conf import app_settings
from conversations.exceptions import InvalidArgumentError
from conversations.models import Profile

__all__ = ["AGENT_TOOL_PREFIX", "agent_tool_name", "check_agents"]

AGENT_TOOL_PREFIX = "agent_"
"""An agent is offered to the model as the tool ``agent_<its slug>``."""


def agent_tool_name(slug: str) -> str:
    """The name of the tool that hands a task to the profile ``slug``."""
    return f"{AGENT_TOOL_PREFIX}{slug}"


def check_agents(*, profile: Profile | None, agents: Iterable[Profile]) -> None:
    """Refuse ``agents`` as the agents of ``profile`` (``None``: a profile not saved yet).

    Raises :class:`InvalidArgumentError` (field ``agents``) with code
    ``agent_cycle`` when a profile would reach itself through its agents,
    ``agent_depth`` when a chain of agents would be longer than
    ``CONVERSATIONS["MAX_AGENT_DEPTH"]``.
    """
    chosen = {agent.pk: agent.slug for agent in agents}
    if profile is not None and profile.pk in chosen:
        raise InvalidArgumentError(
            f"agents: profile {profile.slug!r} cannot call itself",
            code="agent_cycle",
            field="agents",
        )
    through = Profile.agents.through
    edges: dict[int, set[int]] = {}
    for caller, callee in through.objects.values_list("from_profile_id", "to_profile_id"):
        if profile is None or caller != profile.pk:
            edges.setdefault(caller, set()).add(callee)
    # A profile not saved yet has no edge pointing at it: it stands for itself as key 0.
    me = profile.pk if profile is not None else 0
    edges[me] = set(chosen)
    slugs = dict(Profile.objects.filter(pk__in=_nodes(edges)).values_list("pk", "slug"))
    slugs[me] = profile.slug if profile is not None else "(this profile)"
    cycle = _cycle_through(me, edges)
    if cycle:
        path = " -> ".join(slugs.get(node, str(node)) for node in cycle)
        raise InvalidArgumentError(
            f"agents: a profile would reach itself through its agents ({path})",
            code="agent_cycle",
            field="agents",
        )
    limit = app_settings().MAX_AGENT_DEPTH
    longest = _longest_up(me, edges) + _longest_down(me, edges)
    if longest > limit:
        raise InvalidArgumentError(
            f"agents: a chain of {longest} agents would be longer than MAX_AGENT_DEPTH ({limit})",
            code="agent_depth",
            field="agents",
        )


def _nodes(edges: Mapping[int, set[int]]) -> set[int]:
    return set(edges).union(*edges.values())


def _cycle_through(start: int, edges: Mapping[int, set[int]]) -> list[int]:
    """A path from ``start`` back to it (the nodes in order), or ``[]``."""
    stack: list[tuple[int, list[int]]] = [(start, [start])]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        for callee in sorted(edges.get(node, ())):
            if callee == start:
                return [*path, start]
            if callee not in seen:
                seen.add(callee)
                stack.append((callee, [*path, callee]))
    return []


def _longest_down(node: int, edges: Mapping[int, set[int]]) -> int:
    """Edges on the longest chain from ``node`` down (the graph has no cycle here)."""
    return max((1 + _longest_down(callee, edges) for callee in edges.get(node, ())), default=0)


def _longest_up(node: int, edges: Mapping[int, set[int]]) -> int:
    callers = [caller for caller, callees in edges.items() if node in callees]
    return max((1 + _longest_up(caller, edges) for caller in callers), default=0)
