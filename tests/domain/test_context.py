"""Choosing a call's view of the history: the newest whole turns, never a split pair."""

from __future__ import annotations

import pytest

from conversations.domain import ChatMessage, Role, ToolCall
from conversations.domain.context import (
    MESSAGE_OVERHEAD_TOKENS,
    Sized,
    choose_view,
    context_budget,
    estimate_message_tokens,
    pair_safe_starts,
    provider_family,
)
from conversations.exceptions import ContextTooLarge


def turn(start: int, *, calls: int = 0, size: int = 10) -> list[Sized]:
    """A user message, then (with calls) an assistant turn with its results, then the answer."""
    rows = [Sized(start, Role.USER, size)]
    if calls:
        rows.append(Sized(start + 1, Role.ASSISTANT, size, calls=calls))
        rows += [Sized(start + 2 + i, Role.TOOL, size) for i in range(calls)]
    rows.append(Sized(start + len(rows), Role.ASSISTANT, size))
    return rows


def history(*turns: list[Sized]) -> list[Sized]:
    return [entry for part in turns for entry in part]


def test_a_history_within_the_budget_is_sent_whole():
    entries = history(turn(0), turn(2))
    assert choose_view(entries, budget=40).start == 0
    assert choose_view(entries, budget=40).tokens == 40


def test_the_oldest_whole_turns_are_left_out_until_the_rest_fits():
    entries = history(turn(0), turn(2), turn(4))
    view = choose_view(entries, budget=45)
    assert (entries[view.start].position, view.tokens) == (2, 40)


def test_a_view_never_starts_between_a_call_and_its_result():
    # One turn with three calls (user, call turn, three results, answer) then a short turn.
    entries = history(turn(0, calls=3), turn(6))
    starts = pair_safe_starts(entries)
    assert [entries[i].position for i in starts] == [0, 6]
    # 80 tokens in all; 50 would fit from the call turn on, but only a whole turn may start.
    view = choose_view(entries, budget=50)
    assert entries[view.start].position == 6
    kept = entries[view.start :]
    assert not any(entry.role is Role.TOOL for entry in kept)


def test_a_user_message_after_unanswered_calls_is_no_place_to_cut():
    entries = [
        Sized(0, Role.USER, 10),
        Sized(1, Role.ASSISTANT, 10, calls=2),
        Sized(2, Role.TOOL, 10),
        Sized(3, Role.USER, 10),  # a second result is still owed: not a start
    ]
    assert pair_safe_starts(entries) == [0]


def test_the_scale_applies_to_every_message():
    entries = history(turn(0), turn(2))
    assert choose_view(entries, budget=40, scale=1.0).start == 0
    assert entries[choose_view(entries, budget=40, scale=1.5).start].position == 2


def test_a_single_message_larger_than_the_budget_is_named_with_its_size():
    entries = [*turn(0), Sized(2, Role.USER, 500)]
    with pytest.raises(ContextTooLarge) as raised:
        choose_view(entries, budget=100)
    assert raised.value.code == "context_too_large"
    assert (raised.value.position, raised.value.tokens) == (2, 500)
    assert "position 2" in raised.value.detail and "500" in raised.value.detail


def test_a_newest_turn_too_big_as_a_whole_is_refused_from_where_it_starts():
    entries = history(turn(0), turn(2, calls=4, size=30))
    with pytest.raises(ContextTooLarge) as raised:
        choose_view(entries, budget=100)
    assert raised.value.position == 2
    assert raised.value.tokens == 7 * 30


def test_the_fail_strategy_refuses_any_cut():
    entries = history(turn(0), turn(2))
    assert choose_view(entries, budget=40, allow_cut=False).start == 0
    with pytest.raises(ContextTooLarge, match="strategy is fail"):
        choose_view(entries, budget=39, allow_cut=False)


def test_the_budget_leaves_the_answer_the_margin_and_the_fixed_part_out():
    # 5 % of 10,000 is 500 (more than the 64 minimum).
    assert context_budget(context_window=10_000, max_output_tokens=1000, fixed_tokens=300) == (
        10_000 - 1000 - 500 - 300
    )
    assert context_budget(context_window=1000, max_output_tokens=100, fixed_tokens=0) == 836


def test_a_message_estimate_counts_its_text_its_calls_and_the_overhead():
    plain = ChatMessage.user("x" * 400)
    assert estimate_message_tokens(plain) == 100 + MESSAGE_OVERHEAD_TOKENS
    call = ToolCall(id="c1", name="lookup", arguments={"q": "y" * 100})
    with_call = ChatMessage.assistant_tool_calls([call])
    assert estimate_message_tokens(with_call) > 25 + MESSAGE_OVERHEAD_TOKENS
    assert estimate_message_tokens(ChatMessage.user("")) == MESSAGE_OVERHEAD_TOKENS


def test_every_openai_shaped_adapter_counts_as_the_openai_family():
    assert provider_family("anthropic") == "anthropic"
    assert provider_family("groq") == provider_family("azure_openai") == "openai"
