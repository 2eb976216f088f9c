"""Token counts guessed from text, for when the provider has not said (yet) what a call uses.

Before a model call its cost is unknown, yet budgets must hold it while it
runs: the call is reserved at an estimate, its request's characters / 4
plus the most it may write. And a stopped or cut-off stream ends before the
vendor reports its usage, yet the vendor has read the request and written
part of an answer: the ledger then charges an estimate instead of zero,
marked ``estimated``. The rule lives in :func:`estimate_tokens` alone, so a
better count (a real tokenizer, a model's own ratio) replaces it in one
place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from .messages import ChatMessage
from .responses import Usage
from .tools import ToolSpec

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "DEFAULT_OUTPUT_TOKENS",
    "estimate_call",
    "estimate_prompt_tokens",
    "estimate_tokens",
    "estimate_usage",
]

CHARACTERS_PER_TOKEN = 4
"""The rough ratio of English text in the common tokenizers."""

DEFAULT_OUTPUT_TOKENS = 4096
"""The most a call is expected to write when its request sets no ``max_tokens``."""


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is: one per four characters, at least one for any text."""
    if not text:
        return 0
    return max(1, len(text) // CHARACTERS_PER_TOKEN)


def estimate_prompt_tokens(*, sent: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> int:
    """About how many tokens a request reads: its messages and tool specs on the wire."""
    prompt = json.dumps(
        [message.to_dict() for message in sent] + [spec.to_dict() for spec in tools],
        ensure_ascii=False,
    )
    return estimate_tokens(prompt)


def estimate_call(
    *,
    sent: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    max_output_tokens: int | None = None,
) -> Usage:
    """The most a call is expected to use: its request read, and ``max_output_tokens`` written
    (:data:`DEFAULT_OUTPUT_TOKENS` when the request sets none)."""
    output = max_output_tokens if max_output_tokens is not None else DEFAULT_OUTPUT_TOKENS
    return Usage(estimate_prompt_tokens(sent=sent, tools=tools), output)


def estimate_usage(
    *, sent: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (), received: Iterable[str] = ()
) -> Usage:
    """What a call that ended without the provider's usage used, marked ``estimated``: ``sent``
    and ``tools`` as the prompt, ``received`` (the text, reasoning and argument pieces that
    arrived) as the completion."""
    return Usage(
        estimate_prompt_tokens(sent=sent, tools=tools),
        estimate_tokens("".join(received)),
        estimated=True,
    )
