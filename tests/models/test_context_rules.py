"""A context summary covers a range of positions, whoever writes the row."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from conversations.models import ContextSummary, Conversation

from . import sql

pytestmark = pytest.mark.django_db


def test_a_summary_ending_before_it_starts_is_refused_by_the_database(conversation):
    conversation_id = sql.db_id(Conversation, conversation.pk)
    with pytest.raises(IntegrityError, match="covers_a_range"), transaction.atomic():
        sql.insert(
            ContextSummary,
            conversation_id=conversation_id,
            first_position=5,
            last_position=4,
            content="x",
        )
    kept = sql.insert(
        ContextSummary, conversation_id=conversation_id, first_position=0, last_position=4
    )
    assert ContextSummary.objects.get(pk=kept).last_position == 4
