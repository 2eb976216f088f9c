"""Making text and JSON storable, and measuring JSON depth without recursion.

PostgreSQL refuses NUL in ``text`` and ``jsonb``, and no database stores a
string that is not valid Unicode (a lone surrogate). Values from outside (a
provider's answer, a tool's result) are kept as faithfully as the database
allows: each such character becomes U+FFFD. Every walk here is iterative, so
a value nested a thousand levels deep is measured or cleaned without a
``RecursionError``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = [
    "DEFAULT_MAX_ARGUMENTS_DEPTH",
    "MAX_NAME_LENGTH",
    "REPLACEMENT",
    "dumps_compact",
    "json_depth",
    "loads_deep",
    "max_arguments_depth",
    "set_max_arguments_depth",
    "storable_json",
    "storable_text",
    "text_depth_excess",
]

MAX_NAME_LENGTH: Final = 200
"""Longest call id, tool name and model name the store holds: their columns' size, and
what a provider's answer and an imported history are checked against."""

DEFAULT_MAX_ARGUMENTS_DEPTH = 64
_limits = {"arguments_depth": DEFAULT_MAX_ARGUMENTS_DEPTH}


def max_arguments_depth() -> int:
    """How deeply tool arguments may nest and still be decoded (and so executed)."""
    return _limits["arguments_depth"]


def set_max_arguments_depth(depth: int) -> None:
    """Set that depth (the app does, from ``CONVERSATIONS["MAX_JSON_DEPTH"]``)."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"the depth must be a positive integer, got {depth!r}")
    _limits["arguments_depth"] = depth


REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> tuple[str, bool]:
    """``text`` with NUL and lone surrogates replaced by U+FFFD, and whether any was."""
    cleaned, count = _UNSTORABLE.subn(REPLACEMENT, text)
    return cleaned, count > 0


def storable_json(value: Any) -> tuple[Any, bool]:
    """A copy of ``value`` whose strings (keys included) are storable, and whether any changed.

    Dicts, lists and tuples are copied (tuples become lists, as JSON has only
    arrays); other values are kept as they are.
    """
    changed = False

    def clean(item: Any) -> Any:
        nonlocal changed
        if isinstance(item, str):
            text, replaced = storable_text(item)
            changed = changed or replaced
            return text
        return item

    root: list[Any] = [None]
    # (source, target container, key in target)
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        source, target, key = stack.pop()
        if isinstance(source, dict):
            copy: dict[Any, Any] = {}
            target[key] = copy
            for name, item in source.items():
                clean_name = clean(name)
                copy[clean_name] = None
                stack.append((item, copy, clean_name))
        elif isinstance(source, list | tuple):
            items: list[Any] = [None] * len(source)
            target[key] = items
            for index, item in enumerate(source):
                stack.append((item, items, index))
        else:
            target[key] = clean(source)
    return root[0], changed


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests objects and arrays (a scalar is 0, ``{}`` is 1)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def text_depth_excess(text: str, limit: int) -> list[str | int] | None:
    """The path to the first object or array nested deeper than ``limit`` in JSON ``text``.

    ``None`` when no container is deeper (or the text is not JSON enough to
    tell: the parser then reports it). Scans the characters once, without
    parsing, so it is safe to call before a recursive parser sees the text.
    """
    # Each frame: [is_object, key or index, expecting a key]
    frames: list[list[Any]] = []
    position, length = 0, len(text)
    while position < length:
        char = text[position]
        if char == '"':
            end = position + 1
            while end < length and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if frames and frames[-1][0] and frames[-1][2]:
                try:
                    frames[-1][1] = json.loads(text[position : end + 1])
                except ValueError:
                    frames[-1][1] = text[position + 1 : end]
                frames[-1][2] = False
            position = end + 1
            continue
        if char in "{[":
            if len(frames) >= limit:
                return [frame[1] for frame in frames]
            frames.append([char == "{", "" if char == "{" else 0, char == "{"])
        elif char in "}]":
            if frames:
                frames.pop()
        elif char == "," and frames:
            if frames[-1][0]:
                frames[-1][2] = True
            else:
                frames[-1][1] += 1
        position += 1
    return None


def dumps_compact(value: Any) -> str:
    """Compact JSON text of ``value`` (like ``json.dumps``), at any nesting depth.

    ``json.dumps`` recurses and fails near a thousand levels; this writes the
    same text with an explicit stack. Non-finite numbers are refused
    (``ValueError``), as JSON has none.
    """
    parts: list[str] = []
    # Entries tagged ``literal`` are text to emit; the others are values to encode.
    literal = object()
    pending: list[tuple[object, Any]] = [(None, value)]
    while pending:
        kind, item = pending.pop()
        if kind is literal:
            parts.append(item)
        elif isinstance(item, dict):
            pending.append((literal, "}"))
            entries = list(item.items())
            for position in range(len(entries) - 1, -1, -1):
                key, child = entries[position]
                if not isinstance(key, str):
                    raise TypeError("JSON object keys must be strings")
                pending.append((None, child))
                prefix = "," if position else ""
                pending.append((literal, prefix + json.dumps(key, ensure_ascii=False) + ":"))
            pending.append((literal, "{"))
        elif isinstance(item, list | tuple):
            pending.append((literal, "]"))
            for position in range(len(item) - 1, -1, -1):
                pending.append((None, item[position]))
                if position:
                    pending.append((literal, ","))
            pending.append((literal, "["))
        else:
            parts.append(json.dumps(item, ensure_ascii=False, allow_nan=False))
    return "".join(parts)


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_LITERALS = {"true": True, "false": False, "null": None}


def loads_deep(text: str) -> Any:
    """Parse JSON ``text`` (like ``json.loads``) at any nesting depth, with an explicit stack.

    Slower than ``json.loads``: meant as the fallback when that one runs out
    of recursion. Raises ``ValueError`` for text that is not JSON.
    """
    scan_string = json.decoder.scanstring  # type: ignore[attr-defined]
    # Each frame: [container, pending key (objects)]
    stack: list[list[Any]] = []
    position = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    result: Any = None
    done = False
    while True:
        if position >= len(text):
            raise ValueError("unexpected end of JSON text")
        char = text[position]
        frame = stack[-1] if stack else None
        if frame is not None and isinstance(frame[0], dict) and frame[1] is None:
            # An object expects a key (or its end).
            if char == "}" and not frame[0]:
                value: Any = stack.pop()[0]
                position += 1
            elif char == '"':
                key, position = scan_string(text, position + 1)
                position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
                if text[position : position + 1] != ":":
                    raise ValueError(f"expected ':' at {position}")
                frame[1] = key
                position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
                continue
            else:
                raise ValueError(f"expected a key at {position}")
        elif char == "{":
            stack.append([{}, None])
            position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
            continue
        elif char == "[":
            stack.append([[], None])
            position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
            if text[position : position + 1] == "]":
                value = stack.pop()[0]
                position += 1
            else:
                continue
        elif char == '"':
            value, position = scan_string(text, position + 1)
        else:
            number = _NUMBER.match(text, position)
            literal = next((w for w in _LITERALS if text.startswith(w, position)), None)
            if literal is not None:
                value, position = _LITERALS[literal], position + len(literal)
            elif number is not None:
                token = number.group()
                value = float(token) if any(c in token for c in ".eE") else int(token)
                position = number.end()
            else:
                raise ValueError(f"unexpected character at {position}")
        # A value is complete: place it, then close every container that ends here.
        while True:
            position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
            if not stack:
                result, done = value, True
                break
            container, key = stack[-1]
            if isinstance(container, dict):
                container[key] = value
                stack[-1][1] = None
                closer = "}"
            else:
                container.append(value)
                closer = "]"
            following = text[position : position + 1]
            if following == ",":
                position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
                break
            if following != closer:
                raise ValueError(f"expected ',' or {closer!r} at {position}")
            value = stack.pop()[0]
            position += 1
        if done:
            if position != len(text):
                raise ValueError(f"extra data at {position}")
            return result
