"""Hypothesis strategies shared by the property tests: JSON, tool calls, messages, histories.

Each strategy takes the few knobs its users differ in (an alphabet an adapter
needs, how many rounds, what metadata a turn carries) as parameters, so a test
specialises the shared strategy instead of copying it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from conversations.domain import ChatMessage, Role, ToolCall

JsonValue = Any
Range = tuple[int, int]

# PostgreSQL text and jsonb cannot hold NUL; lone surrogates are not UTF-8.
storable_text = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30
)

# JSON text that is not an object: a call with it keeps it raw, its arguments empty.
RAW_NOT_OBJECTS = ("[]", "null", '{"city": ', "not json", "{'a': 1}", "[1]", '"x"', "{oops")


def json_scalars(
    text: st.SearchStrategy[str] | None = None, *, storable_numbers: bool = False
) -> st.SearchStrategy[JsonValue]:
    """null, booleans, numbers and strings; ``storable_numbers`` keeps them exact in jsonb."""
    strings = st.text(max_size=10) if text is None else text
    if storable_numbers:
        # jsonb keeps numbers as numeric: 1.2e+16 reads back as the int 12000000000000000
        # and -0.0 as 0.0. Below 1e15 Python writes floats with a decimal point and
        # they round-trip exactly.
        numbers = st.integers(min_value=-(2**53), max_value=2**53) | st.floats(
            min_value=-1e15, max_value=1e15
        ).map(lambda x: x + 0.0)
    else:
        numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    return st.none() | st.booleans() | numbers | strings


def json_values(
    scalars: st.SearchStrategy[JsonValue] | None = None,
    keys: st.SearchStrategy[str] | None = None,
    *,
    max_leaves: int = 100,
) -> st.SearchStrategy[JsonValue]:
    """Any JSON value: ``scalars`` nested in lists and objects with ``keys``."""
    leaves = json_scalars() if scalars is None else scalars
    names = st.text(max_size=8) if keys is None else keys
    return st.recursive(
        leaves,
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(names, children, max_size=3)
        ),
        max_leaves=max_leaves,
    )


def argument_objects(
    keys: st.SearchStrategy[str] | None = None,
    values: st.SearchStrategy[JsonValue] | None = None,
    *,
    max_size: int = 4,
) -> st.SearchStrategy[dict[str, JsonValue]]:
    """A tool call's arguments: a JSON object (possibly empty)."""
    names = st.text(max_size=10) if keys is None else keys
    members = json_values() if values is None else values
    return st.dictionaries(names, members, max_size=max_size)


tool_call_ids = st.text(min_size=1, max_size=12)
tool_names = st.text(min_size=1, max_size=12)
raw_arguments = st.sampled_from(RAW_NOT_OBJECTS)


def tool_calls(
    ids: st.SearchStrategy[str] = tool_call_ids,
    names: st.SearchStrategy[str] = tool_names,
    arguments: st.SearchStrategy[dict[str, JsonValue]] | None = None,
    raw: st.SearchStrategy[str] | None = raw_arguments,
    *,
    types: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[ToolCall]:
    """A call with an arguments object, or (unless ``raw`` is None) one with raw argument text.

    ``types`` draws the call's ``type`` (default: always "function").
    """
    objects = argument_objects() if arguments is None else arguments
    kinds = st.just("function") if types is None else types
    parsed = st.builds(ToolCall, id=ids, name=names, arguments=objects, type=kinds)
    if raw is None:
        return parsed
    return parsed | st.builds(ToolCall, id=ids, name=names, raw_arguments=raw, type=kinds)


def tool_results(
    ids: st.SearchStrategy[str] = tool_call_ids,
    contents: st.SearchStrategy[str] | None = None,
    is_error: st.SearchStrategy[bool] | None = None,
) -> st.SearchStrategy[ChatMessage]:
    """A tool message answering one id, possibly flagged ``is_error``."""
    return st.builds(
        lambda call_id, content, error: ChatMessage.tool_result(call_id, content, is_error=error),
        ids,
        st.text(max_size=30) if contents is None else contents,
        st.booleans() if is_error is None else is_error,
    )


def no_metadata(call_ids: list[str]) -> st.SearchStrategy[dict[str, Any] | None]:
    return st.none()


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    texts: st.SearchStrategy[str] | None = None,
    first_user_texts: st.SearchStrategy[str] | None = None,
    ids: st.SearchStrategy[str] = tool_call_ids,
    calls: Callable[[str], st.SearchStrategy[ToolCall]] | None = None,
    systems: Range = (0, 1),
    rounds: Range = (1, 3),
    turns_per_round: Range = (0, 2),
    calls_per_turn: Range = (1, 4),
    turn_metadata: Callable[[list[str]], st.SearchStrategy[dict[str, Any] | None]] = no_metadata,
    answer_metadata: st.SearchStrategy[dict[str, Any] | None] | None = None,
    interludes: tuple[Role, ...] = (),
    final_answers: bool = True,
    is_error: st.SearchStrategy[bool] | None = None,
) -> list[ChatMessage]:
    """A valid conversation: every call is answered (in any order) before the next other message.

    ``systems`` leading system messages, then ``rounds`` rounds of a user message
    and ``turns_per_round`` assistant turns of ``calls_per_turn`` parallel calls
    (``calls(call_id)`` makes each; ids are unique in the history), each turn
    followed by its results (possibly ``is_error``), then optionally one message
    of each role in ``interludes``; with ``final_answers`` each round ends with an
    assistant answer. ``turn_metadata(ids)`` is the provider metadata of a turn.
    """
    text = st.text(max_size=12) if texts is None else texts
    make_call = calls or (lambda call_id: tool_calls(st.just(call_id)))
    errors = st.booleans() if is_error is None else is_error
    metadata = st.none() if answer_metadata is None else answer_metadata
    used: set[str] = set()
    history = [ChatMessage.system(draw(text)) for _ in range(draw(st.integers(*systems)))]
    for number in range(draw(st.integers(*rounds))):
        first = number == 0 and first_user_texts is not None
        history.append(ChatMessage.user(draw(first_user_texts if first else text)))
        for _ in range(draw(st.integers(*turns_per_round))):
            turn_ids = draw(
                st.lists(
                    ids.filter(lambda i: i not in used),
                    min_size=calls_per_turn[0],
                    max_size=calls_per_turn[1],
                    unique=True,
                )
            )
            used.update(turn_ids)
            made = [draw(make_call(call_id)) for call_id in turn_ids]
            history.append(
                ChatMessage.assistant_tool_calls(
                    made, draw(text), provider_metadata=draw(turn_metadata(turn_ids))
                )
            )
            for call_id in draw(st.permutations(turn_ids)):
                history.append(ChatMessage.tool_result(call_id, draw(text), is_error=draw(errors)))
            for role in interludes:
                if draw(st.booleans()):
                    history.append(ChatMessage(role, draw(text)))
        if final_answers:
            history.append(
                ChatMessage(Role.ASSISTANT, draw(text), provider_metadata=draw(metadata))
            )
    return history


def import_bodies(
    history: st.SearchStrategy[list[ChatMessage]] | None = None,
    titles: st.SearchStrategy[str] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """A conversation import body: a valid history in the wire shape (``to_dict`` plus is_error)."""

    def wire(message: ChatMessage) -> dict[str, Any]:
        data = message.to_dict()
        if message.is_error:
            data["is_error"] = True
        return data

    return st.builds(
        lambda title, messages: {"title": title, "messages": [wire(m) for m in messages]},
        st.text(max_size=20) if titles is None else titles,
        histories() if history is None else history,
    )


# Streamed answers ------------------------------------------------------------------


def _spans(length: int, points: list[int]) -> list[tuple[int, int]]:
    cuts = sorted({point % (length + 1) for point in points})
    return list(itertools.pairwise([0, *cuts, length]))


def split_text(text: str, points: list[int]) -> list[str]:
    """``text`` cut at ``points`` (taken modulo its length + 1); the pieces join to ``text``."""
    return [text[start:end] for start, end in _spans(len(text), points)]


def split_bytes(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` cut at ``points`` like :func:`split_text`, as a transport may deliver it."""
    return [data[start:end] for start, end in _spans(len(data), points)]


def split_list(items: list[Any], points: list[int]) -> list[list[Any]]:
    """``items`` cut at ``points`` like :func:`split_text` (pieces may be empty)."""
    return [items[start:end] for start, end in _spans(len(items), points)]


cut_points = st.lists(st.integers(min_value=0, max_value=2**16), max_size=12)
"""Where to cut a text or a byte stream (see :func:`split_text`, :func:`split_bytes`)."""


@st.composite
def answer_pieces(draw: st.DrawFn, text: st.SearchStrategy[str] | None = None) -> list[str]:
    """A text (possibly empty) as the pieces a stream sends it in."""
    whole = draw(storable_text if text is None else text)
    return split_text(whole, draw(cut_points))


wire_call_ids: st.SearchStrategy[str | None] = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=1, max_size=12
)
"""Call ids every vendor accepts as they are."""
wire_tool_names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
"""Tool names every vendor accepts as they are."""
opaque_signatures = st.text("abcdefABCDEF0123456789+/=", min_size=1, max_size=40)
"""Signatures of reasoning (opaque base64 text)."""


@st.composite
def streamed_answers(
    draw: st.DrawFn,
    *,
    ids: st.SearchStrategy[str | None] = wire_call_ids,
    names: st.SearchStrategy[str] = wire_tool_names,
    signatures: st.SearchStrategy[str] = opaque_signatures,
    max_calls: int = 3,
) -> dict[str, Any]:
    """One answer, vendor-neutral, for rendering as a whole body and as a stream.

    ``{"reasoning": [pieces], "signature": str | None, "text": [pieces],
    "calls": [{"id", "name", "arguments": object, "pieces": [argument JSON pieces]}],
    "usage": {"input", "output", "cached"}}``. Call ids are unique (``ids`` may
    draw ``None``: the vendor sent none); the argument pieces join to the
    compact JSON of the arguments (empty arguments may come as no pieces).
    """
    calls: list[dict[str, Any]] = []
    used: set[str] = set()
    for _ in range(draw(st.integers(0, max_calls))):
        call_id = draw(ids.filter(lambda i: i not in used))
        if call_id is not None:
            used.add(call_id)
        arguments = draw(
            argument_objects(
                storable_text, json_values(json_scalars(storable_text), storable_text, max_leaves=8)
            )
        )
        compact = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        pieces = (
            [] if not arguments and draw(st.booleans()) else split_text(compact, draw(cut_points))
        )
        calls.append({"id": call_id, "name": draw(names), "arguments": arguments, "pieces": pieces})
    reasoning = draw(answer_pieces())
    return {
        "reasoning": reasoning,
        "signature": draw(signatures) if "".join(reasoning) or draw(st.booleans()) else None,
        "text": draw(answer_pieces()),
        "calls": calls,
        "usage": {
            "input": draw(st.integers(0, 10**6)),
            "output": draw(st.integers(0, 10**6)),
            "cached": draw(st.integers(0, 10**6)),
        },
    }


# Model answers, for the streaming property tests -----------------------------------

# Characters a stream carries in UTF-8 and the store keeps: any plane, no NUL, no lone surrogate.
answer_characters = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
answer_text = st.text(answer_characters, max_size=40)


@dataclass(frozen=True)
class AnswerCall:
    """One call of an :class:`Answer`: ``arguments`` is the wire text, ``value`` its object."""

    id: str
    name: str
    arguments: str
    value: dict[str, Any]
    """The decoded arguments (``{}`` when the text is empty or not an object)."""


@dataclass(frozen=True)
class Answer:
    """What a model answered, before any vendor's wire shape."""

    text: str
    reasoning: str
    calls: tuple[AnswerCall, ...]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    model: str


@st.composite
def answer_calls(
    draw: st.DrawFn, *, raw: bool = True, max_calls: int = 3
) -> tuple[AnswerCall, ...]:
    """Parallel calls with unique ids; with ``raw`` some argument texts are ``""`` or not objects."""
    short = st.text(answer_characters, min_size=1, max_size=12)
    values = json_values(json_scalars(answer_text), st.text(answer_characters, max_size=8))
    calls = []
    for call_id in draw(st.lists(short, max_size=max_calls, unique=True)):
        value = draw(argument_objects(st.text(answer_characters, max_size=8), values))
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
        if raw and draw(st.booleans()):
            text, value = draw(st.sampled_from(["", *RAW_NOT_OBJECTS])), {}
        calls.append(AnswerCall(call_id, draw(short), text, value))
    return tuple(calls)


@st.composite
def answers(
    draw: st.DrawFn,
    *,
    raw: bool = True,
    max_calls: int = 3,
    finish_reasons: tuple[str, ...] = ("stop", "length"),
) -> Answer:
    """An answer: text, reasoning (possibly blank), parallel calls, token counts, model."""
    calls = draw(answer_calls(raw=raw, max_calls=max_calls))
    return Answer(
        text=draw(answer_text),
        reasoning=draw(answer_text | st.sampled_from(["", " ", "\n\n"])),
        calls=calls,
        finish_reason="tool_calls" if calls else draw(st.sampled_from(finish_reasons)),
        prompt_tokens=draw(st.integers(0, 10**6)),
        completion_tokens=draw(st.integers(0, 10**6)),
        model=draw(st.text(answer_characters, min_size=1, max_size=20)),
    )


@st.composite
def pieces(draw: st.DrawFn, text: str, *, max_pieces: int = 6) -> list[str]:
    """``text`` cut into consecutive pieces (at least one, possibly empty) that join back to it."""
    points = sorted(draw(st.lists(st.integers(0, len(text)), max_size=max_pieces - 1)))
    edges = [0, *points, len(text)]
    return [text[start:end] for start, end in itertools.pairwise(edges)]


byte_cuts = st.lists(st.integers(min_value=0), max_size=12)
"""Where to cut a byte stream (see ``tests.providers.mock_http.cut``)."""
