"""The agent graph's rules, written past the ORM: no cycle, no chain over MAX_AGENT_DEPTH, no edit."""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest
from django.db import IntegrityError, transaction

from conversations.models import Profile

from . import sql

pytestmark = pytest.mark.django_db

Edge = Profile.agents.through


@contextmanager
def refused(name):
    with pytest.raises(IntegrityError, match=re.escape(name)), transaction.atomic():
        yield


@pytest.fixture
def chain(language_model):
    """Five profiles p0 ... p4, no edges yet."""
    return [
        Profile.objects.create(slug=f"p{i}", name=f"P{i}", language_model=language_model)
        for i in range(5)
    ]


def edge(caller, callee):
    return sql.insert(Edge, from_profile_id=caller.pk, to_profile_id=callee.pk)


def test_a_profile_cannot_call_itself(chain):
    with refused("conversations_profile_agents_acyclic"):
        edge(chain[0], chain[0])


def test_an_edge_that_closes_a_cycle_is_refused(chain):
    edge(chain[0], chain[1])
    edge(chain[1], chain[2])

    with refused("conversations_profile_agents_acyclic"):
        edge(chain[2], chain[0])
    with refused("conversations_profile_agents_acyclic"):
        edge(chain[1], chain[0])
    assert Edge.objects.count() == 2


def test_a_chain_of_max_agent_depth_is_kept_and_one_more_is_refused(chain):
    edge(chain[0], chain[1])
    edge(chain[1], chain[2])
    edge(chain[2], chain[3])  # three levels: the default MAX_AGENT_DEPTH

    with refused("conversations_profile_agents_depth"):
        edge(chain[3], chain[4])
    # Joining two short chains in the middle is judged by the whole chain, too.
    with refused("conversations_profile_agents_depth"):
        edge(chain[4], chain[0])
    assert Edge.objects.count() == 3


def test_a_diamond_is_no_cycle(chain):
    edge(chain[0], chain[1])
    edge(chain[0], chain[2])
    edge(chain[1], chain[3])
    edge(chain[2], chain[3])

    assert Edge.objects.count() == 4


def test_an_edge_never_changes(chain):
    pk = edge(chain[0], chain[1])

    with refused("conversations_profile_agents_immutable"):
        sql.update(Edge, pk, to_profile_id=chain[2].pk)


def test_the_orm_is_refused_the_same_way(chain):
    chain[0].agents.add(chain[1])

    with refused("conversations_profile_agents_acyclic"):
        chain[1].agents.add(chain[0])
    chain[1].agents.add(chain[2], chain[3])
    assert sorted(chain[1].agents.values_list("slug", flat=True)) == ["p2", "p3"]


def test_the_rows_of_one_insert_are_checked_against_each_other(chain):
    with refused("conversations_profile_agents_acyclic"):
        Edge.objects.bulk_create(
            [
                Edge(from_profile_id=chain[3].pk, to_profile_id=chain[4].pk),
                Edge(from_profile_id=chain[4].pk, to_profile_id=chain[3].pk),
            ]
        )
    assert not Edge.objects.exists()
