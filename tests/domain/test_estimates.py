"""Token counts guessed from text: the one rule, and usage that says it is a guess."""

from __future__ import annotations

import pytest

from conversations.domain import ChatMessage, InvalidArgumentError, ToolSpec, Usage
from conversations.domain.estimates import estimate_prompt_tokens, estimate_tokens, estimate_usage


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("ab", 1), ("abcd" * 10, 10), ("é" * 9, 2)])
def test_a_token_is_about_four_characters_and_any_text_is_at_least_one(text, tokens):
    assert estimate_tokens(text) == tokens


def test_an_estimate_counts_what_was_sent_and_what_came_back():
    sent = [ChatMessage.system("Be brief."), ChatMessage.user("Hello " * 40)]
    spec = ToolSpec(name="add", description="Add.", parameters={"type": "object"})
    usage = estimate_usage(sent=sent, tools=[spec], received=["Hi ", "there", '{"a": 1}'])
    assert usage.estimated
    assert usage.prompt_tokens > estimate_tokens("Hello " * 40)
    assert usage.completion_tokens == estimate_tokens('Hi there{"a": 1}')
    assert estimate_usage(sent=sent).prompt_tokens < usage.prompt_tokens  # the tools count


def test_a_stopped_call_counts_its_request_as_the_budget_reservation_counted_it():
    sent = [ChatMessage.user("Wie spät ist es in Leipzig? " * 7)]
    spec = ToolSpec(name="clock", description="The time.", parameters={"type": "object"})
    usage = estimate_usage(sent=sent, tools=[spec], received=["Es ist"])
    assert usage.prompt_tokens == estimate_prompt_tokens(sent=sent, tools=[spec])


def test_usage_is_not_estimated_unless_it_says_so_and_a_sum_with_a_guess_is_a_guess():
    reported = Usage(10, 2)
    guessed = Usage(5, 1, estimated=True)
    assert not reported.estimated
    total = reported + guessed
    assert total.estimated and total.total_tokens == 18
    assert "estimated" not in reported.to_dict()


def test_estimated_must_be_a_boolean():
    with pytest.raises(InvalidArgumentError) as raised:
        Usage(1, 1, estimated="yes")  # type: ignore[arg-type]
    assert raised.value.field == "estimated"
