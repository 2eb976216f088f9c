"""Fixtures for model tests: rows built with the ORM, in a known shape."""

from __future__ import annotations

import pytest

from .factories import add_call, add_message


@pytest.fixture
def open_turn(conversation):
    """user (0), assistant (1) calling ``call_1``: the call is unanswered."""
    add_message(conversation, 0, "user", content="Weather in Paris?")
    assistant = add_message(conversation, 1, "assistant")
    call = add_call(assistant, arguments={"city": "Paris"})
    return assistant, call


@pytest.fixture
def answered_turn(conversation, open_turn):
    """``open_turn`` plus the tool answer (2) and a final assistant message (3)."""
    assistant, call = open_turn
    answer = add_message(conversation, 2, "tool", content="18C", tool_call=call)
    final = add_message(conversation, 3, "assistant", content="It is 18C.")
    return assistant, call, answer, final
